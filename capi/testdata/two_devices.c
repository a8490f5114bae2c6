/* two_devices: pointers of two simulated devices of one process are distinct, and a pointer of device 1
 * freed as device 0's is refused, leaving device 0's block alone (issue 14 item 3). Exit 0 when all holds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gmlake.h"

static int bad_frees(int device) {
	char buf[8192];
	gmlake_stats_json(device, buf, sizeof buf);
	const char *p = strstr(buf, "\"bad_frees\":");
	return p ? atoi(p + strlen("\"bad_frees\":")) : -1;
}

int main(void) {
	int failed = 0;
	void *p0 = gmlake_alloc(1 << 20, 0 /* device */, 0 /* stream */);
	void *p1 = gmlake_alloc(1 << 20, 1 /* device */, 0 /* stream */);
	if (!p0 || !p1 || p0 == p1) {
		printf("FAIL: device 0 gave %p, device 1 gave %p: want two distinct pointers\n", p0, p1);
		failed++;
	}
	gmlake_free(p1, 0, 0 /* device 0: the wrong one */, 0);
	if (bad_frees(0) != 1) {
		printf("FAIL: freeing device 1's %p as device 0's was not refused (bad frees on device 0: %d)\n", p1, bad_frees(0));
		failed++;
	}
	gmlake_free(p0, 0, 0, 0);
	gmlake_free(p1, 0, 1, 0);
	if (bad_frees(0) != 1 || bad_frees(1) != 0) {
		printf("FAIL: the right frees were refused (bad frees: device 0 %d, device 1 %d)\n", bad_frees(0), bad_frees(1));
		failed++;
	}
	if (gmlake_close(0) != 0 || gmlake_close(1) != 0) {
		printf("FAIL: blocks still live at close\n");
		failed++;
	}
	printf("two_devices: %s\n", failed ? "FAILED" : "ok");
	return failed;
}
