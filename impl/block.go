package impl

// The engine's data structures: segments (reservations), chunks (physical handles), blocks (pBlocks that
// tile a segment, and sBlocks that view chunks of several pBlocks), and the intrusive treap that orders
// free blocks by (size, address) for best fit. See doc.go for the design.

import (
	"github.com/gmlake/gmlake/vmm"
)

// poolKind separates small requests (<= 1 MiB after rounding) from large ones, as PyTorch does.
type poolKind uint8

const (
	smallPool poolKind = 0
	largePool poolKind = 1
)

// chunk is one physical handle the allocator holds.
//
// Invariant (INV-REFCOUNT): refs == (1 if primary mapping exists) + views.
type chunk struct {
	h      vmm.Handle
	size   uint64
	seg    *segment // the segment whose range holds its primary mapping
	off    uint64   // offset of the primary mapping in seg
	views  int      // sBlock views mapping the chunk
	refOff int      // test-only refcount skew (MutRefcountOffByOne)
	// freeSeq (arena chunks): the latest free counter of a block that overlapped the chunk; the chunk is
	// release-safe once its stream's fences cover it (blocks merge, chunks keep their own history).
	freeSeq uint64
}

func (c *chunk) refs() int { return 1 + c.views + c.refOff }

// segment is one reservation of virtual address space holding primary mappings of chunks. A fixed segment
// (caching, gmlake-paper) is fully mapped at creation and holds its chunks until released; an arena
// (expandable, gmlake) reserves far more than it maps and grows by mapping chunks into unmapped blocks.
// Blocks tile [base, base+size) in address order starting at head.
type segment struct {
	id     uint64
	base   vmm.DevicePtr
	size   uint64
	ss     *streamState // the stream whose pool the segment's blocks belong to
	pool   poolKind
	arena  bool
	chunks []*chunk // sorted by off; the primary mappings
	head   *block
	mapped uint64 // bytes mapped (sum of chunk sizes)

	unmapped []*block // arena: its unmapped blocks in address order
	hint     *block   // a block of this segment near the last lookup (blockAt), or nil
}

