package wrap

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// The timing decorator counts each call and forwards results and errors unchanged.
func TestTimerCountsTimesAndForwards(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	td := NewTimer(d)
	g := td.Granularity()
	h, err := td.Create(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := td.Map(0x1000, g, h, 0); !errors.Is(err, vmm.ErrInvalidValue) {
		t.Errorf("Map outside a reservation: %v, want the device's ErrInvalidValue", err)
	}
	if err := td.Release(h); err != nil {
		t.Fatal(err)
	}
	c := td.Counts()
	if c[vmm.CallGranularity] != 1 || c[vmm.CallCreate] != 1 || c[vmm.CallMap] != 1 || c[vmm.CallRelease] != 1 || c.Total() != 4 {
		t.Errorf("counts %v", c.Map())
	}
	if inner := d.Counts(); inner != c {
		t.Errorf("wrapper counted %v, device %v", c.Map(), inner.Map())
	}
	if td.Measured() <= 0 {
		t.Error("no wall time measured")
	}
	td.Reset()
	if c := td.Counts(); c.Total() != 0 || td.Measured() != 0 {
		t.Error("Reset left counts")
	}
}

// A counter counts exactly as the timer does and measures no time.
func TestCounterCountsWithoutTiming(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	m := NewCounter(d)
	g := m.Granularity()
	if _, err := m.Reserve(g); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(0); !errors.Is(err, vmm.ErrInvalidValue) {
		t.Errorf("Create(0): %v, want ErrInvalidValue", err)
	}
	if c, dc := m.Counts(), d.Counts(); c != dc || c.Total() != 3 {
		t.Errorf("counter %v, device %v", c.Map(), dc.Map())
	}
	if m.Succeeded(vmm.CallCreate) != 0 || m.Succeeded(vmm.CallReserve) != 1 {
		t.Errorf("succeeded: create %d, reserve %d; want 0, 1", m.Succeeded(vmm.CallCreate), m.Succeeded(vmm.CallReserve))
	}
	if m.Timed() || m.Measured() != 0 {
		t.Errorf("a counter measured %v", m.Measured())
	}
}

// The limit refuses a Create beyond the cap with out of memory and changes nothing, MemInfo reports the
// free bytes under the cap, a release gives the budget back, and lifting the cap lets the request through.
func TestLimitCapsCreatedBytes(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB, SyncStreams: true})
	l := NewLimit(d, 8*vmm.MiB)
	h, err := l.Create(6 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(4 * vmm.MiB); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("6 + 4 MiB under an 8 MiB cap: %v, want ErrOutOfMemory", err)
	}
	if free, total, err := l.MemInfo(); err != nil || free != 2*vmm.MiB || total != 64*vmm.MiB {
		t.Errorf("MemInfo under the cap: free %d total %d %v, want 2 MiB of 64 MiB", free, total, err)
	}
	if err := l.Release(h); err != nil {
		t.Fatal(err)
	}
	h2, err := l.Create(8 * vmm.MiB)
	if err != nil {
		t.Fatalf("8 MiB after the release: %v", err)
	}
	l.SetLimit(0 /* no cap */)
	h3, err := l.Create(16 * vmm.MiB)
	if err != nil || l.Limit() != 0 {
		t.Fatalf("16 MiB with no cap: %v", err)
	}
	for _, x := range []vmm.Handle{h2, h3} {
		if err := l.Release(x); err != nil {
			t.Fatal(err)
		}
	}
	if leaks := d.Leaks(); !leaks.Empty() {
		t.Errorf("leaks: %s", leaks)
	}
}
