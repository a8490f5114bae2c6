package impl

import (
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// A failed Alloc leaves the device as it found it, under the arena policies too: the arena it opened for the
// request (a reservation of 9/8 of the device) is returned when the first mapping into it fails
// (impl/doc.go, the allocation path, step 6).
func TestFailedAllocReturnsTheArenaItOpened(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyExpandable} {
		for _, k := range []vmm.CallKind{vmm.CallCreate, vmm.CallMap, vmm.CallSetAccess} {
			t.Run(pol+"/"+k.Short(), func(t *testing.T) {
				a, dev := newTest(t, pol, 0 /* capacity: an H200 */, true /* sync */)
				before := len(dev.State().Reservations)
				dev.FailNth(k, 1, vmm.InvalidValue)
				if _, err := a.Alloc(64*MiB, 0); err == nil {
					t.Fatalf("no failure injected on %v", k)
				}
				if got := len(dev.State().Reservations); got != before {
					t.Fatalf("after a failed Alloc the device holds %d reservations, %d before", got, before)
				}
				checkState(t, a, dev)
				dev.ClearFaults()
				mustFree(t, a, mustAlloc(t, a, 64*MiB, 0))
				closeClean(t, a, dev)
			})
		}
	}
}

// Config.StitchSave is the growth a stitch must save: the scene's 256 MiB request, covered by free chunks,
// would otherwise grow 256 MiB, so it stitches while the knob asks for less than that (the default 128 MiB
// included), and grows when it asks for 256 MiB or more.
func TestStitchSaveKnobDecidesStitchOrGrow(t *testing.T) {
	for _, c := range []struct {
		save   uint64
		stitch bool
	}{{0 /* default: 128 MiB */, true}, {254 * MiB, true}, {256 * MiB, false}, {vmm.GiB, false}} {
		dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
		a, err := New(dev, Config{ChunkSize: 256 * MiB, StitchSave: c.save})
		if err != nil {
			t.Fatal(err)
		}
		stitchScene(t, a, 0)
		p := mustAlloc(t, a, 256*MiB, 0)
		if got := a.Stats().NumStitches == 1; got != c.stitch {
			t.Errorf("StitchSave %s: stitched %v, want %v", vmm.FormatBytes(c.save), got, c.stitch)
		}
		mustFree(t, a, p)
		closeClean(t, a, dev)
	}
}
