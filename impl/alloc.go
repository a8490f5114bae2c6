package impl

// The allocation path. See doc.go ("The allocation path") for the order of the steps.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// allocLocked serves one request on stream ss.
func (a *Allocator) allocLocked(size vmm.Bytes, ss *streamState) (*block, error) {
	a.assertLocked()
	rs := a.p.round(size)
	pool := poolOf(rs)
	if len(a.pend) > 0 || len(a.deferred) > 0 {
		a.processEventsLocked(ss) // PyTorch's malloc: process_events when no capture is underway
	}
	if a.p.paper {
		a.evTempLocked(1) // GMLake's search key is a Block, and every Block creates a CUDA event
	}
	var b *block
	if pb := a.bestFitLocked(ss, pool, rs); pb != nil {
		b = &pb.block
	} else {
		var err error
		if b, err = a.allocMissLocked(ss, pool, rs, size); err != nil {
			return nil, err
		}
	}
	if pb := b.p; pb != nil && a.p.shouldSplit(pb, rs) {
		a.splitLocked(pb, rs)
		if a.p.paper {
			a.evFreshLocked(b) // GMLake's malloc hands out a new Block for the head, with a new event
		}
	}
	a.markLiveLocked(b, size)
	return b, nil
}

// bestFitLocked takes the smallest free block of ss's pool that holds rs bytes (lowest address among equals),
// with PyTorch's expandable-segment rule: a block at the end of a growing segment counts with the room it
// can grow into, so other blocks are preferred.
func (a *Allocator) bestFitLocked(ss *streamState, pool poolKind, rs vmm.Bytes) *pBlock {
	fs := &ss.free[pool]
	b := fs.lowerBound(rs, 0)
	if b == nil {
		return nil
	}
	if a.seeded(MutWrongBestFit) {
		b = fs.max()
	}
	if a.p.arena && b.next != nil && !b.next.mapped {
		for {
			nx := fs.lowerBound(b.size, b.ptr+1)
			if nx == nil || expSize(nx) >= expSize(b) {
				break
			}
			b = nx
		}
	}
	fs.remove(b)
	return b
}

func expSize(b *pBlock) vmm.Bytes {
	if b.next != nil && !b.next.mapped {
		return b.size + b.next.size
	}
	return b.size
}

// allocMissLocked serves a request no free block holds: sBlock reuse, stitching, growth; on out-of-memory it
// releases the cache and tries once more.
func (a *Allocator) allocMissLocked(ss *streamState, pool poolKind, rs, size vmm.Bytes) (*block, error) {
	if a.p.paper {
		return a.paperMissLocked(ss, pool, rs, size)
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var b *block
		if b, err = a.allocNewLocked(ss, pool, rs, attempt > 0); err == nil {
			return b, nil
		}
		if !errors.Is(err, vmm.ErrOutOfMemory) || attempt > 0 || a.seeded(MutSpuriousOOM) {
			break
		}
		a.st.NumCacheFlushes++
		if a.p.debugOOM {
			a.dumpStateLocked(fmt.Sprintf("before release, alloc %d on s%d: %v", size, ss.s, err))
		}
		a.syncCappedLocked()        // frees past a fence cap become known safe (F6), as PyTorch waits here
		_ = a.releaseCachedLocked() // a failure here leaves less released; the retry tells
		if b := a.bestFitLocked(ss, pool, rs); b != nil {
			return &b.block, nil
		}
	}
	if !errors.Is(err, vmm.ErrOutOfMemory) {
		return nil, fmt.Errorf("gmlake: alloc of %d bytes on stream %d: %w", size, ss.s, err)
	}
	a.st.NumOOMs++
	if a.p.debugOOM {
		a.dumpStateLocked(fmt.Sprintf("OOM alloc %d on s%d: %v", size, ss.s, err))
	}
	return nil, a.oomErrLocked(size, rs, ss.s, err)
}

func (a *Allocator) oomErrLocked(size, rs vmm.Bytes, s vmm.Stream, cause error) error {
	free, _, ierr := a.d.MemInfo()
	if ierr != nil {
		free = 0
	}
	var c error
	if ce := (*vmm.CallError)(nil); errors.As(cause, &ce) {
		c = ce
	}
	return &OOMError{
		Requested: uint64(size), Rounded: uint64(rs), Reserved: a.st.ReservedBytes,
		Cached: a.st.ReservedBytes - min(a.st.ReservedBytes, a.st.AllocatedBytes), Live: a.st.AllocatedBytes,
		DeviceFree: uint64(free), Stream: s, Cause: c,
	}
}

