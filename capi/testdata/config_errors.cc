// config_errors: what a program sees when the library's configuration (environment) is bad (issue 14
// items 4 and 5): every allocation fails (a bad value is never taken as "no cap" or a default), and the
// throwing entry says it is a configuration error, not out of memory. The Go test checks stderr: the error,
// with the variable's name, said once.
#include <cstdio>
#include <stdexcept>

#include "gmlake.h"

int main() {
	int nulls = 0;
	for (int i = 0; i < 3; i++) {
		void *p = gmlake_alloc(size_t(128) << 20, 0 /* device */, nullptr /* stream */);
		if (p == nullptr) {
			nulls++;
		} else {
			gmlake_free(p, 0, 0, nullptr);
		}
	}
	std::printf("nulls=%d\n", nulls);
	try {
		void *p = gmlake_alloc_throw(1 << 20, 0, nullptr);
		std::printf("throw: none\n");
		gmlake_free(p, 0, 0, nullptr);
	} catch (const std::exception &e) {
		std::printf("throw: %s\n", e.what());
	}
	return 0;
}
