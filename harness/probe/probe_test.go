package probe

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

var _ PlainAllocator = (*cudavmm.Driver)(nil)

// short is a probe of a few repetitions at two sizes.
var short = Config{Reps: 3, StitchReps: 1, Sizes: []uint64{2 * vmm.MiB, 20 * vmm.MiB}, StitchK: []int{8}, EventReps: 20}

// The probe runs on any driver: on the simulated device it times every VMM call kind, the stitching and the
// events, releases everything it made, and has no cuMemAlloc rows (the device has no plain allocation).
func TestProbeOnTheSimulatedDeviceReleasesEverything(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	r, err := Run(d, short)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 7 || len(r.Stitch) != 1 || len(r.Events) != 4 {
		t.Errorf("%d rows, %d stitch rows, %d event rows; want 7, 1, 4", len(r.Rows), len(r.Stitch), len(r.Events))
	}
	tab := r.Table()
	for _, want := range []string{"cuMemCreate", "cuMemSetAccess", "| 8 |", "cuEventRecord"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if strings.Contains(tab, "cuMemAlloc") {
		t.Errorf("a cuMemAlloc row without a plain allocator:\n%s", tab)
	}
	if l := d.Leaks(); !l.Empty() {
		t.Errorf("the probe left %s", l)
	}
}

// On the real GPU (skipped without one) the table has the cuMemAlloc/cuMemFree comparison rows too.
func TestProbeOnTheGPUPrintsTheTable(t *testing.T) {
	d, err := cudavmm.New(0)
	if err != nil {
		t.Skipf("no CUDA GPU here, skipping the real-driver probe: %v", err)
	}
	defer d.Close()
	r, err := Run(d, short)
	if err != nil {
		t.Fatal(err)
	}
	tab := r.Table()
	for _, want := range []string{"cuMemCreate", "cuMemSetAccess", "cuMemAlloc", "| 8 |", "cuEventRecord"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	cmp, _ := r.Compare(vmm.H200Costs(), 0.25)
	t.Log("\n" + tab + "\n" + cmp)
	t.Log("shareable handles: " + d.HandleTypes())
}
