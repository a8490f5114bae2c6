package spec

// INV-EXTEND, INV-GROWTH and INV-REUSE (SPEC.md): how much, and where, an allocation may grow the memory the allocator
// holds. They judge efficiency the contract leaves open (any answer that is not a spurious out-of-memory is
// legal there), decision by decision, so that a policy that silently grows where its own rule reuses is seen.

import (
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// resOfSorted returns the reservation of rs (sorted by Base) that contains p.
func resOfSorted(rs []vmm.Range, p vmm.DevicePtr) (vmm.Range, bool) {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Limit() > p })
	if i < len(rs) && rs[i].Contains(p) {
		return rs[i], true
	}
	return vmm.Range{}, false
}

// liveBlockAt returns v's live block at ptr, an sBlock (stitched) or a pBlock, or nil. When several claim
// ptr (a View the engine got wrong), the last is taken, as every predicate did before it shared this.
func liveBlockAt(v View, ptr vmm.DevicePtr, stitched bool) *Block {
	var got *Block
	for i := range v.Blocks {
		if b := &v.Blocks[i]; b.Stitched == stitched && b.State == BlockLive && b.Range.Base == ptr {
			got = b
		}
	}
	return got
}

// CheckExtend is INV-EXTEND for one successful Alloc that returned ptr, over the Views before and after the
// call, for the arena policies (expandable, gmlake): PyTorch's find_expandable_block takes the free block
// before the unmapped room it maps into as the start of the run, so an allocation that maps new memory in
// place never starts right after a free, wholly mapped block of its own arena (that block would have been
// part of the run, and the growth smaller by its size).
func CheckExtend(before, after View, ptr vmm.DevicePtr) []Violation {
	if after.Policy != "expandable" && after.Policy != "gmlake" {
		return nil
	}
	got := liveBlockAt(after, ptr, false /* stitched */)
	if got == nil || got.Range.Size == 0 {
		return nil
	}
	if _, holes := before.Device.Backing(got.Range); len(holes) == 0 {
		return nil // no growth in place
	}
	r, ok := resOfSorted(before.Device.Reservations, ptr)
	if !ok || r.Base == ptr {
		return nil // a new arena, or the arena's first byte: nothing before it
	}
	for _, b := range before.Blocks {
		if b.Stitched || b.State != BlockFree || b.Range.Limit() != ptr || !r.Contains(b.Range.Base) {
			continue
		}
		if _, holes := before.Device.Backing(b.Range); len(holes) > 0 {
			continue
		}
		return []Violation{violation(InvExtend, "Alloc mapped new memory for %v although the free mapped block %v (%s) just before it was not taken into the run (find_expandable_block)",
			got.Range, b.Range, vmm.FormatBytes(b.Range.Size))}
	}
	return nil
}

// GrowthRule is gmlake's stitching rule as INV-GROWTH needs it: requests rounded to at least StitchMin (in
// the large pool) may be stitched, and a stitch is declined only when it would save less than Save bytes
// of growth. The zero value judges nothing.
type GrowthRule struct {
	StitchMin uint64 // the smallest rounded request gmlake stitches (Config.StitchMin; default 2 granules)
	Save      uint64 // the growth a stitch must save (Config.StitchSave; default min(128 MiB, device/1024))
	// Reuse: a cached stitched block serves requests r with size <= max(r/4*Reuse, r + 2 granules) (gmlake:
	// 5, 1.25x); 0 judges no reuse (INV-REUSE).
	Reuse       uint64
	Granularity uint64
	// CrossStream: the policy stitches chunks of other streams whose frees completed (gmlake unless
	// Config.NoCrossStream); INV-STITCH then judges only steps where no other stream has a free block.
	CrossStream bool
	// Chunk: the chunk size gmlake grows by (ChunkSize); 0 judges nothing (INV-CHUNK).
	Chunk uint64
	_     struct{}
}

