package spec

import (
	"slices"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// INV-STITCH: gmlake's choice of chunks, stated over sizes: largest first while each fits, then the smallest
// chunk not taken that covers the rest, else new memory for the rest.
func TestStitchChoiceLargestFirstThenSmallestCover(t *testing.T) {
	for _, c := range []struct {
		cands     []uint64
		need      uint64
		want      []uint64
		wantRem   uint64
		situation string
	}{
		{[]uint64{4 * mb, 8 * mb, 4 * mb}, 12 * mb, []uint64{8 * mb, 4 * mb}, 0, "largest first, not the two smaller ones"},
		{[]uint64{4 * mb, 8 * mb}, 10 * mb, []uint64{8 * mb, 4 * mb}, 0, "the 4 MiB chunk covers the 2 MiB left"},
		{[]uint64{8 * mb, 8 * mb, 20 * mb}, 18 * mb, []uint64{20 * mb, 8 * mb, 8 * mb}, 0, "the smallest cover is the 20 MiB chunk"},
		{[]uint64{4 * mb, 4 * mb}, 10 * mb, []uint64{4 * mb, 4 * mb}, 2 * mb, "nothing covers: new memory"},
		{nil, 4 * mb, nil, 4 * mb, "no candidate"},
	} {
		got, rem := StitchChoice(c.cands, c.need)
		if !slices.Equal(got, c.want) || rem != c.wantRem {
			t.Errorf("%s: StitchChoice(%v, %d) = %v, %d; want %v, %d", c.situation, c.cands, c.need, got, rem, c.want, c.wantRem)
		}
	}
}

// stitchViews: one arena of stream 0 holding a free 8 MiB chunk, a live 2 MiB one, a free 4 MiB one and a
// live 2 MiB one; after the call a new reservation holds a stitched block mapping the given handles (5 and
// up: new memory of 2 MiB each).
func stitchViews(handles ...vmm.Handle) (before, after View) {
	base := vmm.DevicePtr(0x1000_0000)
	sizes := map[vmm.Handle]uint64{1: 8 * mb, 2: 2 * mb, 3: 4 * mb, 4: 2 * mb, 5: 2 * mb, 6: 2 * mb}
	before = View{Policy: "gmlake", Granularity: 2 * mb,
		Blocks: []Block{
			{ID: 1, State: BlockFree, Range: vmm.Range{Base: base, Size: 8 * mb}},
			{ID: 2, State: BlockLive, Range: vmm.Range{Base: base.Add(8 * mb), Size: 2 * mb}},
			{ID: 3, State: BlockFree, Range: vmm.Range{Base: base.Add(10 * mb), Size: 4 * mb}},
			{ID: 4, State: BlockLive, Range: vmm.Range{Base: base.Add(14 * mb), Size: 2 * mb}},
		},
		Device: Device{Reservations: []vmm.Range{{Base: base, Size: 64 * mb}}, Used: 16 * mb, Capacity: 64 * mb}}
	off := uint64(0)
	for h := vmm.Handle(1); h <= 4; h++ {
		before.Device.Mappings = append(before.Device.Mappings, DevMapping{VA: vmm.Range{Base: base.Add(off), Size: sizes[h]}, Handle: h, Accessible: true})
		before.Device.Handles = append(before.Device.Handles, DevHandle{Handle: h, Size: sizes[h], Mappings: 1})
		off += sizes[h]
	}
	after = before
	sb := vmm.DevicePtr(0x4000_0000)
	after.Device.Mappings = slices.Clone(before.Device.Mappings)
	after.Device.Handles = slices.Clone(before.Device.Handles)
	off = 0
	for _, h := range handles {
		after.Device.Mappings = append(after.Device.Mappings, DevMapping{VA: vmm.Range{Base: sb.Add(off), Size: sizes[h]}, Handle: h, Accessible: true})
		if h >= 5 {
			after.Device.Handles = append(after.Device.Handles, DevHandle{Handle: h, Size: sizes[h], Mappings: 2})
		}
		off += sizes[h]
	}
	after.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: sb, Size: off})
	after.Blocks = append(slices.Clone(before.Blocks), Block{ID: 9, Stitched: true, State: BlockLive, Range: vmm.Range{Base: sb, Size: off}})
	return before, after
}

