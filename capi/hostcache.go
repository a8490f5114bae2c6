package main

// The Go side of the host cache (hostcache.c; impl/doc.go, "The host cache"): the allocation that tells the
// cache whether it may keep the block when it is freed, and the replay of the cache's log.

/*
#include <stdint.h>
#include "hostcache.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/vmm"
)

//export gmlakeGoHostAlloc
func gmlakeGoHostAlloc(size C.size_t, device C.int, stream C.uintptr_t, lo, hi *C.uint64_t) (ret C.uintptr_t) {
	*lo, *hi = 0, 0
	p := gmlakeGoAlloc(size, device, stream)
	if p == 0 || tracing.Load() != nil {
		return p
	}
	defer func() {
		if r := recover(); r != nil {
			*lo, *hi = 0, 0
			recovered(slots[device].Load(), "gmlake_alloc", r)
		}
	}()
	if s := slots[device].Load(); s != nil && s.usable() == nil {
		l, h := s.eng.HostClass(uintptr(p))
		*lo, *hi = C.uint64_t(l), C.uint64_t(h)
	}
	return p
}

// gmlakeGoHostAllocReplay is gmlakeGoHostReplay then gmlakeGoHostAlloc in one crossing, for an allocation the
// cache missed while its log was not empty (hostcache.c calls it under the device's mutex, so the log is
// applied before any later one). *rc is the replay's answer; the allocation runs whatever it was, as the two
// separate calls would.
//
//export gmlakeGoHostAllocReplay
func gmlakeGoHostAllocReplay(size C.size_t, device C.int, stream C.uintptr_t, ops *C.gmlake_hc_op, n C.int,
	rc *C.int, lo, hi *C.uint64_t) (ret C.uintptr_t) {
	*lo, *hi, *rc = 0, 0, 0
	var s *slot
	if device >= 0 && device < maxDevices {
		s = slots[device].Load()
	}
	if s == nil || s.usable() != nil || size == 0 || tracing.Load() != nil || testHookAllocArmed(uint64(size)) {
		// Not the common case (no engine yet, a disabled one, a trace that records each call): the two calls.
		*rc = gmlakeGoHostReplay(device, ops, n)
		return gmlakeGoHostAlloc(size, device, stream, lo, hi)
	}
	defer func() {
		if r := recover(); r != nil {
			ret, *lo, *hi = 0, 0, 0
			*rc = -1
			recovered(s, "gmlake_alloc (with the host cache's replay)", r)
		}
	}()
	log, hops := s.hostLog(ops, n)
	r, err := s.eng.AllocHost(hops, uint64(size), uintptr(stream))
	if *rc = s.replayed(device, log, hops, r.Replayed, r.ReplayErr); *rc != 0 || r.ReplayErr != nil {
		if *rc == 1 { // the engine closed meanwhile: as the separate calls, the allocation finds none and starts one
			return gmlakeGoHostAlloc(size, device, stream, lo, hi)
		}
		return 0
	}
	if err != nil {
		allocFailed(s, uint64(size), int(device), uintptr(stream), err)
		return 0
	}
	s.live.Add(1)
	*lo, *hi = C.uint64_t(r.Lo), C.uint64_t(r.Hi)
	return C.uintptr_t(r.Ptr)
}

// gmlakeGoHostReplay applies device's host-cache log (n entries at ops, in the order the cache served them). It
// returns 0; 1 when no engine runs on the device any more (gmlake_close raced the calls the log holds: as their
// own calls would have, they find no engine, and the cache forgets its table); or -1 when the engine could
// not apply the log: the cache and the engine disagree, an internal error that disables the device's engine
// (GMLAKE_ERR_DISABLED from then on), and the cache turns itself off.
//
//export gmlakeGoHostReplay
func gmlakeGoHostReplay(device C.int, ops *C.gmlake_hc_op, n C.int) (ret C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_free (the host cache's replay)", r)
		}
	}()
	if device < 0 || device >= maxDevices || n <= 0 {
		return 0
	}
	if s = slots[device].Load(); s == nil {
		return 1
	}
	if s.usable() != nil {
		return -1 // disabled: it applies nothing more
	}
	log, hops := s.hostLog(ops, n)
	done, err := s.eng.Replay(hops)
	return s.replayed(device, log, hops, done, err)
}

// hostLog converts the host cache's log (n entries at ops) into the engine's, in s's reused buffer.
func (s *slot) hostLog(ops *C.gmlake_hc_op, n C.int) ([]C.gmlake_hc_op, []clib.HostOp) {
	log := unsafe.Slice(ops, int(n))
	hops := s.hostOps[:0]
	for _, op := range log {
		hops = append(hops, clib.HostOp{Ptr: vmm.DevicePtr(op.ptr), Size: uint64(op.size)})
	}
	s.hostOps = hops
	return log, hops
}

// replayed accounts for the first done entries of a log the engine applied (err: why it stopped there) and
// answers as gmlakeGoHostReplay.
func (s *slot) replayed(device C.int, log []C.gmlake_hc_op, hops []clib.HostOp, done int, err error) C.int {
	hits := 0
	for _, op := range hops[:done] {
		if op.Size > 0 {
			hits++
		}
	}
	s.live.Add(int64(hits - (done - hits)))
	s.hostHits.Add(uint64(hits))
	s.hostFrees.Add(uint64(done - hits))
	if t := tracing.Load(); t != nil {
		for i, op := range log[:done] {
			if hops[i].Size == 0 {
				t.free(int(device), uintptr(op.ptr))
			} else {
				t.alloc(int(device), uintptr(op.stream), uint64(op.size), uintptr(op.ptr))
			}
		}
	}
	if clib.IsClosed(err) {
		return 1
	}
	if err != nil {
		msg := fmt.Sprintf("gmlake: internal error in the host cache of device %d: %v (the engine of this device is now "+
			"disabled; set GMLAKE_HOST_CACHE=0 to run without the cache, and please report this)", int(device), err)
		fmt.Fprintln(os.Stderr, msg)
		s.disabled.CompareAndSwap(nil, &msg)
		setError(s, errInternal, msg)
		return -1
	}
	return 0
}
