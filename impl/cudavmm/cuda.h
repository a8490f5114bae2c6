// The few CUDA driver API types and calls this package uses, declared by hand from the C ABI recorded in
// docs/cuda-vmm.md (there is no cuda.h on the build machine), and the gm_* wrappers the Go side calls.
//
// Every gm_* wrapper that touches device state first makes the driver's primary context current on the
// calling OS thread (cuCtxSetCurrent), inside the same C call, so a goroutine that migrates between threads
// between two cgo calls still runs each call in the right context.
#ifndef GMLAKE_CUDAVMM_H
#define GMLAKE_CUDAVMM_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef uint64_t CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

typedef struct {
	int type; // CU_MEM_LOCATION_TYPE_DEVICE = 1
	int id;   // device ordinal
} CUmemLocation; // 8 bytes

typedef struct {
	CUmemLocation location;
	int flags; // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3; an enum: 4 bytes, not 8
} CUmemAccessDesc; // 12 bytes

typedef struct {
	int type;                 // @0  CU_MEM_ALLOCATION_TYPE_PINNED = 1
	int requestedHandleTypes; // @4  0: none
	CUmemLocation location;   // @8
	void *win32HandleMetaData; // @16
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags; // @24
} CUmemAllocationProp; // 32 bytes

// gm_load dlopens libcuda.so.1 and looks up every symbol. 0 on success; otherwise writes why into err.
int gm_load(char *err, int errlen);

// gm_open initialises the driver, checks that the device supports VMM and retains its primary context.
// On failure returns the CUresult and, in *step, which call failed (0 cuInit, 1 cuDeviceGet,
// 2 cuDeviceGetAttribute, 3 VMM unsupported, 4 cuDevicePrimaryCtxRetain, 5 cuCtxSetCurrent,
// 6 cuMemGetAllocationGranularity).
CUresult gm_open(int ordinal, CUdevice *dev, CUcontext *ctx, uint64_t *gran, int *step);
CUresult gm_close(CUdevice dev);

// gm_create is cuMemCreate of pinned device memory, exportable as handle_types (CU_MEM_HANDLE_TYPE_*: POSIX
// file descriptor 0x1, fabric 0x8; 0: none) and GPUDirect RDMA capable when rdma is set.
CUresult gm_create(CUcontext ctx, CUdevice dev, uint64_t size, int handle_types, int rdma, uint64_t *handle);
// gm_handle_caps reports the device's support for POSIX fd and fabric handles and GPUDirect RDMA with VMM
// (cuDeviceGetAttribute; 0 where the driver does not know the attribute).
void gm_handle_caps(CUdevice dev, int *posix_fd, int *fabric, int *rdma);
CUresult gm_release(CUcontext ctx, uint64_t handle);
// gm_export_fd is cuMemExportToShareableHandle as a POSIX file descriptor (the handle must have been created
// with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); the caller owns the descriptor.
CUresult gm_export_fd(CUcontext ctx, uint64_t handle, int *fd);
CUresult gm_reserve(CUcontext ctx, uint64_t size, uint64_t align, uint64_t *ptr);
CUresult gm_free_address(CUcontext ctx, uint64_t ptr, uint64_t size);
CUresult gm_map(CUcontext ctx, uint64_t ptr, uint64_t size, uint64_t offset, uint64_t handle);
CUresult gm_unmap(CUcontext ctx, uint64_t ptr, uint64_t size);
CUresult gm_set_access(CUcontext ctx, CUdevice dev, uint64_t ptr, uint64_t size);
CUresult gm_mem_info(CUcontext ctx, uint64_t *free_, uint64_t *total);

CUresult gm_stream_create(CUcontext ctx, uint64_t *stream);
CUresult gm_stream_destroy(CUcontext ctx, uint64_t stream);
CUresult gm_stream_query(CUcontext ctx, uint64_t stream);
CUresult gm_stream_sync(CUcontext ctx, uint64_t stream);
CUresult gm_ctx_sync(CUcontext ctx);
CUresult gm_stream_is_capturing(CUcontext ctx, uint64_t stream, int *capturing);
CUresult gm_event_create(CUcontext ctx, uint64_t *event);
CUresult gm_event_record(CUcontext ctx, uint64_t event, uint64_t stream);
CUresult gm_event_query(CUcontext ctx, uint64_t event);
CUresult gm_stream_wait_event(CUcontext ctx, uint64_t stream, uint64_t event);
CUresult gm_event_destroy(CUcontext ctx, uint64_t event);

CUresult gm_memset(CUcontext ctx, uint64_t ptr, uint64_t size, unsigned char value, uint64_t stream);
// gm_read waits for the stream's work, then copies size bytes from ptr into dst.
CUresult gm_read(CUcontext ctx, uint64_t ptr, void *dst, uint64_t size, uint64_t stream);

// For the cost probe: plain device allocations (cuMemAlloc/cuMemFree, what cudaMalloc/cudaFree call).
CUresult gm_mem_alloc(CUcontext ctx, uint64_t size, uint64_t *ptr);
CUresult gm_mem_free(CUcontext ctx, uint64_t ptr);

// For a stream clock in tests (harness/gpu): streams that do not synchronise with the legacy default stream,
// and stream memory operations (cuStreamWaitValue32/cuStreamWriteValue32, optional symbols: without them
// both return CUDA_ERROR_NOT_SUPPORTED).
CUresult gm_stream_create_nonblocking(CUcontext ctx, uint64_t *stream);
CUresult gm_stream_wait_value32(CUcontext ctx, uint64_t stream, uint64_t addr, uint32_t value);
CUresult gm_stream_write_value32(CUcontext ctx, uint64_t stream, uint64_t addr, uint32_t value);

// gm_time_ns returns a monotonic clock in nanoseconds, for timing inside C.
uint64_t gm_time_ns(void);

// gm_result_name returns the driver's name for a result (cuGetErrorName), or NULL.
const char *gm_result_name(CUresult r);

#endif
