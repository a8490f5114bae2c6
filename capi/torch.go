package main

// The torch engine ABI of gmlake.h (issue 15): PyTorch-meaning statistics, snapshots, segment events, the
// last allocation failure, pools, stream capture, cacheInfo, getBaseAllocation and the memory fraction, for
// the C++ CUDAAllocator of python/gmlake_torch. torch.c holds the C functions; these are their Go exports.

/*
#include <stddef.h>
#include <stdint.h>
#include "gmlake.h"

void gmlake_set_thread_failure(int kind, uint64_t requested, uint64_t device_total, uint64_t device_free,
                               uint64_t allocated, uint64_t reserved, uint64_t cached, uint64_t limit);
void gmlake_fire_event(int device, int action, uint64_t addr, uint64_t size, uintptr_t stream);
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/gmlake/gmlake/impl/clib"
)

// statOut copies one statistic into C.
func statOut(dst *C.gmlake_stat, s clib.Stat) {
	dst.current, dst.peak, dst.allocated, dst.freed = C.int64_t(s.Current), C.int64_t(s.Peak),
		C.int64_t(s.Allocated), C.int64_t(s.Freed)
}

func statsOut(dst *[3]C.gmlake_stat, a clib.StatArray) {
	for i := range a {
		statOut(&dst[i], a[i])
	}
}

// startedSlot returns device's slot if its engine started (nil, nil if not), or an error for a bad device
// or a disabled engine.
func startedSlot(call string, device C.int) (*slot, error) {
	if device < 0 || device >= maxDevices {
		return nil, fmt.Errorf("%s: device %d out of range [0, %d)", call, int(device), maxDevices)
	}
	s := slots[device].Load()
	if s == nil {
		return nil, nil
	}
	if err := s.usable(); err != nil {
		return s, fmt.Errorf("%s: %w", call, err)
	}
	return s, nil
}

// guard recovers a panic in an export: the call fails (*ret = -1) and the device's engine is disabled.
func guard(s **slot, call string, ret *C.int) {
	if r := recover(); r != nil {
		*ret = -1
		recovered(*s, call, r)
	}
}

//export gmlakeGoTStats
func gmlakeGoTStats(device C.int, out *C.gmlake_device_stats) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_get_device_stats", &ret)
	s, err := startedSlot("gmlake_get_device_stats", device)
	if err != nil {
		setError(s, err.Error())
		return -1
	}
	if out == nil {
		setError(s, "gmlake_get_device_stats: out is NULL")
		return -1
	}
	var st clib.DeviceStats
	st.MaxSplitSize = -1
	if s != nil {
		st = s.eng.TorchStats()
	}
	statsOut(&out.allocation, st.Allocation)
	statsOut(&out.segment, st.Segment)
	statsOut(&out.active, st.Active)
	statsOut(&out.inactive_split, st.InactiveSplit)
	statsOut(&out.allocated_bytes, st.AllocatedBytes)
	statsOut(&out.reserved_bytes, st.ReservedBytes)
	statsOut(&out.active_bytes, st.ActiveBytes)
	statsOut(&out.inactive_split_bytes, st.InactiveSplitBytes)
	statsOut(&out.requested_bytes, st.RequestedBytes)
	out.num_alloc_retries = C.int64_t(st.NumAllocRetries)
	out.num_ooms = C.int64_t(st.NumOOMs)
	out.num_sync_all_streams = C.int64_t(st.NumSyncAllStreams)
	out.num_device_alloc = C.int64_t(st.NumDeviceAlloc)
	out.num_device_free = C.int64_t(st.NumDeviceFree)
	statOut(&out.oversize_allocations, st.OversizeAllocations)
	statOut(&out.oversize_segments, st.OversizeSegments)
	out.max_split_size = C.int64_t(st.MaxSplitSize)
	return 0
}

//export gmlakeGoTReset
func gmlakeGoTReset(device C.int, accumulated C.int) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_reset_stats", &ret)
	s, err := startedSlot("gmlake_reset_stats", device)
	if err != nil {
		setError(s, err.Error())
		return -1
	}
	if s == nil {
		return 0 // nothing counted yet
	}
	if accumulated != 0 {
		s.eng.ResetAccumulatedStats()
	} else {
		s.eng.ResetPeakStats()
	}
	return 0
}

// setFailure records why an allocation of size bytes failed, for gmlake_last_failure. s may be nil (no
// engine: a bad device or configuration).
func setFailure(s *slot, size uint64, err error) {
	var f clib.AllocFailure
	if s == nil || s.usable() != nil {
		f = clib.AllocFailure{Kind: clib.FailOther, Requested: size}
		if s == nil && !errors.Is(err, clib.ErrBadKnob) {
			f.Kind = clib.FailInvalid
		}
	} else {
		f = s.eng.Failure(size, err)
	}
	C.gmlake_set_thread_failure(C.int(f.Kind), C.uint64_t(f.Requested), C.uint64_t(f.DeviceTotal),
		C.uint64_t(f.DeviceFree), C.uint64_t(f.Allocated), C.uint64_t(f.Reserved), C.uint64_t(f.Cached),
		C.uint64_t(f.Limit))
}

//export gmlakeGoTSnapshotJSON
func gmlakeGoTSnapshotJSON(device C.int, buf *C.char, n C.size_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_snapshot_json", &ret)
	s, err := startedSlot("gmlake_snapshot_json", device)
	if err != nil {
		setError(s, err.Error())
		return -1
	}
	if s == nil {
		return copyOut(fmt.Sprintf(`{"device":%d,"segments":[],"stitched_blocks":[]}`, int(device)), buf, n)
	}
	return copyOut(string(s.eng.SnapshotJSON()), buf, n)
}

//export gmlakeGoTAllocPool
func gmlakeGoTAllocPool(size C.size_t, device C.int, stream C.uintptr_t, id0, id1 C.uint64_t) (ret C.uintptr_t) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = 0
			recovered(s, "gmlake_alloc_pool", r)
		}
	}()
	if size == 0 {
		return 0
	}
	s, err := slotFor(int(device))
	if err == nil {
		err = s.usable()
	}
	if err == nil {
		var p uintptr
		if p, err = s.eng.AllocPool(uint64(size), uintptr(stream), clib.PoolID{A: uint64(id0), B: uint64(id1)}); err == nil {
			if t := tracing.Load(); t != nil {
				t.alloc(int(device), uintptr(stream), uint64(size), p)
			}
			return C.uintptr_t(p)
		}
	}
	if s != nil {
		s.allocFailures.Add(1)
	}
	setFailure(s, uint64(size), err)
	setError(s, fmt.Sprintf("gmlake_alloc_pool(%d bytes, device %d, stream %#x, pool (%d, %d)): %v", uint64(size),
		int(device), uintptr(stream), uint64(id0), uint64(id1), err))
	return 0
}

// poolSlot returns device's slot, starting its engine (pools are made before the first allocation).
func poolSlot(call string, device C.int) (*slot, error) {
	s, err := slotFor(int(device))
	if err == nil {
		err = s.usable()
	}
	if err != nil {
		return s, fmt.Errorf("%s: %w", call, err)
	}
	return s, nil
}

//export gmlakeGoTPool
func gmlakeGoTPool(device C.int, id0, id1 C.uint64_t, op C.int) (ret C.int) {
	var s *slot
	call := [...]string{"gmlake_pool_create_or_incref", "gmlake_pool_release", "gmlake_pool_use_count"}[op]
	defer guard(&s, call, &ret)
	s, err := poolSlot(call, device)
	if err != nil {
		setError(s, err.Error())
		return -1
	}
	id := clib.PoolID{A: uint64(id0), B: uint64(id1)}
	var n int
	switch op {
	case 0:
		n, err = s.eng.CreateOrIncrefPool(id)
	case 1:
		n, err = s.eng.ReleasePool(id)
	default:
		n = s.eng.PoolUseCount(id)
	}
	if err != nil {
		setError(s, fmt.Sprintf("%s(device %d, pool (%d, %d)): %v", call, int(device), uint64(id0), uint64(id1), err))
		return -1
	}
	return C.int(n)
}

//export gmlakeGoTPoolLive
func gmlakeGoTPoolLive(device C.int, id0, id1 C.uint64_t, ptrs *C.uint64_t, n C.size_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_pool_live", &ret)
	s, err := startedSlot("gmlake_pool_live", device)
	if err != nil {
		setError(s, err.Error())
		return -1
	}
	if s == nil {
		return 0
	}
	live := s.eng.PoolLive(clib.PoolID{A: uint64(id0), B: uint64(id1)})
	if ptrs != nil {
		out := unsafe.Slice(ptrs, int(n))
		for i := 0; i < len(live) && i < len(out); i++ {
			out[i] = C.uint64_t(live[i])
		}
	}
	return C.int(len(live))
}

//export gmlakeGoTSetCapturing
func gmlakeGoTSetCapturing(device C.int, stream C.uintptr_t, capturing C.int) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_set_capturing", &ret)
	s, err := poolSlot("gmlake_set_capturing", device)
	if err == nil {
		err = s.eng.SetCapturing(uintptr(stream), capturing != 0)
	}
	if err != nil {
		setError(s, fmt.Sprintf("gmlake_set_capturing(device %d, stream %#x, %d): %v", int(device), uintptr(stream),
			int(capturing), err))
		return -1
	}
	return 0
}

//export gmlakeGoTCacheInfo
func gmlakeGoTCacheInfo(device C.int, out *C.uint64_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_cache_info", &ret)
	s, err := startedSlot("gmlake_cache_info", device)
	if err != nil {
		setError(s, err.Error())
		return -1
	}
	var v uint64
	if s != nil {
		v = s.eng.CacheInfo()
	}
	*out = C.uint64_t(v)
	return 0
}

//export gmlakeGoTBaseAllocation
func gmlakeGoTBaseAllocation(ptr C.uintptr_t, base, size *C.uint64_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_base_allocation", &ret)
	err := fmt.Errorf("no engine has started")
	for d := range slots {
		if s = slots[d].Load(); s == nil || s.usable() != nil {
			continue
		}
		var b uintptr
		var n uint64
		if b, n, err = s.eng.BaseAllocation(uintptr(ptr)); err == nil {
			*base, *size = C.uint64_t(b), C.uint64_t(n)
			return 0
		}
		if !clib.IsUnknownPointer(err) {
			break
		}
	}
	setError(s, fmt.Sprintf("gmlake_base_allocation(%#x): %v", uintptr(ptr), err))
	return -1
}

//export gmlakeGoTMemoryFraction
func gmlakeGoTMemoryFraction(device C.int) (ret C.double) {
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(nil, "gmlake_get_memory_fraction", r)
		}
	}()
	if device < 0 || device >= maxDevices {
		setError(nil, fmt.Sprintf("gmlake_get_memory_fraction: device %d out of range [0, %d)", int(device), maxDevices))
		return -1
	}
	if s := slots[device].Load(); s != nil {
		return C.double(s.eng.MemoryFraction())
	}
	createMu.Lock()
	f := pendingFraction[device]
	createMu.Unlock()
	if f == 0 {
		if v, err := strconv.ParseFloat(getenv("GMLAKE_MEMORY_FRACTION"), 64); err == nil && v > 0 && v <= 1 {
			f = v
		} else {
			f = 1
		}
	}
	return C.double(f)
}

// eventsOn says whether a C event callback is set: engines started later get the hook too.
var eventsOn atomic.Bool

// applyEvents gives s's engine the hook that calls the C event callback, or none.
func applyEvents(s *slot) {
	if !eventsOn.Load() {
		s.eng.SetEventHook(nil)
		return
	}
	device := C.int(s.device)
	s.eng.SetEventHook(func(action int, addr uintptr, size uint64, stream uintptr) {
		C.gmlake_fire_event(device, C.int(action), C.uint64_t(addr), C.uint64_t(size), C.uintptr_t(stream))
	})
}

//export gmlakeGoTSetEvents
func gmlakeGoTSetEvents(on C.int) {
	defer func() {
		if r := recover(); r != nil {
			recovered(nil, "gmlake_set_event_callback", r)
		}
	}()
	createMu.Lock()
	defer createMu.Unlock()
	eventsOn.Store(on != 0)
	for d := range slots {
		if s := slots[d].Load(); s != nil && s.usable() == nil {
			applyEvents(s)
		}
	}
}
