package impl

// The engine's driver is a wrap.Meter (vmm/wrap): every call it makes, failed or not, counts once in
// Stats.DriverCalls. Here too: the seam between the engine's sizes (vmm.Bytes) and the driver contract's
// (uint64 until vmm switches; docs/ARCHITECTURE.md, "Named units"), and how the engine undoes a step.

import (
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

// meteredDriver is the engine's view of its wrap.Meter: the calls that take or return sizes say Bytes; the
// others (streams, events, counts) are the Meter's own. The only place where the engine's sizes become the
// driver's uint64 and back.
type meteredDriver struct{ *wrap.Meter }

func (d meteredDriver) Granularity() vmm.Bytes { return vmm.Bytes(d.Meter.Granularity()) }

func (d meteredDriver) Create(size vmm.Bytes) (vmm.Handle, error) {
	return d.Meter.Create(uint64(size))
}

func (d meteredDriver) Reserve(size vmm.Bytes) (vmm.DevicePtr, error) {
	return d.Meter.Reserve(uint64(size))
}

func (d meteredDriver) FreeAddress(p vmm.DevicePtr, size vmm.Bytes) error {
	return d.Meter.FreeAddress(p, uint64(size))
}

func (d meteredDriver) Map(p vmm.DevicePtr, size vmm.Bytes, h vmm.Handle, offset vmm.Bytes) error {
	return d.Meter.Map(p, uint64(size), h, uint64(offset))
}

func (d meteredDriver) Unmap(p vmm.DevicePtr, size vmm.Bytes) error {
	return d.Meter.Unmap(p, uint64(size))
}

func (d meteredDriver) SetAccess(p vmm.DevicePtr, size vmm.Bytes) error {
	return d.Meter.SetAccess(p, uint64(size))
}

func (d meteredDriver) MemInfo() (free, total vmm.Bytes, err error) {
	f, t, err := d.Meter.MemInfo()
	return vmm.Bytes(f), vmm.Bytes(t), err
}

// at is p advanced by n bytes.
func at(p vmm.DevicePtr, n vmm.Bytes) vmm.DevicePtr { return p.Add(uint64(n)) }

// span is the range [base, base+n).
func span(base vmm.DevicePtr, n vmm.Bytes) vmm.Range { return vmm.Range{Base: base, Size: uint64(n)} }

// sizeOf is r's size.
func sizeOf(r vmm.Range) vmm.Bytes { return vmm.Bytes(r.Size) }

// alignUp rounds n up to a multiple of align, a power of two.
func alignUp(n, align vmm.Bytes) vmm.Bytes { return vmm.Bytes(vmm.AlignUp(uint64(n), uint64(align))) }

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
