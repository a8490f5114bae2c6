package vmm

import "time"

// CallKind names a driver call, for counters, costs, fault injection and errors.
type CallKind int

// The driver calls, in the order of the Driver interface.
const (
	CallGranularity     CallKind = iota // cuMemGetAllocationGranularity
	CallCreate                          // cuMemCreate
	CallRelease                         // cuMemRelease
	CallReserve                         // cuMemAddressReserve
	CallFreeAddress                     // cuMemAddressFree
	CallMap                             // cuMemMap
	CallUnmap                           // cuMemUnmap
	CallSetAccess                       // cuMemSetAccess
	CallMemInfo                         // cuMemGetInfo
	CallCreateStream                    // cuStreamCreate
	CallDestroyStream                   // cuStreamDestroy
	CallStreamQuery                     // cuStreamQuery
	CallCreateEvent                     // cuEventCreate
	CallRecordEvent                     // cuEventRecord
	CallQueryEvent                      // cuEventQuery
	CallStreamWaitEvent                 // cuStreamWaitEvent
	CallDestroyEvent                    // cuEventDestroy
	CallMemset                          // cuMemsetD8Async
	CallRead                            // cuMemcpyDtoH (after the stream's work)
	NumCallKinds                        // the number of call kinds
)

var callNames = [NumCallKinds]string{
	"cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
	"cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetInfo", "cuStreamCreate", "cuStreamDestroy",
	"cuStreamQuery", "cuEventCreate", "cuEventRecord", "cuEventQuery", "cuStreamWaitEvent", "cuEventDestroy",
	"cuMemsetD8", "cuMemcpyDtoH",
}

var callShort = [NumCallKinds]string{
	"granularity", "create", "release", "reserve", "free_address", "map", "unmap", "set_access", "mem_info",
	"create_stream", "destroy_stream", "stream_query", "create_event", "record_event", "query_event",
	"stream_wait_event", "destroy_event", "memset", "read",
}

// String returns the CUDA function name of the call.
func (k CallKind) String() string {
	if k >= 0 && k < NumCallKinds {
		return callNames[k]
	}
	return "unknown-call"
}

// Short returns a snake_case name for tables and JSON ("create", "set_access", ...).
func (k CallKind) Short() string {
	if k >= 0 && k < NumCallKinds {
		return callShort[k]
	}
	return "unknown"
}

// ParseCallKind is the inverse of Short and String.
func ParseCallKind(s string) (CallKind, bool) {
	for k := CallKind(0); k < NumCallKinds; k++ {
		if callShort[k] == s || callNames[k] == s {
			return k, true
		}
	}
	return 0, false
}

// CallCounts counts driver calls by kind.
type CallCounts [NumCallKinds]uint64

// Total returns the number of calls of every kind.
func (c *CallCounts) Total() uint64 {
	var t uint64
	for _, n := range c {
		t += n
	}
	return t
}

// Map returns the non-zero counts keyed by short name, for JSON.
func (c *CallCounts) Map() map[string]uint64 {
	m := make(map[string]uint64)
	for k, n := range c {
		if n != 0 {
			m[CallKind(k).Short()] = n
		}
	}
	return m
}

// Driver is what the allocator needs of a GPU: the CUDA VMM calls, stream-ordered events, and integrity
// checks. The package doc lists the rules every implementation enforces. Every method is safe for concurrent
// use; a call that returns an error changed nothing. Errors unwrap to a Result (errors.Is(err, ErrX)).
type Driver interface {
	// Granularity is the size every Create, Reserve, Map, Unmap and SetAccess size must be a multiple of
	// (cuMemGetAllocationGranularity, RECOMMENDED). 2 MiB on the H200. Constant for the driver's life.
	Granularity() uint64

	// Create allocates size bytes of physical memory and returns a handle holding one reference to it.
	// size must be a positive multiple of Granularity (ErrInvalidValue); ErrOutOfMemory when the device
	// has less than size free.
	Create(size uint64) (Handle, error)
	// Release drops the handle's reference. The memory returns to the device once every mapping of it is
	// unmapped too. The handle may not be used again (ErrInvalidHandle on the simulated device).
	Release(h Handle) error

	// Reserve reserves size bytes of virtual address space, aligned to Granularity, with nothing mapped.
	Reserve(size uint64) (DevicePtr, error)
	// FreeAddress returns a reservation: (ptr, size) exactly as Reserve gave them, nothing mapped in it.
	FreeAddress(ptr DevicePtr, size uint64) error

	// Map places the whole handle h at ptr. size must equal h's size and offset must be 0
	// (ErrNotSupported otherwise, even for a size that is not a multiple of Granularity; checked before the
	// address); [ptr, ptr+size) must lie in one reservation with no byte mapped (ErrInvalidValue).
	// A fresh mapping has no access until SetAccess.
	Map(ptr DevicePtr, size uint64, h Handle, offset uint64) error
	// Unmap removes every mapping inside [ptr, ptr+size): whole mappings, adjacent or with unmapped holes
	// between them; with nothing mapped it succeeds and does nothing. A range that starts or ends inside a
	// mapping is ErrInvalidValue.
	Unmap(ptr DevicePtr, size uint64) error
	// SetAccess grants the device read/write access to [ptr, ptr+size), which must be exactly whole
	// mappings, adjacent, no holes: part of a mapping, or an unmapped byte, is ErrInvalidValue.
	SetAccess(ptr DevicePtr, size uint64) error
	// MemInfo returns the device's free and total physical memory in bytes (cuMemGetInfo).
	MemInfo() (free, total uint64, err error)

	// CreateStream makes a new stream. DefaultStream exists without it.
	CreateStream() (Stream, error)
	// DestroyStream destroys a created stream (ErrInvalidHandle for DefaultStream or unknown streams).
	DestroyStream(s Stream) error
	// StreamQuery reports whether all work submitted to s has completed; ErrInvalidHandle for an unknown
	// stream. Allocators use it to validate a stream the first time they meet it.
	StreamQuery(s Stream) (idle bool, err error)

	// CreateEvent makes an event with timing disabled. A fresh, never recorded event counts as completed.
	CreateEvent() (Event, error)
	// RecordEvent captures in e the work submitted to s so far; e completes when that work has completed.
	RecordEvent(e Event, s Stream) error
	// QueryEvent reports whether e has completed (cuEventQuery: CUDA_ERROR_NOT_READY is done == false).
	QueryEvent(e Event) (done bool, err error)
	// StreamWaitEvent makes future work on s wait for e.
	StreamWaitEvent(s Stream, e Event) error
	// DestroyEvent destroys e.
	DestroyEvent(e Event) error

	// Memset fills [ptr, ptr+size) with value, as work on stream s. Any size; the range must be mapped with
	// access set (ErrIllegalAddress otherwise). Used by integrity checks, never on the allocation hot path.
	Memset(ptr DevicePtr, size uint64, value byte, s Stream) error
	// Read copies len(dst) bytes from ptr into dst after all work submitted so far on s has completed.
	Read(ptr DevicePtr, dst []byte, s Stream) error
}

