package impl

// gmlake-paper: the original GMLake, rule by rule, read side by side with GLake's source
// (intelligent-machine-learning/glake, GMLake/src/CUDACachingAllocator.cpp and GMLake/include/
// cuda_vmm_allocator.h). Each function names the GLake function it reproduces; paper_test.go has a scenario
// per rule. See doc.go ("gmlake-paper") for the summary and for where this code departs from GLake and why.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// paperMissLocked is the miss path of GMLake's DeviceCachingAllocator::malloc, after get_free_block missed:
//
//	get_free_block's stitched-block branch (paperReuseLocked)
//	|| get_fused_fragmented_blocks(p, 0)
//	|| realloc_block(p, false)
//	|| get_fused_fragmented_blocks(p, 1)
//	|| (release_cached_blocks() && realloc_block(p, true))
//	|| get_fused_fragmented_blocks(p, 2)
//
// then out of memory. Stitch attempts below defragLevel are skipped. There is no smaller-segment fallback:
// the retry asks for the same segment. (release_available_cached_blocks frees oversize blocks only when
// max_split_size is set, which GMLake's defaults leave unset: a no-op, left out.)
func (a *Allocator) paperMissLocked(ss *streamState, pool poolKind, rs, size vmm.Bytes) (*block, error) {
	if pool == largePool {
		if sb := a.paperReuseLocked(ss, rs); sb != nil {
			return &sb.block, nil
		}
	}
	if sb := a.paperStitchLocked(ss, pool, rs, 0); sb != nil {
		return &sb.block, nil
	}
	// grown: segments reAlloc grew for this request and could not stitch; a request that fails in the end
	// returns them (INV-FAILCLEAN: a failed Alloc holds no more than before; GLake keeps them cached).
	var grown []*segment
	fail := func(err error) error {
		for _, seg := range grown {
			if slices.Contains(a.segs, seg) { // the release before the retry may have returned it already
				_ = a.releaseSegmentIfFreeLocked(seg) // a failed release keeps it cached, free
			}
		}
		return err
	}
	b, seg, err := a.paperGrowLocked(ss, pool, rs, false)
	if b != nil || (err != nil && !errors.Is(err, vmm.ErrOutOfMemory)) {
		return b, fail(a.paperErr(err, size, ss))
	}
	if seg != nil {
		grown = append(grown, seg)
	}
	if sb := a.paperStitchLocked(ss, pool, rs, 1); sb != nil {
		return &sb.block, nil
	}
	if !a.seeded(MutSpuriousOOM) {
		a.st.NumCacheFlushes++
		a.syncCappedLocked()             // frees past a fence cap become known safe (F6)
		_ = a.paperReleaseCachedLocked() // a failure leaves less released; the retry tells
		b, seg, err = a.paperGrowLocked(ss, pool, rs, true)
		if b != nil || (err != nil && !errors.Is(err, vmm.ErrOutOfMemory)) {
			return b, fail(a.paperErr(err, size, ss))
		}
		if seg != nil {
			grown = append(grown, seg)
		}
		if sb := a.paperStitchLocked(ss, pool, rs, 2); sb != nil {
			return &sb.block, nil
		}
	}
	if err == nil {
		err = vmm.ErrOutOfMemory // reAlloc grew but could not stitch: GMLake's realloc_block returned false
	}
	a.st.NumOOMs++
	fail(nil) // the segments reAlloc grew go back first: the error reports what the engine holds after the call
	return nil, a.oomErrLocked(size, rs, ss.s, err)
}

func (a *Allocator) paperErr(err error, size vmm.Bytes, ss *streamState) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("gmlake: alloc of %d bytes on stream %d: %w", size, ss.s, err)
}