// allocNewLocked gets a block for a miss: a cached sBlock, a new sBlock, or new memory.
func (a *Allocator) allocNewLocked(ss *streamState, pool poolKind, rs vmm.Bytes, retry bool) (*block, error) {
	stitch := a.p.stitch && pool == largePool && rs >= a.p.stitchMin
	if stitch {
		if sb := a.reuseSBlockLocked(ss, rs); sb != nil {
			return &sb.block, nil
		}
		if sb, ok, err := a.tryStitchLocked(ss, rs, retry); ok || err != nil {
			if err != nil {
				return nil, err
			}
			return &sb.block, nil
		}
	}
	var b *pBlock
	var err error
	if a.p.arena {
		b, err = a.arenaAllocLocked(ss, pool, rs, retry)
	} else {
		b, err = a.segmentAllocLocked(ss, pool, rs, retry)
	}
	if err != nil {
		return nil, err
	}
	return &b.block, nil
}

// --- fixed segments (caching, gmlake-paper) ---

// segmentAllocLocked makes a new fixed segment for rs (PyTorch's alloc_block); on the retry after releasing the
// cache it falls back to a segment of just rs rounded to the granularity, so no request fails while the
// device could hold it.
func (a *Allocator) segmentAllocLocked(ss *streamState, pool poolKind, rs vmm.Bytes, retry bool) (*pBlock, error) {
	size := alignUp(allocationSize(rs), a.gran)
	seg, err := a.newFixedSegmentLocked(ss, pool, size)
	if err != nil && retry && errors.Is(err, vmm.ErrOutOfMemory) && alignUp(rs, a.gran) < size {
		seg, err = a.newFixedSegmentLocked(ss, pool, alignUp(rs, a.gran))
	}
	if err != nil {
		return nil, err
	}
	return seg.head, nil
}

// newFixedSegmentLocked reserves, creates and maps a segment of size bytes whose single free block is returned
// as seg.head (not in the free set). Chunks: one handle (caching) or chunkMax pieces (gmlake-paper).
func (a *Allocator) newFixedSegmentLocked(ss *streamState, pool poolKind, size vmm.Bytes) (*segment, error) {
	piece := size
	if a.p.chunkMax != 0 && a.p.chunkMax < size {
		piece = a.p.chunkMax
	}
	base, err := a.d.Reserve(size)
	if err != nil {
		return nil, err
	}
	hs, err := a.createMappedLocked(base, size, piece, pool)
	if err != nil {
		a.undoReserveLocked(base, size)
		return nil, err
	}
	a.nextID++
	seg := &segment{id: a.nextID, base: base, size: size, ss: ss, pool: pool}
	for i, h := range hs {
		seg.insertChunk(&chunk{h: h, size: piece, seg: seg, off: vmm.Bytes(i) * piece})
	}
	b := a.newPBlockLocked()
	b.state, b.mapped = Free, true
	b.ptr, b.size, b.stream, b.pool, b.seg = base, size, ss.s, pool, seg
	if a.p.paper {
		b.ev = a.evNewLocked() // realloc_block's new Block
	}
	seg.head = b
	a.addSegmentLocked(seg)
	a.addReservedLocked(pool, size)
	a.noteSegmentsLocked(pool, 1)
	a.noteSegmentEventLocked(SegmentMap, seg, base, size)
	a.st.MappedBytes += uint64(size)
	return seg, nil
}

// createMappedLocked creates size/piece handles for pool, maps them side by side at base and sets access over
// the range. On failure it undoes everything it did and returns the error; on success the handles in address
// order.
func (a *Allocator) createMappedLocked(base vmm.DevicePtr, size, piece vmm.Bytes, pool poolKind) ([]vmm.Handle, error) {
	n := int(size / piece)
	hs := make([]vmm.Handle, 0, n)
	var err error
	for len(hs) < n {
		var h vmm.Handle
		if h, err = a.d.Create(piece); err != nil {
			break
		}
		hs = append(hs, h)
	}
	mapped := 0
	if err == nil {
		for mapped < n {
			if err = a.d.Map(at(base, vmm.Bytes(mapped)*piece), piece, hs[mapped], 0 /* offset */); err != nil {
				break
			}
			mapped++
		}
	}
	if err == nil {
		if err = a.setAccessLocked(base, size, piece); err == nil {
			return hs, nil
		}
	}
	for i := 0; i < mapped; i++ {
		a.undoMapLocked(at(base, vmm.Bytes(i)*piece), piece, hs[i])
	}
	for _, h := range hs {
		a.undoReleaseLocked(h, piece, pool)
	}
	return nil, err
}

// undoMapLocked unmaps [p, p+size) of handle h, a mapping a failed step made and will not keep, retried; one
// that still fails becomes an orphan mapping (Allocator.orphanMaps), counted in MappedBytes while it stands.
func (a *Allocator) undoMapLocked(p vmm.DevicePtr, size vmm.Bytes, h vmm.Handle) {
	if err := retry(func() error { return a.d.Unmap(p, size) }); err != nil {
		a.orphanMaps = append(a.orphanMaps, Mapping{VA: span(p, size), Handle: h})
		a.st.MappedBytes += uint64(size)
	}
}

