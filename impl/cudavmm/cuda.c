//go:build cgo

// The CUDA driver, loaded at run time. See cuda.h.
#include "cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum {
	CU_MEM_ALLOCATION_TYPE_PINNED = 1,
	CU_MEM_LOCATION_TYPE_DEVICE = 1,
	CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
	CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
	CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 128,
	CU_EVENT_DISABLE_TIMING = 2,
	CU_STREAM_DEFAULT = 0,
	CU_STREAM_NON_BLOCKING = 1,
	CU_STREAM_WAIT_VALUE_GEQ = 0,
	CU_STREAM_WRITE_VALUE_DEFAULT = 0,
};

_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");

// The function pointers, one per symbol. The versioned names are the 64-bit ABI; libcuda.so.1 still exports
// the old unsuffixed names with 32-bit sizes (docs/cuda-vmm.md, "Symbol trap").
static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);           // _v2
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
static CUresult (*p_cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
				 unsigned long long);
static CUresult (*p_cuMemRelease)(CUmemGenericAllocationHandle);
static CUresult (*p_cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
static CUresult (*p_cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*p_cuMemAddressFree)(CUdeviceptr, size_t);
static CUresult (*p_cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*p_cuMemUnmap)(CUdeviceptr, size_t);
static CUresult (*p_cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);                 // _v2
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned int);
static CUresult (*p_cuStreamDestroy)(CUstream);                        // _v2
static CUresult (*p_cuStreamQuery)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuStreamIsCapturing)(CUstream, int *); /* CUstreamCaptureStatus: 0 is NONE */
static CUresult (*p_cuEventCreate)(CUevent *, unsigned int);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventQuery)(CUevent);
static CUresult (*p_cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
static CUresult (*p_cuEventDestroy)(CUevent);                          // _v2
static CUresult (*p_cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);        // _v2
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);                // _v2
static CUresult (*p_cuMemFree)(CUdeviceptr);                           // _v2
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
// Optional (NULL when absent): stream memory operations, for the test clock of harness/gpu.
static CUresult (*p_cuStreamWaitValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int);  // _v2 if present
static CUresult (*p_cuStreamWriteValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int); // _v2 if present

static void *lib;

#define LOAD(var, name)                                                                         \
	do {                                                                                    \
		*(void **)(&var) = dlsym(lib, name);                                            \
		if (!var) {                                                                     \
			snprintf(err, errlen, "libcuda.so.1 has no symbol %s: driver too old", name); \
			return -1;                                                      \
		}                                                                               \
	} while (0)

