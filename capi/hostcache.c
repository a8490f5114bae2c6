// The host cache (impl/doc.go, "The host cache"): per device, in front of the crossing into Go, the blocks
// freed last that the engine said the cache may keep (HostClass: default pool, pBlock, no RecordStream, no
// capture, not gmlake-paper, no trace), handed out again for a request on the same stream whose size rounds to
// the same size, without entering Go. The engine still owns every block: the cache only keeps a log of what
// it served (frees and hits), and every crossing into Go for the device first hands the log over
// (gmlakeGoHostReplay), so the engine applies it in order before it answers anything: statistics, snapshots,
// decisions that need memory. The cached frees become the engine's free blocks at that replay.
//
// Invariants, under the device's mutex:
//   - every pointer in live was returned by gmlake_alloc on this device, with a class from HostClass, and has
//     not been freed since (gmlake_free takes it out);
//   - every entry of freed was freed by gmlake_free after it was in live, and its free is in log, after
//     which no Go call for the device ran (a Go call replays the log and empties freed);
//   - log holds, in order, what the cache served since the last replay; a hit's block is an entry of freed
//     taken out, with its free earlier in log.
// Replays run under the mutex (recursive: an event callback run by the replay may call the library), so two
// logs are never applied out of order.

#define _GNU_SOURCE // PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmlake.h"
#include "_cgo_export.h"
#include "hostcache.h"

enum {
	HC_DEVICES = 64, // capi/main.go's maxDevices
	HC_FREED = 32,   // cached frees per device
	HC_LOG = 256,    // log entries per device before a replay
};

typedef struct {
	uintptr_t ptr; // 0: an empty slot
	uintptr_t stream;
	uint64_t lo, hi; // the sizes a hit may take it for (HostClass)
} hc_ent;

typedef struct {
	pthread_mutex_t mu;
	int used;      // something was cached on this device once (read without the mutex: a hint for the loops)
	unsigned gen;  // counts the tables forgotten (gmlake_close, a raced close): an allocation that crossed into
	               // Go under an older table does not enter the new one
	int off;       // the cache gave up on this device (a replay failed): everything goes to Go
	int capturing; // captures underway (gmlake_set_capturing): the cache stands aside
	hc_ent *tab;   // live: open addressing, linear probing; cap a power of two, at most half full
	size_t cap, n;
	hc_ent freed[HC_FREED]; // oldest first
	int nfreed;
	gmlake_hc_op log[HC_LOG];
	int nlog;
} hc_dev;

// Each device's mutex is recursive (a replay's event callback may call the library again) and initialised
// statically (glibc's initializer): no first-use initialisation on the hot path, no attribute calls to fail.
static hc_dev hc[HC_DEVICES] = {[0 ... HC_DEVICES - 1] = {.mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP}};

static hc_dev *hc_lock(int device) {
	if (device < 0 || device >= HC_DEVICES) {
		return NULL;
	}
	hc_dev *h = &hc[device];
	pthread_mutex_lock(&h->mu);
	return h;
}

static size_t hc_slot(const hc_dev *h, uintptr_t p) {
	return (size_t)(((uint64_t)(p >> 9) * 0x9E3779B97F4A7C15ull) >> 20) & (h->cap - 1);
}

// hc_find returns the slot of p in live, or the empty slot where it would go.
static size_t hc_find(const hc_dev *h, uintptr_t p) {
	size_t i = hc_slot(h, p);
	while (h->tab[i].ptr != 0 && h->tab[i].ptr != p) {
		i = (i + 1) & (h->cap - 1);
	}
	return i;
}

static int hc_grow(hc_dev *h) {
	size_t cap = h->cap ? h->cap * 2 : 256;
	hc_ent *tab = calloc(cap, sizeof *tab);
	if (tab == NULL) {
		return -1;
	}
	hc_ent *old = h->tab;
	size_t oldcap = h->cap;
	h->tab = tab;
	h->cap = cap;
	for (size_t i = 0; i < oldcap; i++) {
		if (old[i].ptr != 0) {
			h->tab[hc_find(h, old[i].ptr)] = old[i];
		}
	}
	free(old);
	return 0;
}

