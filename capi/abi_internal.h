/* abi_internal.h: what abi.c and torch.c share and gmlake.h does not promise: the calling thread's error
 * state (gmlake_last_error and gmlake_last_error_kind read it), which the event trampoline saves and restores
 * around a callback (the calls a callback makes do not change the error of the call that fired it). */
#ifndef GMLAKE_ABI_INTERNAL_H
#define GMLAKE_ABI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

// GMLAKE_HIDDEN keeps a helper out of the library's dynamic symbols: a caller reaches the library only through
// gmlake.h's functions, which validate their arguments (TestLibraryExportsOnlyGmlakeH).
#define GMLAKE_HIDDEN __attribute__((visibility("hidden")))

enum { GMLAKE_ERR_CAP = 4096 };

typedef struct {
	int kind;
	char msg[GMLAKE_ERR_CAP];
} gmlake_thread_error;

GMLAKE_HIDDEN void gmlake_set_thread_error(int kind, const char *msg, size_t n);
GMLAKE_HIDDEN void gmlake_clear_thread_error(void);
GMLAKE_HIDDEN void gmlake_save_thread_error(gmlake_thread_error *into);
GMLAKE_HIDDEN void gmlake_restore_thread_error(const gmlake_thread_error *from);
GMLAKE_HIDDEN int gmlake_copy_out(const char *s, size_t n, char *buf, size_t len);
GMLAKE_HIDDEN void gmlake_fire_event(int device, int action, uint64_t addr, uint64_t size, uintptr_t stream);
GMLAKE_HIDDEN void gmlake_set_thread_failure(int kind, uint64_t requested, uint64_t device_total, uint64_t device_free,
                                           uint64_t allocated, uint64_t reserved, uint64_t cached, uint64_t limit);

// gmlake_forked_from is 0 in a process that loaded the library, and the pid of the parent in a child forked
// from one (set by abi.c's fork handler, before the child runs any code of its own). Neither the Go runtime,
// whose threads the child does not have, nor CUDA can be used after fork() without exec(): every entry of
// gmlake.h refuses in such a child (GMLAKE_ENTER), in C, before it reaches Go or the host cache.
GMLAKE_HIDDEN extern volatile int gmlake_forked_from;
GMLAKE_HIDDEN int gmlake_refuse_forked(void);

// GMLAKE_ENTER begins every entry of gmlake.h but the error readers: it clears the calling thread's last
// error (the per-call rule) and, in a forked child, sets GMLAKE_ERR_NO_DEVICE with a line that says to spawn
// and returns ret (nothing in a void function) without entering Go.
#define GMLAKE_ENTER(ret)                                                                   \
	do {                                                                                    \
		gmlake_clear_thread_error();                                                        \
		if (__builtin_expect(gmlake_forked_from != 0, 0) && gmlake_refuse_forked()) {       \
			return ret;                                                                     \
		}                                                                                   \
	} while (0)

#endif
