/* abi_internal.h: what abi.c and torch.c share and gmlake.h does not promise: the calling thread's error
 * state (gmlake_last_error and gmlake_last_error_kind read it), which the event trampoline saves and restores
 * around a callback (the calls a callback makes do not change the error of the call that fired it). */
#ifndef GMLAKE_ABI_INTERNAL_H
#define GMLAKE_ABI_INTERNAL_H

#include <stddef.h>

enum { GMLAKE_ERR_CAP = 4096 };

typedef struct {
	int kind;
	char msg[GMLAKE_ERR_CAP];
} gmlake_thread_error;

void gmlake_set_thread_error(int kind, const char *msg, size_t n);
void gmlake_clear_thread_error(void);
void gmlake_save_thread_error(gmlake_thread_error *into);
void gmlake_restore_thread_error(const gmlake_thread_error *from);
int gmlake_copy_out(const char *s, size_t n, char *buf, size_t len);

#endif
