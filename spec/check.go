package spec

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// Invariant names, as numbered in SPEC.md.
const (
	InvNoOverlap     = "INV-NOOVERLAP"
	InvMapped        = "INV-MAPPED"
	InvNoAlias       = "INV-NOALIAS"
	InvRefcount      = "INV-REFCOUNT"
	InvStats         = "INV-STATS"
	InvMirror        = "INV-MIRROR"
	InvBlocks        = "INV-BLOCKS"
	InvNoLeak        = "INV-NOLEAK"
	InvStream        = "INV-STREAM"
	InvReleaseSafe   = "INV-RELEASESAFE"
	InvNoSpuriousOOM = "INV-NOSPURIOUSOOM"
	InvContract      = "INV-CONTRACT"
	InvSelfCheck     = "INV-SELFCHECK"
	InvBestFit       = "INV-BESTFIT"
	InvPool          = "INV-POOL" // spec/pool.go (PoolChecker)
	InvSizePool      = "INV-SIZEPOOL"
	InvTorch         = "INV-TORCH"
	InvTorchStats    = "INV-TORCHSTATS"  // judged by harness/ops (it reads the engine's PyTorch statistics)
	InvRetries       = "INV-RETRIES"     // judged by harness/ops (judge_retries.go: num_alloc_retries and num_ooms per op)
	InvSegEvents     = "INV-SEGEVENTS"   // judged by harness/ops (judge_segevents.go: segment events against memory_snapshot())
	InvDriverRules   = "INV-DRIVERRULES" // judged by harness/ops (judge_driverrules.go: no memory call the driver refuses for a broken rule)
	InvEmptied       = "INV-EMPTIED"     // spec/emptied.go (CheckEmptied)
	InvExtend        = "INV-EXTEND"      // spec/growth.go (CheckExtend)
	InvGrowth        = "INV-GROWTH"      // spec/growth.go (CheckGrowth)
	InvReuse         = "INV-REUSE"       // spec/growth.go (CheckReuse)
	InvFailClean     = "INV-FAILCLEAN"   // judged by harness/ops (judge_failclean.go: the Views around a failed Alloc)
	InvArena         = "INV-ARENA"       // spec/growth.go (CheckArena)
	InvStitch        = "INV-STITCH"      // spec/stitch.go (CheckStitch)
	InvPaperGC       = "INV-PAPERGC"     // spec/stitch.go (CheckPaperCollect)
	InvLargest       = "INV-LARGEST"     // judged by harness/ops (judge_largest.go: LargestCachedBlock from the View)
	InvSnapshot      = "INV-SNAPSHOT"    // judged by harness/ops (judge_snapshot.go: Snapshot against the Env's record)
	InvPoolReturn    = "INV-POOLRETURN"  // spec/poolreturn.go (PoolChecker.Returned)
	InvCaptureSafe   = "INV-CAPTURESAFE" // judged by harness/ops (judge_capture.go: the engine's event calls)
	InvFlushed       = "INV-FLUSHED"     // judged by harness/ops (judge_capture.go)
	InvSBlockCache   = "INV-SBCACHE"     // judged by harness/ops (judge_sbcache.go)
	InvServe         = "INV-SERVE"       // judged by harness/ops (judge_serve.go: the serving layer's promises)
	InvChunk         = "INV-CHUNK"       // spec/chunk.go (CheckChunks)
	InvAccess        = "INV-ACCESS"      // judged by harness/ops (judge_access.go: the step's cuMemSetAccess calls)
	InvPaperEvents   = "INV-PAPEREVENTS" // judged by harness/ops (judge_paper.go: gmlake-paper's event churn)
	InvFence         = "INV-FENCE"       // judged by harness/ops (judge_fence.go: the fences a Free records)
	InvCounters      = "INV-COUNTERS"    // judged by harness/ops (judge_counters.go: the engine's operation counters)
	InvBudget        = "INV-BUDGET"      // judged by harness/ops (judge_budget.go: the event queries, records and waits an op may cost)
)

