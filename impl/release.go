package impl

// Giving memory back: EmptyCache and the out-of-memory path (releaseCachedLocked), and Close.

import (
	"cmp"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// releaseCachedLocked is PyTorch's release_cached_blocks, extended to sBlocks: every cached sBlock is torn down
// (StitchFree), every wholly free fixed segment released, every free chunk of an arena unmapped and
// released. Only memory whose last use completed is touched, and none of a private pool that lives
// (INV-POOL). Returns the first driver error, an address it could not free included.
func (a *Allocator) releaseCachedLocked() error {
	a.assertLocked()
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	note(a.flushDeferredLocked())
	if a.deadPools {
		a.drainDeadLocked() // a released pool's memory waits for its graphs' replays (pool.go)
	}
	a.processEventsLocked(nil)
	note(a.releaseHeldOrphansLocked())
	for i := 0; i < len(a.sblocks); {
		sb := a.sblocks[i]
		if sb.state == Free && !sb.home.keepsMemory() && a.safeLocked(sb.home, sb.freeSeq) {
			if err := a.stitchFreeLocked(sb); err != nil {
				note(err)
				i++
			}
			continue
		}
		i++
	}
	for _, seg := range slices.Clone(a.segs) {
		if seg.ss.keepsMemory() {
			if seg.arena {
				// A living pool keeps its memory, not an arena with none mapped (a released pool created
				// again after its arena's address free failed): nobody needs the range.
				note(a.returnEmptyArenaLocked(seg))
			}
			continue
		}
		if seg.arena {
			note(a.trimArenaLocked(seg))
		} else {
			note(a.releaseSegmentIfFreeLocked(seg))
		}
	}
	if a.deadPools {
		a.forgetEmptyPoolsLocked()
	}
	// A segment released or an sBlock torn down above whose address free failed past its retries left an
	// orphan reservation (undoReserveLocked): try it again now and report it, or EmptyCache would succeed
	// with a reservation left that nothing maps (INV-EMPTIED; F18).
	note(a.freeOrphanResvLocked())
	return first
}

// releaseSegmentIfFreeLocked releases a fixed segment that is one free block with no chunk viewed by an sBlock.
func (a *Allocator) releaseSegmentIfFreeLocked(seg *segment) error {
	h := seg.head
	if h.state != Free || h.next != nil {
		return nil
	}
	for _, c := range seg.chunks {
		if c.views > 0 {
			return nil
		}
	}
	if !a.safeLocked(seg.ss, h.freeSeq) {
		return nil
	}
	if err := a.d.Unmap(seg.base, seg.size); err != nil {
		return err
	}
	var first error
	released := seg.size
	for _, c := range seg.chunks {
		if err := a.releaseCachedChunkLocked(c.h, c.size, seg.pool); err != nil {
			released -= c.size
			if first == nil {
				first = err
			}
		}
	}
	a.st.ReservedBytes -= uint64(released)
	a.noteReservedLocked(seg.pool, -int64(released))
	a.noteSegmentsLocked(seg.pool, -1)
	a.noteSegmentEventLocked(SegmentUnmap, seg, seg.base, seg.size)
	a.st.MappedBytes -= uint64(seg.size)
	seg.ss.free[h.pool].remove(h)
	a.undoReserveLocked(seg.base, seg.size)
	a.dropSegmentLocked(seg)
	a.recycleLocked(h)
	return first
}

// releaseCachedChunkLocked releases the handle of a cached chunk just unmapped, retried; one that still fails
// becomes a held orphan (Allocator.heldOrphans): the caller keeps its size in the reserved bytes, and the error
// is the caller's to report (PyTorch's emptyCache raises the driver's error).
func (a *Allocator) releaseCachedChunkLocked(h vmm.Handle, size vmm.Bytes, pool poolKind) error {
	// An orphan mapping of a failed stitch over this chunk would keep its memory on the device after the
	// release: it goes first, and while it stands the chunk is a held orphan too.
	err := a.unmapOrphansLocked(func(x vmm.Handle) bool { return x == h })
	if err == nil {
		err = retry(func() error { return a.d.Release(h) })
	}
	if err != nil {
		a.heldOrphans = append(a.heldOrphans, heldOrphan{h: h, size: size, pool: pool})
	}
	return err
}

// releaseHeldOrphansLocked tries again what earlier steps could not give back: the orphan mappings first (each
// unmapped leaves MappedBytes), then the held orphans no orphan mapping maps any more (each released leaves
// the reserved bytes), then the orphan reservations. Returns the first error (what still fails stays).
func (a *Allocator) releaseHeldOrphansLocked() error {
	first := a.unmapOrphansLocked(nil)
	kept := a.heldOrphans[:0]
	for _, o := range a.heldOrphans {
		if a.orphanMappedLocked(o.h) {
			kept = append(kept, o) // still mapped: its unmap's error is reported above
			continue
		}
		if err := retry(func() error { return a.d.Release(o.h) }); err != nil {
			kept = append(kept, o)
			if first == nil {
				first = err
			}
			continue
		}
		a.st.ReservedBytes -= uint64(o.size)
		a.noteReservedLocked(o.pool, -int64(o.size))
	}
	clear(a.heldOrphans[len(kept):])
	a.heldOrphans = kept
	return cmp.Or(first, a.freeOrphanResvLocked()) // an orphan mapping's failed unmap is reported above
}

// trimArenaLocked unmaps and releases every chunk of seg that lies wholly in a free block and is viewed by no
// sBlock (PyTorch's unmap_block on every free block of an expandable segment); an arena left with nothing
// mapped returns its reservation.
func (a *Allocator) trimArenaLocked(seg *segment) error {
	var first error
	frees := a.scratch[:0]
	for b := seg.head; b != nil; b = b.next {
		if b.state == Free && b.mapped && b.size >= a.gran {
			frees = append(frees, b)
		}
	}
	for _, b := range frees {
		if err := a.unmapFreeChunksLocked(b); err != nil && first == nil {
			first = err
		}
	}
	clear(frees)
	a.scratch = frees[:0]
	if err := a.returnEmptyArenaLocked(seg); err != nil && first == nil {
		first = err
	}
	return first
}

// returnEmptyArenaLocked returns the reservation of arena seg if nothing is mapped in it, and forgets seg. On a
// failed address free nothing changes.
func (a *Allocator) returnEmptyArenaLocked(seg *segment) error {
	if h := seg.head; h.mapped || h.next != nil {
		return nil
	}
	if err := a.d.FreeAddress(seg.base, seg.size); err != nil {
		return err
	}
	a.dropEmptyArenaLocked(seg)
	return nil
}

// unmapFreeChunksLocked unmaps the unviewed chunks lying wholly in free mapped block b, which stays a valid block
// (possibly shorter, possibly now unmapped).
func (a *Allocator) unmapFreeChunksLocked(b *pBlock) error {
	seg := b.seg
	fs := &seg.ss.free[b.pool]
	lo, hi := b.segOff(), b.segOff()+b.size
	var todo []*chunk
	for _, c := range seg.chunksOver(lo, hi) {
		if c.off >= lo && c.off+c.size <= hi && c.views == 0 && a.safeLocked(seg.ss, c.freeSeq) {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	fs.remove(b)
	cur := b
	var relErr error // a release that failed past its retries: the chunk is a held orphan, still reserved
	for _, c := range todo {
		if err := a.d.Unmap(at(seg.base, c.off), c.size); err != nil {
			fs.insert(cur)
			return cmp.Or(relErr, err)
		}
		err := a.releaseCachedChunkLocked(c.h, c.size, seg.pool)
		seg.removeChunk(c)
		if err == nil {
			a.st.ReservedBytes -= uint64(c.size)
			a.noteReservedLocked(seg.pool, -int64(c.size))
		} else if relErr == nil {
			relErr = err
		}
		a.noteSegmentEventLocked(SegmentUnmap, seg, at(seg.base, c.off), c.size)
		a.st.MappedBytes -= uint64(c.size)
		var left *pBlock
		if off := cur.segOff(); c.off > off {
			a.splitLocked(cur, c.off-off) // the left part stays free and mapped (split inserted the right part)
			left = cur
			cur = cur.next
			fs.remove(cur)
		}
		var rest *pBlock
		if cur.size > c.size {
			a.splitLocked(cur, c.size)
			rest = cur.next
			fs.remove(rest)
		}
		a.noteSegmentsLocked(seg.pool, -mappedRunDelta(cur))
		cur.mapped = false
		cur.freeSeq = 0
		if left != nil {
			fs.insert(left) // once cur is unmapped: the free sets count split blocks by their neighbours
		}
		a.mergeFreeLocked(cur)
		if rest == nil {
			return relErr
		}
		cur = rest
	}
	fs.insert(cur)
	return relErr
}

// Close releases everything the allocator holds, live or cached, and reports what was still live. Later
// calls return ErrClosed. It returns the first driver error; it releases all it can regardless.
func (a *Allocator) Close() (CloseReport, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return CloseReport{}, ErrClosed
	}
	rep := CloseReport{Live: a.liveInfosLocked()}
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	// stuck: the handles a stitched block's mapping still maps after its unmap failed for good. Released, the
	// device keeps their memory while that mapping stands (it outlives the engine), so the report does not
	// count them as returned, nor those an orphan mapping left standing maps (spec/FINDINGS.md F20).
	stuck := map[vmm.Handle]bool{}
	var released []*chunk // the segments' chunks released, counted once the orphan mappings had their try
	for _, sb := range a.sblocks {
		if err := retry(func() error { return a.d.Unmap(sb.resv.Base, sizeOf(sb.resv)) }); err != nil {
			note(err)
			for _, c := range sb.chunks {
				stuck[c.h] = true
			}
			continue
		}
		note(retry(func() error { return a.d.FreeAddress(sb.resv.Base, sizeOf(sb.resv)) }))
	}
	for _, seg := range a.segs {
		if a.seeded(MutLeakOnClose) && !segInUse(seg) {
			continue
		}
		ok := true
		for _, c := range seg.chunks {
			if err := retry(func() error { return a.d.Unmap(at(seg.base, c.off), c.size) }); err != nil {
				note(err)
				ok = false
				continue
			}
			if err := retry(func() error { return a.d.Release(c.h) }); err != nil {
				note(err)
				continue
			}
			released = append(released, c)
		}
		if ok {
			note(retry(func() error { return a.d.FreeAddress(seg.base, seg.size) }))
		}
	}
	note(a.unmapOrphansLocked(nil)) // what still fails stays in orphanMaps: its reservation is not freed
	for _, c := range released {
		if !stuck[c.h] && !a.orphanMappedLocked(c.h) {
			rep.ReleasedBytes += uint64(c.size)
		}
	}
	for _, o := range a.heldOrphans {
		if err := retry(func() error { return a.d.Release(o.h) }); err != nil {
			note(err)
			continue
		}
		if !stuck[o.h] && !a.orphanMappedLocked(o.h) {
			rep.ReleasedBytes += uint64(o.size)
		}
	}
	note(a.freeOrphanResvLocked())
	for _, pe := range a.pend {
		if pe.ev != 0 {
			note(a.d.DestroyEvent(pe.ev))
		}
	}
	// The fences and last events of every (stream, pool) state: the default pool's and each private pool's
	// (a pool's states hold events too, found by rapid through harness/ops's pool op).
	states := a.sortedStreamsLocked()
	pools := make([]PoolID, 0, len(a.pools))
	for id := range a.pools {
		pools = append(pools, id)
	}
	slices.SortFunc(pools, func(x, y PoolID) int { return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.B, y.B)) })
	for _, id := range pools {
		states = append(states, a.pools[id].order...)
	}
	for _, ss := range states {
		for _, f := range ss.fences {
			note(a.d.DestroyEvent(f.ev))
		}
		if ss.lastEv != 0 {
			note(a.d.DestroyEvent(ss.lastEv))
		}
	}
	for _, e := range a.evFree {
		note(a.d.DestroyEvent(e))
	}
	note(a.evCloseAllLocked())
	a.closed = true
	a.segs, a.sblocks, a.pend, a.evFree = nil, nil, nil, nil
	a.orphanMaps, a.orphanResv, a.heldOrphans = nil, nil, nil
	a.streams = map[vmm.Stream]*streamState{}
	a.order = nil
	a.pools, a.deadPools, a.capturing, a.nCapturing, a.deferred = nil, false, nil, 0, nil
	a.last = nil
	a.ptrs.clear()
	a.st.RequestedBytes, a.st.AllocatedBytes, a.st.ReservedBytes, a.st.MappedBytes, a.st.NumLive = 0, 0, 0, 0, 0
	for _, s := range a.ts.all() {
		for i := range s {
			s[i].cur = 0 // everything went back
		}
	}
	a.ts.pending, a.ts.pendingBytes = [3]int64{}, [3]int64{}
	return rep, first
}

// segInUse reports whether any block of seg is live, held or pending.
func segInUse(seg *segment) bool {
	for b := seg.head; b != nil; b = b.next {
		if b.state != Free {
			return true
		}
	}
	return false
}
