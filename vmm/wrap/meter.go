package wrap

import (
	"sync/atomic"
	"time"

	"github.com/gmlake/gmlake/vmm"
)

// Meter is a vmm.Driver that counts every call made through it by kind, failed calls included (as the
// simulated device counts), and, when timed, the wall time spent inside each kind of call.
type Meter struct {
	inner vmm.Driver
	timed bool // set at construction, never changed

	counts [vmm.NumCallKinds]atomic.Uint64 // calls made through the meter, by kind
	failed [vmm.NumCallKinds]atomic.Uint64 // Invariant: failed[k] <= counts[k]; the calls that returned an error
	nanos  [vmm.NumCallKinds]atomic.Int64  // wall time inside each kind, in ns; all zero unless timed
}

var _ vmm.Driver = (*Meter)(nil)

// NewCounter wraps d with a meter that only counts.
func NewCounter(d vmm.Driver) *Meter { return &Meter{inner: d} }

// NewTimer wraps d with a meter that counts and measures wall time.
func NewTimer(d vmm.Driver) *Meter { return &Meter{inner: d, timed: true} }

// Inner returns the wrapped driver.
func (m *Meter) Inner() vmm.Driver { return m.inner }

// Timed reports whether the meter measures wall time.
func (m *Meter) Timed() bool { return m.timed }

// Counts returns the calls made through the meter, by kind.
func (m *Meter) Counts() vmm.CallCounts {
	var c vmm.CallCounts
	for k := range c {
		c[k] = m.counts[k].Load()
	}
	return c
}

// Succeeded returns the calls of kind k that returned no error (PyTorch counts successful cuMemCreate and
// cuMemRelease calls as num_device_alloc and num_device_free).
func (m *Meter) Succeeded(k vmm.CallKind) uint64 { return m.counts[k].Load() - m.failed[k].Load() }

// Measured returns the total wall time spent in driver calls (0 unless timed).
func (m *Meter) Measured() time.Duration {
	var sum time.Duration
	for k := range m.nanos {
		sum += time.Duration(m.nanos[k].Load())
	}
	return sum
}

// MeasuredByKind returns the wall time spent in each kind of call (all 0 unless timed).
func (m *Meter) MeasuredByKind() [vmm.NumCallKinds]time.Duration {
	var ts [vmm.NumCallKinds]time.Duration
	for k := range ts {
		ts[k] = time.Duration(m.nanos[k].Load())
	}
	return ts
}

// Reset zeroes the counts and times. Calls in flight meanwhile may be counted on either side.
func (m *Meter) Reset() {
	for k := range m.counts {
		m.failed[k].Store(0)
		m.counts[k].Store(0)
		m.nanos[k].Store(0)
	}
}

// start counts one call of kind k and returns when it started (the zero time unless timed).
func (m *Meter) start(k vmm.CallKind) time.Time {
	m.counts[k].Add(1)
	if m.timed {
		return time.Now()
	}
	return time.Time{}
}

// stop counts a failed call and adds the time since t0 to kind k (timed only).
func (m *Meter) stop(k vmm.CallKind, t0 time.Time, err error) {
	if err != nil {
		m.failed[k].Add(1)
	}
	if m.timed {
		m.nanos[k].Add(int64(time.Since(t0)))
	}
}

func (m *Meter) Granularity() uint64 {
	t0 := m.start(vmm.CallGranularity)
	g := m.inner.Granularity()
	m.stop(vmm.CallGranularity, t0, nil)
	return g
}

func (m *Meter) Create(size uint64) (vmm.Handle, error) {
	t0 := m.start(vmm.CallCreate)
	h, err := m.inner.Create(size)
	m.stop(vmm.CallCreate, t0, err)
	return h, err
}

func (m *Meter) Release(h vmm.Handle) error {
	t0 := m.start(vmm.CallRelease)
	err := m.inner.Release(h)
	m.stop(vmm.CallRelease, t0, err)
	return err
}

func (m *Meter) Reserve(size uint64) (vmm.DevicePtr, error) {
	t0 := m.start(vmm.CallReserve)
	p, err := m.inner.Reserve(size)
	m.stop(vmm.CallReserve, t0, err)
	return p, err
}

