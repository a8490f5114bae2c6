// host_cache: the host cache (capi/hostcache.c) seen through the C ABI on the simulated device. Argument
// "on" or "off" (GMLAKE_HOST_CACHE=0 set by the caller). Checks, printing "FAIL: ..." for each broken one and
// "ok N" at the end:
//   - a pair repeated on one stream is served by the cache (on: host_cache_hits counts every pair after the
//     first; off: none), and the statistics read after it are exact (allocation count, requested bytes);
//   - a size that rounds elsewhere, or another stream, misses;
//   - a double free, a free of an unknown pointer, an interior pointer are refused at the call itself, with
//     GMLAKE_ERR_INVALID, as without the cache; a RecordStream'd block's free goes to the engine;
//   - many live blocks freed in a shuffled order leave every remaining entry findable after each free (on);
//   - gmlake_close after cached frees reports 0 live allocations.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmlake.h"

static int failures;

#define CHECK(cond, ...)                                                                                          \
	do {                                                                                                      \
		if (!(cond)) {                                                                                    \
			failures++;                                                                               \
			printf("FAIL: " __VA_ARGS__);                                                             \
			printf("\n");                                                                             \
		}                                                                                                 \
	} while (0)

static int64_t stat_of(int dev, const char *key) {
	char buf[1 << 16];
	gmlake_stats_json(dev, buf, sizeof buf);
	char pat[128];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *at = strstr(buf, pat);
	return at ? strtoll(at + strlen(pat), NULL, 10) : -1;
}

int main(int argc, char **argv) {
	int on = argc > 1 && strcmp(argv[1], "on") == 0;
	cudaStream_t s1 = (cudaStream_t)(uintptr_t)0x51;
	const int n = 1000;
	for (int i = 0; i < n; i++) {
		void *p = gmlake_alloc(512, 0, NULL);
		CHECK(p != NULL, "alloc %d failed", i);
		gmlake_free(p, 512, 0, NULL);
	}
	int64_t hits = stat_of(0, "host_cache_hits");
	CHECK(on ? hits == n - 1 : hits == 0, "%d pairs of 512 B: host_cache_hits %" PRId64 ", want %d", n, hits, on ? n - 1 : 0);
	gmlake_device_stats st;
	CHECK(gmlake_get_device_stats(0, &st) == 0, "get_device_stats");
	CHECK(st.allocation[0].current == 0 && st.allocation[0].allocated == n && st.requested_bytes[0].peak == 512,
	      "after %d pairs: %" PRId64 " live, %" PRId64 " allocated, peak requested %" PRId64, n, st.allocation[0].current,
	      st.allocation[0].allocated, st.requested_bytes[0].peak);

	// Misses: another class, another stream.
	void *a = gmlake_alloc(1000, 0, NULL);
	gmlake_free(a, 0, 0, NULL);
	void *b = gmlake_alloc(2000, 0, NULL); // rounds to 2048, not 1024: a miss
	void *c = gmlake_alloc(1000, 0, s1);   // another stream: a miss
	int64_t h2 = stat_of(0, "host_cache_hits");
	CHECK(h2 == hits, "a request of another size class or stream was a hit (%" PRId64 " -> %" PRId64 ")", hits, h2);
	CHECK(b != c, "distinct live blocks");
	gmlake_free(b, 0, 0, NULL);
	gmlake_free(c, 0, 0, NULL);

	// Bad frees are refused at the call.
	void *d = gmlake_alloc(4096, 0, NULL);
	gmlake_free(d, 0, 0, NULL);
	CHECK(gmlake_last_error_kind() == GMLAKE_ERR_NONE, "a good free left an error");
	gmlake_free(d, 0, 0, NULL);
	CHECK(gmlake_last_error_kind() == GMLAKE_ERR_INVALID, "a double free was not refused at the call (kind %d)", gmlake_last_error_kind());
	void *e = gmlake_alloc(4096, 0, NULL);
	gmlake_free((char *)e + 512, 0, 0, NULL);
	CHECK(gmlake_last_error_kind() == GMLAKE_ERR_INVALID, "an interior free was not refused (kind %d)", gmlake_last_error_kind());
	gmlake_free((void *)(uintptr_t)0x1234000, 0, 0, NULL);
	CHECK(gmlake_last_error_kind() == GMLAKE_ERR_INVALID, "an unknown pointer's free was not refused (kind %d)", gmlake_last_error_kind());
	CHECK(gmlake_record_stream(e, s1) == 0, "record_stream");
	int64_t f0 = stat_of(0, "host_cache_frees");
	gmlake_free(e, 0, 0, NULL);
	void *e2 = gmlake_alloc(4096, 0, NULL);
	CHECK(stat_of(0, "host_cache_frees") == f0, "a block used on another stream was kept by the cache");
	gmlake_free(e2, 0, 0, NULL);

	// Many live blocks, freed in a shuffled order: the table of live entries keeps every remaining one where
	// its probe run finds it after each deletion (the backward shift across the table's end included).
	enum { many = 3000 };
	static void *ps[many];
	for (int i = 0; i < many; i++) {
		ps[i] = gmlake_alloc(512 + (size_t)(i % 3) * 512, 0, NULL);
		CHECK(ps[i] != NULL, "alloc %d of %d failed", i, many);
	}
	uint64_t x = 2801;
	for (int i = many - 1; i > 0; i--) { // Fisher-Yates with a fixed LCG: the same order every run
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		int j = (int)((x >> 33) % (uint64_t)(i + 1));
		void *t = ps[i];
		ps[i] = ps[j];
		ps[j] = t;
	}
	int bad = 0;
	for (int i = 0; i < many && bad < 3; i++) {
		gmlake_free(ps[i], 0, 0, NULL);
		if (on && (i % 7 == 0 || i > many - 40)) {
			int64_t findable = stat_of(0, "host_cache_findable"), n = stat_of(0, "host_cache_live"),
				scanned = stat_of(0, "host_cache_live_scanned");
			if (findable != 1 || n != scanned || n != many - 1 - i) {
				bad++;
				CHECK(0, "after %d of %d shuffled frees: host_cache_findable %" PRId64 ", live %" PRId64 ", scanned %" PRId64 ", want 1, %d, %d",
				      i + 1, many, findable, n, scanned, many - 1 - i, many - 1 - i);
			}
		}
	}

	int64_t live = stat_of(0, "live_allocations");
	CHECK(live == 0, "live_allocations %" PRId64 " after every free", live);
	int rc = gmlake_close(0);
	CHECK(rc == 0, "gmlake_close reported %d live allocations, want 0", rc);
	printf("ok %d checks failed\n", failures);
	return failures != 0;
}