// undoReleaseLocked releases a new handle h of size bytes for pool that a failed step created and will not
// keep, retried. One that stays on the device becomes a held orphan (Allocator.heldOrphans), counted in the
// reserved bytes until a later release of the cache or Close releases it (spec/FINDINGS.md F17): a handle
// whose release fails past the retries, and one an orphan mapping still maps (released, the device would
// keep its memory until the mapping goes, and the engine would have stopped counting it).
func (a *Allocator) undoReleaseLocked(h vmm.Handle, size vmm.Bytes, pool poolKind) {
	if !a.orphanMappedLocked(h) {
		if err := retry(func() error { return a.d.Release(h) }); err == nil {
			return
		}
	}
	a.heldOrphans = append(a.heldOrphans, heldOrphan{h: h, size: size, pool: pool})
	a.addReservedLocked(pool, size)
}

// orphanMappedLocked reports whether an orphan mapping maps handle h.
func (a *Allocator) orphanMappedLocked(h vmm.Handle) bool {
	return slices.ContainsFunc(a.orphanMaps, func(m Mapping) bool { return m.Handle == h })
}

// unmapOrphansLocked tries again to unmap the orphan mappings of the handles of (every one when of is nil):
// each that succeeds leaves MappedBytes. Returns the first error (those still failing stay).
func (a *Allocator) unmapOrphansLocked(of func(vmm.Handle) bool) error {
	var first error
	kept := a.orphanMaps[:0]
	for _, m := range a.orphanMaps {
		if of != nil && !of(m.Handle) {
			kept = append(kept, m)
			continue
		}
		if err := retry(func() error { return a.d.Unmap(m.VA.Base, sizeOf(m.VA)) }); err != nil {
			kept = append(kept, m)
			first = cmp.Or(first, err)
			continue
		}
		a.st.MappedBytes -= uint64(sizeOf(m.VA))
	}
	clear(a.orphanMaps[len(kept):])
	a.orphanMaps = kept
	return first
}

// undoReserveLocked frees the reservation [p, p+size) a failed step made and will not keep, retried; one that
// still fails, or in which an orphan mapping stands (the driver refuses to free a reservation with a mapping
// in it: docs/cuda-vmm.md rule 6, so the call is not made), becomes an orphan reservation, freed once the
// mapping goes (releaseHeldOrphansLocked) or at Close.
func (a *Allocator) undoReserveLocked(p vmm.DevicePtr, size vmm.Bytes) {
	r := span(p, size)
	if a.orphanMappedInLocked(r) {
		a.orphanResv = append(a.orphanResv, r)
		return
	}
	if err := retry(func() error { return a.d.FreeAddress(p, size) }); err != nil {
		a.orphanResv = append(a.orphanResv, r)
	}
}

// freeOrphanResvLocked tries again to free the orphan reservations no orphan mapping stands in (those it stands
// in are left: their mapping's unmap failed, and the driver refuses them). Returns the first error.
func (a *Allocator) freeOrphanResvLocked() error {
	var first error
	kept := a.orphanResv[:0]
	for _, r := range a.orphanResv {
		if a.orphanMappedInLocked(r) {
			kept = append(kept, r)
			continue
		}
		if err := retry(func() error { return a.d.FreeAddress(r.Base, sizeOf(r)) }); err != nil {
			kept = append(kept, r)
			first = cmp.Or(first, err)
		}
	}
	clear(a.orphanResv[len(kept):])
	a.orphanResv = kept
	return first
}

// orphanMappedInLocked reports whether an orphan mapping lies in the reservation r.
func (a *Allocator) orphanMappedInLocked(r vmm.Range) bool {
	return slices.ContainsFunc(a.orphanMaps, func(m Mapping) bool {
		return m.VA.Base >= r.Base && uint64(m.VA.Base)+m.VA.Size <= uint64(r.Base)+r.Size
	})
}

// --- arenas (expandable, gmlake) ---

func (a *Allocator) newArenaLocked(ss *streamState, pool poolKind) (*segment, error) {
	size := roundUp(a.total/arenaSlackDen*arenaSlackNum, a.quantum(pool))
	base, err := a.d.Reserve(size)
	if err != nil {
		return nil, err
	}
	a.nextID++
	seg := &segment{id: a.nextID, base: base, size: size, ss: ss, pool: pool, arena: true}
	u := a.newPBlockLocked()
	u.state, u.mapped = Free, false
	u.ptr, u.size, u.stream, u.pool, u.seg = base, size, ss.s, pool, seg
	seg.head = u
	seg.addUnmapped(u)
	as := ss.arenas[pool]
	i, _ := slices.BinarySearchFunc(as, base, func(s *segment, p vmm.DevicePtr) int { return cmp.Compare(s.base, p) })
	ss.arenas[pool] = slices.Insert(as, i, seg)
	a.addSegmentLocked(seg)
	return seg, nil
}

// dropFreshArenaLocked undoes newArenaLocked after the first mapping into seg failed (prepareMapLocked changed nothing, so seg is
// still one unmapped block): a failed request leaves no new reservation behind.
func (a *Allocator) dropFreshArenaLocked(seg *segment) {
	a.undoReserveLocked(seg.base, seg.size)
	a.dropEmptyArenaLocked(seg)
}

