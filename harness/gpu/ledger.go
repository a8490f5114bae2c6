package gpu

// The ledger: a vmm.Driver wrapper that books every reservation, mapping and physical handle the
// allocator holds through it. On a real GPU it stands in for sim.Device.State(): the spec's invariants
// (INV-MIRROR, INV-MAPPED, INV-NOALIAS, INV-STATS, INV-NOLEAK) are checked against what this process asked
// the driver for and the driver accepted, and the leak check at the end does not depend on other processes
// sharing the GPU (cuMemGetInfo is device-wide). The fuzz campaign and the GPU checkers (Device) use it.
//
// It also names each physical handle once: CUDA hands a released handle's value out again (a
// CUmemGenericAllocationHandle is the driver's pointer to its record), where the simulated device never
// does, and the judges key ownership and history by handle across steps (INV-POOL's owners, the release
// history), so a value released and created again within one step read as one handle (a false INV-POOL on
// the H200). A value the driver hands out a second time gets a fresh name of the ledger's; the engine sees
// only names, which the ledger turns back into the driver's handles. A value never seen before is its own
// name, so over the simulated device the names are the device's handles.

import (
	"errors"
	"sort"
	"sync"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

type ledgerHandle struct {
	size     uint64
	released bool
	mappings int
}

type ledgerMapping struct {
	size       uint64
	h          vmm.Handle
	accessible bool
}

// Ledger wraps a driver and books what succeeded. Safe for concurrent use.
type Ledger struct {
	vmm.Driver
	mu struct {
		sync.Mutex
		reservations map[vmm.DevicePtr]uint64
		mappings     map[vmm.DevicePtr]*ledgerMapping // keyed by base
		handles      map[vmm.Handle]*ledgerHandle     // by name; holding memory: not both released and unmapped
		used         uint64                           // Invariant: sum of sizes of handles
		// seen: every handle value the driver handed out; real: the driver's handle of each name that is
		// not its own (a value handed out again), until the name's memory is freed; fresh: the next such
		// name. Invariant: fresh is above every value in seen and every key of real.
		seen  map[vmm.Handle]bool
		real  map[vmm.Handle]vmm.Handle
		fresh vmm.Handle
	}
	total uint64
}

func NewLedger(d vmm.Driver) *Ledger {
	l := &Ledger{Driver: d}
	l.mu.reservations = make(map[vmm.DevicePtr]uint64)
	l.mu.mappings = make(map[vmm.DevicePtr]*ledgerMapping)
	l.mu.handles = make(map[vmm.Handle]*ledgerHandle)
	l.mu.seen, l.mu.real, l.mu.fresh = map[vmm.Handle]bool{}, map[vmm.Handle]vmm.Handle{}, 1<<62
	if _, total, err := d.MemInfo(); err == nil {
		l.total = total
	}
	return l
}

// Create creates a handle and returns its name (see the top of this file).
func (l *Ledger) Create(size uint64) (vmm.Handle, error) {
	h, err := l.Driver.Create(size)
	if err != nil {
		return h, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	name := h
	if l.mu.seen[h] {
		name = l.mu.fresh
		l.mu.fresh++
		l.mu.real[name] = h
	}
	l.mu.seen[h] = true
	l.mu.fresh = max(l.mu.fresh, h+1)
	l.mu.handles[name] = &ledgerHandle{size: size}
	l.mu.used += size
	return name, nil
}

// Used is the physical bytes of the handles the Ledger holds.
func (l *Ledger) Used() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.used
}

// realLocked is the driver's handle of a name.
func (l *Ledger) realLocked(name vmm.Handle) vmm.Handle {
	if h, ok := l.mu.real[name]; ok {
		return h
	}
	return name
}

func (l *Ledger) maybeFreeLocked(h vmm.Handle, lh *ledgerHandle) {
	if lh.released && lh.mappings == 0 {
		delete(l.mu.handles, h)
		delete(l.mu.real, h)
		l.mu.used -= lh.size
	}
}

func (l *Ledger) Release(h vmm.Handle) error {
	l.mu.Lock()
	real := l.realLocked(h)
	l.mu.Unlock()
	err := l.Driver.Release(real)
	if err == nil {
		l.mu.Lock()
		if lh := l.mu.handles[h]; lh != nil {
			lh.released = true
			l.maybeFreeLocked(h, lh)
		}
		l.mu.Unlock()
	}
	return err
}

func (l *Ledger) Reserve(size uint64) (vmm.DevicePtr, error) {
	p, err := l.Driver.Reserve(size)
	if err == nil {
		l.mu.Lock()
		l.mu.reservations[p] = size
		l.mu.Unlock()
	}
	return p, err
}

func (l *Ledger) FreeAddress(p vmm.DevicePtr, size uint64) error {
	err := l.Driver.FreeAddress(p, size)
	if err == nil {
		l.mu.Lock()
		delete(l.mu.reservations, p)
		l.mu.Unlock()
	}
	return err
}

func (l *Ledger) Map(p vmm.DevicePtr, size uint64, h vmm.Handle, off uint64) error {
	l.mu.Lock()
	real := l.realLocked(h)
	l.mu.Unlock()
	err := l.Driver.Map(p, size, real, off)
	if err == nil {
		l.mu.Lock()
		l.mu.mappings[p] = &ledgerMapping{size: size, h: h}
		if lh := l.mu.handles[h]; lh != nil {
			lh.mappings++
		}
		l.mu.Unlock()
	}
	return err
}

// inRangeLocked returns the bases of the mappings inside [p, p+size), sorted.
func (l *Ledger) inRangeLocked(p vmm.DevicePtr, size uint64) []vmm.DevicePtr {
	var out []vmm.DevicePtr
	for b, m := range l.mu.mappings {
		if b >= p && uint64(b)+m.size <= uint64(p)+size {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (l *Ledger) Unmap(p vmm.DevicePtr, size uint64) error {
	err := l.Driver.Unmap(p, size)
	if err == nil {
		l.mu.Lock()
		for _, b := range l.inRangeLocked(p, size) {
			m := l.mu.mappings[b]
			delete(l.mu.mappings, b)
			if lh := l.mu.handles[m.h]; lh != nil {
				lh.mappings--
				l.maybeFreeLocked(m.h, lh)
			}
		}
		l.mu.Unlock()
	}
	return err
}

func (l *Ledger) SetAccess(p vmm.DevicePtr, size uint64) error {
	err := l.Driver.SetAccess(p, size)
	if err == nil {
		l.mu.Lock()
		for _, b := range l.inRangeLocked(p, size) {
			l.mu.mappings[b].accessible = true
		}
		l.mu.Unlock()
	}
	return err
}

// State returns what this process holds, in the shape of the simulated device's state.
func (l *Ledger) State() sim.DeviceState {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := sim.DeviceState{Used: l.mu.used, Capacity: l.total}
	for p, size := range l.mu.reservations {
		s.Reservations = append(s.Reservations, vmm.Range{Base: p, Size: size})
	}
	for p, m := range l.mu.mappings {
		s.Mappings = append(s.Mappings, sim.DeviceMapping{VA: vmm.Range{Base: p, Size: m.size}, Handle: m.h, Accessible: m.accessible})
	}
	for h, lh := range l.mu.handles {
		s.Handles = append(s.Handles, sim.HandleInfo{Handle: h, Size: lh.size, Released: lh.released, Mappings: lh.mappings})
	}
	sort.Slice(s.Reservations, func(i, j int) bool { return s.Reservations[i].Base < s.Reservations[j].Base })
	sort.Slice(s.Mappings, func(i, j int) bool { return s.Mappings[i].VA.Base < s.Mappings[j].VA.Base })
	sort.Slice(s.Handles, func(i, j int) bool { return s.Handles[i].Handle < s.Handles[j].Handle })
	return s
}

// Reclaim gives back to the driver everything still booked: it unmaps every mapping, releases every handle
// not released yet and frees every reservation, through the ledger (so its books end empty), and returns
// what it reclaimed ("" when nothing was held) and the driver's errors. It is for a device whose engine was
// never closed (a checker's run cut short: a failed rapid case, rapid's shrinking, a discarded draw): on a
// real GPU what a process leaks stays held until it exits, so without it every later run in the process
// would find the GPU full and fail with out of memory.
func (l *Ledger) Reclaim() (string, error) {
	empty, held := l.Empty()
	if empty {
		return "", nil
	}
	s := l.State()
	var errs []error
	for _, m := range s.Mappings {
		errs = append(errs, l.Unmap(m.VA.Base, m.VA.Size))
	}
	for _, h := range s.Handles {
		if !h.Released {
			errs = append(errs, l.Release(h.Handle))
		}
	}
	for _, r := range s.Reservations {
		errs = append(errs, l.FreeAddress(r.Base, r.Size))
	}
	return held, errors.Join(errs...)
}

// Empty reports whether nothing is held, and what is.
func (l *Ledger) Empty() (bool, string) {
	s := l.State()
	if len(s.Reservations) == 0 && len(s.Mappings) == 0 && len(s.Handles) == 0 {
		return true, ""
	}
	return false, (sim.LeakReport{Reservations: s.Reservations, Mappings: s.Mappings, Handles: s.Handles, Used: s.Used}).String()
}
