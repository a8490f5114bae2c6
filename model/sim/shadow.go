package sim

import (
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// shadow is the sparse contents of one physical handle: sorted, disjoint runs of one byte value. Bytes in
// no run read as 0, so a 141 GB device costs nothing until written. Writes of 0 delete runs.
//
// Invariant: runs are sorted by lo, disjoint, non-empty, and none has value 0.
type shadow struct {
	runs []run
}

type run struct {
	lo, hi uint64 // offsets within the handle, [lo, hi)
	v      byte
}

// write sets [lo, hi) to v.
func (s *shadow) write(lo, hi uint64, v byte) {
	if lo >= hi {
		return
	}
	// i: first run ending after lo; j: first run starting at or after hi.
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].hi > lo })
	j := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].lo >= hi })
	var repl []run
	if i < j && s.runs[i].lo < lo {
		repl = append(repl, run{s.runs[i].lo, lo, s.runs[i].v})
	}
	if v != 0 {
		repl = append(repl, run{lo, hi, v})
	}
	if i < j && s.runs[j-1].hi > hi {
		repl = append(repl, run{hi, s.runs[j-1].hi, s.runs[j-1].v})
	}
	out := make([]run, 0, len(s.runs)-(j-i)+len(repl))
	out = append(out, s.runs[:i]...)
	out = append(out, repl...)
	out = append(out, s.runs[j:]...)
	s.runs = out
}

// read copies [lo, lo+len(dst)) into dst.
func (s *shadow) read(lo uint64, dst []byte) {
	hi := lo + uint64(len(dst))
	clear(dst)
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].hi > lo })
	for ; i < len(s.runs) && s.runs[i].lo < hi; i++ {
		r := s.runs[i]
		a, b := max(r.lo, lo), min(r.hi, hi)
		for k := a; k < b; k++ {
			dst[k-lo] = r.v
		}
	}
}

// accessibleLocked walks the mappings covering [ptr, ptr+size) and calls fn for each piece (mapping, offset
// within it, length). It fails with IllegalAddress (what the GPU reports as a fault) if any byte is unmapped
// or not yet made accessible by SetAccess; fn is then never called.
func (d *Device) accessibleLocked(k vmm.CallKind, ptr vmm.DevicePtr, size uint64, fn func(m *mapping, off, n uint64)) error {
	if size == 0 {
		return nil
	}
	end := uint64(ptr) + size
	if end < uint64(ptr) {
		return d.failLocked(k, vmm.IllegalAddress, "range %v + %d overflows the address space", ptr, size)
	}
	type piece struct {
		m      *mapping
		off, n uint64
	}
	var pieces []piece
	first := d.mappingAtLocked(ptr)
	if first == nil {
		return d.failLocked(k, vmm.IllegalAddress, "rule 5: %v is not mapped", ptr)
	}
	next := uint64(ptr)
	var err error
	d.mu.mappings.AscendGreaterOrEqual(first, func(m *mapping) bool {
		if next >= end {
			return false
		}
		if uint64(m.base) > next {
			err = d.failLocked(k, vmm.IllegalAddress, "rule 5: %v is not mapped", vmm.DevicePtr(next))
			return false
		}
		off := next - uint64(m.base)
		n := min(end, uint64(m.limit())) - next
		if !m.access {
			err = d.failLocked(k, vmm.IllegalAddress, "rule 5: [%v, %v) in mapping [%v, %v) of handle %d has no access (SetAccess not called)",
				vmm.DevicePtr(next), vmm.DevicePtr(next+n), m.base, m.limit(), m.h.id)
			return false
		}
		pieces = append(pieces, piece{m, off, n})
		next += n
		return true
	})
	if err != nil {
		return err
	}
	if next < end {
		return d.failLocked(k, vmm.IllegalAddress, "rule 5: %v is not mapped", vmm.DevicePtr(next))
	}
	for _, p := range pieces {
		fn(p.m, p.off, p.n)
	}
	return nil
}

// Memset fills [ptr, ptr+size) with value through the mappings there, so every alias of the handles sees
// it (rule 8). It is one unit of work on s; the write itself is applied at once.
func (d *Device) Memset(ptr vmm.DevicePtr, size uint64, value byte, s vmm.Stream) error {
	const k = vmm.CallMemset
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	st, err := d.lookupStreamLocked(k, s)
	if err != nil {
		return err
	}
	var written []*mapping
	err = d.accessibleLocked(k, ptr, size, func(m *mapping, off, n uint64) {
		m.h.shadow.write(off, off+n, value)
		written = append(written, m)
	})
	if err != nil {
		return err
	}
	d.submitLocked(st, nil)
	if st.completed < st.submitted {
		for _, m := range written {
			noteUseLocked(m, st)
		}
	}
	d.chargeLocked(k, size)
	return nil
}

// Read copies len(dst) bytes at ptr into dst. Like cuMemcpyDtoH it is synchronous: it first completes all
// work submitted to s (and what that work waits on), then reads.
func (d *Device) Read(ptr vmm.DevicePtr, dst []byte, s vmm.Stream) error {
	const k = vmm.CallRead
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	st, err := d.lookupStreamLocked(k, s)
	if err != nil {
		return err
	}
	type piece struct {
		m      *mapping
		off, n uint64
	}
	var pieces []piece
	err = d.accessibleLocked(k, ptr, uint64(len(dst)), func(m *mapping, off, n uint64) {
		pieces = append(pieces, piece{m, off, n})
	})
	if err != nil {
		return err
	}
	d.completeLocked(st, st.submitted)
	at := uint64(0)
	for _, p := range pieces {
		p.m.h.shadow.read(p.off, dst[at:at+p.n])
		at += p.n
	}
	d.chargeLocked(k, uint64(len(dst)))
	return nil
}