// INV-STITCH bites on a new stitched block that maps other chunks than gmlake's rule takes (new memory where
// a free chunk covers the rest, or a chunk under a live block) or maps the rule's chunks out of their address
// order; it judges nothing it cannot see whole.
func TestCheckStitch(t *testing.T) {
	rule := GrowthRule{StitchMin: 4 * mb, Save: 512 << 10, Granularity: 2 * mb, Reuse: 5}
	sb := vmm.DevicePtr(0x4000_0000)
	before, after := stitchViews(1, 3)
	if vs := CheckStitch(rule, before, after, sb, 10*mb, 0); len(vs) != 0 {
		t.Errorf("the 8 MiB chunk and the 4 MiB one covering the rest is the rule's choice: %v", vs)
	}
	before, after = stitchViews(1, 5)
	if vs := CheckStitch(rule, before, after, sb, 10*mb, 0); len(vs) != 1 || vs[0].Inv != InvStitch {
		t.Errorf("new memory for the rest although a free chunk covers it: want one INV-STITCH, got %v", vs)
	}
	before, after = stitchViews(3, 1)
	if vs := CheckStitch(rule, before, after, sb, 10*mb, 0); len(vs) != 1 || vs[0].Inv != InvStitch || !strings.Contains(vs[0].Msg, "address order") {
		t.Errorf("the rule's chunks mapped out of their homes' address order: want one INV-STITCH on the layout, got %v", vs)
	}
	before, after = stitchViews(1, 2)
	if vs := CheckStitch(rule, before, after, sb, 10*mb, 0); len(vs) != 1 || vs[0].Inv != InvStitch {
		t.Errorf("a chunk under a live block stitched: want one INV-STITCH, got %v", vs)
	}
	before, after = stitchViews(3, 5, 6)
	if vs := CheckStitch(rule, before, after, sb, 8*mb, 0); len(vs) != 1 || vs[0].Inv != InvStitch {
		t.Errorf("the smaller chunk first for 8 MiB: want one INV-STITCH, got %v", vs)
	}
	before, after = stitchViews(1, 5)
	before.Blocks[1].State = BlockPending
	if vs := CheckStitch(rule, before, after, sb, 10*mb, 0); len(vs) != 0 {
		t.Errorf("judged with a pending block (its parts may be candidates): %v", vs)
	}
	before, after = stitchViews(1, 5)
	if vs := CheckStitch(GrowthRule{}, before, after, sb, 10*mb, 0); len(vs) != 0 {
		t.Errorf("the zero rule judged: %v", vs)
	}
}

// INV-ARENA bites on a new arena opened while the stream's arena of the request's pool had a run of free and
// unmapped room holding the request, counting the free mapped block before the unmapped room; not otherwise.
// INV-ARENA counts a run of unmapped room that a block in use ends, as find_expandable_block does: an arena
// of 14 MiB holding [10 MiB unmapped | 2 MiB live | 2 MiB unmapped] extends to an 8 MiB request, so a new
// arena for it is caught; a 12 MiB request fits no run, and is not.
func TestCheckArenaCountsARunABusyBlockEnds(t *testing.T) {
	base, nb := vmm.DevicePtr(0x1000_0000), vmm.DevicePtr(0x2000_0000)
	live := vmm.Range{Base: base.Add(10 * mb), Size: 2 * mb}
	before := View{Policy: "gmlake", Granularity: 2 * mb,
		Blocks: []Block{{ID: 1, State: BlockLive, Range: live}},
		Device: Device{Reservations: []vmm.Range{{Base: base, Size: 14 * mb}}, Used: 2 * mb, Capacity: 256 * mb,
			Mappings: []DevMapping{{VA: live, Handle: 1, Accessible: true}}}}
	for _, c := range []struct {
		size uint64
		want int
	}{{8 * mb, 1}, {10 * mb, 1}, {12 * mb, 0}} {
		after := before
		after.Blocks = append(slices.Clone(before.Blocks), Block{ID: 2, State: BlockLive, Range: vmm.Range{Base: nb, Size: c.size}})
		after.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: nb, Size: 64 * mb})
		if vs := CheckArena(before, after, nb, c.size, 0); len(vs) != c.want {
			t.Errorf("a new arena for %d MiB beside a 10 MiB run a live block ends: want %d INV-ARENA, got %v", c.size/mb, c.want, vs)
		}
	}
}