// StreamSyncer is the optional interface of drivers whose stream work runs asynchronously (impl/cudavmm):
// Synchronize returns once all work submitted to s so far has completed. A driver without it completes
// stream work on its own clock (the simulated device: at once with SyncStreams, else when the test says).
// Callers that must wait (before releasing memory freed on a stream, before comparing read-backs) test for it.
type StreamSyncer interface {
	Synchronize(s Stream) error
}

// DeviceSyncer is the optional interface of drivers that can wait for the whole device (impl/cudavmm:
// cuCtxSynchronize): SynchronizeDevice returns once all work submitted to every stream of the device so far,
// the streams the caller never named included, has completed. The engine needs it for memory that work it
// was never told of may use: a released CUDA graph pool's, which the graph's replays used on whatever stream
// they were launched on (PyTorch frees such memory with cudaFree, which waits for the device).
type DeviceSyncer interface {
	SynchronizeDevice() error
}

// CaptureQuerier is the optional interface of drivers that can check a stream while streams capture CUDA
// graphs (impl/cudavmm: cuStreamIsCapturing, which is legal then): StreamCapturing reports whether s
// captures, and fails with ErrInvalidHandle for a stream that does not exist. StreamQuery of a stream that
// joined a capture (it waited on an event of a capturing stream) would invalidate that capture.
type CaptureQuerier interface {
	StreamCapturing(s Stream) (bool, error)
}

// Wrapper is a driver that wraps another (vmm/wrap's meters and cap): Inner returns the driver it wraps.
type Wrapper interface {
	Inner() Driver
}

// Find returns the first driver of d's wrapping chain (d, then each Wrapper's Inner) that implements T: an
// optional interface (DeviceSyncer, CaptureQuerier) stays reachable through the wrappers, which implement
// only the required methods.
func Find[T any](d Driver) (T, bool) {
	for d != nil {
		if t, ok := d.(T); ok {
			return t, true
		}
		w, ok := d.(Wrapper)
		if !ok {
			break
		}
		d = w.Inner()
	}
	var zero T
	return zero, false
}

// CallCounter is the optional interface of drivers that count their calls and charge the cost model (the
// simulated device): what a replay reports as driver calls and modeled driver time.
type CallCounter interface {
	Counts() CallCounts
	ModeledTime() time.Duration
	ModeledByKind() [NumCallKinds]time.Duration
}

// Exporter is a Driver whose physical memory another process can map (CUDA IPC): ExportFD returns a POSIX
// file descriptor for h (cuMemExportToShareableHandle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), which the
// other process duplicates (pidfd_getfd) and imports. The descriptor belongs to the driver: the same one for
// every call on h, open until h is released; the caller must not close it. ErrNotSupported when h was created
// without POSIX-fd export; ErrInvalidHandle for a handle not live.
type Exporter interface {
	ExportFD(h Handle) (int, error)
}

// ExporterOf returns the Exporter under d, looking through the wrappers that say what they wrap
// (Inner() Driver, as vmm/wrap's); false if no driver in the chain exports.
func ExporterOf(d Driver) (Exporter, bool) {
	for d != nil {
		if e, ok := d.(Exporter); ok {
			return e, true
		}
		w, ok := d.(interface{ Inner() Driver })
		if !ok {
			return nil, false
		}
		d = w.Inner()
	}
	return nil, false
}
