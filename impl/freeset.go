package impl

// The free sets: the free, mapped pBlocks of one (stream, pool), ordered by (size, address) for best fit.
//
// A free set is a sorted sequence cut into leaves of at most fsLeafCap entries, each entry holding its
// block's key beside the pointer, so a search reads one or two short arrays and no block: the leaf by a
// binary search over the leaves' last keys, the entry by a binary search inside the leaf. A full leaf splits
// in two halves; a removal that leaves two neighbouring leaves with fsLeafCap/2 entries or fewer merges them,
// so the leaves stay more than a quarter full on average whatever the order of inserts and removals. The
// sets a training step meets hold a few to a few hundred blocks (one to a handful of leaves); PyTorch's
// std::set (a red-black tree) and the treap this replaced visit one scattered block per level instead.

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// fsLeafCap is the most entries a leaf holds; fsLeafCap/2 is the merge bound of two neighbours.
const fsLeafCap = 64

// fsEntry is one block of a free set with its key. Invariant: size == b.size and ptr == b.ptr while the
// entry is in the set (the engine takes a block out before it changes either).
type fsEntry struct {
	size vmm.Bytes
	ptr  vmm.DevicePtr
	b    *pBlock
}

// below reports whether e's key is below (size, ptr): PyTorch's BlockComparatorSize within one stream's pool.
func (e *fsEntry) below(size vmm.Bytes, ptr vmm.DevicePtr) bool {
	if e.size != size {
		return e.size < size
	}
	return e.ptr < ptr
}

// less orders blocks by (size, address): whether (size, ptr) sorts before block b.
func less(size vmm.Bytes, ptr vmm.DevicePtr, b *pBlock) bool {
	if size != b.size {
		return size < b.size
	}
	return ptr < b.ptr
}

// fsLeaf is one stretch of a free set. Invariant: e[:n] are its entries in increasing key order; e[n:]
// are zero (no block kept alive past its removal).
type fsLeaf struct {
	n int
	e [fsLeafCap]fsEntry
}

func (l *fsLeaf) entries() []fsEntry { return l.e[:l.n] }

func (l *fsLeaf) last() *fsEntry { return &l.e[l.n-1] }

// freeSet holds the free, mapped pBlocks of one (stream, pool) in (size, address) order. Insertion and
// removal allocate nothing while the set needs no more leaves than it held before, within fsSpareMax of its
// current count (emptied leaves are kept for reuse).
type freeSet struct {
	// leaves hold the entries in strictly increasing key order: every key of a leaf below every key of the
	// next. Invariant: none is empty but a set's only leaf (kept for the next insert); two neighbouring
	// leaves hold more than fsLeafCap/2 entries together; every entry's block has node.inSet, state Free,
	// mapped, and belongs to this (stream, pool).
	leaves []*fsLeaf
	// spare are emptied leaves kept for reuse, at most fsSpareMax.
	spare []*fsLeaf
	// n and bytes count the blocks in the leaves and their sizes.
	n     int
	bytes vmm.Bytes
	ts    *torchStats // where inactive split blocks are counted (nil: not counted)
	pool  poolKind    // the pool whose blocks the set holds
}

// fsSpareMax bounds the emptied leaves a free set keeps (96 KiB).
const fsSpareMax = 64

// fsNode is a pBlock's membership of its pool's free set.
type fsNode struct {
	// inSet: the block is in its pool's free set. Invariant: inSet implies state == Free and mapped.
	inSet bool
	// splitCounted: counted in DeviceStats.InactiveSplit (it had a mapped neighbour when inserted).
	// Invariant: splitCounted implies inSet.
	splitCounted bool
}

