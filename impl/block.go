package impl

// The engine's data structures: segments (reservations), chunks (physical handles), blocks (pBlocks that
// tile a segment, and sBlocks that view chunks of several pBlocks). The free sets that order free blocks by
// (size, address) for best fit are in freeset.go. See doc.go for the design.

import (
	"github.com/gmlake/gmlake/vmm"
)

// poolKind separates small requests (<= 1 MiB after rounding) from large ones, as PyTorch does.
type poolKind uint8

const (
	smallPool poolKind = 0
	largePool poolKind = 1
)

// chunk is one physical handle the allocator holds (cuMemCreate), mapped once in its segment and once more
// in each sBlock that views it. Guarded by Allocator.mu.
type chunk struct {
	h vmm.Handle
	// size is the handle's bytes. Invariant: a positive multiple of the granularity, fixed.
	size vmm.Bytes
	// seg and off place the primary mapping: [seg.base+off, seg.base+off+size), inside seg, in
	// seg.chunks in off order.
	seg *segment
	off vmm.Bytes
	// views counts the sBlocks mapping the chunk. Invariant (INV-REFCOUNT): refs() == 1 + views, the
	// device's mappings of h.
	views  int
	refOff int // test-only refcount skew (MutRefcountOffByOne); 0 otherwise
	// freeSeq (arena chunks): the latest free counter of a block that overlapped the chunk; the chunk is
	// release-safe once its stream's fences cover it (blocks merge, chunks keep their own history).
	freeSeq uint64
}

func (c *chunk) refs() int { return 1 + c.views + c.refOff }

// segment is one reservation of virtual address space holding primary mappings of chunks. A fixed segment
// (caching, gmlake-paper) is fully mapped at creation and holds its chunks until released; an arena
// (expandable, gmlake) reserves far more than it maps and grows by mapping chunks into unmapped blocks.
// Guarded by Allocator.mu.
type segment struct {
	// id names the segment in panics and dumps (from the allocator's id counter, shared with blocks).
	id   uint64
	base vmm.DevicePtr
	// size is the reservation's bytes, [base, base+size), fixed.
	size  vmm.Bytes
	ss    *streamState // the (stream, pool) state whose pool the segment's blocks belong to
	pool  poolKind     // the pool of every block of the segment
	arena bool
	// chunks are the primary mappings, sorted by off, disjoint. Fixed segment: they tile [0, size).
	chunks []*chunk
	// head is the first of the blocks that tile [base, base+size) in address order (next links).
	// Invariant: a block is mapped iff it lies wholly over chunks; an arena's unmapped bytes are its
	// unmapped blocks.
	head *pBlock
	// mapped is the bytes mapped. Invariant: the sum of the chunks' sizes.
	mapped vmm.Bytes

	// unmapped (arena): its unmapped blocks in address order. Invariant: exactly the blocks with !mapped.
	unmapped []*pBlock
	// hint is a block of this segment near the last lookup (blockAt), or nil; a stale hint (a recycled
	// block, seg != s) is ignored.
	hint *pBlock
}

// addUnmapped records unmapped block b (idempotent).
func (s *segment) addUnmapped(b *pBlock) {
	i, found := s.unmappedIndex(b.ptr)
	if found {
		s.unmapped[i] = b
		return
	}
	s.unmapped = append(s.unmapped, nil)
	copy(s.unmapped[i+1:], s.unmapped[i:])
	s.unmapped[i] = b
}

// dropUnmapped forgets unmapped block b.
func (s *segment) dropUnmapped(b *pBlock) {
	i, found := s.unmappedIndex(b.ptr)
	if !found || s.unmapped[i] != b {
		panicf("unmapped block %d not listed in segment %d", b.id, s.id)
	}
	copy(s.unmapped[i:], s.unmapped[i+1:])
	s.unmapped[len(s.unmapped)-1] = nil
	s.unmapped = s.unmapped[:len(s.unmapped)-1]
}

func (s *segment) unmappedIndex(p vmm.DevicePtr) (int, bool) {
	lo, hi := 0, len(s.unmapped)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.unmapped[m].ptr < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s.unmapped) && s.unmapped[lo].ptr == p
}

// blockAt returns the block of s that holds offset off, walking from the hint.
func (s *segment) blockAt(off vmm.Bytes) *pBlock {
	p := at(s.base, off)
	b := s.hint
	if b == nil || b.seg != s {
		b = s.head
	}
	for p < b.ptr {
		b = b.prev
	}
	for p >= b.end() {
		b = b.next
	}
	s.hint = b
	return b
}

// chunkIdx indexes a segment's chunks (segment.chunks, in offset order): [0, numChunks()).
type chunkIdx int

