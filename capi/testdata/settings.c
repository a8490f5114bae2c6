// settings: what one engine start makes of the environment (capi/settings_test.go sets it): whether a 1 MiB
// allocation on device 0 succeeds, device 0's statistics JSON (the cap in force and the setting it came from),
// and the library's error text when the allocation failed.
#include <stdio.h>

#include "gmlake.h"

int main(void) {
	static char buf[1 << 16];
	void *p = gmlake_alloc((size_t)1 << 20, 0 /* device */, NULL /* stream */);
	printf("alloc=%s\n", p != NULL ? "ok" : "null");
	if (p == NULL) {
		gmlake_last_error(buf, sizeof buf);
		printf("error=%s\n", buf);
	}
	gmlake_stats_json(0, buf, sizeof buf);
	printf("stats=%s\n", buf);
	if (p != NULL) {
		gmlake_free(p, 0, 0, NULL);
	}
	return 0;
}
