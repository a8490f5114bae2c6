// gmlake_alloc_throw: gmlake_alloc for C++ callers that expect a failed allocation to throw (PyTorch's
// CUDAPluggableAllocator does not check for NULL: a NULL block of nonzero size would be used as if it were
// memory). The exception is thrown here, after the Go call has returned, so no Go frame is ever unwound.
// PyTorch turns a std::exception into a Python RuntimeError carrying what(); python/gmlake_torch's shim,
// built against the torch headers when possible, throws c10::OutOfMemoryError instead. The text keeps the
// error's kind (gmlake_last_error_kind): only an out of memory says "CUDA out of memory", which batch-size
// finders and retry logic read as "shrink the batch"; a bad setting, a missing device or driver, a bad
// argument or a disabled engine says what it is, under its GMLAKE_ERR_* name.

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gmlake.h"

namespace {

const char *kind_name(int kind) {
	switch (kind) {
	case GMLAKE_ERR_INVALID:
		return "GMLAKE_ERR_INVALID";
	case GMLAKE_ERR_CONFIG:
		return "GMLAKE_ERR_CONFIG";
	case GMLAKE_ERR_NO_DEVICE:
		return "GMLAKE_ERR_NO_DEVICE";
	case GMLAKE_ERR_DISABLED:
		return "GMLAKE_ERR_DISABLED";
	case GMLAKE_ERR_INTERNAL:
		return "GMLAKE_ERR_INTERNAL";
	default:
		return "GMLAKE_ERR_OTHER";
	}
}

} // namespace

extern "C" void *gmlake_alloc_throw(size_t size, int device, cudaStream_t stream) {
	void *p = gmlake_alloc(size, device, stream);
	if (p == nullptr && size != 0) {
		char buf[2048];
		int kind = gmlake_last_error_kind();
		gmlake_last_error(buf, sizeof buf);
		if (kind == GMLAKE_ERR_OOM)
			throw std::runtime_error(std::string("CUDA out of memory (gmlake): ") + buf);
		if (kind == GMLAKE_ERR_INVALID)
			throw std::invalid_argument(std::string(buf) + " [" + kind_name(kind) + "]");
		throw std::runtime_error(std::string(buf) + " [" + kind_name(kind) + "]");
	}
	return p;
}
