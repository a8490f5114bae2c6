// abi_lifecycle: single checks of issue 36 item 4 on the simulated device, one per mode (abi_lifecycle_test.go):
//   panic-size    an allocation of GMLAKE_TEST_PANIC_SIZE bytes is an allocation like any other (shipped library)
//   capture-end   ending a capture that never began fails (GMLAKE_ERR_INVALID) and changes nothing
//   close-in-cb   an event callback cannot close the engine under the call that fired it; that call's pointer
//                 is live and freeable, and close afterwards reports it
//   pool-unmap    freeing the last block of a released private pool delivers its SEGMENT_UNMAP before the free
//                 returns
//   ipc-export    gmlake_ipc_export: the pieces cover the allocation, a short array says how many are needed and
//                 writes nothing, bad pointers and NULL outputs fail INVALID, a freed pointer (in the host
//                 cache) is no live allocation, and every descriptor is closed once empty_cache releases it
// Prints "ok MODE" or "FAIL MODE: why" and exits 0 / 1.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include "gmlake.h"

static const size_t MiB = 1 << 20;
static int failures;

static const char *last_error(void) {
	static char buf[4096];
	gmlake_last_error(buf, sizeof buf);
	return buf;
}

#define CHECK(cond, ...)                                                                                      \
	do {                                                                                                      \
		if (!(cond)) {                                                                                        \
			failures++;                                                                                       \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                            \
			printf(__VA_ARGS__);                                                                              \
			printf(" (last error kind %d: %s)\n", gmlake_last_error_kind(), last_error());                    \
		}                                                                                                     \
	} while (0)

static int maps, unmaps, close_rc = 1, close_kind;

