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
)

// errNotYet is returned by the functions of the ABI that are declared but not implemented yet.
var errNotYet = errors.New("gmlake: not implemented yet in this build of libgmlake")

func notYet(call string) C.int {
	setError(nil, fmt.Sprintf("%s: %v", call, errNotYet))
	return -1
}

//export gmlakeGoTStats
func gmlakeGoTStats(device C.int, out *C.gmlake_device_stats) C.int {
	return notYet("gmlake_get_device_stats")
}

//export gmlakeGoTReset
func gmlakeGoTReset(device C.int, accumulated C.int) C.int { return notYet("gmlake_reset_stats") }

//export gmlakeGoTSnapshotJSON
func gmlakeGoTSnapshotJSON(device C.int, buf *C.char, n C.size_t) C.int {
	return notYet("gmlake_snapshot_json")
}

//export gmlakeGoTAllocPool
func gmlakeGoTAllocPool(size C.size_t, device C.int, stream C.uintptr_t, id0, id1 C.uint64_t) C.uintptr_t {
	notYet("gmlake_alloc_pool")
	return 0
}

//export gmlakeGoTPool
func gmlakeGoTPool(device C.int, id0, id1 C.uint64_t, op C.int) C.int { return notYet("gmlake_pool_*") }

//export gmlakeGoTPoolLive
func gmlakeGoTPoolLive(device C.int, id0, id1 C.uint64_t, ptrs *C.uint64_t, n C.size_t) C.int {
	return notYet("gmlake_pool_live")
}

//export gmlakeGoTSetCapturing
func gmlakeGoTSetCapturing(device C.int, stream C.uintptr_t, capturing C.int) C.int {
	return notYet("gmlake_set_capturing")
}

//export gmlakeGoTCacheInfo
func gmlakeGoTCacheInfo(device C.int, out *C.uint64_t) C.int { return notYet("gmlake_cache_info") }

//export gmlakeGoTBaseAllocation
func gmlakeGoTBaseAllocation(ptr C.uintptr_t, base, size *C.uint64_t) C.int {
	return notYet("gmlake_base_allocation")
}

//export gmlakeGoTMemoryFraction
func gmlakeGoTMemoryFraction(device C.int) C.double {
	notYet("gmlake_get_memory_fraction")
	return -1
}

//export gmlakeGoTSetEvents
func gmlakeGoTSetEvents(on C.int) {}