func TestCheckArena(t *testing.T) {
	base, nb := vmm.DevicePtr(0x1000_0000), vmm.DevicePtr(0x2000_0000)
	views := func(policy string, stream vmm.Stream, freeTail bool, size uint64) (View, View) {
		before := View{Policy: policy, Granularity: 2 * mb,
			Blocks: []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 20 * mb}, Stream: stream}},
			Device: Device{Reservations: []vmm.Range{{Base: base, Size: 64 * mb}}, Used: 30 * mb, Capacity: 256 * mb,
				Mappings: []DevMapping{{VA: vmm.Range{Base: base, Size: 30 * mb}, Handle: 1, Accessible: true}}}}
		if freeTail {
			before.Blocks = append(before.Blocks, Block{ID: 2, State: BlockFree, Range: vmm.Range{Base: base.Add(20 * mb), Size: 10 * mb}, Stream: stream})
		} else {
			before.Blocks = append(before.Blocks, Block{ID: 2, State: BlockLive, Range: vmm.Range{Base: base.Add(20 * mb), Size: 10 * mb}, Stream: stream})
		}
		after := before
		after.Blocks = append(slices.Clone(before.Blocks), Block{ID: 3, State: BlockLive, Range: vmm.Range{Base: nb, Size: size}})
		after.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: nb, Size: 64 * mb})
		return before, after
	}
	b, a := views("expandable", 0, false, 34*mb)
	if vs := CheckArena(b, a, nb, 34*mb, 0); len(vs) != 1 || vs[0].Inv != InvArena {
		t.Errorf("34 MiB unmapped left in the arena: want one INV-ARENA, got %v", vs)
	}
	b, a = views("expandable", 0, false, 40*mb)
	if vs := CheckArena(b, a, nb, 40*mb, 0); len(vs) != 0 {
		t.Errorf("40 MiB does not fit in the 34 MiB left: %v", vs)
	}
	b, a = views("gmlake", 0, true, 44*mb)
	if vs := CheckArena(b, a, nb, 44*mb, 0); len(vs) != 1 || vs[0].Inv != InvArena {
		t.Errorf("the free 10 MiB block and the 34 MiB after it hold 44 MiB: want one INV-ARENA, got %v", vs)
	}
	b, a = views("gmlake", 1, true, 44*mb)
	if vs := CheckArena(b, a, nb, 44*mb, 0); len(vs) != 0 {
		t.Errorf("another stream's arena counted: %v", vs)
	}
	b, a = views("gmlake", 0, true, 512)
	if vs := CheckArena(b, a, nb, 512, 0); len(vs) != 0 {
		t.Errorf("a large-pool arena counted for a small request: %v", vs)
	}
	b, a = views("caching", 0, true, 20*mb)
	if vs := CheckArena(b, a, nb, 20*mb, 0); len(vs) != 0 {
		t.Errorf("caching judged: %v", vs)
	}
}

