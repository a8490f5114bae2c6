package impl

import (
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Property (Snapshot's documented order): Live by Ptr, Blocks by (Kind, Range.Base), Chunks by Handle,
// Reservations by Base, Mappings by VA.Base, also after the stitched-block cache evicted one (its slot is
// filled by the last, so the engine's own list is no longer in address order).
func TestSnapshotListsAreInTheirDocumentedOrder(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, err := New(dev, Config{ChunkSize: 256 * MiB, SBlockCache: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sbs []vmm.DevicePtr
	for i := 0; i < 3; i++ {
		stitchScene(t, a, 0)
		sbs = append(sbs, mustAlloc(t, a, 256*MiB, 0))
	}
	if st := a.Stats(); st.NumStitches != 3 {
		t.Fatalf("%d stitches, want 3 for the scene", st.NumStitches)
	}
	mustFree(t, a, sbs[0])
	mustFree(t, a, sbs[1]) // two cached over a limit of one: the first is torn down
	s := a.Snapshot()
	sorted := func(what string, n int, less func(i, j int) bool) {
		t.Helper()
		for i := 1; i < n; i++ {
			if less(i, i-1) {
				t.Fatalf("Snapshot.%s out of order at %d", what, i)
			}
		}
	}
	sorted("Live", len(s.Live), func(i, j int) bool { return s.Live[i].Ptr < s.Live[j].Ptr })
	sorted("Blocks", len(s.Blocks), func(i, j int) bool {
		x, y := s.Blocks[i], s.Blocks[j]
		return x.Kind < y.Kind || x.Kind == y.Kind && x.Range.Base < y.Range.Base
	})
	sorted("Chunks", len(s.Chunks), func(i, j int) bool { return s.Chunks[i].Handle < s.Chunks[j].Handle })
	sorted("Reservations", len(s.Reservations), func(i, j int) bool { return s.Reservations[i].Base < s.Reservations[j].Base })
	sorted("Mappings", len(s.Mappings), func(i, j int) bool { return s.Mappings[i].VA.Base < s.Mappings[j].VA.Base })
	var stitched int
	for _, b := range s.Blocks {
		if b.Kind == Stitched {
			stitched++
		}
	}
	if stitched != 2 {
		t.Fatalf("%d stitched blocks in the snapshot, want 2 (one torn down by the cache limit)", stitched)
	}
	checkState(t, a, dev)
}
