package impl

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// A cached chunk whose release fails past the retries inside EmptyCache (spec/FINDINGS.md F11) is still on the
// device: EmptyCache reports the driver's error (PyTorch's emptyCache raises it), ReservedBytes keeps
// counting the handle (INV-STATS: reserved = the device's used bytes), the snapshot lists it with its size,
// and the next EmptyCache releases it. Every policy (gmlake and expandable unmap chunks of an arena,
// caching and gmlake-paper release whole segments).
func TestEmptyCacheReportsAReleaseThatFailsPastItsRetries(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 256*MiB, true /* sync */)
			keep, err := a.Alloc(4*MiB, 0 /* stream */)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Alloc(20*MiB, 0 /* stream */)
			if err != nil {
				t.Fatal(err)
			}
			mustFree(t, a, p)
			for i := 1; i <= 4; i++ { // the call and its three retries
				dev.FailNth(vmm.CallRelease, i, vmm.UnknownCUDAError)
			}
			err = a.EmptyCache()
			if !errors.Is(err, vmm.UnknownCUDAError) {
				t.Fatalf("EmptyCache with every try of a release failing = %v, want the driver's error", err)
			}
			st := a.Stats()
			if st.ReservedBytes != dev.Used() {
				t.Fatalf("after the failed release: ReservedBytes %d, device used %d", st.ReservedBytes, dev.Used())
			}
			var listed uint64
			for _, c := range a.Snapshot().Chunks {
				listed += c.Size
			}
			if listed != dev.Used() {
				t.Fatalf("after the failed release: the snapshot's chunks hold %d B, the device %d B", listed, dev.Used())
			}
			dev.ClearFaults()
			if err := a.EmptyCache(); err != nil {
				t.Fatalf("EmptyCache once the driver recovered: %v", err)
			}
			if st := a.Stats(); st.ReservedBytes != dev.Used() || st.ReservedBytes >= listed {
				t.Fatalf("after the second EmptyCache: ReservedBytes %d, device used %d (was %d)", st.ReservedBytes, dev.Used(), listed)
			}
			mustFree(t, a, keep)
			closeClean(t, a, dev)
		})
	}
}

// An orphan of a failed growth's undo (spec/FINDINGS.md F17): the growth's third map is refused, and the undo's
// unmap of the first piece and then a release each fail past the retries. What the device still holds is
// what the engine counts: ReservedBytes equals the device's used bytes, MappedBytes the device's mapped
// bytes, the snapshot lists each orphan with its size and Orphan set (the mapped one with one reference);
// the engine asks nothing the driver refuses (no free of the reservation the orphan mapping stands in), and
// the next EmptyCache gives everything back. gmlake and gmlake-paper (their growths map piece by piece).
func TestOrphansOfAFailedUndoAreCountedUntilReleased(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyGMLakePaper} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 64*MiB, true /* sync */)
			dev.FailNth(vmm.CallMap, 3, vmm.UnknownCUDAError)
			for i := 1; i <= 4; i++ { // the call and its three retries
				dev.FailNth(vmm.CallUnmap, i, vmm.UnknownCUDAError)
				dev.FailNth(vmm.CallRelease, i, vmm.UnknownCUDAError)
			}
			frees := dev.Counts()[vmm.CallFreeAddress]
			if _, err := a.Alloc(8*MiB, 0 /* stream */); !errors.Is(err, vmm.UnknownCUDAError) {
				t.Fatalf("Alloc with its third map refused = %v, want the driver's error", err)
			}
			if n := dev.Counts()[vmm.CallFreeAddress] - frees; n != 0 {
				t.Fatalf("the undo tried to free the reservation its orphan mapping stands in %d times (rule 6)", n)
			}
			ds := dev.State()
			var mapped uint64
			for _, m := range ds.Mappings {
				mapped += m.VA.Size
			}
			st := a.Stats()
			if st.ReservedBytes != ds.Used || ds.Used == 0 || st.MappedBytes != mapped || mapped == 0 {
				t.Fatalf("after the failed undo: reserved %d mapped %d, the device holds %d and maps %d", st.ReservedBytes, st.MappedBytes, ds.Used, mapped)
			}
			var orphans, refs uint64
			for _, c := range a.Snapshot().Chunks {
				if !c.Orphan || c.Size == 0 {
					t.Fatalf("a chunk of the failed growth not listed as a sized orphan: %+v", c)
				}
				orphans += c.Size
				refs += uint64(c.Refs)
			}
			if orphans != ds.Used || refs != uint64(len(ds.Mappings)) {
				t.Fatalf("the snapshot's orphans hold %d B with %d references; the device %d B in %d mappings", orphans, refs, ds.Used, len(ds.Mappings))
			}
			dev.ClearFaults()
			if err := a.EmptyCache(); err != nil {
				t.Fatalf("EmptyCache once the driver recovered: %v", err)
			}
			if st := a.Stats(); st.ReservedBytes != 0 || st.MappedBytes != 0 || dev.Used() != 0 || len(dev.State().Reservations) != 0 {
				t.Fatalf("after EmptyCache: reserved %d mapped %d, the device holds %d B in %d reservations", st.ReservedBytes, st.MappedBytes, dev.Used(), len(dev.State().Reservations))
			}
			closeClean(t, a, dev)
		})
	}
}