// CheckGrowth is INV-GROWTH for one successful Alloc(size) on stream s under gmlake (rule.StitchMin > 0),
// over the Views before and after the call (no fault armed): a large request rounded to r >= StitchMin
// grows the device's used bytes by at most max(0, AlignUp(r, G) - U) + Save, where U is the bytes of the
// chunks (physical handles) lying each wholly in one free large-pool block of stream s before the call: a
// stitch may take those at once (stream order), and gmlake stitches whenever that saves more than Save.
// Memory of other streams, pending blocks and cached stitched blocks only lowers what gmlake must grow, so
// leaving it out keeps the bound safe.
func CheckGrowth(rule GrowthRule, before, after View, size uint64, s vmm.Stream) []Violation {
	if rule.StitchMin == 0 || rule.Granularity == 0 {
		return nil
	}
	r := vmm.AlignUp(max(size, 1), 512)
	if r <= SmallRequest || r < rule.StitchMin {
		return nil
	}
	if after.Device.Used <= before.Device.Used {
		return nil
	}
	grew := after.Device.Used - before.Device.Used
	resv := before.Device.Reservations
	var free []Block // free large-pool pBlocks of s, by reservation and address
	for _, b := range before.Blocks {
		if !b.Stitched && b.State == BlockFree && !b.SmallPool && b.Stream == s {
			free = append(free, b)
		}
	}
	sort.Slice(free, func(i, j int) bool { return free[i].Range.Base < free[j].Range.Base })
	var usable uint64
	for _, m := range before.Device.Mappings {
		i := sort.Search(len(free), func(i int) bool { return free[i].Range.Limit() > m.VA.Base })
		if i == len(free) || free[i].Range.Base > m.VA.Base || free[i].Range.Limit() < m.VA.Limit() {
			continue
		}
		if mr, ok := resOfSorted(resv, m.VA.Base); !ok || !mr.Contains(free[i].Range.Base) {
			continue
		}
		usable += m.VA.Size
	}
	need := vmm.AlignUp(r, rule.Granularity)
	bound := rule.Save
	if need > usable {
		bound += need - usable
	}
	if grew > bound {
		return []Violation{violation(InvGrowth, "Alloc(%d) on stream %d grew the device's used memory by %s, but %s of chunks lay wholly in free blocks of the stream: stitching them grows by at most %s (+ %s saving threshold)",
			size, s, vmm.FormatBytes(grew), vmm.FormatBytes(usable), vmm.FormatBytes(bound-rule.Save), vmm.FormatBytes(rule.Save))}
	}
	return nil
}

// CheckReuse is INV-REUSE for one successful Alloc(size) on stream s under gmlake, over the Views before and
// after the call: a large request rounded to r >= StitchMin that a new stitched block serves (one before lacks,
// by id: a real driver may give it the range of one torn down in the call) had no cached stitched block of s to reuse instead, one of at least r and at most
// max(r/4*Reuse, r + 2 granules) bytes whose every chunk lay wholly in a free block of s (impl/doc.go, the
// allocation path, step 3: reuse needs no driver call, a new stitch maps every chunk again); and a request a
// cached stitched block serves took one of at most that many bytes, with no smaller such block of s left.
func CheckReuse(rule GrowthRule, before, after View, ptr vmm.DevicePtr, size uint64, s vmm.Stream) []Violation {
	if rule.Reuse == 0 {
		return nil
	}
	r := vmm.AlignUp(max(size, 1), 512)
	got := stitchedServing(rule, after, ptr, size)
	if got == nil {
		return nil
	}
	limit := max(r/4*rule.Reuse, r+2*rule.Granularity)
	if b, old := stitchedBefore(before, got.ID); old {
		// A cached sBlock was reused: the smallest reusable one, and one of at most limit bytes. The engine
		// may also count chunks freed on other streams whose work completed, so its choice is among a
		// superset of reusableSBlocks: none of those may be smaller. (Reuse is the block's identity, not
		// its address: a real driver may hand a new stitched block the range of one torn down in the same
		// call, found by TestRapidOnGPU on the H200 with a one-sBlock cache.)
		if b.State == BlockFree {
			if b.Range.Size > limit {
				return []Violation{violation(InvReuse, "Alloc(%d) (rounded %d) on stream %d reused the cached stitched block %d %v of %s, more than max(r/4*%d, r + 2 granules) = %s",
					size, r, s, b.ID, b.Range, vmm.FormatBytes(b.Range.Size), rule.Reuse, vmm.FormatBytes(limit))}
			}
			for _, sb := range reusableSBlocks(before, s, r) {
				if sb.Range.Size < b.Range.Size {
					return []Violation{violation(InvReuse, "Alloc(%d) (rounded %d) on stream %d reused the cached stitched block %d %v of %s, but the smaller cached stitched block %d %v of %s (every chunk free) fits: reuse takes the smallest",
						size, r, s, b.ID, b.Range, vmm.FormatBytes(b.Range.Size), sb.ID, sb.Range, vmm.FormatBytes(sb.Range.Size))}
				}
			}
		}
		return nil
	}
	for _, sb := range reusableSBlocks(before, s, r) {
		if sb.Range.Size <= limit {
			return []Violation{violation(InvReuse, "Alloc(%d) on stream %d stitched a new block %v although the cached stitched block %d %v (%s, every chunk free) could be reused",
				size, s, got.Range, sb.ID, sb.Range, vmm.FormatBytes(sb.Range.Size))}
		}
	}
	return nil
}

