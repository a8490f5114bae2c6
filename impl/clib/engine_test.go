package clib

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// newSim is the device the C library opens for GMLAKE_DEVICE=sim: streams complete at once.
func newSim(capacity uint64) *sim.Device {
	return sim.NewDevice(sim.DeviceConfig{Capacity: capacity, SyncStreams: true})
}

// simConfig marks cfg as running on the simulated device, which knows only the streams it created.
func simConfig(cfg Config) Config {
	cfg.Driver, cfg.OwnStreams = "sim", true
	return cfg
}

// Property: Go field names spell as their environment variables, acronym runs and one-letter prefixes kept.
func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"ChunkSize": "CHUNK_SIZE", "SBlockCache": "SBLOCK_CACHE", "StitchMin": "STITCH_MIN",
		"NoCrossStream": "NO_CROSS_STREAM", "HTTPServer": "HTTP_SERVER", "MaxSBlocks": "MAX_SBLOCKS", "X": "X",
		"GCMode": "GC_MODE", "DebugOOM": "DEBUG_OOM",
	} {
		if got := envName(in); got != want {
			t.Errorf("envName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Property: byte counts parse with binary units, and anything else is ErrBadKnob.
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "0.0MiB": 0, "-0": 0, "4096": 4096, "2MiB": 2 * vmm.MiB, "2M": 2 * vmm.MiB, "1.5GiB": 3 * vmm.GiB / 2, " 8 GiB ": 8 * vmm.GiB,
		"512KiB": 512 * vmm.KiB, "3G": 3 * vmm.GiB, "10B": 10,
	} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "2 XiB", "1e"} {
		if _, err := ParseBytes(bad); !errors.Is(err, ErrBadKnob) {
			t.Errorf("ParseBytes(%q): err %v, want ErrBadKnob", bad, err)
		}
	}
}

// Property: knobs set the named impl.Config fields, by Go or environment name; unknown names and bad values
// are ErrBadKnob.
func TestCEngineKnobs(t *testing.T) {
	if len(KnobNames()) == 0 {
		t.Skip("impl.Config has no knobs")
	}
	e, err := New(newSim(0 /* capacity: an H200 */), simConfig(Config{Knobs: map[string]string{KnobNames()[0]: "0"}}))
	if err != nil {
		t.Fatalf("a valid knob: %v", err)
	}
	if _, _, err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, knobs := range []map[string]string{{"NO_SUCH_KNOB": "1"}, {"CHUNK_SIZE": "lots"}} {
		if _, err := New(newSim(0 /* capacity: an H200 */), simConfig(Config{Knobs: knobs})); !errors.Is(err, ErrBadKnob) {
			t.Errorf("knobs %v: err %v, want ErrBadKnob", knobs, err)
		}
	}
}

