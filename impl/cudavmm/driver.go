//go:build cgo

package cudavmm

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/gmlake/gmlake/vmm"
)

// Driver is vmm.Driver on one CUDA device, through that device's primary context. Every method makes the
// primary context current on the OS thread that runs it, inside the same C call as the driver call, so it
// is safe from any goroutine (the CUDA driver itself is thread-safe). Close releases the context.
type Driver struct {
	ordinal int
	dev     C.CUdevice
	ctx     C.CUcontext
	gran    uint64
	closed  atomic.Bool // set once by Close; calls after it fail with InvalidContext
	// handles: what cuMemCreate asks for. 0 (plain pinned memory) unless EnableShareableHandles asked for
	// PyTorch's expandable-segments request: shareable handle types (handleFabric|handlePosixFD where
	// supported) and the GPUDirect RDMA flag (handleRDMA). Narrowed when the driver refuses a combination
	// (Create), never widened after that. caps: what the device reported.
	handles atomic.Int32
	caps    int32
	close   sync.Once
	// exported: the POSIX file descriptor ExportFD made for a handle, closed by Release. Guarded by exportMu.
	exportMu sync.Mutex
	exported map[vmm.Handle]int
}

var (
	_ vmm.Driver         = (*Driver)(nil)
	_ vmm.StreamSyncer   = (*Driver)(nil)
	_ vmm.DeviceSyncer   = (*Driver)(nil)
	_ vmm.CaptureQuerier = (*Driver)(nil)
	_ vmm.Exporter       = (*Driver)(nil)
)

var loadOnce struct {
	sync.Once
	err error
}

// Load loads libcuda.so.1 (once per process). It returns an error that matches vmm.ErrDriverNotLoaded when
// this machine has no CUDA driver.
func Load() error {
	loadOnce.Do(func() {
		var buf [512]C.char
		if C.gm_load(&buf[0], C.int(len(buf))) != 0 {
			loadOnce.err = fmt.Errorf("cudavmm: no CUDA driver was found (%s): run on a machine with an NVIDIA "+
				"driver, or use the simulated GPU (GMLAKE_DEVICE=sim for libgmlake, --device sim for the gmlake command, gmlake.NewSimulated in Go): %w", C.GoString(&buf[0]), vmm.ErrDriverNotLoaded)
		}
	})
	return loadOnce.err
}

var openSteps = []string{"cuInit", "cuDeviceGet", "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)",
	"virtual memory management support", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
	"cuMemGetAllocationGranularity"}

// New opens device ordinal `device` through its primary context. Without a CUDA driver the error matches
// vmm.ErrDriverNotLoaded and says so; with a driver but no such device, vmm.ErrNoDevice/ErrInvalidDevice.
func New(device int) (*Driver, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	d := &Driver{ordinal: device}
	var gran C.uint64_t
	var step C.int
	if r := C.gm_open(C.int(device), &d.dev, &d.ctx, &gran, &step); r != 0 {
		what := "?"
		if int(step) < len(openSteps) {
			what = openSteps[step]
		}
		return nil, fmt.Errorf("cudavmm: opening CUDA device %d failed at %s: %w", device, what, result(r))
	}
	d.gran = uint64(gran)
	var posix, fabric, rdma C.int
	C.gm_handle_caps(d.dev, &posix, &fabric, &rdma)
	if posix != 0 {
		d.caps |= handlePosixFD
	}
	if fabric != 0 {
		d.caps |= handleFabric
	}
	if rdma != 0 {
		d.caps |= handleRDMA
	}
	// The default request: POSIX-fd-exportable memory where the device supports it (what NCCL's intra-node
	// user-buffer registration needs; clean over 12,000 conformance calls and no slower than plain memory on
	// the H200), or what GMLAKE_CUDA_HANDLES names.
	spec, set := liveEnv("GMLAKE_CUDA_HANDLES")
	if !set {
		d.handles.Store(d.caps & handlePosixFD)
	} else if err := d.RequestHandles(spec); err != nil {
		C.gm_close(d.dev)
		return nil, fmt.Errorf("cudavmm: GMLAKE_CUDA_HANDLES=%q: %w", spec, err)
	}
	return d, nil
}

