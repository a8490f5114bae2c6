package ops

import (
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// failLog is the engine's driver on the simulated device: the device itself, noting every Reserve, Create,
// Map, SetAccess, Unmap, Release and FreeAddress that fails (what the judge of a step knows beyond its Views: spec.FailedCall). The Env
// empties it before each step.
type failLog struct {
	*sim.Device
	failed []spec.FailedCall // the calls that failed since the last reset, in call order
	syncs  []streamCall      // the event and stream calls since the last reset (INV-CAPTURESAFE, judge_capture.go)
	access []vmm.Range       // every SetAccess since the last reset, in call order, failed or not (INV-ACCESS)
	unmaps []unmapCall       // every Unmap since the last reset, in call order, failed or not (INV-EMPTIED)
	events []eventCall       // every event record and query and every wait for a stream since the last reset, in call order (INV-BUDGET)
}

// unmapCall is one cuMemUnmap the engine made: the range and the driver's answer.
type unmapCall struct {
	r   vmm.Range
	err error
}

func (l *failLog) note(k vmm.CallKind, size uint64, err error) {
	if err != nil {
		l.failed = append(l.failed, spec.FailedCall{Call: k, Size: size, Err: err, Injected: sim.Injected(err)})
	}
}

// noteEvent notes an event call the device refused because the engine's event does not exist (never
// created, or destroyed already: INV-DRIVERRULES). Other refusals of event calls are not noted: a stream the
// caller destroyed is the engine's to handle (C-RECORD), not a broken rule.
func (l *failLog) noteEvent(k vmm.CallKind, err error) {
	if sim.NoSuchEvent(err) {
		l.failed = append(l.failed, spec.FailedCall{Call: k, Err: err})
	}
}

func (l *failLog) Reserve(size uint64) (vmm.DevicePtr, error) {
	p, err := l.Device.Reserve(size)
	l.note(vmm.CallReserve, size, err)
	return p, err
}

func (l *failLog) Create(size uint64) (vmm.Handle, error) {
	h, err := l.Device.Create(size)
	l.note(vmm.CallCreate, size, err)
	return h, err
}

func (l *failLog) Map(ptr vmm.DevicePtr, size uint64, h vmm.Handle, offset uint64) error {
	err := l.Device.Map(ptr, size, h, offset)
	l.note(vmm.CallMap, size, err)
	return err
}

func (l *failLog) SetAccess(ptr vmm.DevicePtr, size uint64) error {
	l.access = append(l.access, vmm.Range{Base: ptr, Size: size})
	err := l.Device.SetAccess(ptr, size)
	l.note(vmm.CallSetAccess, size, err)
	return err
}

func (l *failLog) Unmap(ptr vmm.DevicePtr, size uint64) error {
	err := l.Device.Unmap(ptr, size)
	l.note(vmm.CallUnmap, size, err)
	l.unmaps = append(l.unmaps, unmapCall{vmm.Range{Base: ptr, Size: size}, err})
	return err
}

func (l *failLog) Release(h vmm.Handle) error {
	err := l.Device.Release(h)
	l.note(vmm.CallRelease, 0, err)
	return err
}

func (l *failLog) FreeAddress(ptr vmm.DevicePtr, size uint64) error {
	err := l.Device.FreeAddress(ptr, size)
	l.note(vmm.CallFreeAddress, size, err)
	return err
}