static void hc_insert(hc_dev *h, hc_ent e) {
	__atomic_store_n(&h->used, 1, __ATOMIC_RELEASE);
	if ((h->n + 1) * 2 > h->cap && hc_grow(h) != 0) {
		return; // no memory for the table: the block's free goes to Go, as an uncached one
	}
	size_t i = hc_find(h, e.ptr);
	if (h->tab[i].ptr == 0) {
		h->n++;
	}
	h->tab[i] = e;
}

// hc_take removes p from live into *out; 0 if p is not there.
static int hc_take(hc_dev *h, uintptr_t p, hc_ent *out) {
	if (h->cap == 0) {
		return 0;
	}
	size_t i = hc_find(h, p);
	if (h->tab[i].ptr == 0) {
		return 0;
	}
	*out = h->tab[i];
	h->n--;
	// Backward-shift deletion: move later entries of the probe run into the hole.
	size_t j = i;
	for (;;) {
		h->tab[i].ptr = 0;
		for (;;) {
			j = (j + 1) & (h->cap - 1);
			if (h->tab[j].ptr == 0) {
				return 1;
			}
			size_t k = hc_slot(h, h->tab[j].ptr);
			// The entry at j may fill the hole at i unless its home k lies cyclically in (i, j].
			if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) {
				continue;
			}
			break;
		}
		h->tab[i] = h->tab[j];
		i = j;
	}
}

// hc_forget_all empties live (a new table for a new engine: hc.gen counts them).
static void hc_forget_all(hc_dev *h) {
	free(h->tab);
	h->tab = NULL;
	h->cap = h->n = 0;
	h->nfreed = h->nlog = 0;
	h->gen++;
}

// hc_replay_locked hands the log to Go, which applies it; the cached frees are the engine's from then on.
static void hc_replay_locked(hc_dev *h, int device) {
	if (h->nlog == 0) {
		return;
	}
	gmlake_hc_op buf[HC_LOG];
	int n = h->nlog;
	memcpy(buf, h->log, (size_t)n * sizeof buf[0]);
	h->nlog = 0;
	h->nfreed = 0;
	int rc = gmlakeGoHostReplay(device, buf, n);
	if (rc != 0) {
		// -1: the engine is disabled now (it says why on every later call): stop caching. 1: no engine runs
		// there any more (a gmlake_close raced): a new one starts empty. Either way the table is stale.
		h->off = rc < 0;
		hc_forget_all(h);
	}
}

void *gmlake_hc_alloc(size_t size, int device, uintptr_t stream) {
	hc_dev *h = hc_lock(device);
	if (h == NULL || size == 0) {
		if (h != NULL) {
			pthread_mutex_unlock(&h->mu);
		}
		return (void *)gmlakeGoAlloc(size, device, stream);
	}
	if (!h->off && h->capturing == 0 && h->nlog < HC_LOG) {
		for (int i = h->nfreed - 1; i >= 0; i--) {
			hc_ent e = h->freed[i];
			if (e.stream != stream || size < e.lo || size > e.hi) {
				continue;
			}
			memmove(&h->freed[i], &h->freed[i + 1], (size_t)(h->nfreed - i - 1) * sizeof e);
			h->nfreed--;
			h->log[h->nlog++] = (gmlake_hc_op){.ptr = e.ptr, .size = size, .stream = stream};
			hc_insert(h, e);
			pthread_mutex_unlock(&h->mu);
			return (void *)e.ptr;
		}
	}
	uint64_t lo = 0, hi = 0;
	if (h->nlog > 0) {
		// A miss with a log to hand over: the replay and the request in one crossing, under the mutex (the
		// log must reach the engine before any later one; the request may wait for streams on its
		// out-of-memory path, as it would under the engine's own lock).
		gmlake_hc_op buf[HC_LOG];
		int n = h->nlog;
		memcpy(buf, h->log, (size_t)n * sizeof buf[0]);
		h->nlog = 0;
		h->nfreed = 0;
		int rc = 0;
		uintptr_t p = gmlakeGoHostAllocReplay(size, device, stream, buf, n, &rc, &lo, &hi);
		if (rc != 0) {
			h->off = rc < 0; // as hc_replay_locked
			hc_forget_all(h);
		}
		if (p != 0 && hi != 0 && !h->off && h->capturing == 0) {
			hc_insert(h, (hc_ent){.ptr = p, .stream = stream, .lo = lo, .hi = hi});
		}
		pthread_mutex_unlock(&h->mu);
		return (void *)p;
	}
	int off = h->off || h->capturing > 0;
	unsigned gen = h->gen;
	pthread_mutex_unlock(&h->mu);
	// The request itself runs outside the mutex (it may wait for streams on its out-of-memory path): a free
	// the cache takes meanwhile is concurrent with it, and either order is one the caller could see.
	uintptr_t p = gmlakeGoHostAlloc(size, device, stream, &lo, &hi);
	if (p != 0 && hi != 0 && !off) {
		h = hc_lock(device);
		if (!h->off && h->gen == gen) {
			hc_insert(h, (hc_ent){.ptr = p, .stream = stream, .lo = lo, .hi = hi});
		}
		pthread_mutex_unlock(&h->mu);
	}
	return (void *)p;
}

