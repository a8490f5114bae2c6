package replay

import (
	"fmt"
	"sync"
	"time"

	"github.com/gmlake/gmlake/vmm"
)

// TimingDriver wraps a vmm.Driver and measures the wall time spent inside each kind of call, so that a replay
// on a real GPU can set measured driver time beside the modeled time of the simulated one. It counts every
// call, failed ones included, as the simulated device does. Safe for concurrent use.
type TimingDriver struct {
	inner vmm.Driver

	mu struct {
		sync.Mutex
		counts vmm.CallCounts
		time   [vmm.NumCallKinds]time.Duration
	}
}

var _ vmm.Driver = (*TimingDriver)(nil)

// NewTimingDriver wraps d.
func NewTimingDriver(d vmm.Driver) *TimingDriver { return &TimingDriver{inner: d} }

// Inner returns the wrapped driver.
func (t *TimingDriver) Inner() vmm.Driver { return t.inner }

// String describes the wrapped driver.
func (t *TimingDriver) String() string { return "timed " + describeReplayDriver(t.inner) }

// Counts returns the calls made through the wrapper, by kind.
func (t *TimingDriver) Counts() vmm.CallCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.counts
}

// Measured returns the total wall time spent in driver calls.
func (t *TimingDriver) Measured() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum time.Duration
	for _, d := range t.mu.time {
		sum += d
	}
	return sum
}

// MeasuredByKind returns the wall time spent in each kind of call.
func (t *TimingDriver) MeasuredByKind() [vmm.NumCallKinds]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.time
}

// Reset zeroes the counts and times.
func (t *TimingDriver) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.counts = vmm.CallCounts{}
	t.mu.time = [vmm.NumCallKinds]time.Duration{}
}

func (t *TimingDriver) done(k vmm.CallKind, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	t.mu.counts[k]++
	t.mu.time[k] += d
	t.mu.Unlock()
}

func (t *TimingDriver) Granularity() uint64 {
	defer t.done(vmm.CallGranularity, time.Now())
	return t.inner.Granularity()
}

func (t *TimingDriver) Create(size uint64) (vmm.Handle, error) {
	defer t.done(vmm.CallCreate, time.Now())
	return t.inner.Create(size)
}

func (t *TimingDriver) Release(h vmm.Handle) error {
	defer t.done(vmm.CallRelease, time.Now())
	return t.inner.Release(h)
}

func (t *TimingDriver) Reserve(size uint64) (vmm.DevicePtr, error) {
	defer t.done(vmm.CallReserve, time.Now())
	return t.inner.Reserve(size)
}

func (t *TimingDriver) FreeAddress(ptr vmm.DevicePtr, size uint64) error {
	defer t.done(vmm.CallFreeAddress, time.Now())
	return t.inner.FreeAddress(ptr, size)
}

func (t *TimingDriver) Map(ptr vmm.DevicePtr, size uint64, h vmm.Handle, offset uint64) error {
	defer t.done(vmm.CallMap, time.Now())
	return t.inner.Map(ptr, size, h, offset)
}

func (t *TimingDriver) Unmap(ptr vmm.DevicePtr, size uint64) error {
	defer t.done(vmm.CallUnmap, time.Now())
	return t.inner.Unmap(ptr, size)
}

func (t *TimingDriver) SetAccess(ptr vmm.DevicePtr, size uint64) error {
	defer t.done(vmm.CallSetAccess, time.Now())
	return t.inner.SetAccess(ptr, size)
}

func (t *TimingDriver) MemInfo() (free, total uint64, err error) {
	defer t.done(vmm.CallMemInfo, time.Now())
	return t.inner.MemInfo()
}

func (t *TimingDriver) CreateStream() (vmm.Stream, error) {
	defer t.done(vmm.CallCreateStream, time.Now())
	return t.inner.CreateStream()
}

func (t *TimingDriver) DestroyStream(s vmm.Stream) error {
	defer t.done(vmm.CallDestroyStream, time.Now())
	return t.inner.DestroyStream(s)
}

func (t *TimingDriver) StreamQuery(s vmm.Stream) (bool, error) {
	defer t.done(vmm.CallStreamQuery, time.Now())
	return t.inner.StreamQuery(s)
}

func (t *TimingDriver) CreateEvent() (vmm.Event, error) {
	defer t.done(vmm.CallCreateEvent, time.Now())
	return t.inner.CreateEvent()
}

func (t *TimingDriver) RecordEvent(e vmm.Event, s vmm.Stream) error {
	defer t.done(vmm.CallRecordEvent, time.Now())
	return t.inner.RecordEvent(e, s)
}

func (t *TimingDriver) QueryEvent(e vmm.Event) (bool, error) {
	defer t.done(vmm.CallQueryEvent, time.Now())
	return t.inner.QueryEvent(e)
}

func (t *TimingDriver) StreamWaitEvent(s vmm.Stream, e vmm.Event) error {
	defer t.done(vmm.CallStreamWaitEvent, time.Now())
	return t.inner.StreamWaitEvent(s, e)
}

func (t *TimingDriver) DestroyEvent(e vmm.Event) error {
	defer t.done(vmm.CallDestroyEvent, time.Now())
	return t.inner.DestroyEvent(e)
}

func (t *TimingDriver) Memset(ptr vmm.DevicePtr, size uint64, value byte, s vmm.Stream) error {
	defer t.done(vmm.CallMemset, time.Now())
	return t.inner.Memset(ptr, size, value, s)
}

func (t *TimingDriver) Read(ptr vmm.DevicePtr, dst []byte, s vmm.Stream) error {
	defer t.done(vmm.CallRead, time.Now())
	return t.inner.Read(ptr, dst, s)
}

// FormatDurations prints the non-zero per-kind times, for reports.
func FormatDurations(ts [vmm.NumCallKinds]time.Duration) string {
	s := ""
	for k, d := range ts {
		if d == 0 {
			continue
		}
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%s=%v", vmm.CallKind(k).Short(), d.Round(time.Microsecond))
	}
	return s
}