// paperGrowLocked is GMLake's realloc_block: a new segment of get_allocation_size(rs) (small: one 2 MiB piece, as
// its cudaMalloc; large: 2 MiB pieces, each created, mapped and given access on its own, VmmSegment). When
// creating it runs out of memory while the device still has more free than the segment and the stream's
// cached sBlocks add up to at least the segment, it collects sBlocks (garbage_collect_fused_blocks with
// time 0, 1, 2) and tries again, three times in all. With reAlloc, a large request that the stream's free
// large blocks cover in part grows by only the rest and is stitched at once (attempt 4, past every
// defragLevel). nil, nil, nil: reAlloc did not grow because the free large blocks already add up to the
// request (realloc_block returns false there). On the retry (isRetry) both hold only for a request a stitch
// can serve (at least fragLimit; and defragLevel at most 2 for the second) and the first only when the rest's
// segment is smaller than the whole one, else the whole segment grows; nil, seg, nil: it grew seg but the stitch failed (seg stays
// cached, free; paperMissLocked returns it if the request fails).
func (a *Allocator) paperGrowLocked(ss *streamState, pool poolKind, rs vmm.Bytes, retry bool) (*block, *segment, error) {
	size := alignUp(allocationSize(rs), a.gran)
	stitchAfter := false
	if pool == largePool {
		if a.p.reAlloc {
			a.evTempLocked(2) // realloc_block's left and right search keys
			// On the retry (after release_cached_blocks) only for a request a stitch will serve: GLake's
			// shortcuts there fail, below fragLimit or with the stitch attempts skipped, a request the
			// device holds; the engine grows the whole segment instead.
			free := ss.free[largePool].bytes
			switch {
			case retry && rs < a.p.fragLimit:
			case free >= rs && (!retry || a.p.defragLevel <= 2): // get_fused_fragmented_blocks(p, 2) takes them
				return nil, nil, nil
			case free >= rs:
			case free > 0 && (!retry || allocationSize(rs-free) < allocationSize(rs)):
				// (get_allocation_size of the rest can exceed the whole segment's: 20 MiB for a 2 MiB rest)
				size, stitchAfter = allocationSize(rs-free), true
			}
		}
		size = roundUp(size, a.p.chunkMax) // any multiple of the granularity: not only a power of two
	}
	var seg *segment
	var err error
	for gc := 0; gc < 3; gc++ {
		if seg, err = a.newFixedSegmentLocked(ss, pool, size); err == nil || pool == smallPool || !errors.Is(err, vmm.ErrOutOfMemory) {
			break
		}
		devFree, _, ierr := a.d.MemInfo()
		if ierr != nil || devFree <= size || a.paperGarbageLocked(ss) < size {
			break
		}
		a.paperGCLocked(gc, allocationSize(rs), nil)
	}
	if err != nil {
		return nil, nil, err
	}
	if !stitchAfter {
		return &seg.head.block, nil, nil
	}
	ss.free[largePool].insert(seg.head)
	if sb := a.paperStitchLocked(ss, largePool, rs, 4); sb != nil {
		return &sb.block, nil, nil
	}
	return nil, seg, nil
}

// paperStitchLocked is GMLake's get_fused_fragmented_blocks(p, time): for a large request of at least fragLimit,
// take the stream's free large blocks whole, largest first (ties: the higher address first, the order of its
// std::set walked from the end), until they cover the request; none left over means no stitch (no new memory
// finishes a stitch). If the last block taken is at least 2 MiB more than the rest needs, it is split and its
// head taken. The pieces are mapped in that order into a new reservation, each with its own cuMemSetAccess;
// when that fails, sBlocks are collected (garbage_collect_fused_blocks(0, 1, 2)) and it is tried again,
// three times in all. Every stitched byte counts toward autoGC.
func (a *Allocator) paperStitchLocked(ss *streamState, pool poolKind, rs vmm.Bytes, time int) *sBlock {
	if time < a.p.defragLevel || pool == smallPool || rs < a.p.fragLimit {
		return nil
	}
	a.evTempLocked(2) // the left and right search keys
	fs := &ss.free[largePool]
	if fs.n < 2 {
		return nil
	}
	var chosen []*pBlock
	var fuse vmm.Bytes
	for b := fs.max(); b != nil && fuse < rs; b = fs.upperBelow(b.size, b.ptr) {
		chosen = append(chosen, b)
		fuse += b.size
	}
	if fuse < rs {
		return nil
	}
	last := chosen[len(chosen)-1]
	split := fuse-rs >= a.p.chunkMax
	if split {
		fs.remove(last)
		a.splitLocked(last, last.size-(fuse-rs))
		fs.insert(last)
		a.evTempLocked(1) // the kept head is a new Block whose event is replaced by the rest's
	}
	var chunks []*chunk
	for _, b := range chosen {
		seg, lo := b.seg, b.segOff()
		chunks = append(chunks, seg.chunksOver(lo, lo+b.size)...)
	}
	var sb *sBlock
	var err error
	for gc := 0; gc < 3; gc++ {
		if sb, err = a.buildSBlockLocked(ss, chunks, nil /* grown: GMLake stitches no new memory */); err == nil {
			break
		}
		a.paperGCLocked(gc, rs, nil)
	}
	if err != nil {
		if split { // GMLake leaves the blocks marked used here; we give them back as they were
			fs.remove(last)
			fs.insert(a.mergeFreeLocked(last))
		}
		return nil
	}
	a.evTempLocked(1) // the fused Block's own event, replaced by the newest of its parts'
	for _, pb := range sb.parts {
		if evNewer(pb.ev, sb.ev) {
			a.evDropLocked(sb.ev)
			sb.ev = evRef(pb.ev)
		}
	}
	a.fused += sb.size
	if a.fused > a.p.autoGC {
		a.paperGCLocked(2, 0, sb) // sb is not yet handed out (Free until markLiveLocked): GMLake's is in the active set
	}
	return sb
}

