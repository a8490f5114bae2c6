package spec

import (
	"slices"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

const mb = vmm.MiB

// goodView is a consistent state: two 2 MiB chunks mapped in one 4 MiB reservation, one live allocation in
// each; a stitched view of both chunks in a second reservation, cached (free).
func goodView() View {
	base := vmm.DevicePtr(0x1000_0000)
	st := base + vmm.DevicePtr(8*mb)
	return View{
		Policy: "gmlake", Granularity: 2 * mb,
		Live: []Alloc{
			{Ptr: base, Requested: 100, Size: 2 * mb, Stream: 0, Block: 1},
			{Ptr: base.Add(2 * mb), Requested: 2 * mb, Size: 2 * mb, Stream: 1, Block: 2},
		},
		Blocks: []Block{
			{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 2 * mb}, SmallPool: true},
			{ID: 2, State: BlockLive, Range: vmm.Range{Base: base.Add(2 * mb), Size: 2 * mb}, Stream: 1},
			{ID: 3, Stitched: true, State: BlockFree, Range: vmm.Range{Base: st, Size: 4 * mb}, Parts: []uint64{1, 2}},
		},
		Chunks:       []Chunk{{Handle: 1, Size: 2 * mb, Refs: 2}, {Handle: 2, Size: 2 * mb, Refs: 2}},
		Reservations: []vmm.Range{{Base: base, Size: 4 * mb}, {Base: st, Size: 4 * mb}},
		Mappings: []Mapping{
			{VA: vmm.Range{Base: base, Size: 2 * mb}, Handle: 1}, {VA: vmm.Range{Base: base.Add(2 * mb), Size: 2 * mb}, Handle: 2},
			{VA: vmm.Range{Base: st, Size: 2 * mb}, Handle: 1}, {VA: vmm.Range{Base: st.Add(2 * mb), Size: 2 * mb}, Handle: 2},
		},
		Stats: Stats{Requested: 100 + 2*mb, PeakRequested: 100 + 2*mb, Allocated: 4 * mb, PeakAllocated: 4 * mb,
			Reserved: 4 * mb, PeakReserved: 4 * mb, Mapped: 8 * mb, NumLive: 2},
		Device: Device{
			Reservations: []vmm.Range{{Base: base, Size: 4 * mb}, {Base: st, Size: 4 * mb}},
			Mappings: []DevMapping{
				{VA: vmm.Range{Base: base, Size: 2 * mb}, Handle: 1, Accessible: true},
				{VA: vmm.Range{Base: base.Add(2 * mb), Size: 2 * mb}, Handle: 2, Accessible: true},
				{VA: vmm.Range{Base: st, Size: 2 * mb}, Handle: 1, Accessible: true},
				{VA: vmm.Range{Base: st.Add(2 * mb), Size: 2 * mb}, Handle: 2, Accessible: true},
			},
			Handles:  []DevHandle{{Handle: 1, Size: 2 * mb, Mappings: 2}, {Handle: 2, Size: 2 * mb, Mappings: 2}},
			Used:     4 * mb,
			Capacity: 16 * mb,
		},
	}
}

func wantOnly(t *testing.T, v View, inv string) {
	t.Helper()
	vs := Check(v)
	if len(vs) == 0 {
		t.Fatalf("%s: no violation found", inv)
	}
	for _, x := range vs {
		if x.Inv != inv {
			t.Errorf("want only %s, got %v", inv, x)
		}
	}
}

func TestCheckGoodViewHasNoViolation(t *testing.T) {
	if vs := Check(goodView()); len(vs) != 0 {
		t.Fatalf("consistent view judged broken: %v", vs)
	}
}

// INV-NOOVERLAP
func TestCheckNoOverlap(t *testing.T) {
	v := goodView()
	v.Live[1].Ptr = v.Live[0].Ptr.Add(mb) // overlaps the first
	if vs := CheckNoOverlap(v); len(vs) != 1 || vs[0].Inv != InvNoOverlap {
		t.Fatalf("overlap not caught: %v", vs)
	}
}

// INV-MAPPED
func TestCheckMapped(t *testing.T) {
	v := goodView()
	v.Device.Mappings[1].Accessible = false
	wantOnly(t, v, InvMapped)
	v = goodView()
	v.Live[1].Size = 3 * mb // runs past the mapping into unmapped space
	v.Blocks[1].Range.Size = 3 * mb
	if vs := CheckMapped(v); len(vs) != 1 || vs[0].Inv != InvMapped {
		t.Fatalf("unmapped tail not caught: %v", vs)
	}
}

// INV-NOALIAS: the second live allocation moves onto the stitched view, whose first chunk backs the first.
func TestCheckNoAlias(t *testing.T) {
	v := goodView()
	st := v.Blocks[2].Range.Base
	v.Live[1].Ptr = st
	v.Blocks[1].Range.Base = st
	vs := CheckNoAlias(v)
	if len(vs) != 1 || !strings.Contains(vs[0].Msg, "handle 1") {
		t.Fatalf("alias through the stitched view not caught: %v", vs)
	}
}