// Property: CloseReport.ReleasedBytes is exactly what the device got back during Close, under every policy:
// the segments' handles and the held orphans of a failed growth's undo (F17) are counted when released, and a
// handle a stitched block's mapping still maps after its unmap failed for good is not (F20: released, the
// device keeps its memory while that mapping stands; TestCloseDoesNotCountWhatAStuckViewKeeps). The third map
// refused leaves held orphans under gmlake and gmlake-paper; caching and expandable make no third map for
// this request, so there the scene is a plain Close.
func TestCloseReportsWhatTheDeviceGotBack(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 64*MiB, true /* sync */)
			dev.FailNth(vmm.CallMap, 3, vmm.UnknownCUDAError)
			for i := 1; i <= 4; i++ { // the call and its three retries, each of unmap and release
				dev.FailNth(vmm.CallUnmap, i, vmm.UnknownCUDAError)
				dev.FailNth(vmm.CallRelease, i, vmm.UnknownCUDAError)
			}
			_, _ = a.Alloc(8*MiB, 0 /* stream */) // fails under gmlake and gmlake-paper, leaving orphans
			dev.ClearFaults()
			if _, err := a.Alloc(2*MiB, 0 /* stream */); err != nil {
				t.Fatal(err)
			}
			used := dev.Used()
			rep, err := a.Close()
			if err != nil {
				t.Fatal(err)
			}
			if rep.ReleasedBytes != used-dev.Used() || dev.Used() != 0 {
				t.Fatalf("Close reported %d B returned; the device got back %d B and holds %d B", rep.ReleasedBytes, used-dev.Used(), dev.Used())
			}
		})
	}
}

// F20's state (spec/FINDINGS.md): two live stitched blocks; Close's unmap of the second is refused past its
// retries, so its mapping stands and the handles it maps keep their memory once released: Close says so (the
// driver's error) and does not count them as returned.
func TestCloseDoesNotCountWhatAStuckViewKeeps(t *testing.T) {
	a, dev := newPaper(t, Config{SBlockCache: 1, ReuseLimit: 1.5, ReAlloc: true}, 4<<30, true /* sync */)
	for _, n := range []uint64{2 * MiB, 535821824, 1049088, 535822336} {
		if _, err := a.Alloc(n, 0 /* stream */); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.NumStitches != 2 {
		t.Fatalf("the scene made %d stitched blocks, want 2", st.NumStitches)
	}
	for i := 2; i <= 5; i++ { // the second unmap and its three retries
		dev.FailNth(vmm.CallUnmap, i, vmm.UnknownCUDAError)
	}
	used := dev.Used()
	rep, err := a.Close()
	if !errors.Is(err, vmm.UnknownCUDAError) {
		t.Fatalf("Close with a stitched block's unmap refused for good = %v, want the driver's error", err)
	}
	if rep.ReleasedBytes != used-dev.Used() || dev.Used() == 0 {
		t.Fatalf("Close reported %d B returned; the device got back %d B and still holds %d B", rep.ReleasedBytes, used-dev.Used(), dev.Used())
	}
}