// CheckPaperReuse is INV-REUSE for gmlake-paper, for one successful Alloc(size) on stream s that returned ptr,
// over the Views before and after the call: GLake's get_free_block, once best fit missed, reuses the
// smallest cached stitched block of the stream of at least r bytes whose every chunk is free, when it is at
// most limit times r (reuseLimit: the ReuseLimit knob, default 10); r is the request rounded to 512 B and,
// above 1 MiB (the large pool, the only one stitched), up to a multiple of chunk (GLake's round_size). So a
// cached stitched block reused for the request held at most limit*r bytes and is handed out at r (only the
// pieces under the request are kept: keep_blocks), and a request served by new
// memory or a new stitched block (a reservation that is new) had no such block to reuse: one of at least r
// and at most limit*r bytes, of stream s, every chunk lying wholly in a free block of s. (The engine may
// also take chunks freed on other streams whose work completed, and so reuse more: the predicate counts
// only the stream's own, a subset, and stays safe.)
func CheckPaperReuse(before, after View, ptr vmm.DevicePtr, size, chunk uint64, limit float64, s vmm.Stream) []Violation {
	r := vmm.AlignUp(max(size, 1), 512)
	if r <= SmallRequest || chunk == 0 {
		return nil
	}
	r = vmm.RoundUp(r, chunk)
	within := func(b Block) bool { return b.Range.Size >= r && float64(b.Range.Size) <= float64(r)*limit }
	res, ok := resOfSorted(after.Device.Reservations, ptr)
	if !ok {
		return nil // INV-MIRROR
	}
	if old, had := resOfSorted(before.Device.Reservations, ptr); had && old == res {
		for _, b := range before.Blocks {
			if !b.Stitched || b.Range.Base != ptr || b.State != BlockFree {
				continue
			}
			got := liveBlockAt(after, ptr, true)
			if got != nil && !within(b) {
				return []Violation{violation(InvReuse, "Alloc(%d) (rounded %d) on stream %d reused the cached stitched block %d %v of %s, more than reuseLimit %g times the request",
					size, r, s, b.ID, b.Range, vmm.FormatBytes(b.Range.Size), limit)}
			}
			if got != nil && got.ID == b.ID && got.Range.Size != r {
				// get_free_block keeps only the pieces under the request (keep_blocks = size / kGranularity:
				// used_blocks, the rest free_blocks): the block is handed out at the request.
				return []Violation{violation(InvReuse, "Alloc(%d) (rounded %d) on stream %d reused the cached stitched block %d of %s and handed out %s of it: GLake keeps only the pieces under the request",
					size, r, s, b.ID, vmm.FormatBytes(b.Range.Size), vmm.FormatBytes(got.Range.Size))}
			}
		}
		return nil
	}
	for _, sb := range reusableSBlocks(before, s, r) {
		if within(sb) {
			return []Violation{violation(InvReuse, "Alloc(%d) (rounded %d) on stream %d made the new reservation %v although the cached stitched block %d %v (%s, every chunk free, at most reuseLimit %g times the request) could be reused",
				size, r, s, res, sb.ID, sb.Range, vmm.FormatBytes(sb.Range.Size), limit)}
		}
	}
	return nil
}