// INV-REFCOUNT
func TestCheckRefcount(t *testing.T) {
	v := goodView()
	v.Chunks[0].Refs = 3
	wantOnly(t, v, InvRefcount)
}

// INV-STATS
func TestCheckStats(t *testing.T) {
	for name, f := range map[string]func(*View){
		"allocated": func(v *View) { v.Stats.Allocated += 2 * mb; v.Stats.PeakAllocated += 2 * mb },
		"reserved":  func(v *View) { v.Stats.Reserved -= 2 * mb },
		"numlive":   func(v *View) { v.Stats.NumLive = 1 },
		"peak":      func(v *View) { v.Stats.PeakRequested = 1 },
		"mapped":    func(v *View) { v.Stats.Mapped = 4 * mb },
	} {
		v := goodView()
		f(&v)
		if vs := CheckStats(v); len(vs) == 0 {
			t.Errorf("%s: stats error not caught", name)
		}
	}
}

// INV-MIRROR
func TestCheckMirror(t *testing.T) {
	v := goodView()
	v.Device.Handles = append(v.Device.Handles, DevHandle{Handle: 9, Size: 2 * mb})
	v.Device.Used += 2 * mb
	vs := CheckMirror(v)
	if len(vs) != 1 || !strings.Contains(vs[0].Msg, "leaked") {
		t.Fatalf("leaked handle not caught: %v", vs)
	}
	v = goodView()
	v.Mappings = v.Mappings[:3]
	if vs := CheckMirror(v); len(vs) != 1 {
		t.Fatalf("unknown device mapping not caught: %v", vs)
	}
}

// INV-BLOCKS
func TestCheckBlocks(t *testing.T) {
	v := goodView()
	v.Live[1].Block = 1
	if vs := CheckBlocks(v); len(vs) == 0 {
		t.Fatal("two allocations on one block not caught")
	}
}

// INV-BLOCKS: only a pending block owes events; a free or live block that counts one is caught, a pending
// one is not.
func TestCheckBlocksOnlyPendingBlocksCountEvents(t *testing.T) {
	for _, st := range []BlockState{BlockFree, BlockLive} {
		v := goodView()
		i := 2 // the cached sBlock
		if st == BlockLive {
			i = 0
		}
		v.Blocks[i].Events = 1
		wantOnly(t, v, InvBlocks)
	}
	v := goodView()
	v.Blocks = append(v.Blocks, Block{ID: 9, State: BlockPending, Range: vmm.Range{Base: 0x9000_0000, Size: 2 * mb}, Events: 2})
	if vs := CheckBlocks(v); len(vs) != 0 {
		t.Fatalf("a pending block with events judged broken: %v", vs)
	}
}

// INV-NOLEAK
func TestCheckNoLeak(t *testing.T) {
	v := goodView()
	v.Closed = true
	if vs := CheckNoLeak(v); len(vs) != 2 {
		t.Fatalf("leaks after close not caught: %v", vs)
	}
	empty := View{Closed: true, Device: Device{Capacity: 16 * mb}}
	if vs := Check(empty); len(vs) != 0 {
		t.Fatalf("an empty closed view is fine: %v", vs)
	}
}

// INV-STREAM: a free on stream 0 with pending work; reuse on stream 1 before completion is a violation,
// on stream 0 it is not, and after completion it is not.
func TestHistoryStream(t *testing.T) {
	v := goodView()
	h := NewHistory()
	h.Launch(0)
	if !h.OnFree(v, v.Live[0].Ptr) {
		t.Fatal("OnFree did not find the live allocation")
	}
	if len(h.Marks()) != 1 {
		t.Fatalf("want 1 mark, got %v", h.Marks())
	}
	other := v
	other.Live = []Alloc{{Ptr: v.Live[0].Ptr, Size: 2 * mb, Stream: 1}}
	h2 := *h
	if vs := h2.OnAlloc(other, other.Live[0].Ptr, 1); len(vs) != 1 || vs[0].Inv != InvStream {
		t.Fatalf("early cross-stream reuse not caught: %v", vs)
	}
	h3 := NewHistory()
	h3.Launch(0)
	h3.OnFree(v, v.Live[0].Ptr)
	if vs := h3.OnAlloc(other, other.Live[0].Ptr, 0); len(vs) != 0 {
		t.Fatalf("same-stream reuse is legal: %v", vs)
	}
	h4 := NewHistory()
	h4.Launch(0)
	h4.OnFree(v, v.Live[0].Ptr)
	h4.Completed(0)
	if vs := h4.OnAlloc(other, other.Live[0].Ptr, 1); len(vs) != 0 {
		t.Fatalf("reuse after completion is legal: %v", vs)
	}
}