// EnableShareableHandles makes later Creates ask for every handle type and flag PyTorch's expandable segments
// ask for where the device supports them: POSIX fd, fabric and the GPUDirect RDMA flag (what NCCL's
// registration over InfiniBand needs). Beware the RDMA flag on the H200 (driver 580.159): once a handle's
// primary mapping is unmapped while it stays mapped elsewhere, the next first cuMemSetAccess of an older
// mapping makes every later cuMemMap of the handle CUDA_ERROR_UNKNOWN (the rule: model/sim
// DeviceConfig.RDMAHandles; docs/cuda-vmm.md). The engine never makes that pattern (harness/conformance
// TestEngineNeverPoisonsRDMAHandles).
func (d *Driver) EnableShareableHandles() { d.handles.Store(d.caps) }

// RequestHandles makes later Creates ask for exactly the handle types named in spec, a comma- or
// space-separated list of "posix_fd", "fabric" and "rdma" ("" or "none": plain memory; New asks for posix_fd where the device supports it), e.g.
// "posix_fd" for fd-exportable memory without the RDMA flag. A name it does not know, or one the device does
// not support (see HandleTypes), is an error matching vmm.ErrInvalidValue and changes nothing. Create still
// narrows the request where the driver refuses it, as it does after EnableShareableHandles.
func (d *Driver) RequestHandles(spec string) error {
	want, err := parseHandles(spec)
	if err != nil {
		return err
	}
	if missing := want &^ d.caps; missing != 0 {
		return vmm.Errorf(vmm.CallCreate, vmm.InvalidValue, "device %d does not support handle type(s) %s (%s)",
			d.ordinal, handleNames(missing), d.HandleTypes())
	}
	d.handles.Store(want)
	return nil
}

// handleFallbacks is the order Create narrows its request in when the driver refuses one: drop fabric
// (needs an IMEX channel even where the device supports it), then the RDMA flag, then POSIX fds.
var handleFallbacks = []int32{handleFabric, handleRDMA, handlePosixFD}

// HandleTypes describes what the device supports and what Create asks for now, e.g.
// "device: posix_fd fabric rdma; cuMemCreate asks: posix_fd rdma".
func (d *Driver) HandleTypes() string {
	return "device: " + handleNames(d.caps) + "; cuMemCreate asks: " + handleNames(d.handles.Load())
}

// Close releases the primary context (cuDevicePrimaryCtxRelease). The caller must have released everything it
// created; calls after Close fail with vmm.ErrInvalidContext.
func (d *Driver) Close() error {
	var err error
	d.close.Do(func() {
		d.closed.Store(true)
		if r := C.gm_close(d.dev); r != 0 {
			err = fmt.Errorf("cudavmm: cuDevicePrimaryCtxRelease(device %d): %w", d.ordinal, result(r))
		}
	})
	return err
}

// Device returns the device ordinal.
func (d *Driver) Device() int { return d.ordinal }

// StreamFromHandle wraps an existing CUstream / cudaStream_t value (a pointer; 0 is the legacy default
// stream) as a vmm.Stream for this package's drivers. The stream must belong to a context of the same device.
func StreamFromHandle(s uintptr) vmm.Stream { return vmm.Stream(s) }

// StreamHandle is the inverse of StreamFromHandle: the CUstream value behind s.
func StreamHandle(s vmm.Stream) uintptr { return uintptr(s) }

// result converts a CUresult into a vmm.Result.
func result(r C.CUresult) vmm.Result { return vmm.Result(int32(r)) }

// ResultName is the driver's own name for a result code (cuGetErrorName), or vmm's when the driver has none.
func ResultName(r vmm.Result) string {
	if Load() == nil {
		if s := C.gm_result_name(C.CUresult(r)); s != nil {
			return C.GoString(s)
		}
	}
	return r.Name()
}

// fail builds the CallError of a failed call; nil for success.
func (d *Driver) fail(k vmm.CallKind, r C.CUresult, format string, args ...any) error {
	if r == 0 {
		return nil
	}
	return &vmm.CallError{Call: k, Result: result(r), Detail: fmt.Sprintf("device %d: ", d.ordinal) + fmt.Sprintf(format, args...)}
}