// dropEmptyArenaLocked forgets arena seg, whose only block is unmapped and whose reservation was returned.
func (a *Allocator) dropEmptyArenaLocked(seg *segment) {
	h := seg.head
	seg.dropUnmapped(h)
	a.dropSegmentLocked(seg)
	a.recycleLocked(h)
}

// arenaRunLocked is PyTorch's find_expandable_block over the stream's arenas of a pool, in address order: the
// first candidate run that holds rs bytes (arenaCandidateLocked) and how many of its bytes are mapped; nil when
// no arena has room, and the caller opens a new arena (every request fits in one: it reserves 9/8 of the
// device).
func (a *Allocator) arenaRunLocked(ss *streamState, pool poolKind, rs vmm.Bytes) (*pBlock, vmm.Bytes) {
	for _, seg := range ss.arenas[pool] {
		if c, mapped := a.arenaCandidateLocked(seg, rs); c != nil {
			return c, mapped
		}
	}
	return nil, 0
}

// arenaCandidateLocked is PyTorch's find_expandable_block: the lowest unmapped block (with the free block before
// it) that starts a run of free or unmapped blocks holding rs bytes. It also returns how many of the rs bytes
// the request takes from the run's start are mapped already (what mapping it saves: a mapped block beyond
// them saves nothing, so tryStitchLocked does not count it against a stitch).
func (a *Allocator) arenaCandidateLocked(seg *segment, rs vmm.Bytes) (*pBlock, vmm.Bytes) {
	for _, u := range seg.unmapped {
		c := u
		if p := u.prev; p != nil && p.state == Free {
			c = p
		}
		var have, mapped vmm.Bytes
		for b := c; b != nil && have < rs && b.state == Free; b = b.next {
			if b.mapped {
				mapped += min(b.size, rs-have)
			}
			have += b.size
		}
		if have >= rs {
			return c, mapped
		}
	}
	return nil, 0
}

// arenaAllocLocked is PyTorch's try_allocate_expandable_block: map what the candidate run lacks, then take it.
// The run may hold several unmapped stretches (between them free blocks whose memory was kept): every
// stretch's driver calls are made before any is committed, so a failure on a later one leaves the earlier
// ones unmapped too, and a failed request changes nothing (INV-FAILCLEAN; PyTorch's map_block keeps the
// stretches it mapped before the one that failed).
func (a *Allocator) arenaAllocLocked(ss *streamState, pool poolKind, rs vmm.Bytes, retry bool) (*pBlock, error) {
	c, _ := a.arenaRunLocked(ss, pool, rs)
	var fresh *segment // an arena opened for this request: returned if the request fails
	if c == nil {
		seg, err := a.newArenaLocked(ss, pool)
		if err != nil {
			return nil, err
		}
		c, fresh = seg.head, seg
	}
	gs := a.growths[:0]
	var err error
	have := vmm.Bytes(0)
	for b := c; have < rs; b = b.next {
		if b == nil || b.state != Free {
			panicf("arena run broken after block %d", c.id)
		}
		if b.mapped {
			have += b.size
			continue
		}
		var g growth
		if g, err = a.prepareMapLocked(b, min(b.size, rs-have), retry); err != nil {
			break
		}
		gs = append(gs, g)
		have += g.sz
	}
	if err != nil {
		for _, g := range gs {
			a.undoGrowthLocked(g)
		}
	} else {
		for _, g := range gs {
			c = a.commitMapLocked(g) // the last commit's block has merged the whole run
		}
	}
	clear(gs)
	a.growths = gs[:0]
	if err != nil {
		if fresh != nil {
			a.dropFreshArenaLocked(fresh)
		}
		return nil, err
	}
	if c.size < rs {
		panicf("arena run at block %d holds %d bytes after mapping, want %d", c.id, c.size, rs)
	}
	ss.free[pool].remove(c)
	return c, nil
}

// quantum is the size one growth of an arena maps in: the page size (expandable) or the granularity.
func (a *Allocator) quantum(pool poolKind) vmm.Bytes {
	if a.p.pageSmall != 0 {
		if pool == smallPool {
			return a.p.pageSmall
		}
		return a.p.pageLarge
	}
	return a.gran
}

// growth is the driver half of one mapping into an arena (prepareMapLocked): the handles created, mapped side
// by side at the start of unmapped block u and given access, but not yet the engine's (commitMapLocked).
// Between the two halves the device holds memory the engine's structures do not show: a caller either
// commits or undoes (undoGrowthLocked) before it returns.
type growth struct {
	u      *pBlock
	sz     vmm.Bytes // bytes mapped at u.ptr: at most u.size
	chunks []*chunk  // the new chunks in address order, not yet in u.seg
}