// INV-RELEASESAFE
func TestHistoryReleaseSafe(t *testing.T) {
	v := goodView()
	h := NewHistory()
	h.Launch(1)
	h.OnFree(v, v.Live[1].Ptr)
	if vs := h.CheckRelease(v); len(vs) != 0 {
		t.Fatalf("still mapped: %v", vs)
	}
	gone := v
	gone.Device.Mappings = v.Device.Mappings[:1]
	gone.Device.Handles = v.Device.Handles[:1]
	if vs := h.CheckRelease(gone); len(vs) != 1 || vs[0].Inv != InvReleaseSafe {
		t.Fatalf("release under pending work not caught: %v", vs)
	}
}

// INV-NOSPURIOUSOOM
func TestCheckNoSpuriousOOM(t *testing.T) {
	v := goodView()
	// 12 MiB free on the device, nothing usable cached (both chunks back live allocations).
	if vs := CheckNoSpuriousOOM(v, nil, GranularNeed(2*mb, 4*mb), 14*mb, 0); len(vs) != 0 {
		t.Fatalf("14 MiB cannot fit: %v", vs)
	}
	if vs := CheckNoSpuriousOOM(v, nil, GranularNeed(2*mb, 4*mb), 12*mb, 0); len(vs) != 1 {
		t.Fatalf("12 MiB fits the free device: %v", vs)
	}
	// Free the first allocation: its chunk becomes usable, so 14 MiB fits.
	v.Live = v.Live[1:]
	if vs := CheckNoSpuriousOOM(v, nil, GranularNeed(2*mb, 4*mb), 14*mb, 0); len(vs) != 1 {
		t.Fatalf("14 MiB fits with the cached chunk: %v", vs)
	}
	// ... unless the chunk waits for work on stream 1 and the request is on stream 0.
	h := NewHistory()
	h.Launch(1)
	w := goodView()
	w.Live[0].Uses = []vmm.Stream{1}
	h.OnFree(w, w.Live[0].Ptr)
	if vs := CheckNoSpuriousOOM(v, h, GranularNeed(2*mb, 4*mb), 14*mb, 0); len(vs) != 0 {
		t.Fatalf("a chunk waiting for another stream is not usable: %v", vs)
	}
	// PyTorch's caching allocator needs a whole 20 MiB segment for a 3 MiB request.
	if vs := CheckNoSpuriousOOM(goodView(), nil, SegmentNeed(mb, 2*mb, 10*mb, 20*mb, 2*mb), 3*mb, 0); len(vs) != 0 {
		t.Fatalf("caching: a 20 MiB segment does not fit 12 MiB free: %v", vs)
	}
}

// INV-BESTFIT: two free blocks of one segment; the request must take the smaller that fits.
func TestCheckBestFit(t *testing.T) {
	base := vmm.DevicePtr(0x1000_0000)
	before := View{
		Blocks: []Block{
			{ID: 1, State: BlockFree, Range: vmm.Range{Base: base, Size: 6 * mb}},
			{ID: 2, State: BlockLive, Range: vmm.Range{Base: base.Add(6 * mb), Size: 2 * mb}},
			{ID: 3, State: BlockFree, Range: vmm.Range{Base: base.Add(8 * mb), Size: 4 * mb}},
		},
		Device: Device{Reservations: []vmm.Range{{Base: base, Size: 12 * mb}},
			Mappings: []DevMapping{{VA: vmm.Range{Base: base, Size: 12 * mb}, Handle: 1, Accessible: true}}},
	}
	if vs := CheckBestFit(before, View{}, base, 0, 3*mb); len(vs) != 1 || vs[0].Inv != InvBestFit {
		t.Fatalf("taking the 6 MiB block for 3 MiB while a 4 MiB block fits: %v", vs)
	}
	if vs := CheckBestFit(before, View{}, base.Add(8*mb), 0, 3*mb); len(vs) != 0 {
		t.Fatalf("the 4 MiB block is the best fit: %v", vs)
	}
	if vs := CheckBestFit(before, View{}, base, 0, 5*mb); len(vs) != 0 {
		t.Fatalf("only the 6 MiB block fits 5 MiB: %v", vs)
	}
	if vs := CheckBestFit(before, View{}, base, 1, 3*mb); len(vs) != 0 {
		t.Fatalf("blocks of stream 0 are not candidates on stream 1: %v", vs)
	}
}

// INV-SIZEPOOL: a 100 B request served from the large pool, a 2 MiB one from the small pool, and a stitched
// block in the small pool are each caught; a request of exactly 1 MiB belongs to the small pool.
func TestCheckSizePool(t *testing.T) {
	v := goodView()
	v.Blocks[0].SmallPool = false
	wantOnly(t, v, InvSizePool)
	v = goodView()
	v.Blocks[1].SmallPool = true
	wantOnly(t, v, InvSizePool)
	v = goodView()
	v.Live[0].Requested = 1 << 20
	v.Stats.Requested += 1<<20 - 100
	v.Stats.PeakRequested = v.Stats.Requested
	if vs := CheckSizePool(v); len(vs) != 0 {
		t.Fatalf("1 MiB is a small request: %v", vs)
	}
	v.Live[0].Requested = 1<<20 + 1
	if vs := CheckSizePool(v); len(vs) != 1 {
		t.Fatalf("1 MiB + 1 is a large request, served from the small pool: want one violation, got %v", vs)
	}
}