// StateInvariants lists the invariants Check evaluates on a single View, with their predicates.
var StateInvariants = []struct {
	Name  string
	Check func(View) []Violation
}{
	{InvNoOverlap, CheckNoOverlap},
	{InvMapped, CheckMapped},
	{InvNoAlias, CheckNoAlias},
	{InvRefcount, CheckRefcount},
	{InvStats, CheckStats},
	{InvMirror, CheckMirror},
	{InvBlocks, CheckBlocks},
	{InvNoLeak, CheckNoLeak},
	{InvSizePool, CheckSizePool},
}

// SmallRequest is the largest request, rounded up to 512 B, served from the small-request pool (PyTorch's
// kSmallSize): every policy of the engine keeps small and large requests in separate pools.
const SmallRequest = 1 << 20

// CheckSizePool is INV-SIZEPOOL: each live allocation lies in the size pool its request belongs to: a request that
// rounds up (to 512 B) to at most SmallRequest in a small-pool block, a larger one in a large-pool block;
// a stitched block is never in the small pool.
func CheckSizePool(v View) []Violation {
	var out []Violation
	blocks := map[uint64]Block{}
	for _, b := range v.Blocks {
		blocks[b.ID] = b
	}
	for _, a := range v.Live {
		b, ok := blocks[a.Block]
		if !ok {
			continue // INV-BLOCKS says so
		}
		want := vmm.AlignUp(max(a.Requested, 1), 512) <= SmallRequest
		if b.SmallPool != want || b.Stitched && b.SmallPool {
			out = append(out, violation(InvSizePool, "live %v (request %d B, stream %d) is served by block %d in the %s pool, want the %s pool",
				a.Range(), a.Requested, a.Stream, b.ID, poolName(b.SmallPool), poolName(want)))
		}
	}
	return out
}

func poolName(small bool) string {
	if small {
		return "small"
	}
	return "large"
}

// Check evaluates every state invariant on v and returns the violations, in SPEC.md order.
func Check(v View) []Violation {
	var out []Violation
	for _, inv := range StateInvariants {
		out = append(out, inv.Check(v)...)
	}
	return out
}

// CheckNoOverlap is INV-NOOVERLAP: live allocations never overlap in virtual space, and none starts at 0.
func CheckNoOverlap(v View) []Violation {
	var out []Violation
	live := sortedLive(v.Live)
	for i, a := range live {
		if a.Ptr == 0 {
			out = append(out, violation(InvNoOverlap, "live allocation at address 0 (size %d)", a.Size))
		}
		if i > 0 && live[i-1].Range().Overlaps(a.Range()) {
			out = append(out, violation(InvNoOverlap, "live %v (stream %d) overlaps live %v (stream %d)",
				live[i-1].Range(), live[i-1].Stream, a.Range(), a.Stream))
		}
	}
	return out
}

// CheckMapped is INV-MAPPED: every byte of every live allocation's block is mapped on the device with
// access granted.
func CheckMapped(v View) []Violation {
	var out []Violation
	for _, a := range v.Live {
		if a.Size == 0 {
			continue
		}
		_, holes := v.Device.Backing(a.Range())
		for _, h := range holes {
			out = append(out, violation(InvMapped, "live %v (stream %d): %v is not mapped on the device", a.Range(), a.Stream, h))
		}
		for _, m := range overlappingDev(v.Device.Mappings, a.Range()) {
			if !m.Accessible {
				out = append(out, violation(InvMapped, "live %v (stream %d): mapping %v of handle %d has no access (SetAccess missing)",
					a.Range(), a.Stream, m.VA, m.Handle))
			}
		}
	}
	return out
}