// paperReuseLocked is the stitched-block branch of GMLake's get_free_block: once best fit missed, the smallest
// cached sBlock of the stream whose pieces are all free (free_fused_blocks.lower_bound) serves a large
// request, of any size, if it is at most reuseLimit times the request; it holds only the first
// request/2 MiB pieces and leaves the rest free. No driver call.
func (a *Allocator) paperReuseLocked(ss *streamState, rs vmm.Bytes) *sBlock {
	var best *sBlock
	for _, sb := range a.sblocks {
		if sb.state != Free || sb.stream != ss.s || sb.size < rs {
			continue
		}
		if best != nil && (sb.size > best.size || sb.size == best.size && sb.ptr > best.ptr) {
			continue
		}
		if a.sblockAllFreeLocked(sb, ss) {
			best = sb
		}
	}
	if best == nil || float64(best.size) > float64(rs)*a.p.paperReuse {
		return nil
	}
	best.size = rs
	a.holdPartsLocked(best)
	a.st.NumStitchReuses++
	return best
}

// sblockAllFreeLocked reports whether every chunk of cached sBlock sb lies in a free block usable on ss.
func (a *Allocator) sblockAllFreeLocked(sb *sBlock, ss *streamState) bool {
	for _, c := range sb.chunks {
		if !a.chunkFreeLocked(c, ss) {
			return false
		}
	}
	return true
}

// paperGCLocked is GMLake's garbage_collect_fused_blocks(time, require): per stream, the cached sBlocks whose pieces
// are not all free (fragmented_free_fused_blocks) are torn down oldest release first, stopping at the first
// whose last use has not completed, or (time 0 and 1, require > 0) once 4x resp. 16x require bytes are
// collected; with time > 0, then the cached sBlocks whose pieces are all free (free_fused_blocks_in_release_
// order), the same way. It returns the bytes of the sBlocks torn down; keep is never torn down.
func (a *Allocator) paperGCLocked(time int, require vmm.Bytes, keep *sBlock) vmm.Bytes {
	var garbage vmm.Bytes
	for _, pass := range []bool{true, false} {
		if !pass && time == 0 {
			break
		}
		for _, st := range a.sortedStreamsLocked() {
			var set []*sBlock
			for _, sb := range a.sblocks {
				if sb.state == Free && sb != keep && sb.stream == st.s && a.sblockAllFreeLocked(sb, st) != pass {
					set = append(set, sb)
				}
			}
			slices.SortFunc(set, func(x, y *sBlock) int { return cmp.Compare(x.lastUse, y.lastUse) })
			for _, sb := range set {
				if !a.paperDoneLocked(sb, st) {
					break
				}
				size := sizeOf(sb.resv)
				if a.stitchFreeLocked(sb) != nil {
					break
				}
				garbage += size
				if pass && require > 0 && time <= 1 && garbage >= require<<(2*(time+1)) {
					break
				}
			}
		}
	}
	a.fused -= min(a.fused, garbage)
	return garbage
}