// INV-TORCH: PyTorch's rules as stated in spec/torch.go, at their boundaries, and the predicate on a new
// segment of the wrong size and on a block split against should_split.
func TestCheckTorch(t *testing.T) {
	for _, c := range []struct{ r, seg uint64 }{{512, 2 * mb}, {mb, 2 * mb}, {mb + 512, 20 * mb}, {10*mb - 512, 20 * mb}, {10 * mb, 10 * mb}, {10*mb + 512, 12 * mb}} {
		if got := TorchAllocationSize(c.r); got != c.seg {
			t.Errorf("get_allocation_size(%d) = %d, want %d", c.r, got, c.seg)
		}
	}
	if TorchRoundSize(1) != 512 || TorchRoundSize(513) != 1024 {
		t.Error("round_size")
	}
	if !TorchShouldSplit(20*mb, 19*mb-512, false) || TorchShouldSplit(20*mb, 19*mb, false) || !TorchShouldSplit(2*mb, mb, false) || TorchShouldSplit(mb+256, mb, false) {
		t.Error("should_split: large pool splits only when more than 1 MiB remains, small pool at 512 B")
	}
	if !TorchShouldSplit(20*mb, 19*mb, true) {
		t.Error("should_split under expandable segments splits at 512 B")
	}
	base := vmm.DevicePtr(0x1000_0000)
	after := View{Policy: "caching", Granularity: 2 * mb,
		Blocks: []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 3 * mb}},
			{ID: 2, State: BlockFree, Range: vmm.Range{Base: base.Add(3 * mb), Size: 17 * mb}}},
		Device: Device{Reservations: []vmm.Range{{Base: base, Size: 20 * mb}}, Capacity: 64 * mb, Used: 20 * mb}}
	if vs := CheckTorch("caching", View{}, after, base, 3*mb, nil /* failed calls */); len(vs) != 0 {
		t.Fatalf("a 20 MiB segment split for 3 MiB is PyTorch's decision: %v", vs)
	}
	wrong := after
	wrong.Device.Reservations = []vmm.Range{{Base: base, Size: 4 * mb}}
	if vs := CheckTorch("caching", View{}, wrong, base, 3*mb, nil /* failed calls */); len(vs) != 1 || vs[0].Inv != InvTorch {
		t.Fatalf("a 4 MiB segment for 3 MiB with room for 20 MiB: want INV-TORCH, got %v", vs)
	}
	unsplit := after
	unsplit.Blocks = []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 20 * mb}}}
	if vs := CheckTorch("caching", View{}, unsplit, base, 3*mb, nil /* failed calls */); len(vs) != 1 {
		t.Fatalf("20 MiB handed out whole for 3 MiB: want INV-TORCH, got %v", vs)
	}
	if vs := CheckTorch("gmlake", View{}, unsplit, base, 3*mb, nil /* failed calls */); len(vs) != 0 {
		t.Fatalf("gmlake makes its own decisions: %v", vs)
	}
}