// CheckNoAlias is INV-NOALIAS: no physical byte backs two live allocations, through any mapping (a chunk
// seen through its pBlock and through an sBlock is the same physical byte).
func CheckNoAlias(v View) []Violation {
	type owned struct {
		PhysRange
		alloc int
	}
	var all []owned
	for i, a := range v.Live {
		phys, _ := v.Device.Backing(a.Range())
		for _, p := range phys {
			all = append(all, owned{p, i})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Handle != all[j].Handle {
			return all[i].Handle < all[j].Handle
		}
		return all[i].Lo < all[j].Lo
	})
	var out []Violation
	for i := 1; i < len(all); i++ {
		// Compare with the furthest-reaching earlier range of the same handle.
		for j := i - 1; j >= 0 && all[j].Handle == all[i].Handle; j-- {
			if all[j].Hi > all[i].Lo && all[j].alloc != all[i].alloc {
				a, b := v.Live[all[j].alloc], v.Live[all[i].alloc]
				out = append(out, violation(InvNoAlias, "handle %d bytes [%#x, %#x) back both live %v (stream %d) and live %v (stream %d)",
					all[i].Handle, all[i].Lo, min(all[i].Hi, all[j].Hi), a.Range(), a.Stream, b.Range(), b.Stream))
				break
			}
		}
	}
	return out
}

// CheckRefcount is INV-REFCOUNT: the reference count the allocator keeps for each chunk equals the number
// of mappings of that handle on the device (its pBlock mapping plus one per stitched view), and the
// device's own count agrees.
func CheckRefcount(v View) []Violation {
	devMaps := map[vmm.Handle]int{}
	for _, m := range v.Device.Mappings {
		devMaps[m.Handle]++
	}
	devHandles := map[vmm.Handle]DevHandle{}
	for _, h := range v.Device.Handles {
		devHandles[h.Handle] = h
	}
	var out []Violation
	for _, c := range v.Chunks {
		if c.Refs != devMaps[c.Handle] {
			out = append(out, violation(InvRefcount, "chunk %d (%s): allocator counts %d references, device has %d mappings",
				c.Handle, vmm.FormatBytes(c.Size), c.Refs, devMaps[c.Handle]))
		}
		if h, ok := devHandles[c.Handle]; ok && h.Mappings != devMaps[c.Handle] {
			out = append(out, violation(InvRefcount, "handle %d: device counts %d mappings but lists %d", c.Handle, h.Mappings, devMaps[c.Handle]))
		}
	}
	return out
}

// CheckStats is INV-STATS: the statistics equal what the live set, the chunks and the device say.
func CheckStats(v View) []Violation {
	var out []Violation
	var req, alloc, reserved, mapped uint64
	for _, a := range v.Live {
		req += a.Requested
		alloc += a.Size
	}
	for _, c := range v.Chunks {
		reserved += c.Size
	}
	for _, m := range v.Mappings {
		mapped += m.VA.Size
	}
	s := v.Stats
	check := func(name string, got, want uint64, from string) {
		if got != want {
			out = append(out, violation(InvStats, "%s = %d, but %s = %d", name, got, from, want))
		}
	}
	check("Stats.RequestedBytes", s.Requested, req, "sum of live requested sizes")
	check("Stats.AllocatedBytes", s.Allocated, alloc, "sum of live block sizes")
	check("Stats.NumLive", s.NumLive, uint64(len(v.Live)), "number of live allocations")
	check("Stats.ReservedBytes", s.Reserved, reserved, "sum of chunk sizes")
	check("Stats.ReservedBytes", s.Reserved, v.Device.Used, "device used bytes")
	check("Stats.MappedBytes", s.Mapped, mapped, "sum of the allocator's mapping sizes")
	if s.PeakRequested < s.Requested || s.PeakAllocated < s.Allocated || s.PeakReserved < s.Reserved {
		out = append(out, violation(InvStats, "a peak is below its current value: requested %d/%d allocated %d/%d reserved %d/%d",
			s.Requested, s.PeakRequested, s.Allocated, s.PeakAllocated, s.Reserved, s.PeakReserved))
	}
	if s.Allocated > s.Reserved && !v.Closed {
		out = append(out, violation(InvStats, "allocated %d bytes exceed reserved %d", s.Allocated, s.Reserved))
	}
	for _, a := range v.Live {
		if a.Size < a.Requested {
			out = append(out, violation(InvStats, "live %v: block size %d below requested %d", a.Range(), a.Size, a.Requested))
		}
	}
	return out
}