void gmlake_hc_free(uintptr_t ptr, int device) {
	hc_dev *h = ptr != 0 ? hc_lock(device) : NULL;
	if (h == NULL) {
		gmlakeGoFree(ptr, device); // nothing, or the error of a device out of range
		return;
	}
	hc_ent e;
	if (hc_take(h, ptr, &e) && !h->off && h->capturing == 0) {
		if (h->nfreed == HC_FREED || h->nlog == HC_LOG) {
			hc_replay_locked(h, device);
		}
		if (!h->off) {
			h->freed[h->nfreed++] = e;
			h->log[h->nlog++] = (gmlake_hc_op){.ptr = ptr, .size = 0, .stream = e.stream};
			pthread_mutex_unlock(&h->mu);
			return;
		}
	}
	hc_replay_locked(h, device);
	pthread_mutex_unlock(&h->mu);
	gmlakeGoFree(ptr, device); // not the cache's (unknown, interior, double, used on another stream): Go says
}

void gmlake_hc_flush(int device) {
	if (device >= HC_DEVICES) {
		return;
	}
	int lo = device < 0 ? 0 : device, hi = device < 0 ? HC_DEVICES : device + 1;
	for (int d = lo; d < hi; d++) {
			if (!__atomic_load_n(&hc[d].used, __ATOMIC_ACQUIRE)) {
			continue; // nothing was ever cached there: nothing to hand over
		}
		hc_dev *h = hc_lock(d);
		hc_replay_locked(h, d);
		pthread_mutex_unlock(&h->mu);
	}
}

void gmlake_hc_forget(uintptr_t ptr) {
	for (int d = 0; d < HC_DEVICES; d++) {
			if (!__atomic_load_n(&hc[d].used, __ATOMIC_ACQUIRE)) {
			continue;
		}
		hc_dev *h = hc_lock(d);
		hc_replay_locked(h, d);
		hc_ent e;
		hc_take(h, ptr, &e); // its free goes to Go from now on (RecordStream)
		pthread_mutex_unlock(&h->mu);
	}
}

void gmlake_hc_info(int device, gmlake_hc_state *out) {
	memset(out, 0, sizeof *out);
	hc_dev *h = hc_lock(device);
	if (h == NULL) {
		return;
	}
	out->n = h->n;
	out->slots = h->cap;
	out->freed = (uint64_t)h->nfreed;
	out->log = (uint64_t)h->nlog;
	out->findable = 1;
	for (size_t i = 0; i < h->cap; i++) {
		if (h->tab[i].ptr != 0) {
			out->scanned++;
			if (hc_find(h, h->tab[i].ptr) != i) {
				out->findable = 0;
			}
		}
	}
	pthread_mutex_unlock(&h->mu);
}

void gmlake_hc_capturing(int device, int delta) {
	hc_dev *h = hc_lock(device);
	if (h == NULL) {
		return;
	}
	hc_replay_locked(h, device);
	h->capturing += delta;
	if (h->capturing < 0) {
		h->capturing = 0;
	}
	pthread_mutex_unlock(&h->mu);
}

int gmlake_hc_close(int device) {
	hc_dev *h = hc_lock(device);
	if (h == NULL) {
		return gmlakeGoClose(device); // the error of a device out of range
	}
	// Under the mutex: an allocation that crosses into Go after the close started gets the next engine, and
	// one that crossed before finds the table forgotten (gen) when it comes back.
	hc_replay_locked(h, device);
	int rc = gmlakeGoClose(device);
	hc_forget_all(h);
	h->off = 0; // a new engine may start on the device
	pthread_mutex_unlock(&h->mu);
	return rc;
}