// INV-TORCH: the engine's one departure (a segment of just the request rounded to the granularity) is
// legal when the device is short of get_allocation_size, or when an injected fault answered out of memory
// to a call on the full segment's bytes during the Alloc (the engine cannot tell it from a real one), and
// only on the retry: the full segment failed twice, before and after the cache was released. With room
// for the full segment and no such failure, or after one failure only, it is flagged, and so is a fallback
// of any other size.
func TestCheckTorchFallbackOnlyAfterOutOfMemory(t *testing.T) {
	base := vmm.DevicePtr(0x1000_0000)
	r := uint64(mb + 512) // get_allocation_size 20 MiB; the fallback is 2 MiB
	fallback := func(used uint64, segSize uint64) View {
		return View{Policy: "caching", Granularity: 2 * mb, Stats: Stats{AllocRetries: 1},
			Blocks: []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: segSize}}},
			Device: Device{Reservations: []vmm.Range{{Base: base, Size: segSize}}, Capacity: 40 * mb, Used: used}}
	}
	injected := func(k vmm.CallKind, size uint64, res vmm.Result) []FailedCall {
		return []FailedCall{{Call: k, Size: size, Err: &vmm.CallError{Call: k, Result: res}, Injected: true}}
	}
	room := fallback(2*mb, 2*mb)   // 38 MiB free after it: the 20 MiB segment fitted
	short := fallback(32*mb, 2*mb) // 8 MiB free after it, 10 before: the device was short of 20 MiB
	// retried is the View before the Alloc for one whose retry came after releasing the cache
	// (num_alloc_retries one below the after View's); View{} is one that did not retry.
	retried := View{}
	noRetry := View{Stats: Stats{AllocRetries: 1}} // the same count after: the Alloc did not retry
	realOOM := []FailedCall{{Call: vmm.CallCreate, Size: 20 * mb, Err: &vmm.CallError{Call: vmm.CallCreate, Result: vmm.OutOfMemory}}}
	for _, c := range []struct {
		name          string
		before, after View
		failed        []FailedCall
		bad           bool
	}{
		{"no failed call, room for the full segment", retried, room, nil, true},
		{"the device short of the full segment", retried, short, realOOM, false},
		{"the device short of the full segment, no call failed (a cap refused it)", retried, short, nil, false},
		{"the device short, the fallback on the first failure (no retry: the cache kept)", noRetry, short, realOOM, true},
		{"injected out of memory on the full segment's create", retried, room, injected(vmm.CallCreate, 20*mb, vmm.OutOfMemory), false},
		{"injected out of memory on the full segment's create, no retry", noRetry, room, injected(vmm.CallCreate, 20*mb, vmm.OutOfMemory), true},
		{"injected out of memory on the full segment's reserve", retried, room, injected(vmm.CallReserve, 20*mb, vmm.OutOfMemory), false},
		{"injected out of memory on the full segment's map", retried, room, injected(vmm.CallMap, 20*mb, vmm.OutOfMemory), false},
		{"a real out of memory on the full segment's create, with room", retried, room, realOOM, true},
		{"injected out of memory on a call of other bytes", retried, room, injected(vmm.CallCreate, 2*mb, vmm.OutOfMemory), true},
		{"injected fault other than out of memory on the full segment", retried, room, injected(vmm.CallCreate, 20*mb, vmm.InvalidValue), true},
		{"a fallback of 4 MiB after injected out of memory", retried, fallback(4*mb, 4*mb), injected(vmm.CallCreate, 20*mb, vmm.OutOfMemory), true},
	} {
		vs := CheckTorch("caching", c.before, c.after, base, r, c.failed)
		if got := len(vs) == 1 && vs[0].Inv == InvTorch; got != c.bad || !c.bad && len(vs) != 0 {
			t.Errorf("%s: want INV-TORCH %v, got %v", c.name, c.bad, vs)
		}
	}
}

// INV-EMPTIED: after a successful EmptyCache no reservation is left with nothing mapped (always), and, when
// every stream is idle and no fault that may hide completion is armed, no cached sBlock, no all-free fixed
// segment and no arena handle mapped wholly in free blocks remains; outside the memory of living private
// pools, which is judged by nothing here.
func TestCheckEmptied(t *testing.T) {
	want := func(name string, vs []Violation, n int) {
		t.Helper()
		if len(vs) != n {
			t.Errorf("%s: want %d INV-EMPTIED violations, got %v", name, n, vs)
		}
		for _, v := range vs {
			if v.Inv != InvEmptied {
				t.Errorf("%s: %v", name, v)
			}
		}
	}
	v := goodView()
	want("cached sBlock, quiet", CheckEmptied(v, true, nil, PoolMemory{}), 1)
	want("cached sBlock, work pending", CheckEmptied(v, false, nil, PoolMemory{}), 0)
	want("cached sBlock, a query fault armed", CheckEmptied(v, true, []vmm.CallKind{vmm.CallQueryEvent}, PoolMemory{}), 0)
	want("cached sBlock, an unmap fault armed", CheckEmptied(v, true, []vmm.CallKind{vmm.CallUnmap}, PoolMemory{}), 1)
	want("gmlake-paper collects by its own rule", CheckEmptied(func() View { w := goodView(); w.Policy = "gmlake-paper"; return w }(), true, nil, PoolMemory{}), 0)

	// A reservation with nothing mapped in it: always.
	v = goodView()
	v.Blocks = v.Blocks[:2]
	empty := vmm.Range{Base: 0x4000_0000, Size: 2 * mb}
	v.Reservations = append(v.Reservations, empty)
	v.Device.Reservations = append(v.Device.Reservations, empty)
	want("empty reservation, work pending", CheckEmptied(v, false, nil, PoolMemory{}), 1)

	// An arena: the first handle's mapping lies wholly in a free block; a fixed segment (caching) of free
	// blocks only.
	v = goodView()
	v.Blocks = v.Blocks[:2]
	v.Live = v.Live[1:]
	v.Blocks[0].State = BlockFree
	want("gmlake arena, handle 1 wholly free", CheckEmptied(v, true, nil, PoolMemory{}), 1)
	v.Policy = "caching"
	want("caching, segment partly live", CheckEmptied(v, true, nil, PoolMemory{}), 0)
	v.Blocks[1].State = BlockFree
	want("caching, segment all free", CheckEmptied(v, true, nil, PoolMemory{}), 1)
	want("caching, segment all free, work pending", CheckEmptied(v, false, nil, PoolMemory{}), 0)

	// A living private pool's memory is its own (INV-POOL): its segment, known by a handle that backed one of
	// its allocations or by a range it handed out, is left out; the rest is still judged.
	byHandle := PoolMemory{Handles: map[vmm.Handle]bool{1: true}}
	byRange := PoolMemory{Ranges: []vmm.Range{{Base: 0x1000_0000, Size: 2 * mb}}}
	want("caching, a living pool's free segment (its handle)", CheckEmptied(v, true, nil, byHandle), 0)
	want("caching, a living pool's free segment (its range)", CheckEmptied(v, true, nil, byRange), 0)
	want("caching, another pool's handle", CheckEmptied(v, true, nil, PoolMemory{Handles: map[vmm.Handle]bool{9: true}}), 1)
	v = goodView()
	want("a living pool's cached sBlock (its handles)", CheckEmptied(v, true, nil, byHandle), 0)
	v.Reservations = append(v.Reservations, empty)
	v.Device.Reservations = append(v.Device.Reservations, empty)
	want("an empty reservation beside a living pool's memory", CheckEmptied(v, false, nil, byHandle), 1)
}