// INV-TORCH holds gmlake-paper's small pool (PyTorch's, unchanged in GLake) to should_split and to 2 MiB
// segments; its large pool is GMLake's own and is not judged.
func TestCheckTorchPaperSmallPool(t *testing.T) {
	base := vmm.DevicePtr(0x1000_0000)
	whole := View{Policy: "gmlake-paper", Granularity: 2 * mb,
		Blocks: []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 2 * mb}, SmallPool: true}},
		Device: Device{Reservations: []vmm.Range{{Base: base, Size: 2 * mb}}, Capacity: 64 * mb, Used: 2 * mb}}
	if vs := CheckTorch("gmlake-paper", View{}, whole, base, 512, nil /* failed calls */); len(vs) != 1 || vs[0].Inv != InvTorch {
		t.Errorf("a 2 MiB small segment handed out whole for 512 B: want one INV-TORCH, got %v", vs)
	}
	split := whole
	split.Blocks = []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 512}, SmallPool: true},
		{ID: 2, State: BlockFree, Range: vmm.Range{Base: base.Add(512), Size: 2*mb - 512}, SmallPool: true}}
	if vs := CheckTorch("gmlake-paper", View{}, split, base, 512, nil /* failed calls */); len(vs) != 0 {
		t.Errorf("PyTorch's split judged: %v", vs)
	}
	large := whole
	large.Blocks = []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 20 * mb}}}
	large.Device.Reservations = []vmm.Range{{Base: base, Size: 20 * mb}}
	if vs := CheckTorch("gmlake-paper", View{}, large, base, 3*mb, nil /* failed calls */); len(vs) != 0 {
		t.Errorf("gmlake-paper's large pool judged: %v", vs)
	}
}

// INV-PAPERGC bites on a cached stitched block of gmlake-paper collected during an allocation on a device
// short of the segment, when no segment it views was released; not when one was, nor with room on the
// device (realloc_block's collection), nor under another policy.
func TestCheckPaperCollect(t *testing.T) {
	_, before := stitchViews(1, 3) // a stitched block over handles 1 and 3
	after := before
	before.Policy, after.Policy = "gmlake-paper", "gmlake-paper"
	before.Blocks = slices.Clone(before.Blocks)
	before.Blocks[len(before.Blocks)-1].State = BlockFree // cached
	before.Device.Used = before.Device.Capacity - 4*mb    // 4 MiB free
	after.Blocks = before.Blocks[:len(before.Blocks)-1]
	after.Device.Reservations = before.Device.Reservations[:1]
	after.Device.Mappings = before.Device.Mappings[:4]
	if vs := CheckPaperCollect(before, after, 16*mb, false /* reAlloc */); len(vs) != 1 || vs[0].Inv != InvPaperGC {
		t.Errorf("a cached stitched block collected with 4 MiB free for a 16 MiB segment: want one INV-PAPERGC, got %v", vs)
	}
	if vs := CheckPaperCollect(before, after, 2*mb, false /* reAlloc */); len(vs) != 1 {
		t.Errorf("2 MiB makes a 20 MiB segment, more than the 4 MiB free: want one INV-PAPERGC, got %v", vs)
	}
	if vs := CheckPaperCollect(before, after, 512, false /* reAlloc */); len(vs) != 0 {
		t.Errorf("512 B makes a 2 MiB segment, less than the 4 MiB free (realloc_block may collect): %v", vs)
	}
	released := after
	released.Device.Handles = slices.DeleteFunc(slices.Clone(after.Device.Handles), func(h DevHandle) bool { return h.Handle == 3 })
	if vs := CheckPaperCollect(before, released, 16*mb, false /* reAlloc */); len(vs) != 0 {
		t.Errorf("deleted with a segment it views (release_cached_blocks): %v", vs)
	}
	roomy := before
	roomy.Device.Used = 0
	if vs := CheckPaperCollect(roomy, after, 16*mb, false /* reAlloc */); len(vs) != 0 {
		t.Errorf("collected with more free than the segment (realloc_block's rule): %v", vs)
	}
	before.Policy = "gmlake"
	if vs := CheckPaperCollect(before, after, 16*mb, false /* reAlloc */); len(vs) != 0 {
		t.Errorf("gmlake judged: %v", vs)
	}
}