// numChunks is the end of the segment's chunk indexes.
func (s *segment) numChunks() chunkIdx { return chunkIdx(len(s.chunks)) }

// chunkIndex returns the index of the first chunk whose end is past off (numChunks() if none).
func (s *segment) chunkIndex(off vmm.Bytes) chunkIdx {
	lo, hi := chunkIdx(0), s.numChunks()
	for lo < hi {
		m := chunkIdx(uint(lo+hi) >> 1)
		c := s.chunks[m]
		if c.off+c.size <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// chunksOver returns the chunks that overlap [lo, hi) (offsets in s), in offset order: a subslice of
// s.chunks, which the caller must not change.
func (s *segment) chunksOver(lo, hi vmm.Bytes) []*chunk {
	i := s.chunkIndex(lo)
	j := i
	for j < s.numChunks() && s.chunks[j].off < hi {
		j++
	}
	return s.chunks[i:j]
}

// insertChunk adds c in offset order.
func (s *segment) insertChunk(c *chunk) {
	i := s.chunkIndex(c.off)
	s.chunks = append(s.chunks, nil)
	copy(s.chunks[i+1:], s.chunks[i:])
	s.chunks[i] = c
	s.mapped += c.size
}

// removeChunk drops c from the segment's list.
func (s *segment) removeChunk(c *chunk) {
	i := s.chunkIndex(c.off)
	if i >= s.numChunks() || s.chunks[i] != c {
		panicf("chunk %d not in segment %d", c.h, s.id)
	}
	copy(s.chunks[i:], s.chunks[i+1:])
	s.chunks[len(s.chunks)-1] = nil
	s.chunks = s.chunks[:len(s.chunks)-1]
	s.mapped -= c.size
}

// block is what pBlocks and sBlocks share: one range handed out as one allocation, its state and its use
// on streams. It is never made on its own: it is embedded as the first field of a pBlock or an sBlock, and
// exactly one of p and s points back to that struct (Go has no container_of without unsafe), so code that
// holds a *block (the pointer table, pending waits) reaches the kind's fields with one load and no type
// switch. Everything is guarded by Allocator.mu.
//
// state's legal transitions, by kind (BlockState lists the states):
//
//	pBlock  Free -> Live      handed out (markLiveLocked), or held under a live sBlock (holdPartsLocked)
//	        Live -> Free      freed with no stream to wait for, or given back by its sBlock (freeBlockLocked)
//	        Live -> Pending   freed with RecordStream streams to wait for (recordUsesLocked), deferred during
//	                          a capture (freeLocked), or a part of a freed sBlock of another stream's pool
//	                          (freeSBlockLocked: xwait set)
//	        Pending -> Free   its events completed (processEventsOnceLocked)
//	        Pending -> Live   a part waiting only for its sBlock's stream, held again by an sBlock of that
//	                          stream (holdPartsLocked); a deferred free re-tried once no stream captures
//	                          (flushDeferredLocked), which ends Pending again or Free
//	sBlock  Free -> Live      stitched (buildSBlockLocked makes it Free, allocLocked hands it out) or reused
//	        Live -> Free      freed: cached, its parts given back (freeSBlockLocked)
//	        Live -> Pending   freed with RecordStream streams to wait for, or deferred during a capture
//	        Pending -> Free   its events completed; Pending -> Live as a pBlock's deferred free
//
// A block leaves the engine only while Free: a pBlock merged into a neighbour, unmapped or released with
// its segment is recycled (recycleLocked); a cached sBlock torn down (stitchFreeLocked) is dropped.
type block struct {
	// id names the block in snapshots and panics. Invariant: unique among the blocks in use, never 0; a
	// recycled pBlock gets a new one.
	id    uint64
	state BlockState
	// ptr is the first byte. pBlock: inside seg, ptr == prev.end() (seg.base for the head). sBlock:
	// resv.Base. Invariant: ptrs[p] == b implies ptr == p.
	ptr vmm.DevicePtr
	// size is the block's bytes, [ptr, ptr+size). pBlock: a multiple of 512 B, > 0. sBlock: resv.Size,
	// except while gmlake-paper holds it for a smaller request (paperReuseLocked): the request's, a
	// multiple of the chunk size, and only the chunks under [ptr, ptr+size) are held.
	size vmm.Bytes
	// requested is the size Alloc was asked for, <= size, while the block is handed out (Live, not held);
	// freeLocked takes it off the statistics. Stale otherwise.
	requested vmm.Bytes
	// stream is the stream whose pool owns the block: pBlock seg.ss.s, sBlock home.s.
	stream vmm.Stream
	// pool is the block's pool: pBlock seg.pool; sBlock always largePool.
	pool poolKind

	// uses are the streams RecordStream added while Live (never stream, no duplicates); kept while Pending,
	// emptied when the block is handed out or becomes Free.
	uses []vmm.Stream
	// events counts the waits a Pending block has outstanding: its pendingEv entries (an event per
	// recorded stream, a gone stream's last event, or, for an sBlock's part, one cross-stream wait).
	// Invariant: events > 0 iff Pending, except a free deferred during a capture (in Allocator.deferred,
	// events == 0 until flushDeferredLocked records them).
	events int
	// freeSeq is Allocator.freeSeq when the block last became free (0: never freed since mapped); the
	// fences of its stream say when work before that free completed (streamState.safeSeq).
	freeSeq uint64
	// stamped: freeSeq was set when the free was asked, while the block went Pending (recordUsesLocked),
	// or by its sBlock's free (freeSBlockLocked); freeBlockLocked keeps that stamp and clears the flag.
	// Invariant: stamped only while Pending, or a part being given back (between those two calls).
	stamped bool
	// ev (gmlake-paper only, else nil): GMLake's self_last_event, shared by the blocks that point to it
	// (paper.go). Invariant: ev.refs counts the blocks whose ev is this event.
	ev *blockEvent
	// active: the free of a handed-out allocation went Pending and is counted in torchStats.pending
	// (DeviceStats.Active) until it is reusable (noteReusableLocked). Invariant: active implies Pending.
	active bool

	// p and s: the struct this header is embedded in. Invariant: exactly one is non-nil and
	// &p.block == b (resp. &s.block == b), fixed for the struct's life (recycled pBlocks keep p).
	p *pBlock
	s *sBlock
}

// kind says whether b is a pBlock or an sBlock.
func (b *block) kind() BlockKind {
	if b.s != nil {
		return Stitched
	}
	return Primitive
}

func (b *block) end() vmm.DevicePtr { return at(b.ptr, b.size) }

// pBlock is a range of a segment (a primitive block). The blocks of a segment tile it in address order.
// Free pBlocks of a (stream, pool) that are mapped are in that pool's free set (node).
type pBlock struct {
	block
	// mapped: backed by the segment's chunks. false: an unmapped stretch of an arena, always Free, never in
	// a free set, listed in seg.unmapped. Fixed segments' blocks are always mapped.
	mapped bool
	// seg is the segment holding the block. Invariant: never nil while the block is in use.
	seg *segment
	// prev and next are the address-order neighbours in seg (nil at its ends; seg.head has no prev).
	// Invariant: prev.next == b, next.prev == b, next.ptr == b.end(). Free neighbours of the same
	// mappedness are merged when either is freed (mergeFreeLocked; not under MutNoMerge).
	prev, next *pBlock
	// heldBy is the sBlock whose view covers the chunk under this pBlock while that sBlock is Live or
	// Pending. Invariant: heldBy != nil iff b is in heldBy.parts; then state == Live and b is not handed
	// out (ptrs may still hold an entry from an earlier allocation at ptr).
	heldBy *sBlock
	// xwait and xseq: a part of an sBlock freed on another stream's pool waits (Pending, events == 1) until
	// xwait's fence covers xseq, the sBlock's free stamp: the pendingEv{st: xwait, seq: xseq} lists it.
	// Invariant: xwait != nil implies Pending and events == 1; nil otherwise.
	xwait *streamState
	xseq  uint64
	// node is the block's membership of its pool's free set, seg.ss.free[pool].
	node fsNode
}

func (b *pBlock) segOff() vmm.Bytes { return vmm.Bytes(b.ptr - b.seg.base) }

// sblockIdx indexes Allocator.sblocks: [0, len(sblocks)).
type sblockIdx int

// sBlock is a stitched block: its own reservation mapping whole chunks of several pBlocks side by side.
// Freed, it stays cached with its mappings (Free) and is reused when its chunks are all free again.
type sBlock struct {
	block
	// home is the (stream, pool) state the sBlock serves: its requests, its cache, its fences.
	// Invariant: never nil; home.s == stream.
	home *streamState
	// chunks are the viewed chunks in the view's address order: chunks[i] is mapped at ptr plus the sizes
	// before it. Invariant: each counts this view in views; their sizes add up to resv.Size.
	chunks []*chunk
	// parts, while Live or Pending: the pBlocks held under the chunks of [ptr, ptr+size), parts[i] exactly
	// under chunks[i] (heldBy == this). Empty while Free.
	parts []*pBlock
	// resv is the sBlock's reservation. Invariant: resv.Base == ptr.
	resv vmm.Range
	// lastUse is Allocator.clock at the last free (LRU order of the cache).
	lastUse uint64
	// sIndex is the sBlock's place in Allocator.sblocks. Invariant: sblocks[sIndex] == b.
	sIndex sblockIdx
}
