package clib

// What PyTorch's full CUDAAllocator needs from an engine beyond alloc and free (issue 15): its statistics,
// the figures of a failed allocation, cacheInfo, getBaseAllocation and the memory fraction. capi/torch.go
// exposes them as C.

import (
	"errors"
	"sync/atomic"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// PyTorch's statistics, as the engine keeps them (capi may import only this package).
type (
	DeviceStats = impl.DeviceStats
	Stat        = impl.Stat
	StatArray   = impl.StatArray
)

// torchCounters are the statistics the C library keeps itself, because its own retry (synchronise the
// streams, allocate again) sits above the engine: an out of memory is counted once it reaches the caller.
type torchCounters struct {
	ooms, syncs         atomic.Int64 // allocations failed with out of memory; synchronisations of all streams
	oomsBase, syncsBase atomic.Int64 // their values at the last ResetAccumulatedStats
}

// TorchStats returns PyTorch's DeviceStats of the engine (see impl/torchstats.go for the meaning), with
// num_ooms counting the allocations that failed with out of memory after every retry (including requests
// larger than the device) and num_sync_all_streams the synchronisations of every stream (empty_cache and the
// out-of-memory path; counted on the simulated device too, where they complete at once).
func (e *CEngine) TorchStats() impl.DeviceStats {
	s := e.a.TorchStats()
	s.NumOOMs = e.torch.ooms.Load() - e.torch.oomsBase.Load()
	s.NumSyncAllStreams = e.torch.syncs.Load() - e.torch.syncsBase.Load()
	return s
}

// ResetPeakStats sets every peak to its current value.
func (e *CEngine) ResetPeakStats() { e.a.ResetPeakStats() }

// ResetAccumulatedStats zeroes the accumulated totals and the num_* counters.
func (e *CEngine) ResetAccumulatedStats() {
	e.a.ResetAccumulatedStats()
	e.torch.oomsBase.Store(e.torch.ooms.Load())
	e.torch.syncsBase.Store(e.torch.syncs.Load())
}

// oversize is the out-of-memory error of a request larger than the device (counted in num_ooms).
func (e *CEngine) oversize(size uint64, s vmm.Stream) error {
	e.torch.ooms.Add(1)
	st := e.a.Stats()
	free, _, _ := e.drv.MemInfo()
	return &impl.OOMError{Requested: size, Rounded: size, Reserved: st.ReservedBytes,
		Cached: st.ReservedBytes - min(st.ReservedBytes, st.AllocatedBytes), Live: st.AllocatedBytes,
		DeviceFree: free, Stream: s}
}

// Failure kinds of AllocFailure (gmlake.h's GMLAKE_FAIL_*).
const (
	FailOOM     = 1 // out of memory, also a request larger than the device
	FailInvalid = 2 // a bad argument (size 0 is not a failure)
	FailOther   = 3 // a driver error or a disabled engine
)

// AllocFailure is why an allocation failed, with the figures PyTorch's out-of-memory message needs.
type AllocFailure struct {
	Kind                                                                   int
	Requested, DeviceTotal, DeviceFree, Allocated, Reserved, Cached, Limit uint64

	_ struct{}
}

// Failure describes the failure err of an allocation of size bytes.
func (e *CEngine) Failure(size uint64, err error) AllocFailure {
	f := AllocFailure{Kind: FailOther, Requested: size, DeviceTotal: e.total, Limit: e.drv.limit.Load()}
	var oom *impl.OOMError
	switch {
	case errors.As(err, &oom):
		f.Kind, f.DeviceFree, f.Allocated, f.Reserved, f.Cached = FailOOM, oom.DeviceFree, oom.Live, oom.Reserved, oom.Cached
		return f
	case IsOutOfMemory(err):
		f.Kind = FailOOM
	case errors.Is(err, impl.ErrInvalidSize), errors.Is(err, impl.ErrUnknownStream), errors.Is(err, impl.ErrUnknownPool):
		f.Kind = FailInvalid
	}
	st := e.a.Stats()
	f.Allocated, f.Reserved = st.AllocatedBytes, st.ReservedBytes
	f.Cached = st.ReservedBytes - min(st.ReservedBytes, st.AllocatedBytes)
	f.DeviceFree, _, _ = e.drv.MemInfo()
	return f
}

// CacheInfo returns the largest block an allocation of the default pool could get without new memory.
func (e *CEngine) CacheInfo() uint64 { return e.a.LargestCachedBlock() }

// BaseAllocation returns the live allocation holding ptr: its start and block size.
func (e *CEngine) BaseAllocation(ptr uintptr) (uintptr, uint64, error) {
	r, err := e.a.AllocationAt(vmm.DevicePtr(ptr))
	return uintptr(r.Base), r.Size, err
}

// MemoryFraction returns the cap on the physical memory as a fraction of the device (1: no cap).
func (e *CEngine) MemoryFraction() float64 {
	lim := e.drv.limit.Load()
	if lim == 0 || e.total == 0 || lim >= e.total {
		return 1
	}
	return float64(lim) / float64(e.total)
}