func (m *Meter) FreeAddress(ptr vmm.DevicePtr, size uint64) error {
	t0 := m.start(vmm.CallFreeAddress)
	err := m.inner.FreeAddress(ptr, size)
	m.stop(vmm.CallFreeAddress, t0, err)
	return err
}

func (m *Meter) Map(ptr vmm.DevicePtr, size uint64, h vmm.Handle, offset uint64) error {
	t0 := m.start(vmm.CallMap)
	err := m.inner.Map(ptr, size, h, offset)
	m.stop(vmm.CallMap, t0, err)
	return err
}

func (m *Meter) Unmap(ptr vmm.DevicePtr, size uint64) error {
	t0 := m.start(vmm.CallUnmap)
	err := m.inner.Unmap(ptr, size)
	m.stop(vmm.CallUnmap, t0, err)
	return err
}

func (m *Meter) SetAccess(ptr vmm.DevicePtr, size uint64) error {
	t0 := m.start(vmm.CallSetAccess)
	err := m.inner.SetAccess(ptr, size)
	m.stop(vmm.CallSetAccess, t0, err)
	return err
}

func (m *Meter) MemInfo() (free, total uint64, err error) {
	t0 := m.start(vmm.CallMemInfo)
	free, total, err = m.inner.MemInfo()
	m.stop(vmm.CallMemInfo, t0, err)
	return free, total, err
}

func (m *Meter) CreateStream() (vmm.Stream, error) {
	t0 := m.start(vmm.CallCreateStream)
	s, err := m.inner.CreateStream()
	m.stop(vmm.CallCreateStream, t0, err)
	return s, err
}

func (m *Meter) DestroyStream(s vmm.Stream) error {
	t0 := m.start(vmm.CallDestroyStream)
	err := m.inner.DestroyStream(s)
	m.stop(vmm.CallDestroyStream, t0, err)
	return err
}

func (m *Meter) StreamQuery(s vmm.Stream) (bool, error) {
	t0 := m.start(vmm.CallStreamQuery)
	idle, err := m.inner.StreamQuery(s)
	m.stop(vmm.CallStreamQuery, t0, err)
	return idle, err
}

func (m *Meter) CreateEvent() (vmm.Event, error) {
	t0 := m.start(vmm.CallCreateEvent)
	e, err := m.inner.CreateEvent()
	m.stop(vmm.CallCreateEvent, t0, err)
	return e, err
}

func (m *Meter) RecordEvent(e vmm.Event, s vmm.Stream) error {
	t0 := m.start(vmm.CallRecordEvent)
	err := m.inner.RecordEvent(e, s)
	m.stop(vmm.CallRecordEvent, t0, err)
	return err
}

func (m *Meter) QueryEvent(e vmm.Event) (bool, error) {
	t0 := m.start(vmm.CallQueryEvent)
	done, err := m.inner.QueryEvent(e)
	m.stop(vmm.CallQueryEvent, t0, err)
	return done, err
}

func (m *Meter) StreamWaitEvent(s vmm.Stream, e vmm.Event) error {
	t0 := m.start(vmm.CallStreamWaitEvent)
	err := m.inner.StreamWaitEvent(s, e)
	m.stop(vmm.CallStreamWaitEvent, t0, err)
	return err
}

func (m *Meter) DestroyEvent(e vmm.Event) error {
	t0 := m.start(vmm.CallDestroyEvent)
	err := m.inner.DestroyEvent(e)
	m.stop(vmm.CallDestroyEvent, t0, err)
	return err
}

func (m *Meter) Memset(ptr vmm.DevicePtr, size uint64, value byte, s vmm.Stream) error {
	t0 := m.start(vmm.CallMemset)
	err := m.inner.Memset(ptr, size, value, s)
	m.stop(vmm.CallMemset, t0, err)
	return err
}

func (m *Meter) Read(ptr vmm.DevicePtr, dst []byte, s vmm.Stream) error {
	t0 := m.start(vmm.CallRead)
	err := m.inner.Read(ptr, dst, s)
	m.stop(vmm.CallRead, t0, err)
	return err
}
