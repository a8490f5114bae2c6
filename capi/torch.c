// The C side of the torch engine ABI (gmlake.h, issue 15): casts between C types and the integer-typed Go
// exports of torch.go (gmlakeGoT*), the per-thread last allocation failure, and the trampoline through which Go
// calls the event callback (Go cannot call a C function pointer itself).

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmlake.h"
#include "_cgo_export.h"
#include "abi_internal.h"
#include "hostcache.h"

// Every entry clears the calling thread's last error first, and hands the host cache's log over before it
// reaches an engine, as in abi.c.

int gmlake_get_device_stats(int device, gmlake_device_stats *out) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTStats(device, out);
}

int gmlake_reset_peak_stats(int device) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTReset(device, 0);
}

int gmlake_reset_accumulated_stats(int device) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTReset(device, 1);
}

int gmlake_snapshot_json(int device, char *buf, size_t len) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTSnapshotJSON(device, buf, len);
}

void *gmlake_alloc_pool(size_t size, int device, cudaStream_t stream, uint64_t id0, uint64_t id1) {
	GMLAKE_ENTER(NULL);
	gmlake_hc_flush(device);
	return (void *)gmlakeGoTAllocPool(size, device, (uintptr_t)stream, id0, id1);
}

int gmlake_pool_create_or_incref(int device, uint64_t id0, uint64_t id1) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTPool(device, id0, id1, 0);
}

int gmlake_pool_release(int device, uint64_t id0, uint64_t id1) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTPool(device, id0, id1, 1);
}

int gmlake_pool_use_count(int device, uint64_t id0, uint64_t id1) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTPool(device, id0, id1, 2);
}

int gmlake_pool_live(int device, uint64_t id0, uint64_t id1, uint64_t *ptrs, size_t cap) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoTPoolLive(device, id0, id1, ptrs, cap);
}

int gmlake_set_capturing(int device, cudaStream_t stream, int capturing) {
	GMLAKE_ENTER(-1);
	if (capturing) { // the cache stands aside from the capture's start (hostcache.c)
		gmlake_hc_capturing(device, +1);
		int rc = gmlakeGoTSetCapturing(device, (uintptr_t)stream, capturing);
		if (rc != 0) {
			gmlake_hc_capturing(device, -1);
		}
		return rc;
	}
	gmlake_hc_flush(device);
	int rc = gmlakeGoTSetCapturing(device, (uintptr_t)stream, capturing);
	if (rc == 0) {
		gmlake_hc_capturing(device, -1);
	}
	return rc;
}

int gmlake_cache_info(int device, size_t *largest_free_block) {
	GMLAKE_ENTER(-1);
	if (largest_free_block == NULL) {
		return gmlakeGoTCacheInfo(device, NULL); // the error names the NULL argument
	}
	gmlake_hc_flush(device);
	uint64_t v = 0;
	int rc = gmlakeGoTCacheInfo(device, &v);
	if (rc == 0) {
		*largest_free_block = (size_t)v;
	}
	return rc;
}

int gmlake_base_allocation(void *ptr, void **base, size_t *size) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(-1); // a cached free's pointer is no allocation's base any more
	uint64_t b = 0, n = 0;
	int rc = gmlakeGoTBaseAllocation((uintptr_t)ptr, &b, &n);
	if (rc == 0) {
		if (base != NULL) {
			*base = (void *)(uintptr_t)b;
		}
		if (size != NULL) {
			*size = (size_t)n;
		}
	}
	return rc;
}

int gmlake_ipc_export(void *ptr, gmlake_ipc_piece *pieces, size_t cap, size_t *n, uint64_t *offset,
                      uint64_t *size) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(-1); // a cached free is no live allocation to share
	return gmlakeGoTIPCExport((uintptr_t)ptr, pieces, cap, n, offset, size);
}

double gmlake_get_memory_fraction(int device) {
	GMLAKE_ENTER(-1);
	return gmlakeGoTMemoryFraction(device);
}

// The last allocation failure of the calling thread (a pthread key, as the last error in abi.c).
static pthread_key_t fail_key;
static pthread_once_t fail_once = PTHREAD_ONCE_INIT;

static void fail_key_init(void) { pthread_key_create(&fail_key, free); }

void gmlake_set_thread_failure(int kind, uint64_t requested, uint64_t device_total, uint64_t device_free,
                               uint64_t allocated, uint64_t reserved, uint64_t cached, uint64_t limit) {
	pthread_once(&fail_once, fail_key_init);
	gmlake_alloc_failure *f = pthread_getspecific(fail_key);
	if (f == NULL) {
		f = malloc(sizeof *f);
		if (f == NULL || pthread_setspecific(fail_key, f) != 0) {
			free(f);
			return;
		}
	}
	f->kind = kind;
	f->requested = requested;
	f->device_total = device_total;
	f->device_free = device_free;
	f->allocated = allocated;
	f->reserved = reserved;
	f->cached = cached;
	f->limit = limit;
}

int gmlake_last_failure(gmlake_alloc_failure *out) {
	pthread_once(&fail_once, fail_key_init);
	const gmlake_alloc_failure *f = pthread_getspecific(fail_key);
	if (f == NULL) {
		return -1;
	}
	if (out != NULL) {
		*out = *f;
	}
	return 0;
}

// The event callback. Read and written under ev_mu; called outside it (a callback may set another).
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static gmlake_event_fn ev_fn;
static void *ev_ctx;

void gmlake_set_event_callback(gmlake_event_fn fn, void *ctx) {
	GMLAKE_ENTER();
	pthread_mutex_lock(&ev_mu);
	ev_fn = fn;
	ev_ctx = ctx;
	pthread_mutex_unlock(&ev_mu);
	gmlakeGoTSetEvents(fn != NULL);
}

// gmlake_fire_event is the trampoline Go calls for each segment event.
void gmlake_fire_event(int device, int action, uint64_t addr, uint64_t size, uintptr_t stream) {
	pthread_mutex_lock(&ev_mu);
	gmlake_event_fn fn = ev_fn;
	void *ctx = ev_ctx;
	pthread_mutex_unlock(&ev_mu);
	if (fn == NULL) {
		return;
	}
	// The callback's own calls into gmlake set and clear this thread's last error: keep the error state
	// of the call that fired it (its error, if any, is set after the callback returns; usually none yet).
	gmlake_thread_error *saved = NULL;
	if (gmlake_last_error_kind() != 0) {
		saved = malloc(sizeof *saved);
		if (saved != NULL) {
			gmlake_save_thread_error(saved);
		}
	}
	fn(ctx, device, action, addr, size, (void *)stream);
	if (saved != NULL) {
		gmlake_restore_thread_error(saved);
		free(saved);
	} else {
		gmlake_clear_thread_error();
	}
}
