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
	"fmt"
	"math"
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
// (GMLAKE_ERR_INVALID) or a disabled engine (GMLAKE_ERR_DISABLED).
func startedSlot(call string, device C.int) (*slot, error) {
	if device < 0 || device >= maxDevices {
		return nil, invalidf("%s(%d): device out of range [0, %d)", call, int(device), maxDevices)
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
	if err == nil && out == nil {
		err = invalidf("gmlake_get_device_stats(%d): out is NULL", int(device))
	}
	if err != nil {
		fail(s, err)
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
	call := "gmlake_reset_peak_stats"
	if accumulated != 0 {
		call = "gmlake_reset_accumulated_stats"
	}
	defer guard(&s, call, &ret)
	s, err := startedSlot(call, device)
	if err != nil {
		fail(s, err)
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
		switch kindOf(err) {
		case errInvalid:
			f.Kind = clib.FailInvalid
		case errOOM:
			f.Kind = clib.FailOOM
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
		fail(s, err)
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
		testHookAlloc(uint64(size))
		var p uintptr
		if p, err = s.eng.AllocPool(uint64(size), uintptr(stream), clib.PoolID{A: uint64(id0), B: uint64(id1)}); err == nil {
			s.live.Add(1)
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
	setError(s, kindOf(err), fmt.Sprintf("gmlake_alloc_pool(%d bytes, device %d, stream %#x, pool (%d, %d)): %v", uint64(size),
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

// Operations of gmlakeGoTPool (torch.c passes them).
const (
	poolCreate = iota
	poolRelease
	poolUseCount
)

//export gmlakeGoTPool
func gmlakeGoTPool(device C.int, id0, id1 C.uint64_t, op C.int) (ret C.int) {
	var s *slot
	call := "gmlake_pool_use_count"
	switch op {
	case poolCreate:
		call = "gmlake_pool_create_or_incref"
	case poolRelease:
		call = "gmlake_pool_release"
	}
	defer guard(&s, call, &ret)
	s, err := poolSlot(call, device)
	if err != nil {
		fail(s, err)
		return -1
	}
	id := clib.PoolID{A: uint64(id0), B: uint64(id1)}
	var n int
	switch op {
	case poolCreate:
		n, err = s.eng.CreateOrIncrefPool(id)
	case poolRelease:
		n, err = s.eng.ReleasePool(id)
	default:
		n = s.eng.PoolUseCount(id)
	}
	if err == nil {
		err = fitsCInt(n, "the use count")
	}
	if err != nil {
		setError(s, kindOf(err), fmt.Sprintf("%s(device %d, pool (%d, %d)): %v", call, int(device), uint64(id0), uint64(id1), err))
		return -1
	}
	return C.int(n)
}

// fitsCInt reports, as an error of kind errOther, a count n (of what) that the int a C function returns
// cannot hold; nil when it fits.
func fitsCInt(n int, what string) error {
	if n < 0 || n > math.MaxInt32 {
		return withKind(errOther, fmt.Errorf("%s: %d, which the int this function returns cannot hold", what, n))
	}
	return nil
}

//export gmlakeGoTPoolLive
func gmlakeGoTPoolLive(device C.int, id0, id1 C.uint64_t, ptrs *C.uint64_t, n C.size_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_pool_live", &ret)
	s, err := startedSlot("gmlake_pool_live", device)
	var live []uintptr
	if err == nil && s != nil {
		live = s.eng.PoolLive(clib.PoolID{A: uint64(id0), B: uint64(id1)})
		if err = fitsCInt(len(live), "the live allocations"); err != nil {
			err = fmt.Errorf("gmlake_pool_live: %w", err)
		}
	}
	if err != nil {
		fail(s, err)
		return -1
	}
	if s == nil {
		return 0
	}
	if ptrs != nil {
		// At most n entries, however large n is (no Go slice of the caller's count: an n beyond what the
		// platform can address made the slice panic and disabled the engine, issue 36 item 1).
		copyPtrs(ptrs, n, live)
	}
	return C.int(len(live))
}

// copyPtrs writes the first min(len(v), n) values of v to the C array at dst, one element at a time.
func copyPtrs(dst *C.uint64_t, n C.size_t, v []uintptr) {
	for i := 0; i < len(v) && uint64(i) < uint64(n); i++ {
		*(*C.uint64_t)(unsafe.Add(unsafe.Pointer(dst), uintptr(i)*unsafe.Sizeof(*dst))) = C.uint64_t(v[i])
	}
}

//export gmlakeGoTSetCapturing
func gmlakeGoTSetCapturing(device C.int, stream C.uintptr_t, capturing C.int) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_set_capturing", &ret)
	s, err := poolSlot("gmlake_set_capturing", device)
	if err == nil {
		err = s.setCapturing(uintptr(stream), capturing != 0)
	}
	if err != nil {
		setError(s, kindOf(err), fmt.Sprintf("gmlake_set_capturing(device %d, stream %#x, %d): %v", int(device), uintptr(stream),
			int(capturing), err))
		return -1
	}
	return 0
}

// setCapturing tells the engine that stream begins (on) or ends a capture. Ending a capture the stream
// never began (or already ended) is refused (GMLAKE_ERR_INVALID) and changes nothing: a caller whose
// begin and end do not pair has lost track of its captures, and the engine would keep deferring frees.
func (s *slot) setCapturing(stream uintptr, on bool) error {
	s.captureMu.Lock()
	defer s.captureMu.Unlock()
	if !on && !s.capturing[stream] {
		return invalidf("stream %#x has no capture to end (gmlake_set_capturing(device, stream, 1) begins one)", stream)
	}
	if err := s.eng.SetCapturing(stream, on); err != nil {
		return err
	}
	if on {
		if s.capturing == nil {
			s.capturing = map[uintptr]bool{}
		}
		s.capturing[stream] = true
	} else {
		delete(s.capturing, stream)
	}
	return nil
}

//export gmlakeGoTCacheInfo
func gmlakeGoTCacheInfo(device C.int, out *C.uint64_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_cache_info", &ret)
	s, err := startedSlot("gmlake_cache_info", device)
	if err == nil && out == nil {
		err = invalidf("gmlake_cache_info(%d): largest_free_block is NULL", int(device))
	}
	if err != nil {
		fail(s, err)
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
	if base == nil || size == nil { // torch.c passes its own; a direct caller of this export may not
		fail(nil, invalidf("gmlake_base_allocation: NULL output"))
		return -1
	}
	var err error = invalidf("no engine has started")
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
	setError(s, kindOf(err), fmt.Sprintf("gmlake_base_allocation(%#x): %v", uintptr(ptr), err))
	return -1
}

//export gmlakeGoTIPCExport
func gmlakeGoTIPCExport(ptr C.uintptr_t, pieces *C.gmlake_ipc_piece, capacity C.size_t, n *C.size_t,
	offset, size *C.uint64_t) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_ipc_export", &ret)
	if n == nil || offset == nil || size == nil || (pieces == nil && capacity > 0) {
		fail(nil, invalidf("gmlake_ipc_export: NULL output (n, offset and size are required, pieces unless cap is 0)"))
		return -1
	}
	var err error = invalidf("no engine has started")
	for d := range slots {
		if s = slots[d].Load(); s == nil || s.usable() != nil {
			continue
		}
		var ex clib.IPCExport
		if ex, err = s.eng.ExportIPC(uintptr(ptr)); err == nil {
			*n = C.size_t(len(ex.Pieces))
			if len(ex.Pieces) > int(capacity) {
				err = invalidf("pieces holds %d, the allocation at %#x lies over %d handles: call again with cap >= %d",
					int(capacity), uintptr(ptr), len(ex.Pieces), len(ex.Pieces))
				break
			}
			out := unsafe.Slice(pieces, len(ex.Pieces))
			for i, pc := range ex.Pieces {
				out[i] = C.gmlake_ipc_piece{fd: C.int(pc.FD), size: C.uint64_t(pc.Size)}
			}
			*offset, *size = C.uint64_t(ex.Offset), C.uint64_t(ex.Size)
			return 0
		}
		if !clib.IsUnknownPointer(err) {
			break
		}
	}
	setError(s, kindOf(err), fmt.Sprintf("gmlake_ipc_export(%#x): %v", uintptr(ptr), err))
	return -1
}

//export gmlakeGoTMemoryFraction
func gmlakeGoTMemoryFraction(device C.int) (ret C.double) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_get_memory_fraction", r)
		}
	}()
	s, err := startedSlot("gmlake_get_memory_fraction", device)
	if err != nil {
		fail(s, err)
		return -1
	}
	if s != nil {
		return C.double(s.eng.MemoryFraction())
	}
	// Before the engine starts the device's total is unknown, so a GMLAKE_MEMORY_LIMIT in bytes cannot be
	// said as a fraction yet: the fraction GMLAKE_MEMORY_FRACTION gives, read by the settings parser (a bad
	// value is the error the engine's start would give, not a silent 1).
	v := getenv("GMLAKE_MEMORY_FRACTION")
	if v == "" {
		return 1
	}
	f, err := clib.ParseFraction(v)
	if err != nil {
		fail(s, fmt.Errorf("GMLAKE_MEMORY_FRACTION=%q: %w", v, err))
		return -1
	}
	return C.double(f)
}

// eventsOn says whether a C event callback is set: engines started later get the hook too.
var eventsOn atomic.Bool

// applyEvents gives s's engine the hook that calls the C event callback, or none. The engine calls it on
// the thread of the call that caused the event, before that call returns; while it runs, gmlake_close of
// the device is refused (the call goes on in the engine after the callback returns).
func applyEvents(s *slot) {
	if !eventsOn.Load() {
		s.eng.SetEventHook(nil)
		return
	}
	device := C.int(s.device)
	s.eng.SetEventHook(func(action int, addr uintptr, size uint64, stream uintptr) {
		s.inCallback.Add(1)
		defer s.inCallback.Add(-1)
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