// arenaViews is an arena of 8 MiB with a free mapped 2 MiB block at its start and unmapped room after it
// (before), and after an Alloc that took a block of size at off, mapping what it lacked.
func arenaViews(policy string, off, size uint64) (before, after View) {
	base := vmm.DevicePtr(0x1000_0000)
	resv := vmm.Range{Base: base, Size: 8 * mb}
	before = View{Policy: policy, Granularity: 2 * mb,
		Blocks: []Block{
			{ID: 1, State: BlockFree, Range: vmm.Range{Base: base, Size: 2 * mb}},
			{ID: 2, State: BlockFree, Range: vmm.Range{Base: base.Add(2 * mb), Size: 6 * mb}},
		},
		Device: Device{Reservations: []vmm.Range{resv}, Used: 2 * mb, Capacity: 64 * mb,
			Mappings: []DevMapping{{VA: vmm.Range{Base: base, Size: 2 * mb}, Handle: 1, Accessible: true}}},
	}
	after = before
	after.Blocks = []Block{{ID: 3, State: BlockLive, Range: vmm.Range{Base: base.Add(off), Size: size}}}
	after.Device.Mappings = nil
	after.Device.Used = 0
	for p := uint64(0); p < 8*mb; p += 2 * mb {
		if p < 2*mb || p >= off && p < off+size {
			after.Device.Mappings = append(after.Device.Mappings, DevMapping{VA: vmm.Range{Base: base.Add(p), Size: 2 * mb}, Handle: vmm.Handle(1 + p/(2*mb)), Accessible: true})
			after.Device.Used += 2 * mb
		}
	}
	return before, after
}

// INV-EXTEND: growth in place starts at the free mapped block before the unmapped room (arena policies);
// starting after it is caught, starting at it is not, and fixed-segment policies are not judged.
func TestCheckExtend(t *testing.T) {
	b, a := arenaViews("expandable", 0, 4*mb)
	if vs := CheckExtend(b, a, a.Blocks[0].Range.Base); len(vs) != 0 {
		t.Errorf("a run starting at the free block judged broken: %v", vs)
	}
	b, a = arenaViews("gmlake", 2*mb, 2*mb)
	if vs := CheckExtend(b, a, a.Blocks[0].Range.Base); len(vs) != 1 || vs[0].Inv != InvExtend {
		t.Errorf("growth after a free mapped block: want one INV-EXTEND, got %v", vs)
	}
	b, a = arenaViews("caching", 2*mb, 2*mb)
	if vs := CheckExtend(b, a, a.Blocks[0].Range.Base); len(vs) != 0 {
		t.Errorf("caching judged: %v", vs)
	}
}

// INV-GROWTH: under gmlake a large request grows by at most what the stream's wholly free chunks leave
// uncovered, plus the saving threshold; small requests and requests below StitchMin are not judged.
func TestCheckGrowth(t *testing.T) {
	rule := GrowthRule{StitchMin: 4 * mb, Save: 64 << 10, Granularity: 2 * mb}
	b, a := arenaViews("gmlake", 2*mb, 6*mb) // 2 MiB free chunk, a 6 MiB request that mapped 6 MiB
	if vs := CheckGrowth(rule, b, a, 6*mb, 0); len(vs) != 1 || vs[0].Inv != InvGrowth {
		t.Errorf("grew 6 MiB with 2 MiB free: want one INV-GROWTH, got %v", vs)
	}
	b, a = arenaViews("gmlake", 0, 6*mb) // the run starts at the free chunk: grows 4 MiB
	if vs := CheckGrowth(rule, b, a, 6*mb, 0); len(vs) != 0 {
		t.Errorf("grew 4 MiB with 2 MiB free for 6 MiB: %v", vs)
	}
	b, a = arenaViews("gmlake", 2*mb, 6*mb)
	if vs := CheckGrowth(rule, b, a, 6*mb, 1); len(vs) != 0 {
		t.Errorf("another stream's free chunk counted: %v", vs)
	}
	if vs := CheckGrowth(GrowthRule{StitchMin: 8 * mb, Save: 64 << 10, Granularity: 2 * mb}, b, a, 6*mb, 0); len(vs) != 0 {
		t.Errorf("a request below StitchMin judged: %v", vs)
	}
	if vs := CheckGrowth(GrowthRule{}, b, a, 6*mb, 0); len(vs) != 0 {
		t.Errorf("the zero rule judged: %v", vs)
	}
}

