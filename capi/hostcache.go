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
	log := unsafe.Slice(ops, int(n))
	hops := s.hostOps[:0]
	for _, op := range log {
		hops = append(hops, clib.HostOp{Ptr: vmm.DevicePtr(op.ptr), Size: uint64(op.size)})
	}
	s.hostOps = hops
	done, err := s.eng.Replay(hops)
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
