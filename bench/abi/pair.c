// The C side of the per-pair breakdown (issue 38 item 1), on any device libgmlake opens (GMLAKE_DEVICE):
// ns per gmlake_alloc+gmlake_free pair through the C ABI, and per two no-op crossings into Go (gmlake_init),
// from the main thread and from a thread the program creates; CPU ns of the calling thread, best of 5 (neither was created by Go: what PyTorch's
// threads are to libgmlake). Warm cache, stream 0. `pair N SIZE` times only SIZE's pairs, for a profiler. Build and run: bench/abi/run.sh.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gmlake.h"

// The calling thread's CPU time: a cgo callback runs on the calling thread, so this counts the whole pair and
// not the other processes of a loaded machine (wall time would).
static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static long pairs = 1000000;

static double pair_ns(size_t size) {
	for (int i = 0; i < 1000; i++) gmlake_free(gmlake_alloc(size, 0, NULL), size, 0, NULL);
	double best = 1e18;
	for (int r = 0; r < 5; r++) {
		double t0 = now_ns();
		for (long i = 0; i < pairs; i++) {
			void *p = gmlake_alloc(size, 0, NULL);
			if (p == NULL) {
				char buf[512];
				gmlake_last_error(buf, sizeof buf);
				fprintf(stderr, "pair: gmlake_alloc(%zu) failed: %s\n", size, buf);
				exit(1);
			}
			gmlake_free(p, size, 0, NULL);
		}
		double v = (now_ns() - t0) / pairs;
		if (v < best) best = v;
	}
	return best;
}

static double cross_ns(void) {
	double best = 1e18;
	for (int r = 0; r < 5; r++) {
		double t0 = now_ns();
		for (long i = 0; i < pairs; i++) {
			gmlake_init(1);
			gmlake_init(1);
		}
		double v = (now_ns() - t0) / pairs;
		if (v < best) best = v;
	}
	return best;
}

// mixed_ns: the C++ benchmark's mixed pattern (bench/torch/hotpath_bench.py) through the C ABI: a ring of 64
// live blocks over the sizes in sizes[0..n) (one per line of a file: a real trace's), the oldest freed before
// each allocation; ns per allocation (with its free), best of 5 passes of `pairs` allocations.
static double mixed_ns(const size_t *sizes, size_t n) {
	enum { LIVE = 64 };
	void *ring[LIVE] = {0};
	size_t k = 0;
	double best = 1e18;
	for (int r = 0; r < 6; r++) { // the first pass warms the cache
		double t0 = now_ns();
		for (long i = 0; i < pairs; i++, k++) {
			if (ring[k % LIVE] != NULL) gmlake_free(ring[k % LIVE], 0, 0, NULL);
			size_t size = sizes[k % n];
			ring[k % LIVE] = gmlake_alloc(size, 0, NULL);
			if (ring[k % LIVE] == NULL) {
				char buf[512];
				gmlake_last_error(buf, sizeof buf);
				fprintf(stderr, "pair: gmlake_alloc(%zu) failed: %s\n", size, buf);
				exit(1);
			}
		}
		double v = (now_ns() - t0) / pairs;
		if (r > 0 && v < best) best = v;
	}
	for (int i = 0; i < LIVE; i++) gmlake_free(ring[i], 0, 0, NULL);
	return best;
}

static void *in_thread(void *arg) {
	double *out = arg;
	out[0] = cross_ns();
	out[1] = pair_ns(1 << 20);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1) pairs = atol(argv[1]);
	if (argc > 3 && argv[2][0] == 'm') { // pair N mixed FILE: the mixed pattern over FILE's sizes
		FILE *f = fopen(argv[3], "r");
		if (f == NULL) { perror(argv[3]); return 1; }
		static size_t sizes[1 << 16];
		size_t n = 0;
		while (n < sizeof sizes / sizeof sizes[0] && fscanf(f, "%zu", &sizes[n]) == 1) n++;
		fclose(f);
		if (n == 0) { fprintf(stderr, "pair: no sizes in %s\n", argv[3]); return 1; }
		printf("abi mixed (%zu sizes) %.1f ns per allocation and free\n", n, mixed_ns(sizes, n));
		return 0;
	}
	if (argc > 2) { // pair N SIZE: only SIZE's pairs (what `perf record` of one size profiles)
		size_t size = (size_t)atol(argv[2]);
		printf("abi %zuB %.1f ns per pair\n", size, pair_ns(size));
		return 0;
	}
	size_t sizes[] = {512, 1 << 20, 8 << 20, 256 << 20};
	const char *names[] = {"512B", "1MiB", "8MiB", "256MiB"};
	printf("cross main-thread %.1f ns per two crossings\n", cross_ns());
	for (int i = 0; i < 4; i++) printf("abi %s %.1f ns per pair\n", names[i], pair_ns(sizes[i]));
	pthread_t th;
	double r[2];
	pthread_create(&th, NULL, in_thread, r);
	pthread_join(th, NULL);
	printf("cross new-thread %.1f ns per two crossings\nabi-new-thread 1MiB %.1f ns per pair\n", r[0], r[1]);
	return 0;
}