// prepareMapLocked makes the driver calls of one mapping into an arena: physical memory at the start of
// unmapped arena block u, enough for n bytes rounded up to the quantum (at most u.size; on the retry after
// releasing the cache, retry, to the granularity only), as pages of the page size (expandable) or one chunk of
// the whole size (gmlake, in pieces of at most chunkMax). It creates the handles, maps them at u.ptr and sets
// access. On failure it undoes them (nothing changed); on success the engine's structures are untouched
// (commitMapLocked makes the mapped block the engine's: it merges with free neighbours and joins the free set).
func (a *Allocator) prepareMapLocked(u *pBlock, n vmm.Bytes, retry bool) (growth, error) {
	seg := u.seg
	q := a.quantum(seg.pool)
	sz := min(roundUp(n, q), u.size)
	if retry {
		// After releasing the cache, map no more than the granularity requires: a last page shorter than
		// the page size rather than a spurious out-of-memory.
		sz = min(roundUp(n, a.gran), u.size)
	}
	piece := sz
	if a.p.pageSmall != 0 {
		piece = q
	} else if a.p.chunkMax != 0 && a.p.chunkMax < sz {
		piece = a.p.chunkMax
	}
	// The last piece may be shorter when sz is not a multiple of piece.
	g := growth{u: u, sz: sz}
	var err error
	off := vmm.Bytes(u.ptr - seg.base)
	for done := vmm.Bytes(0); done < sz; {
		ps := min(piece, sz-done)
		var h vmm.Handle
		if h, err = a.d.Create(ps); err != nil {
			break
		}
		g.chunks = append(g.chunks, &chunk{h: h, size: ps, seg: seg, off: off + done})
		done += ps
	}
	mapped := 0
	if err == nil {
		for _, c := range g.chunks {
			if err = a.d.Map(at(seg.base, c.off), c.size, c.h, 0 /* offset */); err != nil {
				break
			}
			mapped++
		}
	}
	if err == nil {
		err = a.d.SetAccess(u.ptr, sz)
	}
	if err != nil {
		a.undoChunksLocked(g.chunks, mapped)
		return growth{}, err
	}
	return g, nil
}

// undoGrowthLocked undoes the driver calls of a prepared growth that will not be committed.
func (a *Allocator) undoGrowthLocked(g growth) { a.undoChunksLocked(g.chunks, len(g.chunks)) }

// undoChunksLocked unmaps the first mapped of new chunks cs (not the engine's yet) and releases them all.
func (a *Allocator) undoChunksLocked(cs []*chunk, mapped int) {
	for _, c := range cs[:mapped] {
		a.undoMapLocked(at(c.seg.base, c.off), c.size, c.h)
	}
	for _, c := range cs {
		a.undoReleaseLocked(c.h, c.size, c.seg.pool)
	}
}

// commitMapLocked makes a prepared growth the engine's: u's first g.sz bytes become a mapped free block, merged
// with its free neighbours and in the free set; it returns that block.
func (a *Allocator) commitMapLocked(g growth) *pBlock {
	u, sz := g.u, g.sz
	seg := u.seg
	seg.dropUnmapped(u)
	if sz < u.size {
		r := a.newPBlockLocked()
		r.state, r.mapped = Free, false
		r.ptr, r.size, r.stream, r.pool, r.seg = at(u.ptr, sz), u.size-sz, u.stream, u.pool, seg
		r.prev, r.next = u, u.next
		if u.next != nil {
			u.next.prev = r
		}
		u.next = r
		u.size = sz
		seg.addUnmapped(r)
	}
	u.mapped = true
	u.freeSeq = 0
	for _, c := range g.chunks {
		seg.insertChunk(c)
	}
	a.addReservedLocked(seg.pool, sz)
	a.noteSegmentsLocked(seg.pool, mappedRunDelta(u))
	a.noteSegmentEventLocked(SegmentMap, seg, u.ptr, sz)
	a.st.MappedBytes += uint64(sz)
	m := u
	if !a.seeded(MutNoMerge) {
		m = a.mergeFreeLocked(u)
	}
	seg.ss.free[seg.pool].insert(m)
	return m
}

// --- stitching (gmlake, gmlake-paper) ---

// stitchableLocked lists the chunks that lie wholly inside free large-pool pBlocks usable by ss: its own, and
// (cross-stream policy) other streams' whose frees completed. Largest first, then by stream and address.
func (a *Allocator) stitchableLocked(ss *streamState) []*chunk {
	out := a.cands[:0]
	add := func(st *streamState) {
		st.free[largePool].eachFrom(a.gran, func(b *pBlock) bool {
			seg := b.seg
			lo := b.segOff()
			hi := lo + b.size
			for _, c := range seg.chunksOver(lo, hi) {
				whole := c.off >= lo && c.off+c.size <= hi
				if st != ss && !a.safeLocked(st, c.freeSeq) {
					continue // its last use on st may still run
				}
				if whole || (a.seeded(MutMapChunkTwice) && c.off >= lo) {
					out = append(out, c)
				}
			}
			return true
		})
	}
	add(ss)
	for _, pe := range a.pend {
		if pe.ev != 0 || pe.last || pe.st != ss {
			continue
		}
		for _, x := range pe.blocks { // the parts of ss's freed sBlocks that wait for ss
			if b := x.p; waitsOnlyFor(b, ss) && b.xseq == pe.seq {
				seg := b.seg
				out = append(out, seg.chunksOver(b.segOff(), b.segOff()+b.size)...)
			}
		}
	}
	if a.p.crossStream {
		for _, st := range a.poolStreamsLocked(ss) { // never another pool's chunks (INV-POOL)
			if st != ss && st.free[largePool].n > 0 {
				add(st)
			}
		}
	}
	slices.SortStableFunc(out, func(x, y *chunk) int {
		switch {
		case x.size > y.size:
			return -1
		case x.size < y.size:
			return 1
		}
		return 0
	})
	a.cands = out
	return out
}

