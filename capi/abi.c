// The public C ABI of libgmlake.so (declared in gmlake.h). Each function is a thin cast between C types
// (void*, cudaStream_t) and the integer-typed Go exports of main.go (gmlakeGo*), so that no Go code converts
// integers to pointers. Also: the per-thread last-error buffer, and the exit hook that flushes traces.

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmlake.h"
#include "_cgo_export.h"
#include "abi_internal.h"
#include "hostcache.h"

// Every entry clears the calling thread's last error first (gmlake_clear_thread_error): a call that
// succeeds leaves none, one that fails leaves its own (gmlake.h's per-call rule). Every entry that reaches a
// device's engine hands the host cache's log over first (gmlake_hc_*, hostcache.c), so that the engine
// answers with every free and hit the cache served applied (TestEveryEntryHandsTheHostCacheOver).

// The fork rule (abi_internal.h): a child forked from a process that loaded the library is refused at every
// entry. The handlers are registered when the library is loaded, before any code of the host can fork.
volatile int gmlake_forked_from;
static pid_t gmlake_forking; // the pid of the process calling fork(), recorded by its prepare handler

static void gmlake_fork_prepare(void) { gmlake_forking = getpid(); }
static void gmlake_fork_child(void) { gmlake_forked_from = (int)gmlake_forking; }

__attribute__((constructor)) static void gmlake_fork_watch(void) {
	pthread_atfork(gmlake_fork_prepare, NULL, gmlake_fork_child);
}

int gmlake_refuse_forked(void) {
	char msg[512];
	int n = snprintf(msg, sizeof msg,
	                 "gmlake: this process (%d) is a fork() of process %d, which loaded libgmlake: neither CUDA nor "
	                 "gmlake's Go runtime works in a forked child; start the child with spawn (Python: "
	                 "multiprocessing.set_start_method(\"spawn\")) or exec a new program",
	                 (int)getpid(), gmlake_forked_from);
	gmlake_set_thread_error(GMLAKE_ERR_NO_DEVICE, msg, n < 0 ? 0 : (size_t)n);
	return 1;
}

void *gmlake_alloc(size_t size, int device, cudaStream_t stream) {
	GMLAKE_ENTER(NULL);
	return gmlake_hc_alloc(size, device, (uintptr_t)stream);
}

void gmlake_free(void *ptr, size_t size, int device, cudaStream_t stream) {
	(void)size;
	(void)stream;
	GMLAKE_ENTER();
	gmlake_hc_free((uintptr_t)ptr, device);
}

void gmlake_init(int device_count) {
	GMLAKE_ENTER();
	gmlakeGoInit(device_count);
}

int gmlake_start(int device) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoStart(device);
}

int gmlake_empty_cache(void) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(-1);
	return gmlakeGoEmptyCache();
}

int gmlake_set_memory_fraction(double fraction, int device) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoSetMemoryFraction(fraction, device);
}

int gmlake_record_stream(void *ptr, cudaStream_t stream) {
	GMLAKE_ENTER(-1);
	gmlake_hc_forget((uintptr_t)ptr); // its free must reach the engine, which records the stream's event
	return gmlakeGoRecordStream((uintptr_t)ptr, (uintptr_t)stream);
}

int gmlake_close(int device) {
	GMLAKE_ENTER(-1);
	return gmlake_hc_close(device);
}

// copy_out copies n bytes of s into buf (at most len-1 of them, NUL-terminated) and returns n, as snprintf.
int gmlake_copy_out(const char *s, size_t n, char *buf, size_t len) {
	if (buf != NULL && len > 0) {
		size_t k = n < len - 1 ? n : len - 1;
		if (k > 0) {
			memcpy(buf, s, k);
		}
		buf[k] = 0;
	}
	return (int)n;
}

int gmlake_stats_json(int device, char *buf, size_t len) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(device);
	return gmlakeGoStatsJSON(device, buf, len);
}

int gmlake_knobs(char *buf, size_t len) {
	GMLAKE_ENTER(-1);
	return gmlakeGoKnobs(buf, len);
}

int gmlake_trace_start(const char *path) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(-1); // the trace starts with every cached free applied; the cache serves nothing while it runs
	return gmlakeGoTraceStart((char *)path);
}

int gmlake_trace_stop(void) {
	GMLAKE_ENTER(-1);
	gmlake_hc_flush(-1);
	return gmlakeGoTraceStop();
}

// The calling thread's last error and its kind. Go writes it from inside an export, which runs on the
// calling C thread. A pthread key, not __thread: a library loaded with dlopen gets its thread-local storage
// from the small static TLS surplus (the Go runtime asks for the initial-exec model), and a buffer there
// would not fit.
static pthread_key_t err_key;
static pthread_once_t err_once = PTHREAD_ONCE_INIT;

static void err_key_init(void) { pthread_key_create(&err_key, free); }

// thread_error returns the calling thread's error state, creating it if create (NULL if there is none).
static gmlake_thread_error *thread_error(int create) {
	pthread_once(&err_once, err_key_init);
	gmlake_thread_error *e = pthread_getspecific(err_key);
	if (e == NULL && create) {
		e = calloc(1, sizeof *e);
		if (e == NULL || pthread_setspecific(err_key, e) != 0) {
			free(e);
			return NULL;
		}
	}
	return e;
}

void gmlake_set_thread_error(int kind, const char *msg, size_t n) {
	gmlake_thread_error *e = thread_error(1);
	if (e == NULL) {
		return;
	}
	if (n >= GMLAKE_ERR_CAP) {
		n = GMLAKE_ERR_CAP - 1;
	}
	if (n > 0) {
		memcpy(e->msg, msg, n);
	}
	e->msg[n] = 0;
	e->kind = kind;
}

void gmlake_clear_thread_error(void) {
	gmlake_thread_error *e = thread_error(0);
	if (e != NULL) {
		e->kind = 0;
		e->msg[0] = 0;
	}
}

void gmlake_save_thread_error(gmlake_thread_error *into) {
	gmlake_thread_error *e = thread_error(0);
	if (e == NULL) {
		into->kind = 0;
		into->msg[0] = 0;
		return;
	}
	*into = *e;
}

void gmlake_restore_thread_error(const gmlake_thread_error *from) {
	if (from->kind == 0) {
		gmlake_clear_thread_error();
		return;
	}
	gmlake_set_thread_error(from->kind, from->msg, strlen(from->msg));
}

int gmlake_last_error(char *buf, size_t len) {
	const gmlake_thread_error *e = thread_error(0);
	if (e == NULL) {
		return gmlake_copy_out("", 0, buf, len);
	}
	return gmlake_copy_out(e->msg, strlen(e->msg), buf, len);
}

int gmlake_last_error_kind(void) {
	const gmlake_thread_error *e = thread_error(0);
	return e == NULL ? 0 : e->kind;
}