func (d *Driver) closedErr(k vmm.CallKind) error {
	if d.closed.Load() {
		return vmm.Errorf(k, vmm.InvalidContext, "device %d: driver closed", d.ordinal)
	}
	return nil
}

// Granularity is the RECOMMENDED allocation granularity, queried once at New.
func (d *Driver) Granularity() uint64 { return d.gran }

// Create is cuMemCreate of pinned device memory on this device.
func (d *Driver) Create(size uint64) (vmm.Handle, error) {
	if err := d.closedErr(vmm.CallCreate); err != nil {
		return 0, err
	}
	var h C.uint64_t
	hs := d.handles.Load()
	r := C.gm_create(d.ctx, d.dev, C.uint64_t(size), C.int(hs&^handleRDMA), C.int(hs&handleRDMA), &h)
	// A refused handle request (NOT_PERMITTED, NOT_SUPPORTED, or INVALID_VALUE for a valid size) is narrowed
	// and retried, as PyTorch falls back from fabric handles; the narrowing is kept for later calls.
	for _, drop := range handleFallbacks {
		refused := r == 800 || r == 801 || r == 1 && size > 0 && size%d.gran == 0
		if !refused || hs == 0 {
			break
		}
		if hs&drop == 0 {
			continue
		}
		hs &^= drop
		r = C.gm_create(d.ctx, d.dev, C.uint64_t(size), C.int(hs&^handleRDMA), C.int(hs&handleRDMA), &h)
		if r == 0 {
			d.handles.Store(hs)
		}
	}
	if err := d.fail(vmm.CallCreate, r, "size %d (%s)", size, vmm.FormatBytes(size)); err != nil {
		return 0, err
	}
	return vmm.Handle(h), nil
}

// Release is cuMemRelease.
func (d *Driver) Release(h vmm.Handle) error {
	if err := d.closedErr(vmm.CallRelease); err != nil {
		return err
	}
	d.exportMu.Lock()
	if fd, ok := d.exported[h]; ok {
		delete(d.exported, h)
		syscall.Close(fd)
	}
	d.exportMu.Unlock()
	return d.fail(vmm.CallRelease, C.gm_release(d.ctx, C.uint64_t(h)), "handle %#x", uint64(h))
}

// ExportFD is cuMemExportToShareableHandle as a POSIX file descriptor, made once per handle and kept until
// Release closes it (vmm.Exporter). ErrNotSupported when the driver creates handles without POSIX-fd export
// (GMLAKE_CUDA_HANDLES=none, or a device without the capability).
func (d *Driver) ExportFD(h vmm.Handle) (int, error) {
	if err := d.closedErr(vmm.CallRelease); err != nil {
		return -1, err
	}
	if d.handles.Load()&handlePosixFD == 0 {
		return -1, fmt.Errorf("cudavmm: handle %#x was created without POSIX file descriptor export (handle types %s): "+
			"CUDA IPC needs GMLAKE_CUDA_HANDLES=posix_fd (the default where the device supports it): %w",
			uint64(h), d.HandleTypes(), vmm.ErrNotSupported)
	}
	d.exportMu.Lock()
	defer d.exportMu.Unlock()
	if fd, ok := d.exported[h]; ok {
		return fd, nil
	}
	var fd C.int
	if r := C.gm_export_fd(d.ctx, C.uint64_t(h), &fd); r != 0 {
		return -1, fmt.Errorf("cudavmm: cuMemExportToShareableHandle(handle %#x, POSIX fd): %w", uint64(h), result(r))
	}
	if d.exported == nil {
		d.exported = map[vmm.Handle]int{}
	}
	d.exported[h] = int(fd)
	return int(fd), nil
}

// Reserve is cuMemAddressReserve aligned to the granularity, anywhere.
func (d *Driver) Reserve(size uint64) (vmm.DevicePtr, error) {
	if err := d.closedErr(vmm.CallReserve); err != nil {
		return 0, err
	}
	var p C.uint64_t
	r := C.gm_reserve(d.ctx, C.uint64_t(size), C.uint64_t(d.gran), &p)
	if err := d.fail(vmm.CallReserve, r, "size %d (%s)", size, vmm.FormatBytes(size)); err != nil {
		return 0, err
	}
	return vmm.DevicePtr(p), nil
}