// INV-STITCH, whether to stitch: a stitch whose new memory is not less, by the saving threshold, than what
// growing the stream's arena in place would map is a violation; the arena's run starts at the free, mapped
// block before its unmapped room (find_expandable_block), whose bytes growing does not map again.
func TestCheckStitchOnlyWhenItSavesGrowth(t *testing.T) {
	rule := GrowthRule{StitchMin: 4 * mb, Save: 512 << 10, Granularity: 2 * mb, Reuse: 5}
	base, sb := vmm.DevicePtr(0x1000_0000), vmm.DevicePtr(0x4000_0000)
	// One arena: handle 1 (2 MiB) under a free block (the one stitch candidate), handle 2 (4 MiB) under a
	// live block of live bytes and a free block of the rest, then unmapped room. A 6 MiB request stitches
	// handle 1 and 4 MiB of new memory (handles 3 and 4).
	views := func(live uint64) (before, after View) {
		before = View{Policy: "gmlake", Granularity: 2 * mb,
			Blocks: []Block{
				{ID: 1, State: BlockFree, Range: vmm.Range{Base: base, Size: 2 * mb}},
				{ID: 2, State: BlockLive, Range: vmm.Range{Base: base.Add(2 * mb), Size: live}},
				{ID: 3, State: BlockFree, Range: vmm.Range{Base: base.Add(2*mb + live), Size: 4*mb - live}},
			},
			Device: Device{Reservations: []vmm.Range{{Base: base, Size: 64 * mb}}, Used: 6 * mb, Capacity: 64 * mb,
				Mappings: []DevMapping{{VA: vmm.Range{Base: base, Size: 2 * mb}, Handle: 1, Accessible: true},
					{VA: vmm.Range{Base: base.Add(2 * mb), Size: 4 * mb}, Handle: 2, Accessible: true}},
				Handles: []DevHandle{{Handle: 1, Size: 2 * mb, Mappings: 1}, {Handle: 2, Size: 4 * mb, Mappings: 1}}}}
		after = before
		after.Device.Mappings = append(slices.Clone(before.Device.Mappings),
			DevMapping{VA: vmm.Range{Base: sb, Size: 2 * mb}, Handle: 1, Accessible: true},
			DevMapping{VA: vmm.Range{Base: sb.Add(2 * mb), Size: 2 * mb}, Handle: 3, Accessible: true},
			DevMapping{VA: vmm.Range{Base: sb.Add(4 * mb), Size: 2 * mb}, Handle: 4, Accessible: true})
		after.Device.Handles = append(slices.Clone(before.Device.Handles), DevHandle{Handle: 3, Size: 2 * mb, Mappings: 1}, DevHandle{Handle: 4, Size: 2 * mb, Mappings: 1})
		after.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: sb, Size: 6 * mb})
		after.Device.Used += 4 * mb
		after.Blocks = append(slices.Clone(before.Blocks), Block{ID: 9, Stitched: true, State: BlockLive, Range: vmm.Range{Base: sb, Size: 6 * mb}})
		return before, after
	}
	// 3 MiB free and mapped before the room: growing maps 4 MiB (6 - 3, rounded), the stitch as much.
	before, after := views(1 * mb)
	if got := ArenaGrowthBound(before, 0, 6*mb, 2*mb); got != 4*mb {
		t.Fatalf("ArenaGrowthBound with 3 MiB free and mapped before the room = %s, want 4 MiB", vmm.FormatBytes(got))
	}
	if vs := CheckStitch(rule, before, after, sb, 6*mb, 0); len(vs) != 1 || vs[0].Inv != InvStitch {
		t.Errorf("a stitch mapping as much new memory as growing would: want one INV-STITCH, got %v", vs)
	}
	after.Stats.AllocRetries = 1 // after releasing the cache any saving will do, but this one saves nothing
	if vs := CheckStitch(rule, before, after, sb, 6*mb, 0); len(vs) != 1 {
		t.Errorf("the same stitch on the retry: want one INV-STITCH, got %v", vs)
	}
	// 1 MiB free and mapped before the room: growing maps 6 MiB (6 - 1, rounded), the stitch 4 MiB.
	before, after = views(3 * mb)
	if vs := CheckStitch(rule, before, after, sb, 6*mb, 0); len(vs) != 0 {
		t.Errorf("a stitch saving 2 MiB of growth: %v", vs)
	}
	// A reservation with no block (an arena wholly unmapped, whose stream the View does not tell): growing
	// may map the whole request, and the stitch is not judged a waste.
	before, after = views(1 * mb)
	before.Device.Reservations = append(before.Device.Reservations, vmm.Range{Base: 0x2000_0000, Size: 64 * mb})
	after.Device.Reservations = append(after.Device.Reservations, vmm.Range{Base: 0x2000_0000, Size: 64 * mb})
	if got := ArenaGrowthBound(before, 0, 6*mb, 2*mb); got != 6*mb {
		t.Errorf("ArenaGrowthBound beside a blockless reservation = %s, want 6 MiB", vmm.FormatBytes(got))
	}
}