// stitchedBefore returns the stitched block of v with id, if v has it.
func stitchedBefore(v View, id uint64) (Block, bool) {
	for _, b := range v.Blocks {
		if b.Stitched && b.ID == id {
			return b, true
		}
	}
	return Block{}, false
}

// reusableSBlocks returns the cached (free) stitched blocks of stream s in v of at least r bytes whose every
// chunk lies wholly in a free pBlock of s.
func reusableSBlocks(v View, s vmm.Stream, r uint64) []Block {
	var free []Block
	for _, b := range v.Blocks {
		if !b.Stitched && b.State == BlockFree && b.Stream == s {
			free = append(free, b)
		}
	}
	sort.Slice(free, func(i, j int) bool { return free[i].Range.Base < free[j].Range.Base })
	inFree := func(va vmm.Range) bool {
		i := sort.Search(len(free), func(i int) bool { return free[i].Range.Limit() > va.Base })
		return i < len(free) && free[i].Range.Base <= va.Base && free[i].Range.Limit() >= va.Limit()
	}
	freeHandle := map[vmm.Handle]bool{}
	for _, m := range v.Device.Mappings {
		if inFree(m.VA) {
			freeHandle[m.Handle] = true
		}
	}
	var out []Block
	for _, sb := range v.Blocks {
		if !sb.Stitched || sb.State != BlockFree || sb.Stream != s || sb.Range.Size < r {
			continue
		}
		ms := overlappingDev(v.Device.Mappings, sb.Range)
		ok := len(ms) > 0
		for _, m := range ms {
			ok = ok && freeHandle[m.Handle]
		}
		if ok {
			out = append(out, sb)
		}
	}
	return out
}

// CheckArena is INV-ARENA for one successful Alloc(size) on stream s that returned ptr, over the Views
// before and after the call, for the arena policies (expandable, gmlake): PyTorch's
// try_allocate_expandable_block opens a new expandable segment only when find_expandable_block finds no
// segment of the stream and pool to extend. find_expandable_block walks the stream's unmapped blocks,
// lowest address first; for each it starts at the free block just before it if there is one, and counts
// that block, the unmapped block and the free or unmapped blocks after it; the first run that reaches the
// request is the one mapped into. So a request served by a pBlock in a reservation that is new had, before
// the call, no arena of its stream and pool holding such a run of at least the request rounded to 512 B.
// An arena is recognised by its blocks (every one of stream s and of the request's pool); one that shows
// no block (everything unmapped) is not judged, which keeps the predicate safe, and neither is one released
// during the call (PyTorch's release_cached_blocks drops an expandable segment it unmapped whole). Work completing during the
// call and a release of the cache only add free and unmapped room, so the runs of before are a lower bound.
func CheckArena(before, after View, ptr vmm.DevicePtr, size uint64, s vmm.Stream) []Violation {
	if after.Policy != "expandable" && after.Policy != "gmlake" {
		return nil
	}
	got := liveBlockAt(after, ptr, false /* stitched */)
	if got == nil {
		return nil
	}
	if _, ok := resOfSorted(after.Device.Reservations, ptr); !ok {
		return nil // INV-MIRROR
	}
	if _, old := resOfSorted(before.Device.Reservations, ptr); old {
		return nil // served from an arena that existed
	}
	r := vmm.AlignUp(max(size, 1), 512)
	for _, ar := range streamArenas(before, after, s, r <= SmallRequest) {
		res := ar.res
		if run, at := longestExpandableRun(before.Device, res, ar.blocks); run >= r {
			return []Violation{violation(InvArena, "Alloc(%d) on stream %d opened a new arena for %v although its arena %v had a run of %s of free and unmapped blocks from %#x (find_expandable_block extends it)",
				size, s, got.Range, res, vmm.FormatBytes(run), uint64(at))}
		}
	}
	return nil
}

