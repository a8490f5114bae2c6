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

// deviceHeld is what a failed call must not raise: the device's used bytes and the handles it holds.
func deviceHeld(dev *sim.Device) (used uint64, handles int) {
	s := dev.State()
	for _, h := range s.Handles {
		if !h.Released {
			handles++
		}
	}
	return s.Used, handles
}

// A failed Alloc changes nothing (SPEC.md, INV-FAILCLEAN): when the run of an arena it maps into has two
// unmapped stretches and the second mapping fails, the first is not left mapped (reserved bytes and the
// device's handles are what they were). The scene: [x unmapped][y free][unmapped tail], a request that needs
// x, y and part of the tail, and a SetAccess that fails on the tail's mapping (each mapping sets access once).
func TestFailedAllocLeavesNoArenaRunMapped(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyExpandable} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 0 /* capacity: an H200 */, true /* sync */)
			x := mustAlloc(t, a, 40*MiB, 0)
			y := mustAlloc(t, a, 40*MiB, 0)
			mustFree(t, a, x)
			if err := a.EmptyCache(); err != nil { // unmaps x's memory: y is live, the tail never was mapped
				t.Fatal(err)
			}
			mustFree(t, a, y)
			reserved := a.Stats().ReservedBytes
			used, handles := deviceHeld(dev)
			dev.FailNth(vmm.CallSetAccess, 2 /* the tail's: x's mapping comes first */, vmm.InvalidValue)
			if _, err := a.Alloc(100*MiB, 0); err == nil {
				t.Fatal("no failure injected on the second SetAccess")
			}
			if r := a.Stats().ReservedBytes; r != reserved {
				t.Errorf("a failed Alloc moved reserved bytes from %s to %s", vmm.FormatBytes(reserved), vmm.FormatBytes(r))
			}
			if u, h := deviceHeld(dev); u != used || h != handles {
				t.Errorf("a failed Alloc left the device holding %s in %d handles, %s in %d before", vmm.FormatBytes(u), h, vmm.FormatBytes(used), handles)
			}
			checkState(t, a, dev)
			dev.ClearFaults()
			mustFree(t, a, mustAlloc(t, a, 100*MiB, 0))
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// A failed stitch changes nothing either (INV-FAILCLEAN): gmlake stitches three free 48 MiB chunks and 16 MiB
// of new memory for a 160 MiB request; when the stitched view's reservation fails, the new memory mapped for
// it is returned too.
func TestFailedStitchLeavesNoNewMemory(t *testing.T) {
	for _, k := range []vmm.CallKind{vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess} {
		t.Run(k.Short(), func(t *testing.T) {
			a, dev := newTest(t, PolicyGMLake, 0 /* capacity: an H200 */, true /* sync */)
			var frees, keep []vmm.DevicePtr
			for i := 0; i < 3; i++ {
				frees = append(frees, mustAlloc(t, a, 48*MiB, 0))
				keep = append(keep, mustAlloc(t, a, 48*MiB, 0))
			}
			for _, p := range frees {
				mustFree(t, a, p)
			}
			reserved := a.Stats().ReservedBytes
			used, handles := deviceHeld(dev)
			n := 1 // the view's reservation
			switch k {
			case vmm.CallMap:
				n = 2 // the new memory's mapping, then the view's first
			case vmm.CallSetAccess:
				n = 2 // the new memory's, then the view's
			}
			dev.FailNth(k, n, vmm.InvalidValue)
			if _, err := a.Alloc(160*MiB, 0); err == nil {
				t.Fatalf("no failure injected on %v", k)
			}
			if a.Stats().NumStitches != 0 {
				t.Fatal("the scene stitched although its call failed")
			}
			if r := a.Stats().ReservedBytes; r != reserved {
				t.Errorf("a failed stitch moved reserved bytes from %s to %s", vmm.FormatBytes(reserved), vmm.FormatBytes(r))
			}
			if u, h := deviceHeld(dev); u != used || h != handles {
				t.Errorf("a failed stitch left the device holding %s in %d handles, %s in %d before", vmm.FormatBytes(u), h, vmm.FormatBytes(used), handles)
			}
			checkState(t, a, dev)
			dev.ClearFaults()
			p := mustAlloc(t, a, 160*MiB, 0)
			if a.Stats().NumStitches != 1 {
				t.Errorf("the scene's request was not stitched once the fault cleared (%d stitches)", a.Stats().NumStitches)
			}
			mustFree(t, a, p)
			for _, p := range keep {
				mustFree(t, a, p)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// The stitch candidates are scratch: after a stitch the Allocator keeps no pointer to the chunks it looked at
// (CheckInvariants checks the scratch to its capacity after every scenario, a stitch that grew instead
// included).
func TestStitchCandidatesClearedAfterUse(t *testing.T) {
	a, dev := newTest(t, PolicyGMLake, 0 /* capacity: an H200 */, true /* sync */)
	var frees, keep []vmm.DevicePtr
	for i := 0; i < 3; i++ {
		frees = append(frees, mustAlloc(t, a, 48*MiB, 0))
		keep = append(keep, mustAlloc(t, a, 48*MiB, 0))
	}
	for _, p := range frees {
		mustFree(t, a, p)
	}
	p := mustAlloc(t, a, 160*MiB, 0) // stitched
	if a.Stats().NumStitches != 1 {
		t.Fatalf("the scene did not stitch (%d stitches)", a.Stats().NumStitches)
	}
	if cap(a.cands) == 0 {
		t.Fatal("no stitch candidates were listed: the scene does not test the scratch")
	}
	for i, c := range a.cands[:cap(a.cands)] {
		if c != nil {
			t.Fatalf("stitch candidate %d (chunk %d) kept after the call", i, c.h)
		}
	}
	checkState(t, a, dev)
	for _, q := range append(keep, p) {
		mustFree(t, a, q)
	}
	closeClean(t, a, dev)
}