static void on_event(void *ctx, int device, int action, uint64_t addr, uint64_t size, void *stream) {
	(void)addr, (void)size, (void)stream;
	if (action == GMLAKE_EVENT_SEGMENT_MAP) {
		maps++;
	} else if (action == GMLAKE_EVENT_SEGMENT_UNMAP) {
		unmaps++;
	}
	if (ctx != NULL && action == GMLAKE_EVENT_SEGMENT_MAP) {
		close_rc = gmlake_close(device);
		close_kind = gmlake_last_error_kind();
	}
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	if (strcmp(mode, "panic-size") == 0) {
		void *p = gmlake_alloc(12345, 0, NULL); // GMLAKE_TEST_PANIC_SIZE=12345 is set by the test
		CHECK(p != NULL, "an allocation of GMLAKE_TEST_PANIC_SIZE bytes failed");
		gmlake_free(p, 12345, 0, NULL);
		char js[4096];
		gmlake_stats_json(0, js, sizeof js);
		CHECK(strstr(js, "\"panics_total\":0") != NULL && strstr(js, "\"test_hooks\":false") != NULL, "%s", js);
		CHECK(gmlake_close(0) == 0, "close");
	} else if (strcmp(mode, "capture-end") == 0) {
		cudaStream_t s = (cudaStream_t)0x55;
		CHECK(gmlake_set_capturing(0, s, 0) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID,
		      "ending a capture that never began");
		CHECK(gmlake_set_capturing(0, s, 1) == 0, "begin");
		CHECK(gmlake_set_capturing(0, s, 0) == 0 && gmlake_last_error_kind() == GMLAKE_ERR_NONE, "end after begin");
		CHECK(gmlake_set_capturing(0, s, 0) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID, "ending it twice");
		CHECK(gmlake_close(0) == 0, "close");
	} else if (strcmp(mode, "close-in-cb") == 0) {
		gmlake_set_event_callback(on_event, (void *)1);
		void *p = gmlake_alloc(4 * MiB, 0, NULL); // maps a segment: the callback tries to close device 0
		gmlake_set_event_callback(NULL, NULL);
		CHECK(maps >= 1, "no segment map event");
		CHECK(close_rc < 0 && close_kind == GMLAKE_ERR_INVALID, "gmlake_close from the callback returned %d, kind %d",
		      close_rc, close_kind);
		CHECK(p != NULL && gmlake_last_error_kind() == GMLAKE_ERR_NONE, "the allocation whose event closed");
		void *base = NULL;
		size_t size = 0;
		CHECK(gmlake_base_allocation(p, &base, &size) == 0 && base == p, "the pointer is not a live allocation");
		int live = gmlake_close(0);
		CHECK(live == 1, "close after the call reports %d live allocations, want 1", live);
	} else if (strcmp(mode, "pool-unmap") == 0) {
		gmlake_set_event_callback(on_event, NULL);
		CHECK(gmlake_pool_create_or_incref(0, 1, 1) == 1, "create pool");
		void *p = gmlake_alloc_pool(4 * MiB, 0, NULL, 1, 1);
		CHECK(p != NULL, "alloc from the pool");
		CHECK(gmlake_pool_release(0, 1, 1) == 0, "release pool");
		int before = unmaps;
		gmlake_free(p, 4 * MiB, 0, NULL); // the pool's last block: its memory goes back now
		CHECK(unmaps > before, "freeing the last block of a released pool delivered %d unmap events before it returned",
		      unmaps - before);
		gmlake_device_stats st;
		CHECK(gmlake_get_device_stats(0, &st) == 0 && st.reserved_bytes[0].current == 0, "reserved %lld after the free",
		      (long long)st.reserved_bytes[0].current);
		gmlake_set_event_callback(NULL, NULL);
		CHECK(gmlake_close(0) == 0, "close");
	} else if (strcmp(mode, "ipc-export") == 0) {
		void *p = gmlake_alloc(24 * MiB, 0, NULL), *q = gmlake_alloc(512, 0, NULL);
		CHECK(p != NULL && q != NULL, "alloc");
		gmlake_ipc_piece pc[64];
		size_t n = 0;
		uint64_t off = 1, size = 0;
		int fds[128], nfd = 0;
		void *ptrs[2] = {p, q};
		for (int k = 0; k < 2; k++) {
			CHECK(gmlake_ipc_export(ptrs[k], pc, 64, &n, &off, &size) == 0 && gmlake_last_error_kind() == GMLAKE_ERR_NONE,
			      "export of a live allocation");
			uint64_t total = 0;
			for (size_t i = 0; i < n; i++) {
				CHECK(fcntl(pc[i].fd, F_GETFD) >= 0, "piece %zu's descriptor %d is not open", i, pc[i].fd);
				CHECK(pc[i].size > 0 && pc[i].size % (2 * MiB) == 0 && pc[i].reserved == 0, "piece %zu: %llu bytes", i,
				      (unsigned long long)pc[i].size);
				total += pc[i].size;
				fds[nfd++] = pc[i].fd;
			}
			size_t want = k == 0 ? 24 * MiB : 512;
			CHECK(n >= 1 && size >= want && off < pc[0].size && off + size <= total, "export of %zu bytes: %zu pieces, "
			      "%llu bytes at offset %llu of %llu", want, n, (unsigned long long)size, (unsigned long long)off,
			      (unsigned long long)total);
		}
		gmlake_ipc_piece few[1] = {{-7, 7, 7}};
		size_t need = 0;
		int rc = gmlake_ipc_export(p, few, 0, &need, &off, &size);
		CHECK(rc < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID && need >= 1 && few[0].fd == -7,
		      "cap 0: rc %d, need %zu, pieces[0].fd %d", rc, need, few[0].fd);
		CHECK(gmlake_ipc_export(p, pc, 64, NULL, &off, &size) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID,
		      "NULL n");
		CHECK(gmlake_ipc_export((char *)p + 4096, pc, 64, &n, &off, &size) < 0 &&
		          gmlake_last_error_kind() == GMLAKE_ERR_INVALID, "interior pointer");
		CHECK(gmlake_ipc_export((void *)0x1000, pc, 64, &n, &off, &size) < 0 &&
		          gmlake_last_error_kind() == GMLAKE_ERR_INVALID, "unknown pointer");
		gmlake_free(q, 512, 0, NULL);
		CHECK(gmlake_ipc_export(q, pc, 64, &n, &off, &size) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID,
		      "a freed pointer");
		gmlake_free(p, 24 * MiB, 0, NULL);
		CHECK(gmlake_empty_cache() == 0, "empty_cache");
		for (int i = 0; i < nfd; i++) {
			CHECK(fcntl(fds[i], F_GETFD) < 0, "descriptor %d still open after empty_cache released its handle", fds[i]);
		}
		CHECK(gmlake_close(0) == 0, "close");
	} else {
		printf("FAIL: unknown mode %s\n", mode);
		return 2;
	}
	if (failures == 0) {
		printf("ok %s\n", mode);
	}
	return failures != 0;
}
