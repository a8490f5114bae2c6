/* trace_host: a host process of libgmlake writing GMLAKE_TRACE, for capi/trace_test.go. Modes:
 *   signal N [handler]  N allocations and frees, "ready", then wait to be killed; with "handler" a SIGINT
 *                       handler of the host's own (as Python has) that says so and then dies by SIGINT
 *   fork N M [term]     N pairs, fork; the child makes M pairs and exits (with "term": kills itself by
 *                       SIGTERM); the parent waits, says how the child ended, makes N more, exits
 *   hold N              N pairs, "ready", then wait for stdin to close and exit
 * The simulated device (GMLAKE_DEVICE=sim) serves the allocations. */
#include <signal.h>
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

static void host_sigint(int sig) {
	static const char msg[] = "host handler ran\n";
	if (write(1, msg, sizeof msg - 1) < 0) {
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: trace_host signal|fork|hold N [M|handler]\n");
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
		int m = argc > 3 ? atoi(argv[3]) : 0;
		pairs(n);
		fflush(stdout);
		pid_t child = fork();
		if (child == 0) {
			pairs(m);
			if (argc > 4 && strcmp(argv[4], "term") == 0) {
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
