package spec

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// View is what the checkers see at one instant: the allocator's state (as its snapshot reports it) and the
// device's state (as the device reports it), side by side, so that every predicate can compare what the
// engine believes with what the device holds. The harness builds it (harness/ops/view.go) from impl.Snapshot
// and sim.Device.State(); spec defines it so that it imports only vmm.
//
// Every slice is sorted as documented; predicates do not mutate a View.
type View struct {
	Policy       string
	Granularity  uint64
	Closed       bool
	Live         []Alloc     // live allocations, sorted by Ptr
	Blocks       []Block     // every pBlock and sBlock
	Chunks       []Chunk     // physical handles the allocator holds, sorted by Handle
	Reservations []vmm.Range // virtual ranges the allocator believes it reserved, sorted by Base
	Mappings     []Mapping   // mappings the allocator believes it made, sorted by VA.Base
	Stats        Stats
	Device       Device
}

// Alloc is one live allocation.
type Alloc struct {
	Ptr       vmm.DevicePtr
	Requested uint64       // bytes asked for
	Size      uint64       // bytes of the block handed out (after rounding)
	Stream    vmm.Stream   // allocation stream
	Uses      []vmm.Stream // streams added by RecordStream
	Block     uint64       // ID of the block that serves it
}

// Range returns the allocation's block range [Ptr, Ptr+Size).
func (a Alloc) Range() vmm.Range { return vmm.Range{Base: a.Ptr, Size: a.Size} }

// BlockState mirrors impl.BlockState.
type BlockState uint8

// Block states.
const (
	BlockFree BlockState = iota
	BlockLive
	BlockPending
)

// Block is one pBlock or sBlock of the allocator.
type Block struct {
	ID       uint64
	Stitched bool
	State    BlockState
	Range    vmm.Range
	Stream   vmm.Stream
	Parts    []uint64
	Events   int    // events still outstanding before the block is reusable
	HeldBy   uint64 // for a pBlock: the sBlock whose view holds its chunks (it is then live too), 0 if none
	// SmallPool: the engine says the block lies in its small-request pool (INV-POOL judges it).
	SmallPool bool
	// WaitsOnStream: a Pending part of an sBlock freed on another stream, waiting only for WaitStream's work
	// (impl.BlockInfo): an Alloc on WaitStream may take it back without asking the device (INV-BUDGET rule 3).
	WaitsOnStream bool
	WaitStream    vmm.Stream
}

// Chunk is one physical handle the allocator holds, with the number of mappings it counts for it.
type Chunk struct {
	Handle vmm.Handle
	Size   uint64
	Refs   int
	// SmallPool: the chunk belongs to a small-pool segment (never stitched; INV-NOSPURIOUSOOM).
	SmallPool bool
	// Orphan: a handle the engine gave up and the device still holds (its release failed past the retries):
	// counted in the reserved bytes, in no segment.
	Orphan bool
}

// Mapping is one whole handle mapped at a virtual range.
type Mapping struct {
	VA     vmm.Range
	Handle vmm.Handle
}

// Stats are the allocator's byte counters (impl.Stats).
type Stats struct {
	Requested, PeakRequested uint64
	Allocated, PeakAllocated uint64
	Reserved, PeakReserved   uint64
	Mapped                   uint64
	NumLive                  uint64
	// AllocRetries counts the Allocs that released the cache and tried again (PyTorch's num_alloc_retries,
	// never reset: impl.Stats.NumCacheFlushes).
	AllocRetries uint64
}

// Device is the device's own account of its memory (sim.DeviceState).
type Device struct {
	Reservations []vmm.Range  // sorted by Base
	Mappings     []DevMapping // sorted by VA.Base
	Handles      []DevHandle  // handles still holding memory, sorted by Handle
	Used         uint64       // physical bytes not returned to the device
	Capacity     uint64
}

// Free returns the device's free physical bytes.
func (d Device) Free() uint64 {
	if d.Used > d.Capacity {
		return 0
	}
	return d.Capacity - d.Used
}

// DevMapping is one mapping on the device.
type DevMapping struct {
	VA         vmm.Range
	Handle     vmm.Handle
	Accessible bool
}

// DevHandle is one physical handle on the device.
type DevHandle struct {
	Handle   vmm.Handle
	Size     uint64
	Released bool
	Mappings int
}

// Violation is one broken invariant: which (the INV name of SPEC.md) and what was seen.
type Violation struct {
	Inv string
	Msg string
}

func (v Violation) String() string { return v.Inv + ": " + v.Msg }

func violation(inv, format string, args ...any) Violation {
	return Violation{Inv: inv, Msg: fmt.Sprintf(format, args...)}
}

// PhysRange is a byte range [Lo, Hi) inside one physical handle.
type PhysRange struct {
	Handle vmm.Handle
	Lo, Hi uint64
	VA     vmm.DevicePtr // the virtual address of Lo through which it was reached
}

// Backing resolves the virtual range r through the device's mappings into the physical ranges behind it,
// in address order. Bytes of r that no device mapping covers are returned as holes (virtual ranges).
// Accessibility is not considered here (see CheckMapped).
func (d Device) Backing(r vmm.Range) (phys []PhysRange, holes []vmm.Range) {
	cur := r.Base
	end := r.Limit()
	for _, m := range overlappingDev(d.Mappings, r) {
		if m.VA.Limit() <= cur {
			continue
		}
		if m.VA.Base >= end {
			break
		}
		if m.VA.Base > cur {
			holes = append(holes, vmm.Range{Base: cur, Size: uint64(m.VA.Base - cur)})
			cur = m.VA.Base
		}
		hi := min(end, m.VA.Limit())
		phys = append(phys, PhysRange{Handle: m.Handle, Lo: uint64(cur - m.VA.Base), Hi: uint64(hi - m.VA.Base), VA: cur})
		cur = hi
		if cur >= end {
			break
		}
	}
	if cur < end {
		holes = append(holes, vmm.Range{Base: cur, Size: uint64(end - cur)})
	}
	return phys, holes
}

// Reserved reports whether p lies in a reservation the device holds.
func (v View) Reserved(p vmm.DevicePtr) bool {
	_, ok := resOfSorted(v.Device.Reservations, p)
	return ok
}