// arenaPiece is one stretch of an arena as find_expandable_block walks it: a pBlock (mapped) or unmapped room
// (what no block covers).
type arenaPiece struct {
	base         vmm.DevicePtr
	size         uint64
	free, mapped bool // free: a free, wholly mapped block, or unmapped room
}

// arenaPieces lays arena res out in address order from its pBlocks (given in address order). A block with
// holes in its backing is not free: not what the engine reports for a mapped block, so nothing is judged
// across it.
func arenaPieces(d Device, res vmm.Range, blocks []Block) []arenaPiece {
	var ps []arenaPiece
	cur := res.Base
	for _, b := range blocks {
		if b.Range.Base > cur {
			ps = append(ps, arenaPiece{cur, uint64(b.Range.Base - cur), true, false})
		}
		_, holes := d.Backing(b.Range)
		ps = append(ps, arenaPiece{b.Range.Base, b.Range.Size, b.State == BlockFree && len(holes) == 0, true})
		cur = max(cur, b.Range.Limit())
	}
	if cur < res.Limit() {
		ps = append(ps, arenaPiece{cur, uint64(res.Limit() - cur), true, false})
	}
	return ps
}

// longestExpandableRun is the longest run find_expandable_block would count in arena res (its blocks given
// in address order; what no block covers is unmapped room): from the free, wholly mapped block just before
// an unmapped stretch (or the stretch itself), over the free blocks and unmapped stretches that follow,
// until a block in use. It returns the run's bytes and where it starts.
func longestExpandableRun(d Device, res vmm.Range, blocks []Block) (uint64, vmm.DevicePtr) {
	var best uint64
	var bestAt vmm.DevicePtr
	var run uint64 // the current candidate run (0: none open)
	var runAt vmm.DevicePtr
	var prevFree uint64 // the free, wholly mapped block just before the piece (0: none)
	ps := arenaPieces(d, res, blocks)
	for _, p := range ps {
		if run > best { // the run up to p: measured before a busy block ends it, as before every piece
			best, bestAt = run, runAt
		}
		switch {
		case !p.mapped:
			if run == 0 {
				run, runAt = prevFree, p.base-vmm.DevicePtr(prevFree)
			}
			run += p.size
			prevFree = 0
		case !p.free:
			run, prevFree = 0, 0
		case run > 0:
			run += p.size
			prevFree = 0
		default:
			prevFree = p.size
		}
	}
	if run > best { // the run the arena's end ends
		best, bestAt = run, runAt
	}
	return best, bestAt
}

// CheckStitchArena is INV-ARENA's clause for the new memory of a stitch (gmlake), for one successful Alloc
// on stream s that returned the new stitched block at ptr: the chunks a stitch maps for the part its free
// chunks leave uncovered go into an unmapped stretch of one of the stream's large-pool arenas that holds them
// all (impl: arenaChunksLocked, the first such stretch); a new arena is reserved for them only when none
// does. So if the call reserved a new arena (besides the stitched block's own reservation) whose pBlocks are
// s's large-pool blocks mapping n bytes, no arena of s's large pool that is still reserved after the call had,
// before it, an unmapped stretch of at least n bytes. Room only grows during the call (a release of the
// cache unmaps, never maps), so before's stretches are a lower bound.
func CheckStitchArena(before, after View, ptr vmm.DevicePtr, s vmm.Stream) []Violation {
	if after.Policy != "gmlake" {
		return nil
	}
	sb := liveBlockAt(after, ptr, true /* stitched */)
	if sb == nil || before.Reserved(ptr) {
		return nil // not a stitch, or a cached stitched block reused
	}
	pblocks := pBlocksByAddress(after)
	var fresh vmm.Range
	var grown uint64
	for _, res := range after.Device.Reservations {
		if res.Contains(ptr) || before.Reserved(res.Base) {
			continue
		}
		i := sort.Search(len(pblocks), func(i int) bool { return pblocks[i].Range.Base >= res.Base })
		for j := i; j < len(pblocks) && res.Contains(pblocks[j].Range.Base); j++ {
			if b := pblocks[j]; b.Stream == s && !b.SmallPool {
				fresh = res
				grown += b.Range.Size
			}
		}
	}
	arenas := streamArenas(before, after, s, false /* small */)
	if grown == 0 {
		return checkStitchGrowsFirstHole(before, arenas, pblocks, sb, s)
	}
	for _, ar := range arenas {
		res := ar.res
		for _, p := range arenaPieces(before.Device, res, ar.blocks) {
			if !p.mapped && p.size >= grown {
				return []Violation{violation(InvArena, "Alloc on stream %d stitched block %d %v and reserved a new arena %v for the %s it maps, although its arena %v had %s unmapped at %#x (arenaChunksLocked takes the first stretch that holds them)",
					s, sb.ID, sb.Range, fresh, vmm.FormatBytes(grown), res, vmm.FormatBytes(p.size), uint64(p.base))}
			}
		}
	}
	return nil
}