// FreeAddress is cuMemAddressFree.
func (d *Driver) FreeAddress(ptr vmm.DevicePtr, size uint64) error {
	if err := d.closedErr(vmm.CallFreeAddress); err != nil {
		return err
	}
	return d.fail(vmm.CallFreeAddress, C.gm_free_address(d.ctx, C.uint64_t(ptr), C.uint64_t(size)),
		"ptr %v size %d", ptr, size)
}

// Map is cuMemMap.
func (d *Driver) Map(ptr vmm.DevicePtr, size uint64, h vmm.Handle, offset uint64) error {
	if err := d.closedErr(vmm.CallMap); err != nil {
		return err
	}
	return d.fail(vmm.CallMap, C.gm_map(d.ctx, C.uint64_t(ptr), C.uint64_t(size), C.uint64_t(offset), C.uint64_t(h)),
		"ptr %v size %d handle %#x offset %d", ptr, size, uint64(h), offset)
}

// Unmap is cuMemUnmap.
func (d *Driver) Unmap(ptr vmm.DevicePtr, size uint64) error {
	if err := d.closedErr(vmm.CallUnmap); err != nil {
		return err
	}
	return d.fail(vmm.CallUnmap, C.gm_unmap(d.ctx, C.uint64_t(ptr), C.uint64_t(size)), "ptr %v size %d", ptr, size)
}

// SetAccess is cuMemSetAccess with read/write access for this device.
func (d *Driver) SetAccess(ptr vmm.DevicePtr, size uint64) error {
	if err := d.closedErr(vmm.CallSetAccess); err != nil {
		return err
	}
	return d.fail(vmm.CallSetAccess, C.gm_set_access(d.ctx, d.dev, C.uint64_t(ptr), C.uint64_t(size)),
		"ptr %v size %d", ptr, size)
}

