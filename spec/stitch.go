package spec

// INV-STITCH (SPEC.md): which chunks a new stitched block of gmlake maps, decision by decision.

import (
	"slices"
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// StitchChoice is gmlake's rule for the chunks of a new stitched block (impl/doc.go, the allocation path,
// step 4), stated over chunk sizes: take the candidates largest first while each fits in what the request
// (rounded to the granularity) still lacks; if something is still lacking, the smallest candidate not taken
// that covers it (no new memory, some slack in the block). It returns the sizes taken, largest first, and
// what is still lacking (new memory maps it).
func StitchChoice(cands []uint64, need uint64) (taken []uint64, rem uint64) {
	c := slices.Clone(cands)
	sort.Slice(c, func(i, j int) bool { return c[i] > c[j] })
	rem = need
	used := make([]bool, len(c))
	for i, x := range c {
		if rem == 0 {
			break
		}
		if x <= rem {
			used[i], rem = true, rem-x
		}
	}
	if rem > 0 {
		for i := len(c) - 1; i >= 0; i-- {
			if !used[i] && c[i] >= rem {
				used[i], rem = true, 0
				break
			}
		}
	}
	for i, x := range c {
		if used[i] {
			taken = append(taken, x)
		}
	}
	return taken, rem
}

// CheckStitch is INV-STITCH for one successful Alloc(size) on stream s under gmlake (rule.StitchMin > 0)
// that returned ptr, over the Views before and after the call: when a new stitched block serves it, the
// chunks it maps that the allocator held before are StitchChoice's over the candidates, and the new memory
// it maps is what StitchChoice leaves lacking. The candidates are the chunks lying each wholly in one free
// large-pool pBlock of stream s. The predicate judges only where the View shows every candidate: no pBlock
// is pending (the parts of the stream's own freed stitched blocks that wait only for it are candidates
// too), no other stream has a free large-pool block when the rule stitches across streams (those whose
// frees completed are candidates), and no handle was released during the call (a release of the cache
// changes the candidates).
func CheckStitch(rule GrowthRule, before, after View, ptr vmm.DevicePtr, size uint64, s vmm.Stream) []Violation {
	r := vmm.AlignUp(max(size, 1), 512)
	got := stitchedServing(rule, after, ptr, size)
	if got == nil {
		return nil
	}
	res, ok := resOfSorted(after.Device.Reservations, ptr)
	if _, old := stitchedBefore(before, got.ID); !ok || old {
		return nil // a cached stitched block reused (INV-REUSE), or INV-MIRROR
	}
	var free []Block // free large-pool pBlocks of s, by address
	for _, b := range before.Blocks {
		switch {
		case b.State == BlockPending:
			// A pending block, pBlock or stitched: its events may be found complete during the call (the
			// engine polls them lazily), and a pending stitched block's parts, shown held, then become
			// candidates the View before does not show (found by tla/run.sh long, TestITFStitchAfterPendingSBlock).
			return nil
		case b.Stitched:
		case b.State == BlockFree && !b.SmallPool && b.Stream == s:
			free = append(free, b)
		case b.State == BlockFree && !b.SmallPool && rule.CrossStream:
			return nil
		}
	}
	if releasedDuring(before, after) {
		return nil // a handle released during the call
	}
	sort.Slice(free, func(i, j int) bool { return free[i].Range.Base < free[j].Range.Base })
	cand := map[vmm.Handle]uint64{}
	var sizes []uint64
	for _, m := range before.Device.Mappings {
		i := sort.Search(len(free), func(i int) bool { return free[i].Range.Limit() > m.VA.Base })
		if i < len(free) && free[i].Range.Base <= m.VA.Base && m.VA.Limit() <= free[i].Range.Limit() {
			cand[m.Handle] = m.VA.Size
			sizes = append(sizes, m.VA.Size)
		}
	}
	var old []uint64 // the sizes of the chunks held before that the new block maps
	var fresh uint64
	existed := map[vmm.Handle]bool{}
	for _, h := range before.Device.Handles {
		existed[h.Handle] = !h.Released
	}
	for _, m := range overlappingDev(after.Device.Mappings, res) {
		switch {
		case cand[m.Handle] != 0:
			old = append(old, m.VA.Size)
		case existed[m.Handle]:
			return []Violation{violation(InvStitch, "Alloc(%d) on stream %d stitched %v over handle %d, which lay wholly in no free large-pool block of the stream",
				size, s, got.Range, m.Handle)}
		default:
			fresh += m.VA.Size
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i] > old[j] })
	need := vmm.AlignUp(r, rule.Granularity)
	want, rem := StitchChoice(sizes, need)
	if !slices.Equal(old, want) || fresh != rem {
		return []Violation{violation(InvStitch, "Alloc(%d) on stream %d stitched %v from held chunks of %v and %s of new memory; from the candidates %v gmlake's rule (largest first, then the smallest that covers the rest) takes %v and %s of new memory",
			size, s, got.Range, formatSizes(old), vmm.FormatBytes(fresh), formatSizes(sortedDesc(sizes)), formatSizes(want), vmm.FormatBytes(rem))}
	}
	// The layout: the block maps its chunks in the address order of their home mappings (each chunk's mapping
	// outside every stitched block), held chunks and new memory alike, so that neighbours stay neighbours.
	if v := stitchOrder(after, res, got, size, s); v != nil {
		return []Violation{*v}
	}
	// Whether to stitch at all: only when the stitch's new memory is less, by its saving threshold, than
	// growing the stream's arena would map (after the cache was released in this Alloc, any saving).
	save := rule.Save
	if after.Stats.AllocRetries > before.Stats.AllocRetries {
		save = 0
	}
	if grow := ArenaGrowthBound(before, s, r, rule.Granularity); fresh+save >= grow {
		return []Violation{violation(InvStitch, "Alloc(%d) on stream %d stitched %v mapping %s of new memory, but growing the stream's arena maps at most %s: a stitch must save its threshold (%s) of growth",
			size, s, got.Range, vmm.FormatBytes(fresh), vmm.FormatBytes(grow), vmm.FormatBytes(save))}
	}
	return nil
}