// checkStitchGrowsFirstHole is CheckStitchArena's clause for a stitch that grew inside an arena it had: the
// new chunks are mapped from the start of the lowest-addressed unmapped stretch of that arena that holds
// them all (seg.unmapped is in address order), so no lower stretch of before had room for what was mapped.
func checkStitchGrowsFirstHole(before View, arenas []arenaOf, pblocks []Block, sb *Block, s vmm.Stream) []Violation {
	for _, ar := range arenas {
		res := ar.res
		holes := []arenaPiece{}
		for _, p := range arenaPieces(before.Device, res, ar.blocks) {
			if !p.mapped {
				holes = append(holes, p)
			}
		}
		// The bytes of before's holes that a pBlock maps after, and the first hole they lie in.
		var grown uint64
		first := -1
		for k, h := range holes {
			hr := vmm.Range{Base: h.base, Size: h.size}
			for _, b := range pblocks {
				if b.Range.Base >= hr.Limit() || b.Range.Limit() <= hr.Base {
					continue
				}
				lo, hi := max(b.Range.Base, hr.Base), min(b.Range.Limit(), hr.Limit())
				grown += uint64(hi - lo)
				if first < 0 {
					first = k
				}
			}
		}
		if grown == 0 {
			continue
		}
		for _, h := range holes[:first] {
			if h.size >= grown {
				return []Violation{violation(InvArena, "Alloc on stream %d stitched block %d %v and mapped %s of new memory into arena %v's unmapped stretch at %#x, although the lower stretch at %#x had %s (arenaChunksLocked maps into the first stretch that holds them)",
					s, sb.ID, sb.Range, vmm.FormatBytes(grown), res, uint64(holes[first].base), uint64(h.base), vmm.FormatBytes(h.size))}
			}
		}
	}
	return nil
}

// arenaOf is one arena of a stream and pool: its reservation and its pBlocks in address order.
type arenaOf struct {
	res    vmm.Range
	blocks []Block
}

// streamArenas returns before's arenas of stream s and the small or large pool that are still reserved, the
// same range, after the call: a reservation whose pBlocks are all of s and the pool (one with no block to
// tell whose it is is left out, and so is one released during the call: a release of the cache drops an
// arena it unmapped whole).
func streamArenas(before, after View, s vmm.Stream, small bool) []arenaOf {
	blocks := pBlocksByAddress(before)
	var out []arenaOf
	for _, res := range before.Device.Reservations {
		i := sort.Search(len(blocks), func(i int) bool { return blocks[i].Range.Base >= res.Base })
		j := i
		ours := true
		for ; j < len(blocks) && res.Contains(blocks[j].Range.Base); j++ {
			ours = ours && blocks[j].Stream == s && blocks[j].SmallPool == small
		}
		if j == i || !ours {
			continue
		}
		if still, ok := resOfSorted(after.Device.Reservations, res.Base); !ok || still != res {
			continue
		}
		out = append(out, arenaOf{res, blocks[i:j]})
	}
	return out
}

// pBlocksByAddress returns v's pBlocks (not the stitched blocks) in address order.
func pBlocksByAddress(v View) []Block {
	var out []Block
	for _, b := range v.Blocks {
		if !b.Stitched {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Base < out[j].Range.Base })
	return out
}
