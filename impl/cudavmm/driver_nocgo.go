//go:build !cgo

package cudavmm

// This file stands in for driver.go when cgo is off (CGO_ENABLED=0, or no C compiler): the package still
// builds, and New says why there is no driver.

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// Driver is vmm.Driver on one CUDA device. Without cgo it cannot be opened: New always fails.
type Driver struct {
	ordinal int
	gran    uint64
}

var (
	_ vmm.Driver         = (*Driver)(nil)
	_ vmm.StreamSyncer   = (*Driver)(nil)
	_ vmm.DeviceSyncer   = (*Driver)(nil)
	_ vmm.CaptureQuerier = (*Driver)(nil)
)

var errNoCgo = fmt.Errorf("cudavmm: no CUDA driver was found: this binary was built without cgo (CGO_ENABLED=0); "+
	"rebuild with a C compiler and CGO_ENABLED=1: %w", vmm.ErrDriverNotLoaded)

// Load fails without cgo.
func Load() error { return errNoCgo }

// New fails without cgo, with an error matching vmm.ErrDriverNotLoaded.
func New(device int) (*Driver, error) { return nil, errNoCgo }

// RequestHandles checks spec's names (an unknown one is vmm.ErrInvalidValue) and then fails: no driver.
func (d *Driver) RequestHandles(spec string) error {
	if _, err := parseHandles(spec); err != nil {
		return err
	}
	return errNoCgo
}

// HandleTypes says there is no driver to ask.
func (d *Driver) HandleTypes() string { return "no driver" }

// StreamFromHandle wraps an existing CUstream / cudaStream_t value as a vmm.Stream.
func StreamFromHandle(s uintptr) vmm.Stream { return vmm.Stream(s) }

// StreamHandle is the inverse of StreamFromHandle.
func StreamHandle(s vmm.Stream) uintptr { return uintptr(s) }

// ResultName is vmm's name for a result (there is no driver to ask).
func ResultName(r vmm.Result) string { return r.Name() }

// Device returns the device ordinal.
func (d *Driver) Device() int { return d.ordinal }

// Granularity is the allocation granularity.
func (d *Driver) Granularity() uint64 { return d.gran }

func (d *Driver) Close() error { return errNoCgo }

func (d *Driver) Create(size uint64) (vmm.Handle, error) { return 0, errNoCgo }

func (d *Driver) Release(h vmm.Handle) error { return errNoCgo }

func (d *Driver) Reserve(size uint64) (vmm.DevicePtr, error) { return 0, errNoCgo }

func (d *Driver) FreeAddress(ptr vmm.DevicePtr, size uint64) error { return errNoCgo }

func (d *Driver) Map(ptr vmm.DevicePtr, size uint64, h vmm.Handle, offset uint64) error {
	return errNoCgo
}

func (d *Driver) Unmap(ptr vmm.DevicePtr, size uint64) error { return errNoCgo }

func (d *Driver) SetAccess(ptr vmm.DevicePtr, size uint64) error { return errNoCgo }

func (d *Driver) MemInfo() (free, total uint64, err error) { return 0, 0, errNoCgo }

func (d *Driver) CreateStream() (vmm.Stream, error) { return 0, errNoCgo }

func (d *Driver) DestroyStream(s vmm.Stream) error { return errNoCgo }

func (d *Driver) StreamQuery(s vmm.Stream) (bool, error) { return false, errNoCgo }

func (d *Driver) CreateEvent() (vmm.Event, error) { return 0, errNoCgo }

func (d *Driver) RecordEvent(e vmm.Event, s vmm.Stream) error { return errNoCgo }

func (d *Driver) QueryEvent(e vmm.Event) (bool, error) { return false, errNoCgo }

func (d *Driver) StreamWaitEvent(s vmm.Stream, e vmm.Event) error { return errNoCgo }

func (d *Driver) DestroyEvent(e vmm.Event) error { return errNoCgo }

func (d *Driver) Memset(ptr vmm.DevicePtr, size uint64, value byte, s vmm.Stream) error {
	return errNoCgo
}

func (d *Driver) Read(ptr vmm.DevicePtr, dst []byte, s vmm.Stream) error { return errNoCgo }

func (d *Driver) Synchronize(s vmm.Stream) error { return errNoCgo }

// StreamCapturing fails: built without cgo.
func (d *Driver) StreamCapturing(s vmm.Stream) (bool, error) { return false, errNoCgo }

// SynchronizeDevice fails: built without cgo.
func (d *Driver) SynchronizeDevice() error { return errNoCgo }

// MemAlloc and MemFree need cgo.
func (d *Driver) MemAlloc(size uint64) (vmm.DevicePtr, error) { return 0, errNoCgo }

func (d *Driver) MemFree(p vmm.DevicePtr) error { return errNoCgo }

func (d *Driver) CreateStreamNonBlocking() (vmm.Stream, error)                  { return 0, errNoCgo }
func (d *Driver) WaitValue32(s vmm.Stream, addr vmm.DevicePtr, v uint32) error  { return errNoCgo }
func (d *Driver) WriteValue32(s vmm.Stream, addr vmm.DevicePtr, v uint32) error { return errNoCgo }