// addUnmapped records unmapped block b (idempotent).
func (s *segment) addUnmapped(b *block) {
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
func (s *segment) dropUnmapped(b *block) {
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
func (s *segment) blockAt(off uint64) *block {
	p := s.base.Add(off)
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

// chunkIndex returns the index of the first chunk whose end is past off.
func (s *segment) chunkIndex(off uint64) int {
	lo, hi := 0, len(s.chunks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := s.chunks[m]
		if c.off+c.size <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
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
	if i >= len(s.chunks) || s.chunks[i] != c {
		panicf("chunk %d not in segment %d", c.h, s.id)
	}
	copy(s.chunks[i:], s.chunks[i+1:])
	s.chunks[len(s.chunks)-1] = nil
	s.chunks = s.chunks[:len(s.chunks)-1]
	s.mapped -= c.size
}

// block is a pBlock (a range of a segment) or an sBlock (its own reservation viewing chunks of pBlocks).
// An sBlock's size is its reservation's, except while gmlake-paper has it live for a smaller request
// (paperReuseLocked): then size is the request's, and only the chunks under [ptr, ptr+size) are held.
//
// Legal states: a pBlock is Free (in its pool's free set iff mapped), Live (handed out, or held by a live
// sBlock: heldBy != nil), or Pending (freed, events outstanding). An sBlock is Live, Pending (freed while
// streams recorded with RecordStream still had work: events outstanding, as a pBlock), or Free (cached,
// reused once its chunks are all free again).
type block struct {
	id        uint64
	kind      BlockKind
	state     BlockState
	ptr       vmm.DevicePtr
	size      uint64
	requested uint64
	stream    vmm.Stream // owner pool's stream (pBlock), or the stream it serves (sBlock)
	pool      poolKind
	mapped    bool // pBlock: backed by chunks (false: an unmapped stretch of an arena)

	// pBlock
	seg        *segment
	prev, next *block // address-order neighbours in seg
	heldBy     *block // the live sBlock whose view covers this pBlock's chunk

	// free set (treap), valid while inSet
	left, right *block
	prio        uint32
	inSet       bool

	// stream use
	uses    []vmm.Stream // RecordStream'ed streams (live)
	events  int          // outstanding events (Pending)
	freeSeq uint64       // allocator free counter when the block last became free
	xwait   *streamState // a part of an sBlock freed on xwait, Pending until xwait's work finished
	xseq    uint64       // the sBlock's free counter for that wait (identifies the pendingEv)
	stamped bool         // freeSeq was set when the free was asked (Pending): keep it when it completes
	// ev (gmlake-paper only, else nil): GMLake's self_last_event, shared by the blocks that point to it
	// (paper.go). Invariant: ev.refs counts the blocks whose ev is this event.
	ev *blockEvent

	// PyTorch statistics (torchstats.go)
	active       bool // counted as a pending free in DeviceStats.Active (freed, not yet reusable)
	splitCounted bool // counted in DeviceStats.InactiveSplit (while in a free set)

	// sBlock
	home    *streamState // the (stream, pool) it serves
	chunks  []*chunk     // viewed chunks in address order of the view
	parts   []*block     // while live or pending: the held pBlocks, one per chunk
	resv    vmm.Range    // the sBlock's reservation
	lastUse uint64       // LRU clock
	sIndex  int          // index in a.sblocks
}

func (b *block) end() vmm.DevicePtr { return b.ptr.Add(b.size) }

func (b *block) segOff() uint64 { return uint64(b.ptr - b.seg.base) }

// less orders blocks by (size, address): PyTorch's BlockComparatorSize within one stream's pool.
func less(size uint64, ptr vmm.DevicePtr, b *block) bool {
	if size != b.size {
		return size < b.size
	}
	return ptr < b.ptr
}

// freeSet is a treap of free, mapped pBlocks of one (stream, pool), ordered by (size, address). It is
// intrusive: insertion and deletion allocate nothing.
type freeSet struct {
	root  *block
	n     int
	bytes uint64
	ts    *torchStats // where inactive split blocks are counted (nil: not counted)
	pool  poolKind    // the pool whose blocks the set holds
}

func treapMerge(a, b *block) *block {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.prio > b.prio {
		a.right = treapMerge(a.right, b)
		return a
	}
	b.left = treapMerge(a, b.left)
	return b
}

func (s *freeSet) insert(b *block) {
	if b.inSet {
		panicf("block %d inserted twice", b.id)
	}
	b.inSet = true
	b.left, b.right = nil, nil
	s.n++
	s.bytes += b.size
	// Iterative descent to the insertion point, then split there.
	link := &s.root
	for *link != nil && (*link).prio >= b.prio {
		if less(b.size, b.ptr, *link) {
			link = &(*link).left
		} else {
			link = &(*link).right
		}
	}
	b.left, b.right = treapSplitKey(*link, b)
	*link = b
	s.noteInserted(b)
}

// treapSplitKey splits t around b's key without allocating.
func treapSplitKey(t, b *block) (l, r *block) {
	if t == nil {
		return nil, nil
	}
	if less(t.size, t.ptr, b) {
		a, c := treapSplitKey(t.right, b)
		t.right = a
		return t, c
	}
	a, c := treapSplitKey(t.left, b)
	t.left = c
	return a, t
}

func (s *freeSet) remove(b *block) {
	if !b.inSet {
		panicf("block %d not in free set", b.id)
	}
	s.noteRemoved(b)
	link := &s.root
	for *link != b {
		if *link == nil {
			panicf("block %d missing from free set", b.id)
		}
		if less(b.size, b.ptr, *link) {
			link = &(*link).left
		} else {
			link = &(*link).right
		}
	}
	*link = treapMerge(b.left, b.right)
	b.left, b.right = nil, nil
	b.inSet = false
	s.n--
	s.bytes -= b.size
}

// lowerBound returns the smallest block with key >= (size, ptr), or nil.
func (s *freeSet) lowerBound(size uint64, ptr vmm.DevicePtr) *block {
	var best *block
	t := s.root
	for t != nil {
		if t.size > size || (t.size == size && t.ptr >= ptr) {
			best = t
			t = t.left
		} else {
			t = t.right
		}
	}
	return best
}

// upperBelow returns the largest block with key < (size, ptr), or nil.
func (s *freeSet) upperBelow(size uint64, ptr vmm.DevicePtr) *block {
	var best *block
	t := s.root
	for t != nil {
		if t.size < size || (t.size == size && t.ptr < ptr) {
			best = t
			t = t.right
		} else {
			t = t.left
		}
	}
	return best
}

// max returns the largest block, or nil.
func (s *freeSet) max() *block {
	t := s.root
	if t == nil {
		return nil
	}
	for t.right != nil {
		t = t.right
	}
	return t
}

// each visits blocks in increasing (size, address) order until f returns false.
func (s *freeSet) each(f func(*block) bool) {
	var walk func(t *block) bool
	walk = func(t *block) bool {
		if t == nil {
			return true
		}
		return walk(t.left) && f(t) && walk(t.right)
	}
	walk(s.root)
}

// prioOf derives a treap priority from a block id (splitmix64), so runs are deterministic.
func prioOf(id uint64) uint32 {
	z := id + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return uint32(z ^ (z >> 31))
}

// eachFrom visits, in increasing (size, address) order, the blocks of at least minSize bytes until f
// returns false. f must not change the set.
func (s *freeSet) eachFrom(minSize uint64, f func(*block) bool) {
	var walk func(t *block) bool
	walk = func(t *block) bool {
		if t == nil {
			return true
		}
		if t.size >= minSize {
			if !walk(t.left) || !f(t) {
				return false
			}
		}
		return walk(t.right)
	}
	walk(s.root)
}