int gm_load(char *err, int errlen) {
	if (lib) {
		return 0;
	}
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(err, errlen, "dlopen(libcuda.so.1): %s", e ? e : "unknown error");
		return -1;
	}
	lib = h;
	LOAD(p_cuInit, "cuInit");
	LOAD(p_cuDeviceGet, "cuDeviceGet");
	LOAD(p_cuDeviceGetAttribute, "cuDeviceGetAttribute");
	LOAD(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	LOAD(p_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	LOAD(p_cuCtxSetCurrent, "cuCtxSetCurrent");
	LOAD(p_cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity");
	LOAD(p_cuMemCreate, "cuMemCreate");
	LOAD(p_cuMemRelease, "cuMemRelease");
	LOAD(p_cuMemExportToShareableHandle, "cuMemExportToShareableHandle");
	LOAD(p_cuMemAddressReserve, "cuMemAddressReserve");
	LOAD(p_cuMemAddressFree, "cuMemAddressFree");
	LOAD(p_cuMemMap, "cuMemMap");
	LOAD(p_cuMemUnmap, "cuMemUnmap");
	LOAD(p_cuMemSetAccess, "cuMemSetAccess");
	LOAD(p_cuMemGetInfo, "cuMemGetInfo_v2");
	LOAD(p_cuStreamCreate, "cuStreamCreate");
	LOAD(p_cuStreamDestroy, "cuStreamDestroy_v2");
	LOAD(p_cuStreamQuery, "cuStreamQuery");
	LOAD(p_cuStreamSynchronize, "cuStreamSynchronize");
	LOAD(p_cuCtxSynchronize, "cuCtxSynchronize");
	LOAD(p_cuStreamIsCapturing, "cuStreamIsCapturing");
	LOAD(p_cuEventCreate, "cuEventCreate");
	LOAD(p_cuEventRecord, "cuEventRecord");
	LOAD(p_cuEventQuery, "cuEventQuery");
	LOAD(p_cuStreamWaitEvent, "cuStreamWaitEvent");
	LOAD(p_cuEventDestroy, "cuEventDestroy_v2");
	LOAD(p_cuMemsetD8Async, "cuMemsetD8Async");
	LOAD(p_cuMemcpyDtoH, "cuMemcpyDtoH_v2");
	LOAD(p_cuMemAlloc, "cuMemAlloc_v2");
	LOAD(p_cuMemFree, "cuMemFree_v2");
	LOAD(p_cuGetErrorName, "cuGetErrorName");
	*(void **)(&p_cuStreamWaitValue32) = dlsym(lib, "cuStreamWaitValue32_v2");
	if (!p_cuStreamWaitValue32) *(void **)(&p_cuStreamWaitValue32) = dlsym(lib, "cuStreamWaitValue32");
	*(void **)(&p_cuStreamWriteValue32) = dlsym(lib, "cuStreamWriteValue32_v2");
	if (!p_cuStreamWriteValue32) *(void **)(&p_cuStreamWriteValue32) = dlsym(lib, "cuStreamWriteValue32");
	return 0;
}

static void prop_init(CUmemAllocationProp *prop, CUdevice dev) {
	memset(prop, 0, sizeof *prop);
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = dev;
}

CUresult gm_open(int ordinal, CUdevice *dev, CUcontext *ctx, uint64_t *gran, int *step) {
	CUresult r;
	*step = 0;
	if ((r = p_cuInit(0)) != 0) return r;
	*step = 1;
	if ((r = p_cuDeviceGet(dev, ordinal)) != 0) return r;
	*step = 2;
	int vmm = 0;
	if ((r = p_cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, *dev)) != 0)
		return r;
	*step = 3;
	if (!vmm) return 801; // CUDA_ERROR_NOT_SUPPORTED
	*step = 4;
	if ((r = p_cuDevicePrimaryCtxRetain(ctx, *dev)) != 0) return r;
	*step = 5;
	if ((r = p_cuCtxSetCurrent(*ctx)) != 0) {
		p_cuDevicePrimaryCtxRelease(*dev);
		return r;
	}
	*step = 6;
	CUmemAllocationProp prop;
	prop_init(&prop, *dev);
	size_t g = 0;
	if ((r = p_cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) != 0) {
		p_cuDevicePrimaryCtxRelease(*dev);
		return r;
	}
	*gran = g;
	return 0;
}

CUresult gm_close(CUdevice dev) { return p_cuDevicePrimaryCtxRelease(dev); }

#define CTX(ctx)                                      \
	do {                                          \
		CUresult rc_ = p_cuCtxSetCurrent(ctx); \
		if (rc_ != 0) return rc_;             \
	} while (0)

void gm_handle_caps(CUdevice dev, int *posix_fd, int *fabric, int *rdma) {
	*posix_fd = *fabric = *rdma = 0;
	if (p_cuDeviceGetAttribute(posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) != 0)
		*posix_fd = 0;
	if (p_cuDeviceGetAttribute(fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev) != 0) *fabric = 0;
	if (p_cuDeviceGetAttribute(rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev) != 0) *rdma = 0;
}

CUresult gm_create(CUcontext ctx, CUdevice dev, uint64_t size, int handle_types, int rdma, uint64_t *handle) {
	CTX(ctx);
	CUmemAllocationProp prop;
	prop_init(&prop, dev);
	prop.requestedHandleTypes = handle_types;
	prop.allocFlags.gpuDirectRDMACapable = (unsigned char)(rdma != 0);
	CUmemGenericAllocationHandle h = 0;
	CUresult r = p_cuMemCreate(&h, size, &prop, 0);
	*handle = h;
	return r;
}

CUresult gm_export_fd(CUcontext ctx, uint64_t handle, int *fd) {
	CTX(ctx);
	*fd = -1;
	return p_cuMemExportToShareableHandle(fd, handle, 1 /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */, 0);
}

CUresult gm_release(CUcontext ctx, uint64_t handle) {
	CTX(ctx);
	return p_cuMemRelease(handle);
}

CUresult gm_reserve(CUcontext ctx, uint64_t size, uint64_t align, uint64_t *ptr) {
	CTX(ctx);
	CUdeviceptr p = 0;
	CUresult r = p_cuMemAddressReserve(&p, size, align, 0, 0);
	*ptr = p;
	return r;
}

CUresult gm_free_address(CUcontext ctx, uint64_t ptr, uint64_t size) {
	CTX(ctx);
	return p_cuMemAddressFree(ptr, size);
}

CUresult gm_map(CUcontext ctx, uint64_t ptr, uint64_t size, uint64_t offset, uint64_t handle) {
	CTX(ctx);
	return p_cuMemMap(ptr, size, offset, handle, 0);
}

CUresult gm_unmap(CUcontext ctx, uint64_t ptr, uint64_t size) {
	CTX(ctx);
	return p_cuMemUnmap(ptr, size);
}

CUresult gm_set_access(CUcontext ctx, CUdevice dev, uint64_t ptr, uint64_t size) {
	CTX(ctx);
	CUmemAccessDesc d;
	memset(&d, 0, sizeof d);
	d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	d.location.id = dev;
	d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return p_cuMemSetAccess(ptr, size, &d, 1);
}

CUresult gm_mem_info(CUcontext ctx, uint64_t *free_, uint64_t *total) {
	CTX(ctx);
	size_t f = 0, t = 0;
	CUresult r = p_cuMemGetInfo(&f, &t);
	*free_ = f;
	*total = t;
	return r;
}

CUresult gm_stream_create(CUcontext ctx, uint64_t *stream) {
	CTX(ctx);
	CUstream s = 0;
	CUresult r = p_cuStreamCreate(&s, CU_STREAM_DEFAULT);
	*stream = (uint64_t)(uintptr_t)s;
	return r;
}

CUresult gm_stream_create_nonblocking(CUcontext ctx, uint64_t *stream) {
	CTX(ctx);
	CUstream s = 0;
	CUresult r = p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	*stream = (uint64_t)(uintptr_t)s;
	return r;
}

CUresult gm_stream_wait_value32(CUcontext ctx, uint64_t stream, uint64_t addr, uint32_t value) {
	if (!p_cuStreamWaitValue32) return 801; // CUDA_ERROR_NOT_SUPPORTED
	CTX(ctx);
	return p_cuStreamWaitValue32((CUstream)(uintptr_t)stream, (CUdeviceptr)addr, value, CU_STREAM_WAIT_VALUE_GEQ);
}

CUresult gm_stream_write_value32(CUcontext ctx, uint64_t stream, uint64_t addr, uint32_t value) {
	if (!p_cuStreamWriteValue32) return 801; // CUDA_ERROR_NOT_SUPPORTED
	CTX(ctx);
	return p_cuStreamWriteValue32((CUstream)(uintptr_t)stream, (CUdeviceptr)addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
}

CUresult gm_stream_destroy(CUcontext ctx, uint64_t stream) {
	CTX(ctx);
	return p_cuStreamDestroy((CUstream)(uintptr_t)stream);
}

CUresult gm_stream_query(CUcontext ctx, uint64_t stream) {
	CTX(ctx);
	return p_cuStreamQuery((CUstream)(uintptr_t)stream);
}

CUresult gm_stream_sync(CUcontext ctx, uint64_t stream) {
	CTX(ctx);
	return p_cuStreamSynchronize((CUstream)(uintptr_t)stream);
}

CUresult gm_stream_is_capturing(CUcontext ctx, uint64_t stream, int *capturing) {
	CTX(ctx);
	int st = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
	CUresult r = p_cuStreamIsCapturing((CUstream)(uintptr_t)stream, &st);
	*capturing = st != 0;
	return r;
}

CUresult gm_ctx_sync(CUcontext ctx) {
	CTX(ctx);
	return p_cuCtxSynchronize();
}

CUresult gm_event_create(CUcontext ctx, uint64_t *event) {
	CTX(ctx);
	CUevent e = 0;
	CUresult r = p_cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
	*event = (uint64_t)(uintptr_t)e;
	return r;
}

CUresult gm_event_record(CUcontext ctx, uint64_t event, uint64_t stream) {
	CTX(ctx);
	return p_cuEventRecord((CUevent)(uintptr_t)event, (CUstream)(uintptr_t)stream);
}

CUresult gm_event_query(CUcontext ctx, uint64_t event) {
	CTX(ctx);
	return p_cuEventQuery((CUevent)(uintptr_t)event);
}

CUresult gm_stream_wait_event(CUcontext ctx, uint64_t stream, uint64_t event) {
	CTX(ctx);
	return p_cuStreamWaitEvent((CUstream)(uintptr_t)stream, (CUevent)(uintptr_t)event, 0);
}

CUresult gm_event_destroy(CUcontext ctx, uint64_t event) {
	CTX(ctx);
	return p_cuEventDestroy((CUevent)(uintptr_t)event);
}

CUresult gm_memset(CUcontext ctx, uint64_t ptr, uint64_t size, unsigned char value, uint64_t stream) {
	CTX(ctx);
	return p_cuMemsetD8Async(ptr, value, size, (CUstream)(uintptr_t)stream);
}

CUresult gm_read(CUcontext ctx, uint64_t ptr, void *dst, uint64_t size, uint64_t stream) {
	CTX(ctx);
	CUresult r = p_cuStreamSynchronize((CUstream)(uintptr_t)stream);
	if (r != 0) return r;
	return p_cuMemcpyDtoH(dst, ptr, size);
}

CUresult gm_mem_alloc(CUcontext ctx, uint64_t size, uint64_t *ptr) {
	CTX(ctx);
	CUdeviceptr p = 0;
	CUresult r = p_cuMemAlloc(&p, size);
	*ptr = p;
	return r;
}

CUresult gm_mem_free(CUcontext ctx, uint64_t ptr) {
	CTX(ctx);
	return p_cuMemFree(ptr);
}

uint64_t gm_time_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *gm_result_name(CUresult r) {
	const char *s = NULL;
	if (!p_cuGetErrorName || p_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}
