/* close_race: gmlake_free and gmlake_alloc racing gmlake_close on the same device (issue 14 item 1).
 * Eight threads allocate and free while the main thread closes device 0 every 300 us for about a second.
 * A free of a pointer whose engine was closed meanwhile may be reported as a bad free, and an allocation may
 * fail; what must never happen is a panic inside the library (an "internal error" on stderr, a nonzero
 * "panics" counter, a disabled engine). Usage: close_race [seconds]. Exit 0 when no panic was seen. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include "gmlake.h"

#define THREADS 8
#define KEEP 16

static atomic_int stop;

static void *worker(void *arg) {
	uintptr_t seed = (uintptr_t)arg * 2654435761u + 1;
	void *live[KEEP] = {0};
	while (!atomic_load(&stop)) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		int i = (int)((seed >> 33) % KEEP);
		if (live[i]) {
			gmlake_free(live[i], 0, 0 /* device */, 0 /* stream */);
			live[i] = NULL;
		} else {
			live[i] = gmlake_alloc(((seed >> 40) % 4 + 1) << 20, 0 /* device */, 0 /* stream */);
		}
	}
	for (int i = 0; i < KEEP; i++)
		if (live[i]) gmlake_free(live[i], 0, 0, 0);
	return NULL;
}

int main(int argc, char **argv) {
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;
	pthread_t th[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)i);
	struct timespec start, now, pause = {0, 300 * 1000};
	clock_gettime(CLOCK_MONOTONIC, &start);
	int closes = 0;
	do {
		nanosleep(&pause, NULL);
		gmlake_close(0 /* device */);
		closes++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	atomic_store(&stop, 1);
	for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
	/* One more allocation starts a fresh engine: its stats must show no panic, and neither may the last
	 * engine's (read before closing it). */
	char buf[4096];
	void *p = gmlake_alloc(1 << 20, 0, 0);
	gmlake_stats_json(0, buf, sizeof buf);
	int bad = p == NULL || strstr(buf, "\"panics\":0") == NULL || strstr(buf, "\"disabled\":true") != NULL;
	gmlake_free(p, 0, 0, 0);
	printf("close_race: %d closes in %.1f s; %s\n", closes, seconds, bad ? "FAILED" : "no panic");
	if (bad) printf("stats: %s\n", buf);
	return bad;
}