// Property: the memory limit caps what the engine holds exactly as a smaller device would (out of memory,
// errors.Is ErrOutOfMemory), lifting it lets the request through, and nothing leaks after Close.
func TestCEngineMemoryLimit(t *testing.T) {
	dev := newSim(256 * vmm.MiB)
	e, err := New(dev, simConfig(Config{MemoryLimit: 64 * vmm.MiB}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Alloc(100*vmm.MiB, 0); !IsOutOfMemory(err) {
		t.Fatalf("100 MiB under a 64 MiB limit: err %v, want out of memory", err)
	}
	p, err := e.Alloc(32*vmm.MiB, 0)
	if err != nil {
		t.Fatalf("32 MiB under a 64 MiB limit: %v", err)
	}
	e.SetMemoryLimit(0)
	q, err := e.Alloc(100*vmm.MiB, 0)
	if err != nil {
		t.Fatalf("100 MiB with no limit: %v", err)
	}
	for _, x := range []uintptr{p, q} {
		if err := e.Free(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Free(p); err == nil {
		t.Error("double free must fail")
	}
	if live, _, err := e.Close(); err != nil || live != 0 {
		t.Fatalf("close: %d live, %v", live, err)
	}
	if l := dev.Leaks(); !l.Empty() {
		t.Fatalf("leaks after Close: %s", l)
	}
}

// Property: arbitrary C stream values work on the simulated device (each gets a simulated stream), and the
// statistics JSON carries the peaks, fragmentation and driver calls with the expected relations.
func TestCEngineStreamsAndStats(t *testing.T) {
	e, err := New(newSim(1*vmm.GiB), simConfig(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Alloc(3*vmm.MiB, 0x7f00dead)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Alloc(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RecordStream(a, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.RecordStream(12345, 0); !IsUnknownPointer(err) {
		t.Errorf("RecordStream of an unknown pointer: %v", err)
	}
	var s map[string]any
	if err := json.Unmarshal(e.StatsJSON(map[string]any{"extra": 1}), &s); err != nil {
		t.Fatal(err)
	}
	if s["num_live"].(float64) != 2 || s["requested_bytes"].(float64) != float64(3*vmm.MiB+1000) || s["extra"].(float64) != 1 {
		t.Errorf("stats: %v", s)
	}
	if s["peak_reserved_bytes"].(float64) < s["peak_allocated_bytes"].(float64) {
		t.Errorf("peak reserved below peak allocated: %v", s)
	}
	if f := s["fragmentation"].(float64); f < 0 || f >= 1 {
		t.Errorf("fragmentation %v out of [0, 1)", f)
	}
	for _, p := range []uintptr{a, b} {
		if err := e.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// Property: with TimeDriver the statistics give the wall time of each kind of driver call made (a kind made
// has a time, the total is their sum), the modeled time of the simulated device still shows through the
// timer, and Close still closes the device; without it there is no driver_seconds.
func TestCEngineTimeDriverTimesEachKindMade(t *testing.T) {
	for _, timed := range []bool{false, true} {
		e, err := New(newSim(1*vmm.GiB), simConfig(Config{TimeDriver: timed}))
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Alloc(3*vmm.MiB, 0 /* stream */)
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(e.StatsJSON(nil), &s); err != nil {
			t.Fatal(err)
		}
		secs, ok := s["driver_seconds"].(map[string]any)
		if ok != timed {
			t.Fatalf("TimeDriver=%v: driver_seconds %v", timed, s["driver_seconds"])
		}
		if _, ok := s["modeled_driver_seconds"]; !ok {
			t.Errorf("TimeDriver=%v: the simulated device's modeled time is gone: %v", timed, s)
		}
		if timed {
			calls := s["driver_calls"].(map[string]any)
			sum := 0.0
			for _, kind := range []string{"create", "map", "set_access"} {
				if calls[kind] == nil {
					t.Errorf("no %s call counted: %v", kind, calls)
				}
			}
			for kind, v := range secs {
				if calls[kind] == nil {
					t.Errorf("time for %s, which was never called: %v", kind, calls)
				}
				sum += v.(float64)
			}
			if total := s["driver_seconds_total"].(float64); math.Abs(total-sum) > 1e-12 || total <= 0 {
				t.Errorf("driver_seconds_total %v, want the sum %v of %v (> 0)", total, sum, secs)
			}
		}
		if err := e.Free(p); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The C library's hot path below the C ABI: one alloc+free pair through CEngine (warm cache, default stream,
// simulated device). capi adds about 100 ns per call into Go on top (see capi/testdata/abi_test.cc).
func BenchmarkCEngineAllocFree(b *testing.B) {
	e, err := New(newSim(0 /* capacity: an H200 */), simConfig(Config{}))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, size := range []uint64{512, vmm.MiB, 8 * vmm.MiB, 256 * vmm.MiB} {
		b.Run(vmm.FormatBytes(size), func(b *testing.B) {
			p, _ := e.Alloc(size, 0)
			_ = e.Free(p)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := e.Alloc(size, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Free(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
