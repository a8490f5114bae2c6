// The public C ABI of libgmlake.so (declared in gmlake.h). Each function is a thin cast between C types
// (void*, cudaStream_t) and the integer-typed Go exports of main.go (gmlakeGo*), so that no Go code converts
// integers to pointers. Also: the per-thread last-error buffer, and the exit hook that flushes traces.

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmlake.h"
#include "_cgo_export.h"

void *gmlake_alloc(size_t size, int device, cudaStream_t stream) {
	return (void *)gmlakeGoAlloc(size, device, (uintptr_t)stream);
}

void gmlake_free(void *ptr, size_t size, int device, cudaStream_t stream) {
	(void)size;
	(void)stream;
	gmlakeGoFree((uintptr_t)ptr, device);
}

void gmlake_init(int device_count) { gmlakeGoInit(device_count); }

void gmlake_empty_cache(void) { gmlakeGoEmptyCache(); }

void gmlake_set_memory_fraction(double fraction, int device) { gmlakeGoSetMemoryFraction(fraction, device); }

void gmlake_record_stream(void *ptr, cudaStream_t stream) {
	gmlakeGoRecordStream((uintptr_t)ptr, (uintptr_t)stream);
}

int gmlake_close(int device) { return gmlakeGoClose(device); }

// copy_out copies n bytes of s into buf (at most len-1 of them, NUL-terminated) and returns n, as snprintf.
int gmlake_copy_out(const char *s, size_t n, char *buf, size_t len) {
	if (buf != NULL && len > 0) {
		size_t k = n < len - 1 ? n : len - 1;
		memcpy(buf, s, k);
		buf[k] = 0;
	}
	return (int)n;
}

int gmlake_stats_json(int device, char *buf, size_t len) { return gmlakeGoStatsJSON(device, buf, len); }

int gmlake_knobs(char *buf, size_t len) { return gmlakeGoKnobs(buf, len); }

int gmlake_trace_start(const char *path) { return gmlakeGoTraceStart((char *)path); }

int gmlake_trace_stop(void) { return gmlakeGoTraceStop(); }

// The calling thread's last error. Go writes it from inside an export, which runs on the calling C thread.
// A pthread key, not __thread: a library loaded with dlopen gets its thread-local storage from the small
// static TLS surplus (the Go runtime asks for the initial-exec model), and a buffer there would not fit.
enum { ERR_CAP = 4096 };
static pthread_key_t err_key;
static pthread_once_t err_once = PTHREAD_ONCE_INIT;

static void err_key_init(void) { pthread_key_create(&err_key, free); }

void gmlake_set_thread_error(const char *msg, size_t n) {
	pthread_once(&err_once, err_key_init);
	char *buf = pthread_getspecific(err_key);
	if (buf == NULL) {
		if (n == 0) {
			return;
		}
		buf = malloc(ERR_CAP);
		if (buf == NULL || pthread_setspecific(err_key, buf) != 0) {
			free(buf);
			return;
		}
	}
	if (n >= ERR_CAP) {
		n = ERR_CAP - 1;
	}
	if (n > 0) {
		memcpy(buf, msg, n);
	}
	buf[n] = 0;
}

int gmlake_last_error(char *buf, size_t len) {
	pthread_once(&err_once, err_key_init);
	const char *mine = pthread_getspecific(err_key);
	if (mine != NULL && mine[0] != 0) {
		return gmlake_copy_out(mine, strlen(mine), buf, len);
	}
	return gmlakeGoLastError(buf, len);
}

static void gmlake_exit_hook(void) { gmlakeGoAtExit(); }

void gmlake_register_exit_hook(void) { atexit(gmlake_exit_hook); }