// INV-REUSE: a new stitched block while a cached one of the stream fits and has every chunk free is caught;
// one whose chunk is under a live block, or too large, is not.
func TestCheckReuse(t *testing.T) {
	rule := GrowthRule{StitchMin: 4 * mb, Save: 64 << 10, Granularity: 2 * mb, Reuse: 5}
	before := goodView() // sBlock 3 (4 MiB) views chunks 1 and 2, both under live blocks
	after := before
	nb := vmm.DevicePtr(0x4000_0000)
	after.Blocks = append(append([]Block(nil), before.Blocks...), Block{ID: 4, Stitched: true, State: BlockLive, Range: vmm.Range{Base: nb, Size: 4 * mb}})
	after.Device.Reservations = append(append([]vmm.Range(nil), before.Device.Reservations...), vmm.Range{Base: nb, Size: 4 * mb})
	if vs := CheckReuse(rule, before, after, nb, 4*mb, 0); len(vs) != 0 {
		t.Errorf("chunks under live blocks counted as free: %v", vs)
	}
	for i := range before.Blocks[:2] {
		before.Blocks[i].State, before.Blocks[i].Stream = BlockFree, 0
	}
	before.Live = nil
	if vs := CheckReuse(rule, before, after, nb, 4*mb, 0); len(vs) != 1 || vs[0].Inv != InvReuse {
		t.Errorf("a reusable cached sBlock: want one INV-REUSE, got %v", vs)
	}
	if vs := CheckReuse(rule, before, after, nb, 4*mb, 1); len(vs) != 0 {
		t.Errorf("another stream's cached sBlock counted: %v", vs)
	}
	if vs := CheckReuse(rule, before, after, nb, 1*mb+512, 0); len(vs) != 0 {
		t.Errorf("a small request judged: %v", vs)
	}
}

// INV-REUSE's reuse clause: with both chunks of the cached 4 MiB stitched block free, reusing it for a
// request whose limit, max(r/4*5, r + 2 granules), is below 4 MiB is caught (a 2 MiB request at 512 KiB
// granules: 3 MiB), one at the limit exactly is not (3 MiB: 4 MiB), and reusing it while a smaller cached
// stitched block of the stream also fits is caught.
func TestCheckReuseTakesTheSmallestWithinTheLimit(t *testing.T) {
	before := goodView()
	for i := range before.Blocks[:2] {
		before.Blocks[i].State, before.Blocks[i].Stream, before.Blocks[i].SmallPool = BlockFree, 0, false
	}
	before.Live = nil
	st := before.Blocks[2].Range.Base
	after := before
	after.Blocks = slices.Clone(before.Blocks)
	after.Blocks[2].State = BlockLive
	fine := GrowthRule{StitchMin: 2 * mb, Save: 64 << 10, Granularity: 512 << 10, Reuse: 5}
	if vs := CheckReuse(fine, before, after, st, 2*mb, 0); len(vs) != 1 || vs[0].Inv != InvReuse {
		t.Errorf("a 4 MiB stitched block reused for 2 MiB beyond the 3 MiB limit: want one INV-REUSE, got %v", vs)
	}
	if vs := CheckReuse(fine, before, after, st, 3*mb, 0); len(vs) != 0 {
		t.Errorf("a 4 MiB stitched block reused for 3 MiB, at the limit exactly: %v", vs)
	}
	rule := GrowthRule{StitchMin: 2 * mb, Save: 64 << 10, Granularity: 2 * mb, Reuse: 5}
	if vs := CheckReuse(rule, before, after, st, 2*mb, 0); len(vs) != 0 {
		t.Errorf("the only reusable stitched block reused within the limit: %v", vs)
	}
	small := vmm.DevicePtr(0x4000_0000)
	before.Blocks = append(slices.Clone(before.Blocks), Block{ID: 5, Stitched: true, State: BlockFree, Range: vmm.Range{Base: small, Size: 2 * mb}, Parts: []uint64{1}})
	before.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: small, Size: 2 * mb})
	before.Device.Mappings = append(slices.Clone(before.Device.Mappings), DevMapping{VA: vmm.Range{Base: small, Size: 2 * mb}, Handle: 1, Accessible: true})
	if vs := CheckReuse(rule, before, after, st, 2*mb, 0); len(vs) != 1 || vs[0].Inv != InvReuse {
		t.Errorf("the 4 MiB stitched block reused beside a fitting 2 MiB one: want one INV-REUSE, got %v", vs)
	}
}