// stitchOrder reports a new stitched block (got, in reservation res of View after) whose chunks are not mapped
// in the address order of their homes: the mapping of each handle that lies in no stitched block.
func stitchOrder(after View, res vmm.Range, got *Block, size uint64, s vmm.Stream) *Violation {
	var stitched []vmm.Range
	for _, b := range after.Blocks {
		if b.Stitched {
			stitched = append(stitched, b.Range)
		}
	}
	home := map[vmm.Handle]vmm.DevicePtr{}
	for _, m := range after.Device.Mappings {
		if !slices.ContainsFunc(stitched, func(r vmm.Range) bool { return r.Base <= m.VA.Base && m.VA.Base < r.Limit() }) {
			home[m.Handle] = m.VA.Base
		}
	}
	var prev vmm.DevicePtr
	for i, m := range overlappingDev(after.Device.Mappings, res) {
		h, ok := home[m.Handle]
		if !ok {
			continue // a chunk with no home mapping: INV-MAPPED's concern
		}
		if i > 0 && h <= prev {
			v := violation(InvStitch, "Alloc(%d) on stream %d stitched %v mapping handle %d (at home at %v) after a chunk at home at %v: a stitched block maps its chunks in the address order of their homes",
				size, s, got.Range, m.Handle, h, prev)
			return &v
		}
		prev = h
	}
	return nil
}

// ArenaGrowthBound is the most that serving a large request of r bytes (rounded to 512 B) by growing stream
// s's arena could map, from View v: the request rounded up to granularity g, less the bytes of free mapped
// blocks among the first r bytes of a run PyTorch's find_expandable_block would extend (from the free,
// wholly mapped block just before an unmapped stretch, or the stretch itself, over the free blocks and
// unmapped stretches after it, until r bytes are reached), the largest over the stream's runs that hold r;
// the whole request rounded when no run holds it, or when a reservation shows no block at all (an arena
// wholly unmapped, whose stream the View does not tell). The engine extends the first run it finds, so
// what it maps is at most this.
func ArenaGrowthBound(v View, s vmm.Stream, r, g uint64) uint64 {
	need := vmm.AlignUp(r, g)
	var pbs, sbs []Block
	for _, b := range v.Blocks {
		if b.Stitched {
			sbs = append(sbs, b)
		} else {
			pbs = append(pbs, b)
		}
	}
	sort.Slice(pbs, func(i, j int) bool { return pbs[i].Range.Base < pbs[j].Range.Base })
	found, bound := false, uint64(0)
	for _, res := range v.Device.Reservations {
		i := sort.Search(len(pbs), func(i int) bool { return pbs[i].Range.Base >= res.Base })
		j := i
		ours := true
		for ; j < len(pbs) && res.Contains(pbs[j].Range.Base); j++ {
			ours = ours && pbs[j].Stream == s && !pbs[j].SmallPool
		}
		if j == i {
			if !slices.ContainsFunc(sbs, func(b Block) bool { return res.Contains(b.Range.Base) }) {
				return need // a reservation with no block: an arena wholly unmapped, perhaps s's
			}
			continue // a stitched block's
		}
		if !ours {
			continue
		}
		for _, mapped := range runsHolding(v.Device, res, pbs[i:j], r) {
			found, bound = true, max(bound, vmm.AlignUp(r-min(r, mapped), g))
		}
	}
	if !found {
		return need
	}
	return bound
}

// runsHolding returns, for each run find_expandable_block could take in arena res (its pBlocks given in
// address order; what no block covers is unmapped) that holds r bytes, the bytes of free mapped blocks among
// the run's first r bytes.
func runsHolding(d Device, res vmm.Range, blocks []Block, r uint64) []uint64 {
	ps := arenaPieces(d, res, blocks)
	var out []uint64
	for k, p := range ps {
		if p.mapped {
			continue // a run starts at an unmapped stretch,
		}
		start := k
		if k > 0 && ps[k-1].free && ps[k-1].mapped {
			start = k - 1 // or at the free block just before it
		}
		var have, mapped uint64
		for q := start; q < len(ps) && have < r && ps[q].free; q++ {
			if ps[q].mapped {
				mapped += min(ps[q].size, r-have)
			}
			have += ps[q].size
		}
		if have >= r {
			out = append(out, mapped)
		}
	}
	return out
}

