// fraction_before: gmlake_get_memory_fraction of device 0 before its engine starts, and the library's error
// text when it is negative (capi/fraction_test.go sets GMLAKE_MEMORY_FRACTION).
#include <stdio.h>

#include "gmlake.h"

int main(void) {
	char buf[4096];
	double f = gmlake_get_memory_fraction(0);
	printf("fraction=%g\n", f);
	if (f < 0) {
		gmlake_last_error(buf, sizeof buf);
		printf("error=%s\n", buf);
	}
	return 0;
}
