// gmlake_alloc_throw: gmlake_alloc for C++ callers that expect a failed allocation to throw (PyTorch's
// CUDAPluggableAllocator does not check for NULL: a NULL block of nonzero size would be used as if it were
// memory). The exception is thrown here, after the Go call has returned, so no Go frame is ever unwound.
// PyTorch turns a std::exception into a Python RuntimeError carrying what(); python/gmlake_torch's shim,
// built against the torch headers when possible, throws c10::OutOfMemoryError instead.

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gmlake.h"

extern "C" void *gmlake_alloc_throw(size_t size, int device, cudaStream_t stream) {
	void *p = gmlake_alloc(size, device, stream);
	if (p == nullptr && size != 0) {
		char buf[2048];
		gmlake_last_error(buf, sizeof buf);
		if (std::strstr(buf, "gmlake: configuration error") != nullptr) // main.go's configErrorPrefix
			throw std::runtime_error(buf);
		throw std::runtime_error(std::string("CUDA out of memory (gmlake): ") + buf);
	}
	return p;
}
