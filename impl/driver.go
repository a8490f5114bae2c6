package impl

import (
	"github.com/gmlake/gmlake/vmm"
)

// drv wraps the driver to count the calls the engine makes (Stats.DriverCalls). Every call, failed or not,
// counts once. Guarded by Allocator.mu like the rest of the core.
type drv struct {
	d vmm.Driver
	n vmm.CallCounts

	created, released uint64 // successful Create and Release calls (PyTorch's num_device_alloc/free)
}

func (d *drv) Create(size uint64) (vmm.Handle, error) {
	d.n[vmm.CallCreate]++
	h, err := d.d.Create(size)
	if err == nil {
		d.created++
	}
	return h, err
}

func (d *drv) Release(h vmm.Handle) error {
	d.n[vmm.CallRelease]++
	err := d.d.Release(h)
	if err == nil {
		d.released++
	}
	return err
}

func (d *drv) Reserve(size uint64) (vmm.DevicePtr, error) {
	d.n[vmm.CallReserve]++
	return d.d.Reserve(size)
}

func (d *drv) FreeAddress(p vmm.DevicePtr, size uint64) error {
	d.n[vmm.CallFreeAddress]++
	return d.d.FreeAddress(p, size)
}

func (d *drv) Map(p vmm.DevicePtr, size uint64, h vmm.Handle) error {
	d.n[vmm.CallMap]++
	return d.d.Map(p, size, h, 0)
}

func (d *drv) Unmap(p vmm.DevicePtr, size uint64) error {
	d.n[vmm.CallUnmap]++
	return d.d.Unmap(p, size)
}

func (d *drv) SetAccess(p vmm.DevicePtr, size uint64) error {
	d.n[vmm.CallSetAccess]++
	return d.d.SetAccess(p, size)
}

func (d *drv) MemInfo() (free, total uint64, err error) {
	d.n[vmm.CallMemInfo]++
	return d.d.MemInfo()
}

func (d *drv) StreamQuery(s vmm.Stream) (bool, error) {
	d.n[vmm.CallStreamQuery]++
	return d.d.StreamQuery(s)
}

func (d *drv) CreateEvent() (vmm.Event, error) {
	d.n[vmm.CallCreateEvent]++
	return d.d.CreateEvent()
}

func (d *drv) RecordEvent(e vmm.Event, s vmm.Stream) error {
	d.n[vmm.CallRecordEvent]++
	return d.d.RecordEvent(e, s)
}

func (d *drv) QueryEvent(e vmm.Event) (bool, error) {
	d.n[vmm.CallQueryEvent]++
	return d.d.QueryEvent(e)
}

func (d *drv) DestroyEvent(e vmm.Event) error {
	d.n[vmm.CallDestroyEvent]++
	return d.d.DestroyEvent(e)
}

// retry runs an undo step (unmap, release, free address) until it succeeds, a few times: a failed driver
// call changes nothing, so retrying is safe, and an injected fault fails one call only. It reports whether
// the step finally succeeded; callers park what could not be undone in the orphan lists.
func retry(f func() error) error {
	var err error
	for i := 0; i < 4; i++ {
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}