// CheckMirror is INV-MIRROR: the allocator's belief about the device equals the device: the same
// reservations, the same mappings (address and handle), the same physical handles.
func CheckMirror(v View) []Violation {
	var out []Violation
	engRes := map[vmm.Range]bool{}
	for _, r := range v.Reservations {
		engRes[r] = true
	}
	for _, r := range v.Device.Reservations {
		if !engRes[r] {
			out = append(out, violation(InvMirror, "device reservation %v is unknown to the allocator", r))
		}
		delete(engRes, r)
	}
	for r := range engRes {
		out = append(out, violation(InvMirror, "allocator believes %v is reserved; the device does not", r))
	}
	engMap := map[Mapping]bool{}
	for _, m := range v.Mappings {
		engMap[m] = true
	}
	for _, m := range v.Device.Mappings {
		k := Mapping{VA: m.VA, Handle: m.Handle}
		if !engMap[k] {
			out = append(out, violation(InvMirror, "device mapping %v -> handle %d is unknown to the allocator", m.VA, m.Handle))
		}
		delete(engMap, k)
	}
	for m := range engMap {
		out = append(out, violation(InvMirror, "allocator believes %v -> handle %d is mapped; the device does not", m.VA, m.Handle))
	}
	engH := map[vmm.Handle]uint64{}
	for _, c := range v.Chunks {
		engH[c.Handle] = c.Size
	}
	for _, h := range v.Device.Handles {
		sz, ok := engH[h.Handle]
		switch {
		case !ok:
			out = append(out, violation(InvMirror, "device handle %d (%s) is not held by the allocator (leaked)", h.Handle, vmm.FormatBytes(h.Size)))
		case sz != h.Size:
			out = append(out, violation(InvMirror, "handle %d: allocator says %d bytes, device %d", h.Handle, sz, h.Size))
		}
		delete(engH, h.Handle)
	}
	for h := range engH {
		out = append(out, violation(InvMirror, "allocator holds chunk %d, which the device has freed", h))
	}
	return out
}

