package impl

import "github.com/gmlake/gmlake/vmm"

// ptrTable is Allocator.ptrs: a hash table from a block's start address to the block, in place of a Go map on
// the hot path (every Alloc sets an entry, every Free looks one up, a merge moves one; the Go map's hashing and
// its swiss-table probing were 17% of a mixed-size pair through the C ABI, docs/results/hotpath-breakdown.md).
// Open addressing with linear probing over a power-of-two array, a multiplicative hash of the address (block
// starts are multiples of 512 B, so the low 9 bits are dropped first), and backward-shift deletion, so there
// are no tombstones and a lookup stops at the first empty slot.
//
// Invariants: every key is nonzero (no block starts at address 0: the drivers never hand it out) and appears
// once; len(keys) == len(vals) is a power of two or 0; n is the number of nonzero keys and 2*n <= len(keys)
// after every set (the table doubles before it passes half full); every key k sits at home(k) or after it,
// with no empty slot between home(k) and its slot (cyclically).
type ptrTable struct {
	keys []vmm.DevicePtr
	vals []*block
	n    int
}

const ptrTableMin = 64

func (t *ptrTable) home(p vmm.DevicePtr) int {
	return int(((uint64(p) >> 9) * 0x9E3779B97F4A7C15) >> 32 & uint64(len(t.keys)-1))
}

// get returns the block at p, nil if none.
func (t *ptrTable) get(p vmm.DevicePtr) *block {
	if t.n == 0 {
		return nil
	}
	mask := len(t.keys) - 1
	for i := t.home(p); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case p:
			return t.vals[i]
		case 0:
			return nil
		}
	}
}

// set makes b the block at p (p != 0, b != nil).
func (t *ptrTable) set(p vmm.DevicePtr, b *block) {
	if p == 0 {
		panic("impl: a block at device address 0 (the pointer table's empty key)")
	}
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	i := t.home(p)
	for t.keys[i] != 0 && t.keys[i] != p {
		i = (i + 1) & mask
	}
	if t.keys[i] == 0 {
		t.keys[i] = p
		t.n++
	}
	t.vals[i] = b
}

// del removes p's entry, if any.
func (t *ptrTable) del(p vmm.DevicePtr) {
	if t.n == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.home(p)
	for t.keys[i] != p {
		if t.keys[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	t.n--
	// Backward-shift: move each later entry of the run whose home is not in (i, j] into the hole at i.
	for j := i; ; {
		t.keys[i], t.vals[i] = 0, nil
		for {
			j = (j + 1) & mask
			if t.keys[j] == 0 {
				return
			}
			k := t.home(t.keys[j])
			if i <= j {
				if i < k && k <= j {
					continue
				}
			} else if i < k || k <= j {
				continue
			}
			break
		}
		t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
		i = j
	}
}

func (t *ptrTable) grow() {
	oldK, oldV := t.keys, t.vals
	n := max(ptrTableMin, 2*len(oldK))
	t.keys, t.vals, t.n = make([]vmm.DevicePtr, n), make([]*block, n), 0
	for i, k := range oldK {
		if k != 0 {
			t.set(k, oldV[i])
		}
	}
}

// clear empties the table (keeping its array, so a reset engine does not regrow it).
func (t *ptrTable) clear() {
	clear(t.keys)
	clear(t.vals)
	t.n = 0
}

// len is the number of entries.
func (t *ptrTable) len() int { return t.n }

// all yields every entry, in slot order. The caller must not change the table while it ranges.
func (t *ptrTable) all(yield func(vmm.DevicePtr, *block) bool) {
	for i, k := range t.keys {
		if k != 0 && !yield(k, t.vals[i]) {
			return
		}
	}
}