// leafFor returns the index of the first leaf whose last key is at or above (size, ptr); len(leaves) if none.
func (s *freeSet) leafFor(size vmm.Bytes, ptr vmm.DevicePtr) int {
	if s.n == 0 {
		return len(s.leaves)
	}
	lo, hi := 0, len(s.leaves)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.leaves[m].last().below(size, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// search returns the index of the first entry of l at or above (size, ptr); l.n if none.
func (l *fsLeaf) search(size vmm.Bytes, ptr vmm.DevicePtr) int {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.e[m].below(size, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (s *freeSet) newLeaf() *fsLeaf {
	if n := len(s.spare); n > 0 {
		l := s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
		return l
	}
	return new(fsLeaf)
}

// dropLeaf takes leaf i out of the sequence, keeping it (cleared) as a spare.
func (s *freeSet) dropLeaf(i int) {
	l := s.leaves[i]
	clear(l.entries())
	l.n = 0
	if len(s.spare) < fsSpareMax {
		s.spare = append(s.spare, l)
	}
	copy(s.leaves[i:], s.leaves[i+1:])
	s.leaves[len(s.leaves)-1] = nil
	s.leaves = s.leaves[:len(s.leaves)-1]
}

// moveInto appends the entries of leaf j to leaf i (they fit) and drops leaf j.
func (s *freeSet) moveInto(i, j int) {
	d, src := s.leaves[i], s.leaves[j]
	copy(d.e[d.n:], src.entries())
	d.n += src.n
	s.dropLeaf(j)
}

func (s *freeSet) insert(b *pBlock) {
	if b.node.inSet {
		panicf("block %d inserted twice", b.id)
	}
	li, i := 0, 0
	if len(s.leaves) == 0 {
		s.leaves = append(s.leaves, s.newLeaf())
	} else if s.n > 0 {
		li = s.leafFor(b.size, b.ptr)
		if li == len(s.leaves) {
			li-- // above every key: the end of the last leaf
		}
		i = s.leaves[li].search(b.size, b.ptr)
	}
	l := s.leaves[li]
	if i < l.n && l.e[i].size == b.size && l.e[i].ptr == b.ptr {
		panicf("block %d inserted over block %d (%s at %v)", b.id, l.e[i].b.id, b.size, b.ptr)
	}
	if l.n == fsLeafCap { // split: the upper half moves to a new leaf after this one
		const half = fsLeafCap / 2
		r := s.newLeaf()
		r.n = copy(r.e[:], l.e[half:])
		clear(l.e[half:])
		l.n = half
		s.leaves = append(s.leaves, nil)
		copy(s.leaves[li+2:], s.leaves[li+1:])
		s.leaves[li+1] = r
		if i > half {
			i, l = i-half, r
		}
	}
	if i < l.n {
		copy(l.e[i+1:l.n+1], l.e[i:l.n])
	}
	l.e[i] = fsEntry{size: b.size, ptr: b.ptr, b: b}
	l.n++
	b.node.inSet = true
	s.n++
	s.bytes += b.size
	s.noteInserted(b)
}

func (s *freeSet) remove(b *pBlock) {
	if !b.node.inSet {
		panicf("block %d not in free set", b.id)
	}
	li := s.leafFor(b.size, b.ptr)
	if li == len(s.leaves) {
		panicf("block %d missing from free set", b.id)
	}
	l := s.leaves[li]
	i := l.search(b.size, b.ptr)
	if i == l.n || l.e[i].b != b {
		panicf("block %d missing from free set", b.id)
	}
	s.noteRemoved(b)
	if i < l.n-1 {
		copy(l.e[i:l.n-1], l.e[i+1:l.n])
	}
	l.n--
	l.e[l.n] = fsEntry{}
	b.node.inSet = false
	s.n--
	s.bytes -= b.size
	switch {
	case l.n == 0 && len(s.leaves) == 1: // kept for the next insert
	case l.n == 0:
		s.dropLeaf(li) // its neighbours held at least fsLeafCap/2 each
	default:
		if li+1 < len(s.leaves) && l.n+s.leaves[li+1].n <= fsLeafCap/2 {
			s.moveInto(li, li+1)
		}
		if li > 0 && s.leaves[li-1].n+s.leaves[li].n <= fsLeafCap/2 {
			s.moveInto(li-1, li)
		}
	}
}

// lowerBound returns the smallest block with key >= (size, ptr), or nil.
func (s *freeSet) lowerBound(size vmm.Bytes, ptr vmm.DevicePtr) *pBlock {
	li := s.leafFor(size, ptr)
	if li == len(s.leaves) {
		return nil
	}
	l := s.leaves[li]
	return l.e[l.search(size, ptr)].b
}

// upperBelow returns the largest block with key < (size, ptr), or nil.
func (s *freeSet) upperBelow(size vmm.Bytes, ptr vmm.DevicePtr) *pBlock {
	if s.n == 0 {
		return nil
	}
	li := s.leafFor(size, ptr)
	if li < len(s.leaves) {
		if i := s.leaves[li].search(size, ptr); i > 0 {
			return s.leaves[li].e[i-1].b
		}
	}
	if li == 0 {
		return nil
	}
	return s.leaves[li-1].last().b
}

// max returns the largest block, or nil.
func (s *freeSet) max() *pBlock {
	if s.n == 0 {
		return nil
	}
	return s.leaves[len(s.leaves)-1].last().b
}

// eachFrom visits, in increasing (size, address) order, the blocks of at least minSize bytes until f
// returns false. f must not change the set.
func (s *freeSet) eachFrom(minSize vmm.Bytes, f func(*pBlock) bool) {
	li := s.leafFor(minSize, 0)
	if li == len(s.leaves) {
		return
	}
	i := s.leaves[li].search(minSize, 0)
	for ; li < len(s.leaves); li, i = li+1, 0 {
		for _, e := range s.leaves[li].entries()[i:] {
			if !f(e.b) {
				return
			}
		}
	}
}

// check verifies the free set's invariants: the leaves' order and bounds, each entry's key against its
// block, the counts, and that every block in it is a free mapped pBlock of ss's pool (nil ss: any stream).
func (s *freeSet) check(ss *streamState, pool poolKind) error {
	n, bytes := 0, vmm.Bytes(0)
	var last *fsEntry
	for li, l := range s.leaves {
		if l.n < 0 || l.n > fsLeafCap || (l.n == 0 && len(s.leaves) > 1) {
			return fmt.Errorf("leaf %d of %d holds %d entries", li, len(s.leaves), l.n)
		}
		if li > 0 && s.leaves[li-1].n+l.n <= fsLeafCap/2 {
			return fmt.Errorf("leaves %d and %d hold %d entries together, not merged", li-1, li, s.leaves[li-1].n+l.n)
		}
		for _, e := range l.e[l.n:] {
			if e != (fsEntry{}) {
				return fmt.Errorf("leaf %d keeps block %d past its %d entries", li, e.b.id, l.n)
			}
		}
		for i := range l.entries() {
			e := &l.e[i]
			t := e.b
			if t == nil || e.size != t.size || e.ptr != t.ptr {
				return fmt.Errorf("leaf %d entry %d: key (%s, %v) is not its block's", li, i, e.size, e.ptr)
			}
			if !t.node.inSet || t.state != Free || !t.mapped || (ss != nil && t.seg.ss != ss) || t.pool != pool {
				return fmt.Errorf("block %d in the free set: inSet %v, %v, mapped %v, other pool", t.id, t.node.inSet, t.state, t.mapped)
			}
			if last != nil && !last.below(e.size, e.ptr) {
				return fmt.Errorf("blocks %d and %d out of (size, address) order", last.b.id, t.id)
			}
			last = e
			n++
			bytes += t.size
		}
	}
	if n != s.n || bytes != s.bytes {
		return fmt.Errorf("counts %d blocks, %d B; the leaves hold %d, %d B", s.n, s.bytes, n, bytes)
	}
	for _, l := range s.spare {
		if l.n != 0 || l.e != ([fsLeafCap]fsEntry{}) {
			return fmt.Errorf("a spare leaf holds %d entries", l.n)
		}
	}
	return nil
}