// dropCandsLocked empties the candidate scratch after a stitch decided: no stale chunk pointer outlives the
// call (a chunk released later would otherwise stay reachable from the Allocator).
func (a *Allocator) dropCandsLocked(cands []*chunk) {
	clear(cands)
	a.cands = cands[:0]
}

// tryStitchLocked serves rs by stitching free chunks into a new sBlock when that grows the reserved memory less
// than growing would (gmlake; gmlake-paper stitches by its own rule, paperStitchLocked).
// ok says whether it stitched; err reports a driver failure (nothing changed).
func (a *Allocator) tryStitchLocked(ss *streamState, rs vmm.Bytes, retry bool) (b *sBlock, ok bool, err error) {
	cands := a.stitchableLocked(ss)
	defer a.dropCandsLocked(cands)
	if len(cands) == 0 {
		return nil, false, nil
	}
	need := alignUp(rs, a.gran)
	rem := need
	chosen := make([]*chunk, 0, 8)
	taken := make([]bool, len(cands))
	for i, c := range cands {
		if len(chosen) >= a.p.maxPieces || rem == 0 {
			break
		}
		if c.size <= rem {
			chosen = append(chosen, c)
			taken[i] = true
			rem -= c.size
		}
	}
	if rem > 0 && len(chosen) < a.p.maxPieces {
		// The smallest chunk not taken that covers the rest: no new memory, some slack in the block.
		for i := len(cands) - 1; i >= 0; i-- {
			if !taken[i] && cands[i].size >= rem {
				chosen = append(chosen, cands[i])
				rem = 0
				break
			}
		}
	}
	if len(chosen) == 0 {
		return nil, false, nil
	}
	var grown growth   // new memory for the rest, prepared: committed or undone by buildSBlockLocked
	var fresh *segment // an arena opened for it: returned if the stitch fails
	{
		// Grow instead unless stitching saves at least stitchSave bytes of growth: a stitch maps (and one
		// day unmaps) every chunk it views, and small savings do not pay for that.
		grow := need
		if c, mapped := a.arenaRunLocked(ss, largePool, rs); c != nil {
			grow = alignUp(rs-min(rs, mapped), a.gran)
		}
		save := a.p.stitchSave
		if retry {
			save = 0 // after releasing the cache, any saving may be what makes the request fit
		}
		// One whole chunk of ss's own pool would have been found by best fit; one of another stream's is a
		// cross-stream reuse through a view.
		if rem+save >= grow || (len(chosen) == 1 && rem == 0 && chosen[0].seg.ss == ss) {
			return nil, false, nil
		}
		if rem > 0 {
			if grown, fresh, err = a.arenaChunksLocked(ss, rem, retry); err != nil {
				return nil, false, err
			}
			chosen = append(chosen, grown.chunks...)
		}
	}
	// Map in address order of the sources: deterministic, and neighbours stay neighbours.
	slices.SortFunc(chosen, func(x, y *chunk) int {
		px, py := at(x.seg.base, x.off), at(y.seg.base, y.off)
		switch {
		case px < py:
			return -1
		case px > py:
			return 1
		}
		return 0
	})
	g := &grown
	if len(grown.chunks) == 0 {
		g = nil
	}
	sb, err := a.buildSBlockLocked(ss, chosen, g)
	if err != nil {
		if fresh != nil {
			a.dropFreshArenaLocked(fresh) // buildSBlockLocked undid the growth: fresh is one unmapped block again
		}
		return nil, false, err
	}
	return sb, true, nil
}

// arenaChunksLocked prepares new memory of size bytes in ss's large arena, to be stitched (in pieces of at most
// chunkMax, like any growth): its driver calls are made, and buildSBlockLocked commits it (it then lies free
// in the arena, held by the stitch) or undoes it. fresh is the arena opened for it, if any: the caller
// returns it when the stitch fails.
func (a *Allocator) arenaChunksLocked(ss *streamState, size vmm.Bytes, retry bool) (g growth, fresh *segment, err error) {
	var u *pBlock
	for _, seg := range ss.arenas[largePool] {
		for _, x := range seg.unmapped {
			if x.size >= size {
				u = x
				break
			}
		}
		if u != nil {
			break
		}
	}
	if u == nil {
		seg, err := a.newArenaLocked(ss, largePool)
		if err != nil {
			return growth{}, nil, err
		}
		u, fresh = seg.head, seg
	}
	if g, err = a.prepareMapLocked(u, size, retry); err != nil {
		if fresh != nil {
			a.dropFreshArenaLocked(fresh)
		}
		return growth{}, nil, err
	}
	return g, fresh, nil
}