// CheckBlocks is INV-BLOCKS: each live allocation is served by exactly one live block that starts at its
// pointer and has its size; no two live allocations share a block; every other live block is a pBlock held
// by an sBlock (live or pending) that lists it among its parts; only a pending block counts outstanding
// events.
func CheckBlocks(v View) []Violation {
	byID := map[uint64]Block{}
	for _, b := range v.Blocks {
		byID[b.ID] = b
	}
	var out []Violation
	used := map[uint64]bool{}
	// pBlocks held by an sBlock (live, or pending after its free) are live too: they are not allocations
	// of their own. A holder must exist and list the pBlock among its parts.
	nLive := 0
	for _, b := range v.Blocks {
		if b.State != BlockPending && b.Events != 0 {
			// Outstanding events are what a pending block waits for; a free block is reusable and a live
			// one in use, so neither can owe any (a count left behind holds the block back later).
			out = append(out, violation(InvBlocks, "block %d %v is %s but counts %d outstanding events", b.ID, b.Range, b.State, b.Events))
		}
		if b.Stitched && b.State == BlockFree {
			// A cached stitched block is cached whole: a partly held one (gmlake-paper's reuse hands out
			// the pieces under the request) spans its whole reservation again once freed.
			if r, ok := resOfSorted(v.Reservations, b.Range.Base); !ok || r != b.Range {
				out = append(out, violation(InvBlocks, "cached sBlock %d spans %v, not its whole reservation %v", b.ID, b.Range, r))
			}
		}
		if b.State != BlockLive {
			continue
		}
		if b.HeldBy == 0 {
			nLive++
			continue
		}
		h, ok := byID[b.HeldBy]
		switch {
		case !ok || !h.Stitched:
			out = append(out, violation(InvBlocks, "pBlock %d %v is held by %d, which is not an sBlock", b.ID, b.Range, b.HeldBy))
		case h.State == BlockFree:
			out = append(out, violation(InvBlocks, "pBlock %d %v is held by sBlock %d, which is free (cached)", b.ID, b.Range, h.ID))
		case !containsID(h.Parts, b.ID):
			out = append(out, violation(InvBlocks, "pBlock %d %v is held by sBlock %d, whose parts %v omit it", b.ID, b.Range, h.ID, h.Parts))
		}
	}
	// An sBlock names the pBlocks it stitches (BlockInfo.Parts): at least one, each an existing pBlock; a
	// live one exactly the pBlocks it holds (gmlake-paper's partly held reuse: only those under the request).
	held := map[uint64][]uint64{}
	for _, b := range v.Blocks {
		if !b.Stitched && b.State == BlockLive && b.HeldBy != 0 {
			held[b.HeldBy] = append(held[b.HeldBy], b.ID)
		}
	}
	for _, b := range v.Blocks {
		if !b.Stitched {
			continue
		}
		if len(b.Parts) == 0 {
			out = append(out, violation(InvBlocks, "sBlock %d %v (state %d) lists no parts", b.ID, b.Range, b.State))
		}
		for _, id := range b.Parts {
			if p, ok := byID[id]; !ok || p.Stitched {
				out = append(out, violation(InvBlocks, "sBlock %d %v lists part %d, which is no pBlock", b.ID, b.Range, id))
			}
		}
		if b.State == BlockLive && !sameIDs(b.Parts, held[b.ID]) {
			out = append(out, violation(InvBlocks, "live sBlock %d %v lists parts %v; the pBlocks it holds are %v", b.ID, b.Range, b.Parts, held[b.ID]))
		}
	}
	for _, a := range v.Live {
		b, ok := byID[a.Block]
		switch {
		case !ok:
			out = append(out, violation(InvBlocks, "live %v names block %d, which does not exist", a.Range(), a.Block))
		case b.State != BlockLive:
			out = append(out, violation(InvBlocks, "live %v is served by block %d in state %d", a.Range(), a.Block, b.State))
		case b.Range.Base != a.Ptr || b.Range.Size != a.Size:
			out = append(out, violation(InvBlocks, "live %v is served by block %d at %v", a.Range(), a.Block, b.Range))
		}
		if used[a.Block] {
			out = append(out, violation(InvBlocks, "block %d serves two live allocations", a.Block))
		}
		used[a.Block] = true
	}
	if nLive != len(v.Live) {
		out = append(out, violation(InvBlocks, "%d blocks are live but %d allocations are", nLive, len(v.Live)))
	}
	return out
}

