package impl

// CUDA IPC: what another process needs to map a live allocation (PyTorch's shareIpcHandle). Every mapping
// the engine makes maps a whole handle at offset 0 (vmm.Driver.Map), so any allocation lies over a run of
// whole handles side by side: a pBlock over the chunks of its segment that it overlaps, an sBlock over the
// chunks of its view. The export lists those handles, each as a POSIX file descriptor of the driver's
// (vmm.Exporter), with the allocation's offset into their run; the other process imports each, maps them
// side by side in its own reservation and reads the allocation at the offset. The engine's state does not
// change: the other process's imports hold their own references to the memory, and the producer's
// PyTorch keeps the allocation alive (torch.multiprocessing's CudaIPCSentData) until the consumer is done.

import (
	"errors"
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// ErrNoExport matches an export the driver cannot make: a device whose handles are not exportable as POSIX
// file descriptors (GMLAKE_CUDA_HANDLES=none, or a driver without the capability).
var ErrNoExport = errors.New("gmlake: this device's memory cannot be exported for CUDA IPC")

// IPCPiece is one physical handle under an exported allocation: the driver's POSIX file descriptor for it
// (open until the handle is released; not the caller's to close) and the handle's bytes.
type IPCPiece struct {
	FD   int
	Size uint64
}

// IPCExport is a live allocation as another process maps it: Pieces mapped whole, side by side in this
// order, cover [Offset, Offset+Size) of their run, the allocation's bytes (its block).
type IPCExport struct {
	Pieces []IPCPiece
	Offset uint64
	Size   uint64
}

// ExportIPC returns the handles under the live allocation that starts at p, exported (PyTorch's
// shareIpcHandle). ErrUnknownPointer if p is not the start of a live allocation, ErrNoExport if the driver
// cannot export; nothing changes either way.
func (a *Allocator) ExportIPC(p vmm.DevicePtr) (IPCExport, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return IPCExport{}, ErrClosed
	}
	b := a.liveAtLocked(p)
	if b == nil {
		if a.liveContainingLocked(p) != nil {
			return IPCExport{}, fmt.Errorf("%w: %v (CUDA IPC shares an allocation from its start)", ErrInteriorPtr, p)
		}
		return IPCExport{}, fmt.Errorf("%w: %v is not the start of a live allocation", ErrUnknownPointer, p)
	}
	ex, ok := vmm.ExporterOf(a.d.Meter)
	if !ok {
		return IPCExport{}, fmt.Errorf("%w: the driver has no export", ErrNoExport)
	}
	// The chunks under [b.ptr, b.end()) and the address where the first one is mapped.
	var under []*chunk
	var first vmm.DevicePtr
	if b.s != nil {
		at0 := b.s.ptr
		for _, c := range b.s.chunks {
			if at0 < b.end() && at(at0, c.size) > b.ptr {
				if under == nil {
					first = at0
				}
				under = append(under, c)
			}
			at0 = at(at0, c.size)
		}
	} else {
		seg := b.p.seg
		for _, c := range seg.chunks {
			lo := at(seg.base, c.off)
			if lo < b.end() && at(lo, c.size) > b.ptr {
				if under == nil {
					first = lo
				}
				under = append(under, c)
			}
		}
	}
	out := IPCExport{Offset: uint64(b.ptr - first), Size: uint64(b.size)}
	for _, c := range under {
		fd, err := ex.ExportFD(c.h)
		if err != nil {
			if errors.Is(err, vmm.ErrNotSupported) {
				err = fmt.Errorf("%w: %w", ErrNoExport, err)
			}
			return IPCExport{}, fmt.Errorf("export of the %s allocation at %v: %w", vmm.FormatBytes(uint64(b.size)), p, err)
		}
		out.Pieces = append(out.Pieces, IPCPiece{FD: fd, Size: uint64(c.size)})
	}
	return out, nil
}