// buildSBlockLocked reserves a range, maps chunks side by side into it, sets access, and holds the pBlocks under
// the chunks. grown, if not nil, is new memory prepared for the stitch (arenaChunksLocked), whose chunks are
// among chunks: committed once the view is mapped. On a driver failure it undoes its mappings and reservation
// and the prepared growth (the other chunks stay where they were): a failed stitch changes nothing.
func (a *Allocator) buildSBlockLocked(ss *streamState, chunks []*chunk, grown *growth) (*sBlock, error) {
	var total vmm.Bytes
	for _, c := range chunks {
		total += c.size
	}
	base, err := a.d.Reserve(total)
	if err != nil {
		if grown != nil {
			a.undoGrowthLocked(*grown)
		}
		return nil, err
	}
	off := vmm.Bytes(0)
	mapped := 0
	for _, c := range chunks {
		if err = a.d.Map(at(base, off), c.size, c.h, 0 /* offset */); err != nil {
			break
		}
		off += c.size
		mapped++
	}
	if err == nil && !a.seeded(MutSkipSetAccessStitched) {
		err = a.setAccessLocked(base, total, chunks[0].size)
	}
	if err != nil {
		if !a.seeded(MutLeakOnStitchFailure) {
			off = 0
			for i := 0; i < mapped; i++ {
				a.undoMapLocked(at(base, off), chunks[i].size, chunks[i].h)
				off += chunks[i].size
			}
			a.undoReserveLocked(base, total)
		}
		if grown != nil {
			a.undoGrowthLocked(*grown)
		}
		return nil, err
	}
	if grown != nil {
		a.commitMapLocked(*grown)
	}
	sb := a.newSBlockLocked() // Free: cached until allocLocked hands it out
	sb.home = ss
	sb.ptr, sb.size, sb.stream, sb.pool = base, total, ss.s, largePool
	sb.resv = span(base, total)
	sb.chunks = append(sb.chunks[:0], chunks...)
	for _, c := range chunks {
		c.views++
	}
	if a.seeded(MutRefcountOffByOne) {
		chunks[0].refOff++
	}
	sb.sIndex = sblockIdx(len(a.sblocks))
	a.sblocks = append(a.sblocks, sb)
	a.st.MappedBytes += uint64(total)
	a.st.NumStitches++
	a.holdPartsLocked(sb)
	return sb, nil
}

// chunkFreeLocked reports whether chunk c lies wholly in a free pBlock usable on stream ss.
func (a *Allocator) chunkFreeLocked(c *chunk, ss *streamState) bool {
	a.assertLocked()
	b := c.seg.blockAt(c.off)
	if waitsOnlyFor(b, ss) {
		return true // a part of ss's own cached sBlock: reuse on ss is stream-ordered
	}
	if b.state != Free || !b.mapped || b.segOff()+b.size < c.off+c.size {
		return false
	}
	return b.seg.ss == ss || a.safeLocked(b.seg.ss, c.freeSeq)
}

// waitsOnlyFor reports whether b is the part of an sBlock freed on ss that waits only for ss's work: ss may
// take it at once (stream order), other streams only after the wait.
func waitsOnlyFor(b *pBlock, ss *streamState) bool {
	return b.state == Pending && b.xwait == ss && b.events == 1
}

// holdPartsLocked carves, for each chunk of sb, the pBlock exactly under it out of its free block, and marks it
// held by sb (Live, not handed out). Every chunk must lie wholly in a free block (checked by the caller).
func (a *Allocator) holdPartsLocked(sb *sBlock) {
	sb.parts = sb.parts[:0]
	home := sb.home
	held := vmm.Bytes(0)
	for _, c := range sb.chunks {
		if held >= sb.size {
			break // gmlake-paper: a reused sBlock holds only the pieces under the request (paperReuseLocked)
		}
		held += c.size
		b := c.seg.blockAt(c.off)
		if home != nil && waitsOnlyFor(b, home) {
			// Still waiting for sb's own stream: taken back by that stream, its wait is dropped (its entry
			// in pend goes at the next pass).
			b.xwait, b.events = nil, 0
			a.staleWaits = true
			b.state = Live
			b.heldBy = sb
			sb.parts = append(sb.parts, b)
			continue
		}
		if b.state != Free || !b.mapped {
			if a.seeded(MutMapChunkTwice) {
				continue
			}
			panicf("chunk %d to hold is not free (block %d %v)", c.h, b.id, b.state)
		}
		lo, hi := b.segOff(), b.segOff()+b.size
		if c.off+c.size > hi {
			if a.seeded(MutMapChunkTwice) {
				continue
			}
			panicf("chunk %d not inside free block %d", c.h, b.id)
		}
		b.seg.ss.free[b.pool].remove(b)
		if c.off > lo { // keep the left part free
			a.splitLocked(b, c.off-lo)
			left := b
			b = b.next
			b.seg.ss.free[b.pool].remove(b)
			left.seg.ss.free[left.pool].insert(left)
		}
		if b.size > c.size {
			a.splitLocked(b, c.size)
		}
		b.state = Live
		b.heldBy = sb
		sb.parts = append(sb.parts, b)
	}
}