// String names the state as the engine does (impl.BlockState.String).
func (s BlockState) String() string {
	switch s {
	case BlockFree:
		return "free"
	case BlockLive:
		return "live"
	case BlockPending:
		return "pending"
	}
	return fmt.Sprintf("state %d", s)
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// CheckNoLeak is INV-NOLEAK: after Close the device holds nothing: no reservation, no mapping, no handle,
// no used byte; and the allocator's snapshot is empty.
func CheckNoLeak(v View) []Violation {
	if !v.Closed {
		return nil
	}
	var out []Violation
	d := v.Device
	if len(d.Reservations) > 0 || len(d.Mappings) > 0 || len(d.Handles) > 0 || d.Used > 0 {
		out = append(out, violation(InvNoLeak, "after Close the device still holds %d reservations, %d mappings, %d handles, %s used",
			len(d.Reservations), len(d.Mappings), len(d.Handles), vmm.FormatBytes(d.Used)))
	}
	if len(v.Live) > 0 || len(v.Chunks) > 0 || len(v.Mappings) > 0 || len(v.Reservations) > 0 {
		out = append(out, violation(InvNoLeak, "after Close the allocator still lists %d live, %d chunks, %d mappings, %d reservations",
			len(v.Live), len(v.Chunks), len(v.Mappings), len(v.Reservations)))
	}
	return out
}

func sortedLive(live []Alloc) []Alloc {
	if sort.SliceIsSorted(live, func(i, j int) bool { return live[i].Ptr < live[j].Ptr }) {
		return live
	}
	c := append([]Alloc(nil), live...)
	sort.Slice(c, func(i, j int) bool { return c[i].Ptr < c[j].Ptr })
	return c
}

// overlappingDev returns the device mappings that overlap r (mappings sorted by VA.Base).
func overlappingDev(ms []DevMapping, r vmm.Range) []DevMapping {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].VA.Limit() > r.Base })
	j := i
	for j < len(ms) && ms[j].VA.Base < r.Limit() {
		j++
	}
	return ms[i:j]
}

// CheckBestFit is INV-BESTFIT: when Alloc(size, s) is served by a free pBlock F that existed before the
// call (the new allocation starts at F's base), F is a best fit: no other free pBlock of stream s in the
// same segment (reservation, hence the same pool) held the rounded request with fewer bytes. Blocks that
// touch unmapped room of their segment (expandable segments' growing end) are not compared: a policy may
// count them with the room they can grow into; nor are blocks next to a pending block, which may complete
// and merge with them during the call.
func CheckBestFit(before, after View, ptr vmm.DevicePtr, s vmm.Stream, rounded uint64) []Violation {
	var f *Block
	for i := range before.Blocks {
		b := &before.Blocks[i]
		if !b.Stitched && b.State == BlockFree && b.Range.Base == ptr && b.Stream == s {
			f = b
		}
	}
	if f == nil || f.Range.Size < rounded {
		return nil
	}
	resOf := func(p vmm.DevicePtr) (vmm.Range, bool) {
		rs := before.Device.Reservations
		i := sort.Search(len(rs), func(i int) bool { return rs[i].Limit() > p })
		if i < len(rs) && rs[i].Contains(p) {
			return rs[i], true
		}
		return vmm.Range{}, false
	}
	fr, ok := resOf(f.Range.Base)
	if !ok {
		return nil
	}
	growing := func(b Block) bool {
		lim := b.Range.Limit()
		if r, _ := resOf(b.Range.Base); lim >= r.Limit() {
			return false
		}
		_, holes := before.Device.Backing(vmm.Range{Base: lim, Size: 1})
		return len(holes) > 0
	}
	if growing(*f) {
		return nil
	}
	// A pending block may complete its events during the call and merge with a free neighbour, making that
	// neighbour larger than it was before: such neighbours are not compared.
	touchesPending := func(g Block) bool {
		for _, p := range before.Blocks {
			if !p.Stitched && p.State == BlockPending && (p.Range.Limit() == g.Range.Base || g.Range.Limit() == p.Range.Base) {
				return true
			}
		}
		return false
	}
	for _, g := range before.Blocks {
		if g.Stitched || g.State != BlockFree || g.Stream != s || g.ID == f.ID || g.Range.Size < rounded || g.Range.Size >= f.Range.Size {
			continue
		}
		if touchesPending(g) {
			continue
		}
		if gr, ok := resOf(g.Range.Base); !ok || gr != fr || growing(g) {
			continue
		}
		return []Violation{violation(InvBestFit, "Alloc of %d bytes (rounded) on stream %d took free block %v (%d bytes) although free block %v (%d bytes) of the same segment fits",
			rounded, s, f.Range, f.Range.Size, g.Range, g.Range.Size)}
	}
	return nil
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
