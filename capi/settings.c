// The settings functions of gmlake.h (settings.go holds their Go side), and the live environment for it.
#include <stddef.h>
#include <stdint.h>

#include "gmlake.h"
#include "_cgo_export.h"
#include "abi_internal.h"

extern char **environ;

// gmlake_environ_at returns the i-th "NAME=VALUE" of the process's live environment, NULL past its end.
GMLAKE_HIDDEN const char *gmlake_environ_at(size_t i) { return environ == NULL ? NULL : environ[i]; }

int gmlake_check_settings(const char *const *env, char *buf, size_t len) {
	GMLAKE_ENTER(-1); // gmlake.h's per-call rule (abi.c)
	return gmlakeGoCheckSettings((char **)env, buf, len);
}

int gmlake_settings_json(char *buf, size_t len) {
	GMLAKE_ENTER(-1); // gmlake.h's per-call rule (abi.c)
	return gmlakeGoSettingsJSON(buf, len);
}