// INV-REUSE judges reuse by the block's identity, not its address: a new stitched block that a real driver
// placed at the range of a cached one torn down in the same call (the one-sBlock cache, found by
// TestRapidOnGPU on the H200) is a new stitch, not a reuse of the old block beyond the limit; the same
// answer with the old block's id is that reuse, and is caught.
func TestCheckReuseKnowsANewBlockAtAnOldAddress(t *testing.T) {
	before := goodView()
	for i := range before.Blocks[:2] {
		before.Blocks[i].State, before.Blocks[i].Stream, before.Blocks[i].SmallPool = BlockFree, 0, false
	}
	before.Live = nil
	st := before.Blocks[2].Range.Base // sBlock 3, 4 MiB, cached
	after := before
	after.Blocks = slices.Clone(before.Blocks)
	after.Blocks[2] = Block{ID: 9, Stitched: true, State: BlockLive, Range: vmm.Range{Base: st, Size: 2 * mb}, Parts: []uint64{1}}
	fine := GrowthRule{StitchMin: 2 * mb, Save: 64 << 10, Granularity: 512 << 10, Reuse: 5}
	if vs := CheckReuse(fine, before, after, st, 2*mb, 0); len(vs) != 0 {
		t.Errorf("a new 2 MiB stitched block at the torn-down 4 MiB block's address judged as its reuse: %v", vs)
	}
	after.Blocks[2].ID, after.Blocks[2].Range.Size = 3, 4*mb
	if vs := CheckReuse(fine, before, after, st, 2*mb, 0); len(vs) != 1 || vs[0].Inv != InvReuse {
		t.Errorf("the 4 MiB block itself reused for 2 MiB beyond the 3 MiB limit: want one INV-REUSE, got %v", vs)
	}
}

// INV-REUSE for gmlake-paper: with every chunk of the cached 4 MiB stitched block free, a 3 MiB request
// (rounded to 4 MiB) served by a new reservation is caught while the block is within reuseLimit times the
// request, a reuse of it is caught once it is not (a 2 MiB request under reuseLimit 1.5), and so is a reuse
// that hands the block out whole rather than at the request (GLake keeps only the pieces under it).
func TestCheckPaperReuse(t *testing.T) {
	before := goodView()
	for i := range before.Blocks[:2] {
		before.Blocks[i].State, before.Blocks[i].Stream, before.Blocks[i].SmallPool = BlockFree, 0, false
	}
	before.Live = nil
	fresh := before
	nb := vmm.DevicePtr(0x4000_0000)
	fresh.Blocks = append(slices.Clone(before.Blocks), Block{ID: 4, State: BlockLive, Range: vmm.Range{Base: nb, Size: 4 * mb}})
	fresh.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: nb, Size: 20 * mb})
	if vs := CheckPaperReuse(before, fresh, nb, 3*mb, 2*mb, 10, 0); len(vs) != 1 || vs[0].Inv != InvReuse {
		t.Errorf("a new segment beside a reusable cached stitched block: want one INV-REUSE, got %v", vs)
	}
	if vs := CheckPaperReuse(before, fresh, nb, 3*mb, 2*mb, 10, 1); len(vs) != 0 {
		t.Errorf("another stream's cached block counted: %v", vs)
	}
	if vs := CheckPaperReuse(before, fresh, nb, 3*mb, 2*mb, 0.9, 0); len(vs) != 0 {
		t.Errorf("a block above reuseLimit times the request counted: %v", vs)
	}
	if vs := CheckPaperReuse(before, fresh, nb, 5*mb, 2*mb, 10, 0); len(vs) != 0 {
		t.Errorf("a block smaller than the request counted: %v", vs)
	}
	st := before.Blocks[2].Range.Base
	reused := before
	reused.Blocks = slices.Clone(before.Blocks)
	reused.Blocks[2].State = BlockLive
	reused.Blocks[2].Range.Size = 2 * mb
	if vs := CheckPaperReuse(before, reused, st, 2*mb, 2*mb, 2, 0); len(vs) != 0 {
		t.Errorf("a reuse of 2x within reuseLimit 2: %v", vs)
	}
	if vs := CheckPaperReuse(before, reused, st, 2*mb, 2*mb, 1.5, 0); len(vs) != 1 || vs[0].Inv != InvReuse {
		t.Errorf("a reuse of 2x above reuseLimit 1.5: want one INV-REUSE, got %v", vs)
	}
	if vs := CheckPaperReuse(before, reused, st, mb, 2*mb, 1.5, 0); len(vs) != 0 {
		t.Errorf("a small-pool request judged: %v", vs)
	}
	whole := reused
	whole.Blocks = slices.Clone(reused.Blocks)
	whole.Blocks[2].Range.Size = 4 * mb
	if vs := CheckPaperReuse(before, whole, st, 2*mb, 2*mb, 2, 0); len(vs) != 1 || vs[0].Inv != InvReuse || !strings.Contains(vs[0].Msg, "under the request") {
		t.Errorf("a 4 MiB stitched block reused for 2 MiB and handed out whole: want one INV-REUSE (GLake keeps the pieces under the request), got %v", vs)
	}
}
