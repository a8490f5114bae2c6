package sim

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// TestRDMAHandlesPoisonAsTheH200Does: with RDMAHandles the model fails the last map of exactly the measured
// poisoning patterns (RDMAPatterns) with UnknownCUDAError and marks the handle poisoned; without it every
// pattern succeeds; either way nothing is left behind.
func TestRDMAHandlesPoisonAsTheH200Does(t *testing.T) {
	for _, p := range RDMAPatterns {
		for _, rdma := range []bool{false, true} {
			d := NewDevice(DeviceConfig{RDMAHandles: rdma})
			last, err := RunRDMAPattern(d, p)
			if err != nil {
				t.Fatal(err)
			}
			want := rdma && p.Poisoned
			if got := errors.Is(last, vmm.UnknownCUDAError); got != want || !want && last != nil {
				t.Errorf("%s (rdma %v): last map = %v, want poisoned %v", p.Name, rdma, last, want)
			}
			if l := d.Leaks(); !l.Empty() {
				t.Errorf("%s: the device still holds %v", p.Name, l)
			}
		}
	}
}

// TestRDMAPoisonedHandleShowsInState: DeviceState marks the poisoned handle while it lives.
func TestRDMAPoisonedHandleShowsInState(t *testing.T) {
	d := NewDevice(DeviceConfig{RDMAHandles: true})
	g := d.Granularity()
	h, _ := d.Create(g)
	r, _ := d.Reserve(4 * g)
	for _, e := range []error{d.Map(r, g, h, 0), d.Map(r.Add(2*g), g, h, 0), d.Unmap(r, g), d.SetAccess(r.Add(2*g), g)} {
		if e != nil {
			t.Fatal(e)
		}
	}
	st := d.State()
	if len(st.Handles) != 1 || !st.Handles[0].Poisoned {
		t.Errorf("handles after the poisoning pattern: %+v, want one poisoned", st.Handles)
	}
}