// releasedDuring reports whether a physical handle the device held in before is released in after (a release
// of the cache during the call changes what the allocator could use).
func releasedDuring(before, after View) bool {
	held := map[vmm.Handle]bool{}
	for _, h := range after.Device.Handles {
		if !h.Released {
			held[h.Handle] = true
		}
	}
	for _, h := range before.Device.Handles {
		if !h.Released && !held[h.Handle] {
			return true
		}
	}
	return false
}

func sortedDesc(x []uint64) []uint64 {
	c := slices.Clone(x)
	sort.Slice(c, func(i, j int) bool { return c[i] > c[j] })
	return c
}

func formatSizes(x []uint64) []string {
	out := make([]string, len(x))
	for i, v := range x {
		out[i] = vmm.FormatBytes(v)
	}
	return out
}

// CheckPaperCollect is INV-PAPERGC for one Alloc(size) under gmlake-paper (successful or not), over the Views
// before and after it, with no fault armed and while the stitched bytes made so far stay below autoGC:
// GLake collects cached stitched blocks during an allocation only where its source says
// (garbage_collect_fused_blocks): when the stitched bytes pass autoGC, when a stitch's driver calls fail,
// when realloc_block fails to create a segment although cudaMemGetInfo reports more free bytes than that
// segment (and the stream's cached stitched blocks add up to at least it), and release_cached_blocks deletes
// the cached stitched blocks that view a segment it releases. So a cached stitched block of before that is
// gone after views a handle released during the call, or the device had more free bytes before the call
// than the segment realloc_block makes for the request: get_allocation_size of the request rounded as GMLake
// rounds it (to 2 MiB above 1 MiB); with reAlloc on, a segment for only what the free blocks lack, at its
// smallest (every free or pending large pBlock counted; none, and nothing judged, when they cover the
// request). No new memory is made before realloc_block's collection, so the
// device's free bytes then are at least those of before.
func CheckPaperCollect(before, after View, size uint64, reAlloc bool) []Violation {
	if before.Policy != "gmlake-paper" {
		return nil
	}
	r := vmm.AlignUp(max(size, 1), 512)
	seg := TorchAllocationSize(r)
	if r > torchSmallSize {
		r = vmm.AlignUp(r, 2<<20)
		seg = TorchAllocationSize(r)
	}
	if reAlloc && r > torchSmallSize {
		// The segment of only what the free large blocks lack: at its smallest with every free or pending
		// large pBlock counted (any stream's; pending ones may complete during the call), none when they
		// cover the request.
		var free uint64
		for _, b := range before.Blocks {
			if !b.Stitched && !b.SmallPool && b.State != BlockLive {
				free += b.Range.Size
			}
		}
		if free >= r {
			return nil
		}
		seg = min(seg, vmm.AlignUp(TorchAllocationSize(vmm.AlignUp(r-free, 2<<20)), 2<<20))
	}
	if before.Device.Free() > seg {
		return nil
	}
	held := map[vmm.Handle]bool{}
	for _, h := range after.Device.Handles {
		if !h.Released {
			held[h.Handle] = true
		}
	}
	for _, b := range before.Blocks {
		if !b.Stitched || b.State != BlockFree {
			continue
		}
		if res, ok := resOfSorted(before.Device.Reservations, b.Range.Base); !ok {
			continue // INV-MIRROR
		} else if still, ok := resOfSorted(after.Device.Reservations, b.Range.Base); ok && still == res {
			continue // still reserved
		}
		released := false
		for _, m := range overlappingDev(before.Device.Mappings, b.Range) {
			released = released || !held[m.Handle]
		}
		if !released {
			return []Violation{violation(InvPaperGC, "Alloc(%d) collected the cached stitched block %d %v although no segment it views was released and the device had only %s free (realloc_block collects only when it reports more than the %s segment)",
				size, b.ID, b.Range, vmm.FormatBytes(before.Device.Free()), vmm.FormatBytes(seg))}
		}
	}
	return nil
}

// stitchedServing returns the live stitched block at ptr after an Alloc(size) that gmlake's stitching rule
// covers (a large request rounded to at least StitchMin, the rule known), or nil: the block INV-REUSE and
// INV-STITCH judge.
func stitchedServing(rule GrowthRule, after View, ptr vmm.DevicePtr, size uint64) *Block {
	if rule.StitchMin == 0 || rule.Granularity == 0 {
		return nil
	}
	if r := vmm.AlignUp(max(size, 1), 512); r <= SmallRequest || r < rule.StitchMin {
		return nil
	}
	return liveBlockAt(after, ptr, true /* stitched */)
}