// INV-TORCH, realloc_block's segment under gmlake-paper: get_allocation_size of the request rounded to the
// chunk; with reAlloc, of the rest beyond the stream's free large bytes (the whole one too where no stitch
// serves the request or the rest's is not the smaller), and none while those bytes cover a request a stitch
// serves.
func TestCheckPaperSegment(t *testing.T) {
	base, nb := vmm.DevicePtr(0x1000_0000), vmm.DevicePtr(0x4000_0000)
	// Before: a 20 MiB segment of stream 0, free bytes `free` at its end beside a live block.
	views := func(free, seg uint64) (before, after View) {
		before = View{Policy: "gmlake-paper", Granularity: 2 * mb,
			Blocks: []Block{{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: 20*mb - free}},
				{ID: 2, State: BlockFree, Range: vmm.Range{Base: base.Add(20*mb - free), Size: free}}},
			Device: Device{Reservations: []vmm.Range{{Base: base, Size: 20 * mb}}, Capacity: 256 * mb}}
		after = before
		after.Blocks = append(slices.Clone(before.Blocks), Block{ID: 3, State: BlockLive, Range: vmm.Range{Base: nb, Size: seg}})
		after.Device.Reservations = append(slices.Clone(before.Device.Reservations), vmm.Range{Base: nb, Size: seg})
		return before, after
	}
	plain := PaperRule{FragLimit: 512 * mb}
	re := PaperRule{ReAlloc: true, FragLimit: 4 * mb}
	for _, c := range []struct {
		what       string
		free, seg  uint64
		size       uint64
		rule       PaperRule
		violations int
	}{
		{"no reAlloc: the whole request's segment", 12 * mb, 24 * mb, 24 * mb, plain, 0},
		{"no reAlloc: another size", 12 * mb, 12 * mb, 24 * mb, plain, 1},
		{"reAlloc: the rest's segment (24 - 12 MiB)", 12 * mb, 12 * mb, 24 * mb, re, 0},
		{"reAlloc: the whole segment though the rest's is smaller", 12 * mb, 24 * mb, 24 * mb, re, 1},
		{"reAlloc: a 2 MiB rest makes 20 MiB, the whole 12 MiB request 12 MiB: either", 10 * mb, 12 * mb, 12 * mb, re, 0},
		{"reAlloc: free bytes cover a request a stitch serves: no segment", 16 * mb, 20 * mb, 12 * mb, re, 1},
		{"reAlloc: free bytes cover a request below fragLimit: the retry's whole segment", 16 * mb, 12 * mb, 12 * mb, PaperRule{ReAlloc: true, FragLimit: 512 * mb}, 0},
		{"a small request is not judged", 12 * mb, 4 * mb, mb, re, 0},
	} {
		before, after := views(c.free, c.seg)
		if vs := CheckPaperSegment(before, after, c.size, 2*mb, c.rule, 0); len(vs) != c.violations {
			t.Errorf("%s: %v, want %d violations", c.what, vs, c.violations)
		}
	}
}