// reuseSBlockLocked serves rs from a cached sBlock of ss whose chunks are all free: the smallest that fits, at
// most max(reuseLimit/4 times the request, the request + 2 granules) (gmlake: 1.25x, but 2x at a 4 MiB
// request and 1.25x only from 16 MiB; gmlake-paper 10x, GMLake's reuseLimit). No driver calls.
func (a *Allocator) reuseSBlockLocked(ss *streamState, rs vmm.Bytes) *sBlock {
	limit := max(rs/4*vmm.Bytes(a.p.reuseLimit), rs+2*a.gran)
	var best *sBlock
	for _, sb := range a.sblocks {
		if sb.state != Free || sb.home != ss || sb.size < rs || sb.size > limit {
			continue
		}
		if best != nil && sb.size >= best.size {
			continue
		}
		ok := true
		for _, c := range sb.chunks {
			if !a.chunkFreeLocked(c, ss) {
				ok = false
				break
			}
		}
		if ok {
			best = sb
		}
	}
	if best == nil {
		return nil
	}
	a.holdPartsLocked(best)
	a.st.NumStitchReuses++
	return best
}

// freeSBlockLocked caches sb and gives its parts back: parts of ss's own pools are free at once (stream order);
// parts of other streams' pools wait until sb's stream has finished the work submitted so far.
func (a *Allocator) freeSBlockLocked(sb *sBlock) {
	sb.state = Free
	sb.size = sizeOf(sb.resv) // a partly held sBlock (paperReuseLocked) is cached whole
	sb.uses = sb.uses[:0]
	sb.events = 0
	a.stampFreeLocked(&sb.block)
	a.clock++
	sb.lastUse = a.clock
	home := sb.home
	var foreign []*block
	if n := len(a.spareParts); n > 0 {
		foreign, a.spareParts = a.spareParts[n-1], a.spareParts[:n-1]
	}
	for i, pb := range sb.parts {
		sb.parts[i] = nil
		pb.heldBy = nil
		if pb.stream != sb.stream && !a.seeded(MutEarlyCrossStreamReuse) {
			pb.state = Pending
			pb.events = 1
			pb.xwait, pb.xseq = home, sb.freeSeq
			foreign = append(foreign, &pb.block)
			continue
		}
		// One free: the parts' last use was sb's, so they are stamped with sb's free (one fence covers
		// them all) rather than counted as later frees of their own.
		pb.freeSeq, pb.stamped = sb.freeSeq, true
		if a.p.paper {
			a.evShareNewerLocked(pb, sb) // GMLake's update_block: the part takes the sBlock's event if newer
		}
		a.freeBlockLocked(&pb.block)
	}
	sb.parts = sb.parts[:0]
	if home != nil {
		a.noteFreeLocked(home) // StitchFree needs to know when the view's last use completed
	}
	if len(foreign) > 0 {
		a.pend = append(a.pend, pendingEv{st: home, seq: sb.freeSeq, blocks: foreign})
	} else if foreign != nil {
		a.spareParts = append(a.spareParts, foreign)
	}
	a.trimSBlocksLocked()
}

// trimSBlocksLocked tears down least recently used cached sBlocks beyond the cache limit, once the work that
// used them completed (StitchFree).
func (a *Allocator) trimSBlocksLocked() {
	if a.p.sblockCache < 0 {
		return
	}
	for {
		n := 0
		var lru *sBlock
		for _, sb := range a.sblocks {
			if sb.state == Free && !sb.home.keepsMemory() { // a live pool's views stay (INV-POOL)
				n++
				if lru == nil || sb.lastUse < lru.lastUse {
					lru = sb
				}
			}
		}
		if n <= a.p.sblockCache || lru == nil {
			return
		}
		if !a.safeLocked(lru.home, lru.freeSeq) || a.stitchFreeLocked(lru) != nil {
			return
		}
	}
}

// stitchFreeLocked unmaps a cached sBlock's view and returns its range. On an unmap failure nothing changes.
func (a *Allocator) stitchFreeLocked(sb *sBlock) error {
	if err := a.d.Unmap(sb.resv.Base, sizeOf(sb.resv)); err != nil {
		return err
	}
	for _, c := range sb.chunks {
		c.views--
	}
	a.st.MappedBytes -= uint64(sizeOf(sb.resv))
	a.undoReserveLocked(sb.resv.Base, sizeOf(sb.resv))
	last := sblockIdx(len(a.sblocks) - 1)
	a.sblocks[sb.sIndex] = a.sblocks[last]
	a.sblocks[sb.sIndex].sIndex = sb.sIndex
	a.sblocks[last] = nil
	a.sblocks = a.sblocks[:last]
	a.st.NumStitchFrees++
	a.forgetBlockLocked(&sb.block)
	return nil
}