// paperDoneLocked reports whether the last use of cached sBlock sb completed: its event (cudaEventQuery on
// self_last_event), or, when that event was never recorded (a failed event call), the stream's fences.
func (a *Allocator) paperDoneLocked(sb *sBlock, st *streamState) bool {
	if sb.ev != nil && sb.ev.id != 0 {
		if a.nCapturing > 0 {
			return false // no event may be queried while a stream captures (INV-CAPTURESAFE): not known done
		}
		done, err := a.d.QueryEvent(sb.ev.e)
		return err == nil && done
	}
	return a.safeLocked(st, sb.freeSeq)
}

// paperGarbageLocked is what realloc_block weighs before collecting: the bytes of the stream's cached sBlocks.
func (a *Allocator) paperGarbageLocked(ss *streamState) vmm.Bytes {
	var n vmm.Bytes
	for _, sb := range a.sblocks {
		if sb.state == Free && sb.stream == ss.s {
			n += sizeOf(sb.resv)
		}
	}
	return n
}

// paperReleaseCachedLocked is GMLake's release_cached_blocks: every unsplit free segment is released (release_blocks
// of both pools), with the cached sBlocks that view its pieces (release_block deletes them); cached sBlocks
// over other memory stay. A segment some live sBlock still views, whose viewing sBlock's last use has not
// completed, or whose own last free is not known complete (releaseSegmentIfFreeLocked would keep it), is kept
// with every sBlock that views it (GMLake unmaps it regardless); tearing the views down and then keeping the
// segment would collect stitched blocks release_cached_blocks does not (INV-PAPERGC, paper-gc-s22.ops). First the frees deferred during a capture whose events
// could not be recorded when it ended are tried again (GMLake's process_events starts with
// insert_events_deferred_until_no_capture), as releaseCachedLocked does: else such a block stayed Pending
// until the next capture, and its segment could never be released.
func (a *Allocator) paperReleaseCachedLocked() error {
	first := a.flushDeferredLocked()
	a.processEventsLocked(nil)
	first = cmp.Or(first, a.releaseHeldOrphansLocked())
	for _, seg := range slices.Clone(a.segs) {
		h := seg.head
		if seg.arena || h.state != Free || h.next != nil {
			continue
		}
		var views []*sBlock
		ok := true
		for _, sb := range a.sblocks {
			for _, c := range sb.chunks {
				if c.seg == seg {
					ok = ok && sb.state == Free && a.paperDoneLocked(sb, a.streams[sb.stream])
					views = append(views, sb)
					break
				}
			}
		}
		if !ok || !a.safeLocked(seg.ss, h.freeSeq) {
			continue // (a segment whose last free is not known complete is kept: its views stay too)
		}
		for _, sb := range views {
			// GMLake's release_block deletes them without taking their bytes off total_fuse_size: autoGC
			// counts them still, and so does a.fused.
			if err := a.stitchFreeLocked(sb); err != nil {
				ok = false
				if first == nil {
					first = err
				}
				break
			}
		}
		if ok {
			if err := a.releaseSegmentIfFreeLocked(seg); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// paperEmptyCacheLocked is GMLake's emptyCache: release_cached_blocks, then garbage_collect_fused_blocks(2, 0).
func (a *Allocator) paperEmptyCacheLocked() error {
	a.assertLocked()
	err := a.paperReleaseCachedLocked()
	a.paperGCLocked(2, 0, nil)
	// The address frees that failed past their retries above (a released segment's, a collected sBlock's)
	// left orphan reservations: tried again and reported, as releaseCachedLocked does (F18).
	return cmp.Or(err, a.freeOrphanResvLocked())
}

// setAccessLocked grants access to [base, base+size), mapped in pieces of piece bytes: one cuMemSetAccess over the
// range, or, for gmlake-paper, one per piece, as GMLake's VirBlock does after each cuMemMap.
func (a *Allocator) setAccessLocked(base vmm.DevicePtr, size, piece vmm.Bytes) error {
	if !a.p.paper || piece == 0 || piece >= size {
		return a.d.SetAccess(base, size)
	}
	for off := vmm.Bytes(0); off < size; off += piece {
		if err := a.d.SetAccess(at(base, off), min(piece, size-off)); err != nil {
			return err
		}
	}
	return nil
}

// --- GMLake's block events (BlockEvent) ---
//
// Every GMLake Block owns a shared_ptr<BlockEvent>: constructing a Block creates a CUDA event (the search
// key of every malloc included), a free records the block's event on its stream (insert_free_event_into_
// alloc_stream: a new event when the old one is shared), merged and split blocks share the newer one, and
// the last reference destroys it. gmlake-paper makes the same calls on the driver, so the replay counts and
// charges them, and the sBlock GC asks its sBlock's event (paperDoneLocked). The engine's splits and merges are
// not GMLake's one for one (it carves the pBlock under each stitched piece), so the counts are GMLake's
// rules applied to this engine's block operations.

// blockEvent is one BlockEvent. Invariant: refs is the number of blocks whose ev is it; at 0 it is destroyed.
type blockEvent struct {
	e    vmm.Event
	refs int
	id   uint64 // record order (GMLake's event_id); 0: never recorded
}

// evNewLocked creates a block event (cudaEventCreateWithFlags); nil when the driver refuses (the block then has
// none: paperDoneLocked falls back to the fences).
func (a *Allocator) evNewLocked() *blockEvent {
	e, err := a.d.CreateEvent()
	if err != nil {
		return nil
	}
	return &blockEvent{e: e, refs: 1}
}

// evTempLocked creates and destroys n events: GMLake's short-lived Blocks (search keys, replaced events).
// No blockEvent is made: the event lives only between the two calls (no allocation on the hot path, whether
// or not the compiler inlines evNewLocked).
func (a *Allocator) evTempLocked(n int) {
	for i := 0; i < n; i++ {
		if e, err := a.d.CreateEvent(); err == nil {
			_ = a.d.DestroyEvent(e) // as evDropLocked: a failure leaks one event on the device
		}
	}
}

func evRef(ev *blockEvent) *blockEvent {
	if ev != nil {
		ev.refs++
	}
	return ev
}

// evDropLocked drops one reference, destroying the event with the last.
func (a *Allocator) evDropLocked(ev *blockEvent) {
	if ev == nil {
		return
	}
	if ev.refs--; ev.refs == 0 {
		_ = a.d.DestroyEvent(ev.e) // a failure leaks one event on the device, nothing of the allocator's
	}
}

// evFreshLocked gives b a new event of its own (a new GMLake Block at b's place).
func (a *Allocator) evFreshLocked(b *block) {
	a.evDropLocked(b.ev)
	b.ev = a.evNewLocked()
}

// evRecordFreeLocked is insert_free_event_into_alloc_stream: record b's event on b's stream, in a new event when
// b shares it.
func (a *Allocator) evRecordFreeLocked(b *block) {
	if b.ev == nil || b.ev.refs > 1 {
		a.evFreshLocked(b)
	}
	if b.ev == nil {
		return
	}
	if err := a.d.RecordEvent(b.ev.e, b.stream); err != nil {
		b.ev.id = 0
		return
	}
	a.evSeq++
	b.ev.id = a.evSeq
}

// evNewer reports whether x was recorded after y.
func evNewer(x, y *blockEvent) bool {
	return x != nil && (y == nil || x.id > y.id)
}

// evKeepNewer is try_merge_blocks' event rule: dst, absorbing src, keeps the newer of their events. src's
// reference (the other event) goes with src when it is recycled.
func evKeepNewer(dst, src *pBlock) {
	if evNewer(src.ev, dst.ev) {
		dst.ev, src.ev = src.ev, dst.ev
	}
}

// evShareNewerLocked is update_block's rule for the pBlocks under a freed sBlock: a part takes the sBlock's event
// when it is newer than its own.
func (a *Allocator) evShareNewerLocked(pb *pBlock, sb *sBlock) {
	if evNewer(sb.ev, pb.ev) {
		a.evDropLocked(pb.ev)
		pb.ev = evRef(sb.ev)
	}
}

// evCloseAllLocked destroys every block event still held (Close).
func (a *Allocator) evCloseAllLocked() error {
	a.assertLocked()
	if !a.p.paper {
		return nil
	}
	seen := map[*blockEvent]bool{}
	var first error
	kill := func(b *block) {
		if ev := b.ev; ev != nil && !seen[ev] {
			seen[ev] = true
			if err := a.d.DestroyEvent(ev.e); err != nil && first == nil {
				first = err
			}
		}
		b.ev = nil
	}
	for _, seg := range a.segs {
		for b := seg.head; b != nil; b = b.next {
			kill(&b.block)
		}
	}
	for _, sb := range a.sblocks {
		kill(&sb.block)
	}
	return first
}
