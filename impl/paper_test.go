package impl

// gmlake-paper, rule by rule: each test is a scenario for one of GMLake's rules and names the GLake function
// (intelligent-machine-learning/glake, GMLake/src/CUDACachingAllocator.cpp) it reproduces. See paper.go.

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

func newPaper(t testing.TB, cfg Config, capacity uint64, sync bool) (*Allocator, *sim.Device) {
	t.Helper()
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: capacity, SyncStreams: sync})
	cfg.Policy = PolicyGMLakePaper
	a, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, dev
}

// liveSize is the block size of the live allocation at p (0: none).
func liveSize(a *Allocator, p vmm.DevicePtr) uint64 {
	for _, l := range a.Snapshot().Live {
		if l.Ptr == p {
			return l.Size
		}
	}
	return 0
}

// freeSizes lists the sizes of the free pBlocks, largest first.
func freeSizes(a *Allocator) []uint64 {
	var out []uint64
	for _, b := range a.Snapshot().Blocks {
		if b.Kind == Primitive && b.State == Free {
			out = append(out, b.Range.Size)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// separate allocates one segment per size (each its own cudaMalloc-sized segment: no free block holds the
// next) and frees them all, leaving one free block per size, in address order of the sizes.
func separate(t *testing.T, a *Allocator, sizes ...uint64) []vmm.DevicePtr {
	t.Helper()
	var ps []vmm.DevicePtr
	for _, s := range sizes {
		ps = append(ps, mustAlloc(t, a, s, 0))
	}
	for _, p := range ps {
		mustFree(t, a, p)
	}
	return ps
}

// get_fused_fragmented_blocks: whole free blocks of the stream, largest first, ties to the higher address,
// and the last one split keeping its head. The example: free 500/300/300 MiB, a 600 MiB request
// takes the 500 and the head 100 MiB of the higher 300, leaving the lower 300 and a 200 MiB tail free.
func TestPaperStitchLargestFirstSplitsLastKeepingHead(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	ps := separate(t, a, 500*MiB, 300*MiB, 300*MiB)
	res := a.Stats().ReservedBytes
	p := mustAlloc(t, a, 600*MiB, 0)
	st := a.Stats()
	if st.NumStitches != 1 || st.ReservedBytes != res {
		t.Fatalf("stitches %d, reserved %d -> %d: want one stitch and no growth", st.NumStitches, res, st.ReservedBytes)
	}
	if got := freeSizes(a); !slices.Equal(got, []uint64{300 * MiB, 200 * MiB}) {
		t.Fatalf("free blocks %v MiB-ish, want [300 MiB 200 MiB]", got)
	}
	higher := max(ps[1], ps[2])
	for _, b := range a.Snapshot().Blocks {
		if b.Kind == Primitive && b.State == Free && b.Range.Size == 200*MiB && b.Range.Base != higher.Add(100*MiB) {
			t.Fatalf("the 200 MiB tail is at %v, want the tail of the higher 300 MiB block (%v)", b.Range.Base, higher.Add(100*MiB))
		}
	}
	checkState(t, a, dev)
	mustFree(t, a, p)
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// get_fused_fragmented_blocks: no new memory finishes a stitch; free blocks that do not cover the request
// leave it to realloc_block.
func TestPaperStitchNeedsFreeBlocksCovering(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	separate(t, a, 300*MiB, 200*MiB)
	res := a.Stats().ReservedBytes
	mustAlloc(t, a, 600*MiB, 0)
	if st := a.Stats(); st.NumStitches != 0 || st.ReservedBytes != res+600*MiB {
		t.Fatalf("stitches %d, reserved %d -> %d: want a new 600 MiB segment", st.NumStitches, res, st.ReservedBytes)
	}
	closeClean(t, a, dev)
}

// get_fused_fragmented_blocks: requests below fragLimit are not stitched; the knob moves the limit.
func TestPaperFragmentLimit(t *testing.T) {
	for _, c := range []struct {
		limit   uint64
		stitchs uint64
	}{{0 /* default 512 MiB */, 0}, {256 * MiB, 1}} {
		a, dev := newPaper(t, Config{StitchMin: c.limit}, 0, true)
		separate(t, a, 200*MiB, 200*MiB)
		mustAlloc(t, a, 300*MiB, 0)
		if n := a.Stats().NumStitches; n != c.stitchs {
			t.Errorf("fragment limit %d: %d stitches for a 300 MiB request, want %d", c.limit, n, c.stitchs)
		}
		closeClean(t, a, dev)
	}
}

// round_size: requests above 1 MiB round up to a 2 MiB multiple, smaller ones to 512 B; should_split: a large
// block splits only when at least one 2 MiB piece is left (so an 11.5 MiB request takes a free 12 MiB block
// whole, where PyTorch's rule would split off 1.5 MiB).
func TestPaperRoundingAndSplitting(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	for _, c := range []struct{ size, block uint64 }{
		{1000, 1024}, {MiB, MiB}, {MiB + 1, 2 * MiB}, {3*MiB + 5, 4 * MiB}, {11*MiB + 512*1024, 12 * MiB},
	} {
		p := mustAlloc(t, a, c.size, 0)
		got := liveSize(a, p)
		if got != c.block {
			t.Errorf("Alloc(%d): block of %d bytes, want %d", c.size, got, c.block)
		}
		mustFree(t, a, p)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)

	a, dev = newPaper(t, Config{}, 0, true)
	q := mustAlloc(t, a, 12*MiB, 0)
	mustFree(t, a, q)
	mustAlloc(t, a, 11*MiB+512*1024, 0)
	if got := freeSizes(a); len(got) != 0 {
		t.Errorf("free blocks %v after an 11.5 MiB request on a free 12 MiB block: want it taken whole", got)
	}
	mustAlloc(t, a, 4*MiB, 0) // a new 20 MiB segment, split 4 + 16
	if got := freeSizes(a); !slices.Equal(got, []uint64{16 * MiB}) {
		t.Errorf("free blocks %v after a 4 MiB request: want the 20 MiB segment split, 16 MiB free", got)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// With a chunk of three granules (ChunkSize 6 MiB, GLake's kGranularity as a knob) every large request
// rounds up to whole chunks and so does its segment (round_size, realloc_block): a 1 MiB + 1 B request gets
// a 6 MiB block of a 24 MiB segment (20 MiB rounded up), an 11 MiB request a 12 MiB block and segment, a
// 13 MiB request an 18 MiB one; the segments are whole chunks, each one handle of 6 MiB.
func TestPaperChunkOfThreeGranulesRoundsSegments(t *testing.T) {
	for _, c := range []struct{ size, block, seg uint64 }{
		{MiB + 1, 6 * MiB, 24 * MiB}, {11 * MiB, 12 * MiB, 12 * MiB}, {13 * MiB, 18 * MiB, 18 * MiB},
	} {
		a, dev := newPaper(t, Config{ChunkSize: 6 * MiB}, 0, true)
		before := a.Stats().ReservedBytes
		p := mustAlloc(t, a, c.size, 0)
		got := liveSize(a, p)
		if got != c.block {
			t.Errorf("Alloc(%d) with 6 MiB chunks: block of %s, want %s", c.size, vmm.FormatBytes(got), vmm.FormatBytes(c.block))
		}
		if grew := a.Stats().ReservedBytes - before; grew != c.seg {
			t.Errorf("Alloc(%d) with 6 MiB chunks: a segment of %s, want %s (get_allocation_size rounded up to whole chunks)",
				c.size, vmm.FormatBytes(grew), vmm.FormatBytes(c.seg))
		}
		for _, h := range dev.State().Handles {
			if h.Size != 6*MiB {
				t.Fatalf("Alloc(%d) with 6 MiB chunks: a handle of %s, want every chunk 6 MiB", c.size, vmm.FormatBytes(h.Size))
			}
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// get_free_block's stitched-block branch: once best fit misses, a cached sBlock serves any large request
// (below fragLimit too), if at most reuseLimit times the request, holding only the first request/2 MiB
// pieces; the rest stays free for others.
func TestPaperReuseHoldsOnlyTheRequest(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	separate(t, a, 300*MiB, 300*MiB)
	p := mustAlloc(t, a, 600*MiB, 0)
	mustFree(t, a, p)
	res := a.Stats().ReservedBytes
	q := mustAlloc(t, a, 400*MiB, 0) // below the 512 MiB fragment limit, above every free block
	st := a.Stats()
	if st.NumStitchReuses != 1 || st.NumStitches != 1 || st.ReservedBytes != res || q != p {
		t.Fatalf("reuses %d stitches %d reserved %d -> %d ptr %v (sBlock %v): want the cached sBlock reused",
			st.NumStitchReuses, st.NumStitches, res, st.ReservedBytes, q, p)
	}
	if st.AllocatedBytes != 400*MiB {
		t.Errorf("allocated %d, want the request's 400 MiB", st.AllocatedBytes)
	}
	if got := freeSizes(a); !slices.Equal(got, []uint64{200 * MiB}) {
		t.Errorf("free blocks %v: want the sBlock's unheld 200 MiB tail free", got)
	}
	r := mustAlloc(t, a, 200*MiB, 0) // best fit takes the tail: no aliasing with q
	checkState(t, a, dev)
	mustFree(t, a, q)
	mustFree(t, a, r)
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// get_free_block: a cached sBlock more than reuseLimit (10) times the request is not reused.
func TestPaperReuseLimit(t *testing.T) {
	for _, c := range []struct {
		req    uint64
		reuses uint64
	}{{64 * MiB, 1}, {60 * MiB, 0}} {
		a, dev := newPaper(t, Config{StitchMin: 32 * MiB}, 0, true)
		sizes := make([]uint64, 16)
		for i := range sizes {
			sizes[i] = 40 * MiB
		}
		separate(t, a, sizes...)
		p := mustAlloc(t, a, 640*MiB, 0)
		mustFree(t, a, p)
		mustAlloc(t, a, c.req, 0)
		if n := a.Stats().NumStitchReuses; n != c.reuses {
			t.Errorf("a %d MiB request and a cached 640 MiB sBlock: %d reuses, want %d", c.req/MiB, n, c.reuses)
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// twoCached leaves two cached sBlocks on stream 0, older first: a fragmented one (a piece of it now serves
// a live block) and one whose pieces are all free. It returns the live block.
func twoCached(t *testing.T, a *Allocator, dev *sim.Device) vmm.DevicePtr {
	t.Helper()
	separate(t, a, 300*MiB, 300*MiB, 200*MiB, 400*MiB)
	p := mustAlloc(t, a, 600*MiB, 0) // 400 + 200 (the two largest)
	q := mustAlloc(t, a, 600*MiB, 0) // 300 + 300
	mustFree(t, a, p)
	mustFree(t, a, q)
	if n := len(a.sblocks); n != 2 {
		t.Fatalf("%d cached sBlocks, want 2", n)
	}
	return mustAlloc(t, a, 200*MiB, 0) // best fit: the 200 MiB block, a piece of the first sBlock
}

// garbage_collect_fused_blocks: time 0 collects only fragmented sBlocks; time 2 all; oldest release first,
// stopping at the first whose event has not completed.
func TestPaperGCFragmentedFirstStopsAtUnfinishedEvent(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	twoCached(t, a, dev)
	if got := underLock(a, func() vmm.Bytes { return a.paperGCLocked(0, 0, nil) }); uint64(got) != 600*MiB || len(a.sblocks) != 1 {
		t.Fatalf("GC(0): %d bytes, %d sBlocks left: want the fragmented 600 MiB sBlock only", got, len(a.sblocks))
	}
	if got := underLock(a, func() vmm.Bytes { return a.paperGCLocked(2, 0, nil) }); uint64(got) != 600*MiB || len(a.sblocks) != 0 {
		t.Fatalf("GC(2): %d bytes, %d sBlocks left: want the free one too", got, len(a.sblocks))
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)

	a, dev = newPaper(t, Config{}, 0, false)
	dev.Launch(0)
	separate(t, a, 300*MiB, 300*MiB, 200*MiB, 400*MiB)
	p := mustAlloc(t, a, 600*MiB, 0)
	q := mustAlloc(t, a, 600*MiB, 0)
	mustFree(t, a, p) // freed while stream 0's work is pending
	dev.Complete(0)
	dev.Launch(0)
	mustFree(t, a, q) // its event waits for the new work
	if got := underLock(a, func() vmm.Bytes { return a.paperGCLocked(2, 0, nil) }); uint64(got) != 600*MiB || len(a.sblocks) != 1 || &a.sblocks[0].block != a.ptrs.get(q) {
		t.Fatalf("GC(2) with the newer sBlock's event pending: %d bytes, want only the older sBlock", got)
	}
	dev.CompleteAll()
	if got := underLock(a, func() vmm.Bytes { return a.paperGCLocked(2, 0, nil) }); uint64(got) != 600*MiB {
		t.Fatalf("GC(2) after completion: %d bytes, want the other 600 MiB", got)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// garbage_collect_fused_blocks(time, require) stops collecting the fragmented sBlocks, oldest release first,
// once it has 4x require bytes (time 0) or 16x (time 1); with require 0, or at time 2, it collects them all.
// Three fragmented cached sBlocks of 80, 60 and 40 MiB, released in that order: 20 MiB at time 0 stops at
// exactly 80 MiB (one), 25 MiB needs 100 (two: 140), 5 MiB at time 1 stops at 80 (one); released in the
// reverse order, 10 MiB at time 0 stops at the 40 MiB one, released last but made first. The stitched bytes
// autoGC counts go down by what was collected.
func TestPaperGCStopsAtItsMultipleOfTheRequest(t *testing.T) {
	for _, c := range []struct {
		time      int
		require   uint64
		reverse   bool // released 40, 60, 80 MiB
		collected int
		bytes     uint64
	}{
		{0, 20 * MiB, false, 1, 80 * MiB}, {0, 25 * MiB, false, 2, 140 * MiB}, {1, 5 * MiB, false, 1, 80 * MiB},
		{1, 10 * MiB, false, 3, 180 * MiB}, {0, 0, false, 3, 180 * MiB}, {2, 20 * MiB, false, 3, 180 * MiB},
		{0, 10 * MiB, true, 1, 40 * MiB}, {0, 20 * MiB, true, 2, 100 * MiB},
	} {
		a, dev := newPaper(t, Config{StitchMin: 4 * MiB}, 0, true)
		separate(t, a, 40*MiB, 40*MiB, 30*MiB, 30*MiB, 20*MiB, 20*MiB)
		var stitched []vmm.DevicePtr
		for _, sz := range []uint64{80 * MiB, 60 * MiB, 40 * MiB} { // 40+40, 30+30, 20+20
			stitched = append(stitched, mustAlloc(t, a, sz, 0))
		}
		if c.reverse {
			slices.Reverse(stitched)
		}
		for _, p := range stitched {
			mustFree(t, a, p)
		}
		for _, sz := range []uint64{40 * MiB, 30 * MiB, 20 * MiB} { // one piece of each: all three fragmented
			mustAlloc(t, a, sz, 0)
		}
		if n := len(a.sblocks); n != 3 || uint64(a.fused) != 180*MiB {
			t.Fatalf("%d cached sBlocks, %s stitched; want 3, 180 MiB", n, vmm.FormatBytes(uint64(a.fused)))
		}
		got := underLock(a, func() vmm.Bytes { return a.paperGCLocked(c.time, vmm.Bytes(c.require), nil) })
		if left := 3 - len(a.sblocks); left != c.collected || uint64(got) != c.bytes {
			t.Errorf("GC(%d, %s), released in reverse %v: collected %d sBlocks, %s; want %d, %s", c.time,
				vmm.FormatBytes(c.require), c.reverse, left, vmm.FormatBytes(uint64(got)), c.collected, vmm.FormatBytes(c.bytes))
		}
		if uint64(a.fused) != 180*MiB-c.bytes {
			t.Errorf("GC(%d, %s) collected %s: %s stitched left, want %s", c.time, vmm.FormatBytes(c.require),
				vmm.FormatBytes(uint64(got)), vmm.FormatBytes(uint64(a.fused)), vmm.FormatBytes(180*MiB-c.bytes))
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// get_fused_fragmented_blocks: once the stitched bytes exceed autoGC, garbage_collect_fused_blocks(2, 0).
func TestPaperAutoGC(t *testing.T) {
	for _, c := range []struct {
		autoGC uint64
		frees  uint64
	}{{0 /* 1000 GiB */, 0}, {1 * vmm.GiB, 1}} {
		a, dev := newPaper(t, Config{AutoGC: c.autoGC}, 0, true)
		separate(t, a, 300*MiB, 300*MiB, 200*MiB, 400*MiB)
		p := mustAlloc(t, a, 600*MiB, 0)
		mustFree(t, a, p)
		mustAlloc(t, a, 200*MiB, 0)   // fragments the cached sBlock
		mustAlloc(t, a, 600*MiB+1, 0) // stitches 300 + 300 + a piece: 1.2 GiB stitched in all
		if n := a.Stats().NumStitchFrees; n != c.frees {
			t.Errorf("autoGC %d: %d sBlocks collected, want %d", c.autoGC, n, c.frees)
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// get_fused_fragmented_blocks' trigger is strict: total_fuse_size > autoGC. The same scene as TestPaperAutoGC
// run with autoGC at exactly the stitched bytes it reaches collects nothing; one byte lower, it collects.
func TestPaperAutoGCTriggersOnlyAbove(t *testing.T) {
	scene := func(autoGC uint64) (fused vmm.Bytes, frees uint64) {
		a, dev := newPaper(t, Config{AutoGC: autoGC}, 0, true)
		separate(t, a, 300*MiB, 300*MiB, 200*MiB, 400*MiB)
		mustFree(t, a, mustAlloc(t, a, 600*MiB, 0))
		mustAlloc(t, a, 200*MiB, 0)
		mustAlloc(t, a, 600*MiB+1, 0)
		fused, frees = a.fused, a.Stats().NumStitchFrees
		checkState(t, a, dev)
		closeClean(t, a, dev)
		return fused, frees
	}
	total, _ := scene(0) // 1000 GiB: never collects
	if _, n := scene(uint64(total)); n != 0 {
		t.Errorf("autoGC equal to the %v stitched: %d sBlocks collected, want 0 (GMLake collects once they exceed it)", vmm.FormatBytes(uint64(total)), n)
	}
	if _, n := scene(uint64(total) - 1); n != 1 {
		t.Errorf("autoGC one byte below the %v stitched: %d sBlocks collected, want 1", vmm.FormatBytes(uint64(total)), n)
	}
}

// emptyCache: release_cached_blocks (unsplit free segments, with the sBlocks viewing them), then
// garbage_collect_fused_blocks(2, 0): nothing is left cached.
func TestPaperEmptyCacheReleasesAndCollects(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	live := twoCached(t, a, dev)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); len(a.sblocks) != 0 || st.ReservedBytes != 200*MiB {
		t.Fatalf("after EmptyCache: %d sBlocks, %d reserved: want none, and only the live 200 MiB segment", len(a.sblocks), st.ReservedBytes)
	}
	mustFree(t, a, live)
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// malloc: stitching at attempts 0 (before growing), 1 (growing failed) and 2 (after releasing the cache),
// attempts below defragLevel skipped.
func TestPaperDefragLevel(t *testing.T) {
	for _, c := range []struct {
		level    int
		stitches uint64
		reserved uint64
	}{
		{0, 1, 900 * MiB}, // attempt 0 stitches: no growth
		{1, 1, 900 * MiB}, // growing fails (1 GiB device), attempt 1 stitches
		{3, 0, 600 * MiB}, // no attempt: the cache is released and a 600 MiB segment grows
	} {
		a, dev := newPaper(t, Config{DefragLevel: c.level}, vmm.GiB, true)
		separate(t, a, 300*MiB, 300*MiB, 300*MiB)
		mustAlloc(t, a, 600*MiB, 0)
		if st := a.Stats(); st.NumStitches != c.stitches || st.ReservedBytes != c.reserved {
			t.Errorf("defragLevel %d: %d stitches, %d MiB reserved; want %d and %d MiB", c.level, st.NumStitches,
				st.ReservedBytes/MiB, c.stitches, c.reserved/MiB)
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// release_cached_blocks on out of memory frees only unsplit free segments (a split one stays cached), and
// realloc_block retries the same segment size: no smaller fallback (PyTorch's caching policy here falls
// back to a segment of the request).
func TestPaperOOMReleasesUnsplitOnlyNoFallback(t *testing.T) {
	a, dev := newPaper(t, Config{}, 60*MiB, true)
	mustAlloc(t, a, 4*MiB, 0) // a 20 MiB segment, split: 16 MiB free stays
	b := mustAlloc(t, a, 30*MiB, 0)
	mustFree(t, a, b)
	mustAlloc(t, a, 36*MiB, 0) // 10 MiB free on the device: release the free 30 MiB segment, grow
	if st := a.Stats(); st.ReservedBytes != 56*MiB || st.NumCacheFlushes != 1 {
		t.Fatalf("reserved %d MiB, flushes %d: want 20 + 36 MiB (the split segment kept) after one flush",
			st.ReservedBytes/MiB, st.NumCacheFlushes)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)

	for _, c := range []struct {
		policy string
		ok     bool
	}{{PolicyGMLakePaper, false}, {PolicyCaching, true}} {
		dev := sim.NewDevice(sim.DeviceConfig{Capacity: 30 * MiB, SyncStreams: true})
		a, err := New(dev, Config{Policy: c.policy})
		if err != nil {
			t.Fatal(err)
		}
		mustAlloc(t, a, 12*MiB, 0)
		_, err = a.Alloc(4*MiB, 0) // wants a 20 MiB segment; 18 MiB free
		if (err == nil) != c.ok {
			t.Errorf("%s: Alloc(4 MiB) with 18 MiB free and 20 MiB segments: err %v, want success %v", c.policy, err, c.ok)
		}
		closeClean(t, a, dev)
	}
}

// realloc_block with reAlloc: a large request the free large blocks cover in part grows by only the rest
// and is stitched from both; when they cover it whole (too small to stitch: below fragLimit), realloc_block
// refuses to grow, and the request is served only after release_cached_blocks.
func TestPaperReAlloc(t *testing.T) {
	a, dev := newPaper(t, Config{ReAlloc: true}, 0, true)
	separate(t, a, 60*MiB, 60*MiB)
	mustAlloc(t, a, 100*MiB, 0)
	if st := a.Stats(); st.NumCacheFlushes != 1 || st.ReservedBytes != 100*MiB {
		t.Errorf("reAlloc, 120 MiB free for a 100 MiB request: %d flushes, %d MiB reserved; want the cache released, then 100 MiB grown",
			st.NumCacheFlushes, st.ReservedBytes/MiB)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)

	for _, c := range []struct {
		realloc  bool
		reserved uint64
	}{{false, 900 * MiB}, {true, 600 * MiB}} {
		a, dev := newPaper(t, Config{ReAlloc: c.realloc}, 0, true)
		separate(t, a, 300*MiB)
		mustAlloc(t, a, 600*MiB, 0)
		if st := a.Stats(); st.ReservedBytes != c.reserved {
			t.Errorf("reAlloc %v: %d MiB reserved, want %d MiB", c.realloc, st.ReservedBytes/MiB, c.reserved/MiB)
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// GLake's event churn for a stitch (get_fused_fragmented_blocks), event by event: malloc's search key is a
// Block (one event), the stitch's left and right search keys two more, the fused Block's own one (replaced
// by the newest of its parts'), and, when the last block taken is split, the kept head's new Block one
// more: free segments of 12 and 10 MiB stitched whole for 22 MiB create and destroy 4 events, and for
// 14 MiB (the 10 MiB one split, its 2 MiB head taken) 5. None is recorded: no free happened.
func TestPaperStitchEventChurn(t *testing.T) {
	for _, c := range []struct {
		req, events uint64
	}{{22 * MiB, 4}, {14 * MiB, 5}} {
		a, dev := newPaper(t, Config{StitchMin: 4 * MiB}, 0, true)
		separate(t, a, 12*MiB, 10*MiB)
		before := dev.Counts()
		mustAlloc(t, a, c.req, 0)
		d := diff(dev.Counts(), before)
		if a.Stats().NumStitches != 1 {
			t.Fatalf("Alloc(%d MiB) over free 12 and 10 MiB segments: %d stitches, want 1", c.req>>20, a.Stats().NumStitches)
		}
		if d[vmm.CallCreateEvent] != c.events || d[vmm.CallDestroyEvent] != c.events || d[vmm.CallRecordEvent] != 0 {
			t.Errorf("Alloc(%d MiB) stitched: %d events created, %d destroyed, %d recorded; want GLake's %d, %d, 0",
				c.req>>20, d[vmm.CallCreateEvent], d[vmm.CallDestroyEvent], d[vmm.CallRecordEvent], c.events, c.events)
		}
		checkState(t, a, dev)
		closeClean(t, a, dev)
	}
}

// VmmSegment / VirBlock: every 2 MiB piece is created, mapped and given access on its own, in a segment and
// in a stitched block alike; the segment is unmapped in one call at release.
func TestPaperDriverCallsPerPiece(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	before := dev.Counts()
	p := mustAlloc(t, a, 64*MiB, 0)
	d := diff(dev.Counts(), before)
	if d[vmm.CallCreate] != 32 || d[vmm.CallMap] != 32 || d[vmm.CallSetAccess] != 32 || d[vmm.CallReserve] != 1 {
		t.Fatalf("a 64 MiB segment: %v, want 32 create, map and set_access, 1 reserve", d.Map())
	}
	mustFree(t, a, p)
	closeClean(t, a, dev)

	a, dev = newPaper(t, Config{}, 0, true)
	separate(t, a, 300*MiB, 300*MiB)
	before = dev.Counts()
	mustAlloc(t, a, 600*MiB, 0)
	d = diff(dev.Counts(), before)
	if d[vmm.CallMap] != 300 || d[vmm.CallSetAccess] != 300 || d[vmm.CallReserve] != 1 || d[vmm.CallCreate] != 0 {
		t.Fatalf("a 600 MiB stitch of 300 pieces: %v, want 300 map and set_access, 1 reserve, no create", d.Map())
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	closeClean(t, a, dev)
}

func diff(after, before vmm.CallCounts) vmm.CallCounts {
	var d vmm.CallCounts
	for k := range after {
		d[k] = after[k] - before[k]
	}
	return d
}

// Property: gmlake-paper's own paths (stitching, partly held reuse, collection, reAlloc, every defragLevel)
// keep the engine's state true to the device after every step of random alloc/free/EmptyCache sequences on
// two streams with pending work, and Close leaves nothing behind, block events included. Low fragment
// limits and autoGC make every path run on a small device. A failure prints the seed, the knobs and the ops;
// rerun one seed with GMLAKE_PAPER_SEED=N go test ./impl -run TestPaperRandomOpsKeepState -v.
func TestPaperRandomOpsKeepState(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if s := os.Getenv("GMLAKE_PAPER_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int64{n}
	}
	for _, seed := range seeds {
		rng := rand.New(rand.NewSource(seed))
		cfg := Config{StitchMin: uint64(1+rng.Intn(8)) * 4 * MiB, AutoGC: uint64(1+rng.Intn(4)) * 256 * MiB,
			DefragLevel: rng.Intn(4), ReAlloc: rng.Intn(2) == 0, ReuseLimit: float64(1 + rng.Intn(12))}
		dev := sim.NewDevice(sim.DeviceConfig{Capacity: 1 * vmm.GiB})
		a, err := New(dev, Config{Policy: PolicyGMLakePaper, StitchMin: cfg.StitchMin, AutoGC: cfg.AutoGC,
			DefragLevel: cfg.DefragLevel, ReAlloc: cfg.ReAlloc, ReuseLimit: cfg.ReuseLimit})
		if err != nil {
			t.Fatal(err)
		}
		s1, err := dev.CreateStream()
		if err != nil {
			t.Fatal(err)
		}
		streams := []vmm.Stream{vmm.DefaultStream, s1}
		var live []vmm.DevicePtr
		var ops []string
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d, knobs %+v: %s\nops:\n%s\nrerun: GMLAKE_PAPER_SEED=%d go test ./impl -run TestPaperRandomOpsKeepState -v",
				seed, cfg, fmt.Sprintf(format, args...), strings.Join(ops, "\n"), seed)
		}
		for step := 0; step < 400; step++ {
			switch r := rng.Intn(20); {
			case r < 10 || len(live) == 0:
				size := uint64(1 + rng.Intn(2*int(MiB)))
				if rng.Intn(2) == 0 {
					size = uint64(1+rng.Intn(48)) * 2 * MiB
				}
				s := streams[rng.Intn(2)]
				ops = append(ops, fmt.Sprintf("alloc %d s%d", size, s))
				p, err := a.Alloc(size, s)
				if err != nil {
					if !errors.Is(err, vmm.ErrOutOfMemory) {
						fail("Alloc: %v", err)
					}
					continue
				}
				live = append(live, p)
			case r < 17:
				i := rng.Intn(len(live))
				ops = append(ops, fmt.Sprintf("free %v", live[i]))
				if err := a.Free(live[i]); err != nil {
					fail("Free: %v", err)
				}
				live = slices.Delete(live, i, i+1)
			case r < 18:
				ops = append(ops, "empty-cache")
				if err := a.EmptyCache(); err != nil {
					fail("EmptyCache: %v", err)
				}
			default:
				s := streams[rng.Intn(2)]
				if rng.Intn(2) == 0 {
					ops = append(ops, fmt.Sprintf("launch s%d", s))
					dev.Launch(s)
				} else {
					ops = append(ops, fmt.Sprintf("complete s%d", s))
					dev.Complete(s)
				}
			}
			if err := verifySnapshot(a.Snapshot(), dev.State()); err != nil {
				fail("after step %d: %v", step, err)
			}
		}
		dev.CompleteAll()
		if _, err := a.Close(); err != nil {
			fail("Close: %v", err)
		}
		if l := dev.Leaks(); !l.Empty() || len(l.Events) > 0 {
			fail("leaks after Close: %v", l)
		}
		st := a.Stats()
		t.Logf("seed %d: %d stitches, %d reuses, %d collected, %d flushes, %d OOMs", seed, st.NumStitches,
			st.NumStitchReuses, st.NumStitchFrees, st.NumCacheFlushes, st.NumOOMs)
	}
}

// get_fused_fragmented_blocks: when mapping the stitched block fails (here its cuMemAddressReserve),
// garbage_collect_fused_blocks(0, request) runs and the stitch is tried again.
func TestPaperGCOnFailedStitch(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	twoCached(t, a, dev) // free blocks 400, 300, 300; a fragmented and an all-free cached sBlock
	dev.FailNth(vmm.CallReserve, 1, vmm.OutOfMemory)
	mustAlloc(t, a, 700*MiB, 0)
	if st := a.Stats(); st.NumStitches != 3 || st.NumStitchFrees != 1 {
		t.Fatalf("stitches %d, collected %d: want the third stitch after collecting the fragmented sBlock",
			st.NumStitches, st.NumStitchFrees)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// get_fused_fragmented_blocks refused at all three attempts after splitting the last block it took: the
// split block goes back to the free set whole (merged with its rest: GLake leaves it marked used, the engine
// gives it back), the request grows a segment of its own, and the free blocks are as before.
func TestPaperFailedStitchGivesTheSplitBlockBack(t *testing.T) {
	a, dev := newPaper(t, Config{StitchMin: 4 * MiB}, 0, true)
	separate(t, a, 12*MiB, 10*MiB)
	for n := 1; n <= 3; n++ {
		dev.FailNth(vmm.CallReserve, n, vmm.UnknownCUDAError)
	}
	mustAlloc(t, a, 14*MiB, 0) // 12 + 10 MiB, the 10 MiB one split for its 2 MiB head
	if st := a.Stats(); st.NumStitches != 0 || st.ReservedBytes != 36*MiB {
		t.Fatalf("after three refused stitches: %d stitches, %s reserved; want none and a 14 MiB segment grown (36 MiB)",
			st.NumStitches, vmm.FormatBytes(st.ReservedBytes))
	}
	if got := freeSizes(a); !slices.Equal(got, []uint64{12 * MiB, 10 * MiB}) {
		t.Fatalf("free blocks %v after the refused stitch: want the 12 and 10 MiB segments whole", got)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// realloc_block: when creating a segment runs out of memory while the device has more free than the
// segment and the stream's cached sBlocks add up to at least it, garbage_collect_fused_blocks runs and the
// segment is created again.
func TestPaperGCOnFailedGrow(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	twoCached(t, a, dev) // 1200 MiB of cached sBlocks; 1000 MiB of free blocks: 1100 MiB must grow
	res := a.Stats().ReservedBytes
	dev.FailNth(vmm.CallCreate, 1, vmm.OutOfMemory)
	mustAlloc(t, a, 1100*MiB, 0)
	if st := a.Stats(); st.NumStitchFrees != 1 || st.ReservedBytes != res+1100*MiB || st.NumCacheFlushes != 0 {
		t.Fatalf("collected %d, reserved %d -> %d MiB, flushes %d: want the fragmented sBlock collected and the "+
			"segment created on the retry", st.NumStitchFrees, res/MiB, st.ReservedBytes/MiB, st.NumCacheFlushes)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// A free deferred during a capture whose event could not be recorded when the capture ended (a failed
// cudaEventRecord) is tried again by release_cached_blocks (GMLake's process_events starts with
// insert_events_deferred_until_no_capture): on a device that holds one 2 MiB segment, the segment of the
// block freed under capture is released on the next request's out-of-memory path, and the request is served
// (F10, found by rapid: the block stayed Pending until the next capture).
func TestPaperDeferredFreeRetriedAfterFailedCaptureEnd(t *testing.T) {
	a, dev := newPaper(t, Config{}, 2*MiB /* capacity: one small segment */, true /* sync */)
	s1, _ := dev.CreateStream()
	p := mustAlloc(t, a, 1, 0)
	if err := a.RecordStream(p, s1); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCapturing(0, true); err != nil {
		t.Fatal(err)
	}
	mustFree(t, a, p) // deferred: used on s1, and stream 0 captures
	dev.FailNth(vmm.CallRecordEvent, 1 /* the next */, vmm.OutOfMemory)
	if err := a.SetCapturing(0, false); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("SetCapturing(off) with a failing event record: %v, want out of memory", err)
	}
	dev.ClearFaults()
	q, err := a.Alloc(1, s1)
	if err != nil {
		t.Fatalf("Alloc(1) on stream %d after the capture and a failed event record: %v; want the deferred free retried and its segment released", s1, err)
	}
	mustFree(t, a, q)
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// heldAsBefore fails t unless the engine reserves and the device holds what they did before a failed request
// (INV-FAILCLEAN).
func heldAsBefore(t *testing.T, a *Allocator, dev *sim.Device, reserved, used uint64, handles int) {
	t.Helper()
	if r := a.Stats().ReservedBytes; r != reserved {
		t.Errorf("a failed request moved reserved bytes from %s to %s", vmm.FormatBytes(reserved), vmm.FormatBytes(r))
	}
	if u, h := deviceHeld(dev); u != used || h != handles {
		t.Errorf("a failed request left the device holding %s in %d handles, %s in %d before", vmm.FormatBytes(u), h, vmm.FormatBytes(used), handles)
	}
}

// A failed request holds no more than before, under gmlake-paper's reAlloc too (INV-FAILCLEAN): reAlloc grows
// a segment for the part of a request the stream's free large blocks do not cover and stitches at once; when
// that stitch and the later ones fail (every stitched view's reservation fails here), the request fails and
// the segments it grew are returned (GLake keeps them cached).
func TestPaperReAllocFailedRequestKeepsNoSegment(t *testing.T) {
	a, dev := newPaper(t, Config{ReAlloc: true, StitchMin: 8 * MiB}, 64*MiB /* capacity */, true /* sync */)
	live := mustAlloc(t, a, 8*MiB, 0) // a 20 MiB segment, split: 12 MiB free beside the live 8 MiB
	reserved := a.Stats().ReservedBytes
	used, handles := deviceHeld(dev)
	// Reserve calls: 1 the first growth, 2-4 its stitch (three tries), 5-7 stitch attempt 1, then the
	// cache release returns the grown segment, 8 the second growth, 9-11 its stitch, 12-14 attempt 2.
	for _, n := range []int{2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14} {
		dev.FailNth(vmm.CallReserve, n, vmm.InvalidValue)
	}
	// 24 MiB: the rest, 12 MiB, makes a segment smaller than the whole request's, so the retry grows the
	// rest again (a 16 MiB request's 4 MiB rest would make a 20 MiB segment, and its retry a whole 16 MiB one).
	if _, err := a.Alloc(24*MiB, 0); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("Alloc(24 MiB) with every stitch failing: %v, want out of memory", err)
	}
	if n := a.Stats().DriverCalls[vmm.CallReserve]; n < 14 {
		t.Fatalf("the scene made %d Reserve calls, want at least 14: the faults missed their calls", n)
	}
	dev.ClearFaults()
	heldAsBefore(t, a, dev, reserved, used, handles)
	checkState(t, a, dev)
	mustFree(t, a, live)
	closeClean(t, a, dev)
}

// The same failed request, with the cache release before the retry failing to return the segment the
// first growth made (its first unmap fails): the segment stays cached and free, and the failed request
// returns it at its end (INV-FAILCLEAN). blind-s27's dropped first `grown = append(grown, seg)` survived every
// checker: the release before the retry returns that segment on every path but this one.
func TestPaperReAllocFailedRequestReturnsASegmentTheFlushKept(t *testing.T) {
	a, dev := newPaper(t, Config{ReAlloc: true, StitchMin: 8 * MiB}, 64*MiB, true)
	live := mustAlloc(t, a, 8*MiB, 0)
	reserved := a.Stats().ReservedBytes
	used, handles := deviceHeld(dev)
	for n := 2; n <= 40; n++ { // every Reserve after the first growth's: no stitch, no second segment
		dev.FailNth(vmm.CallReserve, n, vmm.InvalidValue)
	}
	dev.FailNth(vmm.CallUnmap, 1, vmm.InvalidValue) // the flush's first unmap: the grown segment's
	if _, err := a.Alloc(24*MiB, 0); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("Alloc(24 MiB) with every stitch failing: %v, want out of memory", err)
	}
	dev.ClearFaults()
	heldAsBefore(t, a, dev, reserved, used, handles)
	if n := a.Stats().DriverCalls[vmm.CallUnmap]; n < 2 && !t.Failed() {
		t.Fatalf("the scene made %d Unmap calls, want the flush's failed one and the request's own: the fault missed", n)
	}
	checkState(t, a, dev)
	mustFree(t, a, live)
	closeClean(t, a, dev)
}

// A cached stitched block freed while work that uses it is pending on its own stream, and recorded on
// another stream, is not torn down by EmptyCache until that work completed (INV-RELEASESAFE: cuMemUnmap
// does not wait for in-flight work). Its free waited for the other stream's event only, and the collection
// of cached sBlocks (paperDoneLocked) asked the sBlock's own event, never recorded at that free: rapid found
// it (harness/ops's rule table grew, so its fixed seed drew new sequences), minimized to these 10 ops.
func TestPaperCachedSBlockOutlivesItsStreamsWork(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: 24 * MiB})
	a, err := New(dev, Config{Policy: PolicyGMLakePaper, StitchMin: 4 * MiB})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, a, 6*MiB, 0)
	mustAlloc(t, a, 2*MiB, 0)
	p := mustAlloc(t, a, 4*MiB, 0)
	mustAlloc(t, a, 2*MiB, 0)
	mustFree(t, a, p)
	sb := mustAlloc(t, a, 8*MiB, 0) // stitched over the freed 4 MiB and new memory
	if err := a.RecordStream(sb, s1); err != nil {
		t.Fatal(err)
	}
	dev.Launch(0) // work on the block's own stream, pending
	mustFree(t, a, sb)
	before := dev.Counts()
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if d := diff(dev.Counts(), before); d[vmm.CallUnmap] != 0 || d[vmm.CallRelease] != 0 {
		t.Fatalf("EmptyCache with the stitched block's work pending on its stream: %v, want no unmap or release", d.Map())
	}
	dev.CompleteAll()
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if d := diff(dev.Counts(), before); d[vmm.CallUnmap] == 0 {
		t.Fatalf("EmptyCache after the work completed: %v, want the cached stitched block torn down", d.Map())
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// The engine's departure from GLake's realloc_block on the retry (doc.go): with reAlloc on, a request the
// stream's free blocks cover but no stitch serves (below fragLimit), and one whose rest would make a segment
// larger than the whole request's, grow the whole segment after the cache release instead of failing on a
// device that holds it (INV-NOSPURIOUSOOM; spec/FINDINGS.md F14).
func TestPaperReAllocRetryGrowsWhatNoStitchServes(t *testing.T) {
	// 10 MiB free in a segment that stays in use (2 + 8 MiB freed beside live blocks), a 10 MiB request
	// below the 512 MiB fragLimit: GLake grows nothing (the free blocks cover it), stitches nothing.
	a, dev := newPaper(t, Config{ReAlloc: true}, 64*MiB, true)
	ps := []vmm.DevicePtr{mustAlloc(t, a, 2*MiB, 0), mustAlloc(t, a, 2*MiB, 0), mustAlloc(t, a, 8*MiB, 0), mustAlloc(t, a, 2*MiB, 0)}
	mustFree(t, a, ps[0])
	mustFree(t, a, ps[2])
	if _, err := a.Alloc(10*MiB, 0); err != nil {
		t.Fatalf("Alloc(10 MiB) with 44 MiB free on the device: %v", err)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)

	// A 12 MiB request beside 10 MiB free (fragLimit 4 MiB, one free block: no stitch): the 2 MiB rest's
	// segment is 20 MiB, more than the 18 MiB the device has; the whole request's is 12 MiB.
	a, dev = newPaper(t, Config{ReAlloc: true, StitchMin: 4 * MiB}, 64*MiB, true)
	mustAlloc(t, a, 2*MiB, 0)
	mustAlloc(t, a, 2*MiB, 0)
	mustAlloc(t, a, 6*MiB, 0)
	s1, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, a, 24*MiB, s1) // another stream's segment: the device keeps 18 MiB free
	if _, err := a.Alloc(12*MiB, 0); err != nil {
		t.Fatalf("Alloc(12 MiB) with 18 MiB free on the device: %v", err)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}
