/* trace_host: a host process of libgmlake writing GMLAKE_TRACE, for capi/trace_test.go. Modes:
 *   signal N [handler]  N allocations and frees, "ready", then wait to be killed; with "handler" a SIGINT
 *                       handler of the host's own (as Python has) that says so and then dies by SIGINT
 *   fork N [term]       N pairs, fork; the child calls every entry of gmlake.h, each of which must refuse it
 *                       (NULL or negative, GMLAKE_ERR_NO_DEVICE, a line naming fork and spawn), says how many
 *                       did, and exits (with "term": kills itself by SIGTERM); the parent waits, says how the
 *                       child ended, makes N more, exits
 *   hold N              N pairs, "ready", then wait for stdin to close and exit
 * The simulated device (GMLAKE_DEVICE=sim) serves the allocations. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gmlake.h"

static void pairs(int n) {
	for (int i = 0; i < n; i++) {
		void *p = gmlake_alloc(4096 + i % 7, 0, 0);
		if (p == NULL) {
			printf("FAIL: allocation %d failed\n", i);
			exit(2);
		}
		gmlake_free(p, 0, 0, 0);
	}
}

// refused reports whether the call just made in a forked child was refused by the fork rule.
static int refused(const char *name, int failed) {
	char msg[1024];
	gmlake_last_error(msg, sizeof msg);
	if (!failed || gmlake_last_error_kind() != GMLAKE_ERR_NO_DEVICE || strstr(msg, "fork()") == NULL ||
	    strstr(msg, "spawn") == NULL) {
		printf("FAIL: %s in the forked child: failed %d, kind %d, error \"%s\"\n", name, failed,
		       gmlake_last_error_kind(), msg);
		return 0;
	}
	return 1;
}

// child_entries calls every entry of gmlake.h but the error readers (TestForkedChildCallsEveryEntry checks
// that this list names them all) and returns how many refused. live is a pointer the parent allocated.
static int child_entries(void *live) {
	char buf[256];
	gmlake_device_stats st;
	size_t largest = 0, size = 0;
	void *base = NULL;
	uint64_t ptrs[4];
	int ok = 0;
	ok += refused("gmlake_alloc", gmlake_alloc(4096, 0, 0) == NULL);
	gmlake_free(live, 0, 0, 0);
	ok += refused("gmlake_free", 1);
	ok += refused("gmlake_alloc_pool", gmlake_alloc_pool(4096, 0, 0, 1, 2) == NULL);
	gmlake_init(1);
	ok += refused("gmlake_init", 1);
	ok += refused("gmlake_start", gmlake_start(0) < 0);
	ok += refused("gmlake_empty_cache", gmlake_empty_cache() < 0);
	ok += refused("gmlake_set_memory_fraction", gmlake_set_memory_fraction(0.5, 0) < 0);
	ok += refused("gmlake_get_memory_fraction", gmlake_get_memory_fraction(0) < 0);
	ok += refused("gmlake_record_stream", gmlake_record_stream(live, 0) < 0);
	ok += refused("gmlake_stats_json", gmlake_stats_json(0, buf, sizeof buf) < 0);
	ok += refused("gmlake_knobs", gmlake_knobs(buf, sizeof buf) < 0);
	ok += refused("gmlake_trace_start", gmlake_trace_start("child.trace") < 0);
	ok += refused("gmlake_trace_stop", gmlake_trace_stop() < 0);
	ok += refused("gmlake_get_device_stats", gmlake_get_device_stats(0, &st) < 0);
	ok += refused("gmlake_reset_peak_stats", gmlake_reset_peak_stats(0) < 0);
	ok += refused("gmlake_reset_accumulated_stats", gmlake_reset_accumulated_stats(0) < 0);
	ok += refused("gmlake_snapshot_json", gmlake_snapshot_json(0, buf, sizeof buf) < 0);
	gmlake_set_event_callback(NULL, NULL);
	ok += refused("gmlake_set_event_callback", 1);
	ok += refused("gmlake_pool_create_or_incref", gmlake_pool_create_or_incref(0, 1, 2) < 0);
	ok += refused("gmlake_pool_release", gmlake_pool_release(0, 1, 2) < 0);
	ok += refused("gmlake_pool_use_count", gmlake_pool_use_count(0, 1, 2) < 0);
	ok += refused("gmlake_pool_live", gmlake_pool_live(0, 1, 2, ptrs, 4) < 0);
	ok += refused("gmlake_set_capturing", gmlake_set_capturing(0, 0, 1) < 0);
	ok += refused("gmlake_cache_info", gmlake_cache_info(0, &largest) < 0);
	ok += refused("gmlake_base_allocation", gmlake_base_allocation(live, &base, &size) < 0);
	gmlake_ipc_piece pc[4];
	size_t npc = 0;
	uint64_t off = 0, size64 = 0;
	ok += refused("gmlake_ipc_export", gmlake_ipc_export(live, pc, 4, &npc, &off, &size64) < 0);
	ok += refused("gmlake_check_settings", gmlake_check_settings(NULL, buf, sizeof buf) < 0);
	ok += refused("gmlake_settings_json", gmlake_settings_json(buf, sizeof buf) < 0);
	ok += refused("gmlake_close", gmlake_close(0) < 0);
	return ok;
}

static void host_sigint(int sig) {
	static const char msg[] = "host handler ran\n";
	if (write(1, msg, sizeof msg - 1) < 0) {
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: trace_host signal|fork|hold N [handler|term]\n");
		return 2;
	}
	int n = atoi(argv[2]);
	if (strcmp(argv[1], "signal") == 0) {
		if (argc > 3 && strcmp(argv[3], "handler") == 0) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = host_sigint;
			sigaction(SIGINT, &sa, NULL);
		}
		pairs(n);
		printf("ready\n");
		fflush(stdout);
		for (;;) {
			pause();
		}
	}
	if (strcmp(argv[1], "fork") == 0) {
		pairs(n);
		void *live = gmlake_alloc(1 << 20, 0, 0);
		if (live == NULL) {
			printf("FAIL: the parent's allocation failed\n");
			return 2;
		}
		fflush(stdout);
		pid_t child = fork();
		if (child == 0) {
			int ok = child_entries(live);
			printf("child refused %d entries\n", ok);
			fflush(stdout);
			if (argc > 3 && strcmp(argv[3], "term") == 0) {
				kill(getpid(), SIGTERM); /* the child's SIGTERM is its own: it dies by it */
				sleep(10);
				exit(3);
			}
			exit(0);
		}
		int status = 0;
		waitpid(child, &status, 0);
		if (WIFSIGNALED(status)) {
			printf("child %d killed by signal %d\n", (int)child, WTERMSIG(status));
		} else {
			printf("child %d exited %d\n", (int)child, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		}
		gmlake_free(live, 0, 0, 0);
		pairs(n);
		return 0;
	}
	if (strcmp(argv[1], "hold") == 0) {
		pairs(n);
		printf("ready\n");
		fflush(stdout);
		char buf[64];
		while (read(0, buf, sizeof buf) > 0) {
		}
		return 0;
	}
	fprintf(stderr, "trace_host: unknown mode %s\n", argv[1]);
	return 2;
}
