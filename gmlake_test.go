package gmlake

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// The facade works on the default simulated device, with every policy, and reports leaks as none.
func TestFacadeAllPolicies(t *testing.T) {
	for _, pol := range Policies() {
		dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
		a, err := New(dev, Options{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		if a.Policy() != pol {
			t.Errorf("policy %q, want %q", a.Policy(), pol)
		}
		p, err := a.Alloc(3<<20, vmm.DefaultStream)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Free(p); err != nil {
			t.Fatal(err)
		}
		if err := a.Free(p); !errors.Is(err, ErrDoubleFree) {
			t.Errorf("double free: %v", err)
		}
		if _, err := a.Alloc(0, 0); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("size 0: %v", err)
		}
		if err := a.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if l := dev.Leaks(); !l.Empty() {
			t.Fatalf("leaks: %v", l)
		}
	}
	a, err := NewSimulated(Options{})
	if err != nil || a.Policy() != PolicyGMLake {
		t.Fatalf("default: %v %v", err, a)
	}
	if _, ok := a.Driver().(*sim.Device); !ok {
		t.Fatalf("NewSimulated runs on %T, want the simulated device", a.Driver())
	}
	a.Close()
	if _, err := New(nil /* device */, Options{}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("New without a device: %v, want ErrBadConfig", err)
	}
}

// ParseConfig reads knobs as text.
func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"policy": "expandable", "GMLAKE_PAGE_SIZE_LARGE": "40MiB",
		"SBlockCache": "12", "NO_CROSS_STREAM": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policy != PolicyExpandable || cfg.PageSizeLarge != 40<<20 || cfg.SBlockCache != 12 || !cfg.NoCrossStream {
		t.Errorf("parsed %+v", cfg)
	}
	if _, err := ParseConfig(map[string]string{"policy": "nope"}); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := ParseConfig(map[string]string{"CHUNKY": "1"}); !errors.Is(err, ErrBadKnob) {
		t.Errorf("unknown knob: %v", err)
	}
	a, err := NewSimulated(Options{Knobs: map[string]string{"POLICY": "caching"}})
	if err != nil || a.Policy() != PolicyCaching {
		t.Fatalf("knobs in Options: %v", err)
	}
	a.Close()
}

// DestroyStream through the facade makes the stream unknown to the engine (issue 14 item 6).
func TestFacadeDestroyStreamUnknownAfter(t *testing.T) {
	a, err := NewSimulated(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Driver().CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Alloc(1<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(1<<20, s); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("Alloc on destroyed stream = %v, want %v", err, ErrUnknownStream)
	}
	if err := a.Free(p); err != nil {
		t.Fatalf("Free of an allocation of a destroyed stream: %v", err)
	}
	if _, err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// New refuses a configuration the engine cannot run with ErrBadConfig (ErrUnknownPolicy for a policy it does
// not know) and returns no allocator: a chunk that is no multiple of the granularity, a stitch threshold no
// multiple of 512 B, a page no multiple of the granularity, a negative reuse limit, a defrag level above 3.
// A refused New takes nothing from the device.
func TestFacadeNewRefusesBadConfigs(t *testing.T) {
	for _, c := range []struct {
		knobs map[string]string
		want  error
	}{
		{map[string]string{"CHUNK_SIZE": "3MiB"}, ErrBadConfig},
		{map[string]string{"POLICY": "gmlake-paper", "CHUNK_SIZE": "1MiB"}, ErrBadConfig},
		{map[string]string{"STITCH_MIN": "1000"}, ErrBadConfig},
		{map[string]string{"POLICY": "expandable", "PAGE_SIZE_LARGE": "21MiB"}, ErrBadConfig},
		{map[string]string{"POLICY": "gmlake-paper", "REUSE_LIMIT": "-1"}, ErrBadConfig},
		{map[string]string{"POLICY": "gmlake-paper", "DEFRAG_LEVEL": "4"}, ErrBadConfig},
		{map[string]string{"POLICY": "gmlake-2"}, ErrUnknownPolicy},
	} {
		dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
		a, err := New(dev, Options{Knobs: c.knobs})
		if !errors.Is(err, c.want) || a != nil {
			t.Errorf("New with %v = %v, %v; want no allocator and %v", c.knobs, a, err, c.want)
		}
		if l := dev.Leaks(); !l.Empty() || dev.State().Used != 0 {
			t.Errorf("New with %v refused, but took from the device: %v", c.knobs, l)
		}
	}
}
