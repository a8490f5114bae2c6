// Package cudavmm implements vmm.Driver on a real NVIDIA GPU through the CUDA driver API, loaded at run
// time with dlopen("libcuda.so.1"): no CUDA headers or libraries are needed to build it, and New returns a
// clear error on machines without a driver. It is the only package that imports "C" or unsafe.
//
// # Layout
//
//   - cuda.h declares, by hand, the few CUDA types the package needs (from the C ABI in docs/cuda-vmm.md:
//     the 12-byte CUmemAccessDesc, the 32-byte CUmemAllocationProp, handles as 64-bit values, streams and
//     events as pointers) and the gm_* wrappers. cuda.c loads every symbol once, by its versioned name where
//     the unsuffixed one has the old 32-bit ABI (cuMemGetInfo_v2, cuMemcpyDtoH_v2, cuStreamDestroy_v2,
//     cuEventDestroy_v2, cuDevicePrimaryCtxRelease_v2, cuMemAlloc_v2, cuMemFree_v2).
//   - driver.go is the Driver: one per device ordinal, on the device's primary context (retained by New,
//     released by Close). Every gm_* wrapper calls cuCtxSetCurrent before its driver call, inside the same C
//     call, so the call runs in the right context on whatever OS thread the goroutine is on.
//   - MemAlloc/MemFree (cuMemAlloc, outside vmm.Driver) let harness/probe time the plain allocation beside
//     the VMM calls (gmlake probe prints it).
//   - driver_nocgo.go stands in when cgo is off: the package builds, New says there is no driver.
//
// # Errors
//
// A failed CUDA call returns a *vmm.CallError with the call kind, vmm.Result(code) (so errors.Is works and
// the message carries the CUDA name and code) and the arguments. No CUDA driver on the machine: an error
// matching vmm.ErrDriverNotLoaded that says so. Calls after Close: vmm.ErrInvalidContext.
//
// # What the real driver does that the simulated one reports
//
// Using a handle after its last release, or a stream or event after it was destroyed, is undefined on the
// GPU: handles, streams and events are driver pointers, and on the H200 (driver 580) cuMemMap of a freed
// handle crashes the process. A Memset or Read on a range without access faults the GPU and loses the
// context for the rest of the process. The simulated device (model) reports all of these as errors; callers
// of this package must not make them. DestroyStream(DefaultStream) is refused here, before the driver.
//
// # Shareable handles
//
// By default physical memory is created exportable as a POSIX file descriptor where the device supports it
// (what NCCL's intra-node user-buffer registration needs; PyTorch's expandable segments ask for it too).
// GMLAKE_CUDA_HANDLES, read by New, or RequestHandles chooses other handle types ("posix_fd", "fabric",
// "rdma", or "none" for plain memory); EnableShareableHandles asks for everything the device reports, as
// PyTorch does: POSIX fd, fabric (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) and the GPUDirect RDMA
// flag. A cuMemCreate the driver refuses for its handle request (NOT_PERMITTED, NOT_SUPPORTED, or
// INVALID_VALUE for a valid size) is retried narrower (without fabric, then without the RDMA flag, then
// without POSIX fds) and the narrower request kept; on the H200 (no IMEX channel) fabric is refused.
// HandleTypes says what is asked. The RDMA flag has a driver bug on the H200 (driver 580.159): a handle
// mapped twice, its first mapping unmapped before the other's first cuMemSetAccess, cannot be mapped again
// while that mapping lives (CUDA_ERROR_UNKNOWN); the engine never makes that pattern (docs/cuda-vmm.md,
// Shareable handles; model/sim DeviceConfig.RDMAHandles states the rule).
//
// Streams created here are blocking (they synchronise with the legacy default stream, vmm.DefaultStream);
// events have timing disabled. StreamFromHandle wraps a cudaStream_t from elsewhere (PyTorch's) as a
// vmm.Stream. Memset is cuMemsetD8Async on the stream; Read synchronises the stream, then copies.
package cudavmm
