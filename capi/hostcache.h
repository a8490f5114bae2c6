/* hostcache.h: the host cache's log entry, shared by hostcache.c and its Go side (hostcache.go). */
#ifndef GMLAKE_HOSTCACHE_H
#define GMLAKE_HOSTCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "abi_internal.h"

// One entry of a device's log, in the order the cache served it: a free (size 0) of an allocation the cache
// kept, or a hit: a request of size bytes on stream served with the block at ptr, freed earlier in the log.
typedef struct {
	uintptr_t ptr;
	uint64_t size;
	uintptr_t stream;
} gmlake_hc_op;

GMLAKE_HIDDEN void *gmlake_hc_alloc(size_t size, int device, uintptr_t stream);
GMLAKE_HIDDEN void gmlake_hc_free(uintptr_t ptr, int device);
GMLAKE_HIDDEN void gmlake_hc_flush(int device); /* device < 0: every device */
GMLAKE_HIDDEN void gmlake_hc_forget(uintptr_t ptr);
GMLAKE_HIDDEN void gmlake_hc_capturing(int device, int delta);
GMLAKE_HIDDEN int gmlake_hc_close(int device); /* gmlake_close: the replay, the close and the new table at once */

// What the cache of a device holds, for the statistics and their judges (FuzzABI): its count of live entries
// (n), the live entries a scan of its table finds, the table's slots, the cached frees and the log's entries
// not handed over, and whether every live entry is found where its probe run puts it (1) or not (0).
typedef struct {
	uint64_t n, scanned, slots, freed, log, findable;
} gmlake_hc_state;
GMLAKE_HIDDEN void gmlake_hc_info(int device, gmlake_hc_state *out);

#endif