// MemInfo is cuMemGetInfo_v2.
func (d *Driver) MemInfo() (free, total uint64, err error) {
	if err := d.closedErr(vmm.CallMemInfo); err != nil {
		return 0, 0, err
	}
	var f, t C.uint64_t
	if err := d.fail(vmm.CallMemInfo, C.gm_mem_info(d.ctx, &f, &t), "cuMemGetInfo"); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

// CreateStream is cuStreamCreate (default flags: the stream synchronises with the legacy default stream).
func (d *Driver) CreateStream() (vmm.Stream, error) {
	if err := d.closedErr(vmm.CallCreateStream); err != nil {
		return 0, err
	}
	var s C.uint64_t
	if err := d.fail(vmm.CallCreateStream, C.gm_stream_create(d.ctx, &s), "cuStreamCreate"); err != nil {
		return 0, err
	}
	return vmm.Stream(s), nil
}

// DestroyStream is cuStreamDestroy_v2. The default stream cannot be destroyed (InvalidHandle, checked here:
// the driver would be asked to destroy the legacy stream).
func (d *Driver) DestroyStream(s vmm.Stream) error {
	if err := d.closedErr(vmm.CallDestroyStream); err != nil {
		return err
	}
	if s == vmm.DefaultStream {
		return vmm.Errorf(vmm.CallDestroyStream, vmm.InvalidHandle, "device %d: the default stream cannot be destroyed", d.ordinal)
	}
	return d.fail(vmm.CallDestroyStream, C.gm_stream_destroy(d.ctx, C.uint64_t(s)), "stream %#x", uint64(s))
}

// StreamQuery is cuStreamQuery: CUDA_ERROR_NOT_READY is idle == false.
func (d *Driver) StreamQuery(s vmm.Stream) (bool, error) {
	if err := d.closedErr(vmm.CallStreamQuery); err != nil {
		return false, err
	}
	r := C.gm_stream_query(d.ctx, C.uint64_t(s))
	if result(r) == vmm.NotReady {
		return false, nil
	}
	if err := d.fail(vmm.CallStreamQuery, r, "stream %#x", uint64(s)); err != nil {
		return false, err
	}
	return true, nil
}

// CreateEvent is cuEventCreate with CU_EVENT_DISABLE_TIMING.
func (d *Driver) CreateEvent() (vmm.Event, error) {
	if err := d.closedErr(vmm.CallCreateEvent); err != nil {
		return 0, err
	}
	var e C.uint64_t
	if err := d.fail(vmm.CallCreateEvent, C.gm_event_create(d.ctx, &e), "cuEventCreate"); err != nil {
		return 0, err
	}
	return vmm.Event(e), nil
}

// RecordEvent is cuEventRecord.
func (d *Driver) RecordEvent(e vmm.Event, s vmm.Stream) error {
	if err := d.closedErr(vmm.CallRecordEvent); err != nil {
		return err
	}
	return d.fail(vmm.CallRecordEvent, C.gm_event_record(d.ctx, C.uint64_t(e), C.uint64_t(s)),
		"event %#x stream %#x", uint64(e), uint64(s))
}

// QueryEvent is cuEventQuery: CUDA_ERROR_NOT_READY is done == false.
func (d *Driver) QueryEvent(e vmm.Event) (bool, error) {
	if err := d.closedErr(vmm.CallQueryEvent); err != nil {
		return false, err
	}
	r := C.gm_event_query(d.ctx, C.uint64_t(e))
	if result(r) == vmm.NotReady {
		return false, nil
	}
	if err := d.fail(vmm.CallQueryEvent, r, "event %#x", uint64(e)); err != nil {
		return false, err
	}
	return true, nil
}

// StreamWaitEvent is cuStreamWaitEvent.
func (d *Driver) StreamWaitEvent(s vmm.Stream, e vmm.Event) error {
	if err := d.closedErr(vmm.CallStreamWaitEvent); err != nil {
		return err
	}
	return d.fail(vmm.CallStreamWaitEvent, C.gm_stream_wait_event(d.ctx, C.uint64_t(s), C.uint64_t(e)),
		"stream %#x event %#x", uint64(s), uint64(e))
}

// DestroyEvent is cuEventDestroy_v2.
func (d *Driver) DestroyEvent(e vmm.Event) error {
	if err := d.closedErr(vmm.CallDestroyEvent); err != nil {
		return err
	}
	return d.fail(vmm.CallDestroyEvent, C.gm_event_destroy(d.ctx, C.uint64_t(e)), "event %#x", uint64(e))
}

// Memset is cuMemsetD8Async on s.
func (d *Driver) Memset(ptr vmm.DevicePtr, size uint64, value byte, s vmm.Stream) error {
	if err := d.closedErr(vmm.CallMemset); err != nil {
		return err
	}
	return d.fail(vmm.CallMemset, C.gm_memset(d.ctx, C.uint64_t(ptr), C.uint64_t(size), C.uchar(value), C.uint64_t(s)),
		"ptr %v size %d value %#x stream %#x", ptr, size, value, uint64(s))
}

// Read synchronises s (cuStreamSynchronize), then copies len(dst) bytes with cuMemcpyDtoH_v2.
func (d *Driver) Read(ptr vmm.DevicePtr, dst []byte, s vmm.Stream) error {
	if err := d.closedErr(vmm.CallRead); err != nil {
		return err
	}
	var p unsafe.Pointer
	if len(dst) > 0 {
		p = unsafe.Pointer(&dst[0])
	}
	return d.fail(vmm.CallRead, C.gm_read(d.ctx, C.uint64_t(ptr), p, C.uint64_t(len(dst)), C.uint64_t(s)),
		"ptr %v size %d stream %#x", ptr, len(dst), uint64(s))
}

// Synchronize waits for all work on s (cuStreamSynchronize).
func (d *Driver) Synchronize(s vmm.Stream) error {
	if err := d.closedErr(vmm.CallStreamQuery); err != nil {
		return err
	}
	return d.fail(vmm.CallStreamQuery, C.gm_stream_sync(d.ctx, C.uint64_t(s)), "cuStreamSynchronize(stream %#x)", uint64(s))
}

// StreamCapturing reports whether s captures a CUDA graph (cuStreamIsCapturing: legal during a capture,
// unlike cuStreamQuery).
func (d *Driver) StreamCapturing(s vmm.Stream) (bool, error) {
	if err := d.closedErr(vmm.CallStreamQuery); err != nil {
		return false, err
	}
	var c C.int
	if err := d.fail(vmm.CallStreamQuery, C.gm_stream_is_capturing(d.ctx, C.uint64_t(s), &c), "cuStreamIsCapturing(stream %#x)", uint64(s)); err != nil {
		return false, err
	}
	return c != 0, nil
}

// SynchronizeDevice waits for all work on every stream of the device (cuCtxSynchronize on its primary context).
func (d *Driver) SynchronizeDevice() error {
	if err := d.closedErr(vmm.CallStreamQuery); err != nil {
		return err
	}
	return d.fail(vmm.CallStreamQuery, C.gm_ctx_sync(d.ctx), "cuCtxSynchronize")
}

// CreateStreamNonBlocking is cuStreamCreate with CU_STREAM_NON_BLOCKING: the stream does not synchronise
// with the legacy default stream, so work held back on one stream (WaitValue32) holds back no other.
func (d *Driver) CreateStreamNonBlocking() (vmm.Stream, error) {
	if err := d.closedErr(vmm.CallCreateStream); err != nil {
		return 0, err
	}
	var s C.uint64_t
	if err := d.fail(vmm.CallCreateStream, C.gm_stream_create_nonblocking(d.ctx, &s), "cuStreamCreate(NON_BLOCKING)"); err != nil {
		return 0, err
	}
	return vmm.Stream(s), nil
}

// WaitValue32 is cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ: work submitted to s after it starts only
// once the 32-bit word at addr (device memory, 4-byte aligned) is at least v. With WriteValue32 it makes a
// stream clock a test controls on the real GPU (harness/gpu), as the simulated device's Launch and Complete.
// CUDA_ERROR_NOT_SUPPORTED where the driver has no stream memory operations.
func (d *Driver) WaitValue32(s vmm.Stream, addr vmm.DevicePtr, v uint32) error {
	if err := d.closedErr(vmm.CallStreamWaitEvent); err != nil {
		return err
	}
	return d.fail(vmm.CallStreamWaitEvent, C.gm_stream_wait_value32(d.ctx, C.uint64_t(s), C.uint64_t(addr), C.uint32_t(v)),
		"cuStreamWaitValue32(stream %#x, %v >= %d)", uint64(s), addr, v)
}

// WriteValue32 is cuStreamWriteValue32: once s reaches it, the 32-bit word at addr becomes v.
func (d *Driver) WriteValue32(s vmm.Stream, addr vmm.DevicePtr, v uint32) error {
	if err := d.closedErr(vmm.CallMemset); err != nil {
		return err
	}
	return d.fail(vmm.CallMemset, C.gm_stream_write_value32(d.ctx, C.uint64_t(s), C.uint64_t(addr), C.uint32_t(v)),
		"cuStreamWriteValue32(stream %#x, %v = %d)", uint64(s), addr, v)
}

// MemAlloc and MemFree are cuMemAlloc_v2/cuMemFree_v2 (what cudaMalloc/cudaFree do), outside the VMM
// calls of vmm.Driver: the cost probe (harness/probe) times them for comparison.
func (d *Driver) MemAlloc(size uint64) (vmm.DevicePtr, error) {
	var p C.uint64_t
	if r := C.gm_mem_alloc(d.ctx, C.uint64_t(size), &p); r != 0 {
		return 0, fmt.Errorf("cuMemAlloc(%s): %w", vmm.FormatBytes(size), result(r))
	}
	return vmm.DevicePtr(p), nil
}

func (d *Driver) MemFree(p vmm.DevicePtr) error {
	if r := C.gm_mem_free(d.ctx, C.uint64_t(p)); r != 0 {
		return fmt.Errorf("cuMemFree(%v): %w", p, result(r))
	}
	return nil
}

// liveEnv reads the process's live C environment: a host such as Python sets variables with setenv after the
// library loaded, and Go's copy (os.LookupEnv) is taken at load time, so it would not see them.
func liveEnv(name string) (string, bool) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.getenv(cs)
	if v == nil {
		return "", false
	}
	return C.GoString(v), true
}
