package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gmlake/gmlake/vmm"
)

// mapAccess reserves size bytes, maps h there and sets access.
func mapAccess(t testing.TB, d *Device, h vmm.Handle, size uint64) vmm.DevicePtr {
	t.Helper()
	p, err := d.Reserve(size)
	require.NoError(t, err)
	require.NoError(t, d.Map(p, size, h, 0))
	require.NoError(t, d.SetAccess(p, size))
	return p
}

func readBytes(t testing.TB, d *Device, p vmm.DevicePtr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	require.NoError(t, d.Read(p, b, vmm.DefaultStream))
	return b
}

// Rule 8: a handle mapped at two addresses is one memory; writes through one alias are read through the
// other, and a stitched range reads the handles it is made of, in order.
func TestDeviceAliasing(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	h, err := d.Create(4 * mib)
	require.NoError(t, err)
	a := mapAccess(t, d, h, 4*mib)
	b := mapAccess(t, d, h, 4*mib)
	require.NotEqual(t, a, b)

	assert.Equal(t, make([]byte, 16), readBytes(t, d, b.Add(3*mib), 16), "unwritten memory reads 0")
	require.NoError(t, d.Memset(a.Add(3*mib), 8, 0xAB, vmm.DefaultStream))
	got := readBytes(t, d, b.Add(3*mib-4), 16)
	assert.Equal(t, append(append(make([]byte, 4), bytes.Repeat([]byte{0xAB}, 8)...), make([]byte, 4)...), got,
		"write through alias a is read through alias b")
	require.NoError(t, d.Memset(b.Add(3*mib+2), 2, 0, vmm.DefaultStream))
	assert.Equal(t, []byte{0xAB, 0xAB, 0, 0, 0xAB, 0xAB, 0xAB, 0xAB}, readBytes(t, d, a.Add(3*mib), 8))

	// Stitch two other handles side by side in one range (VMS) and one of them also alone.
	h1, err := d.Create(2 * mib)
	require.NoError(t, err)
	h2, err := d.Create(2 * mib)
	require.NoError(t, err)
	p1 := mapAccess(t, d, h1, 2*mib)
	p2 := mapAccess(t, d, h2, 2*mib)
	require.NoError(t, d.Memset(p1, 2*mib, 1, vmm.DefaultStream))
	require.NoError(t, d.Memset(p2, 2*mib, 2, vmm.DefaultStream))
	s, err := d.Reserve(4 * mib)
	require.NoError(t, err)
	require.NoError(t, d.Map(s, 2*mib, h2, 0))
	require.NoError(t, d.Map(s.Add(2*mib), 2*mib, h1, 0))
	require.NoError(t, d.SetAccess(s, 4*mib))
	assert.Equal(t, []byte{2, 2, 1, 1}, readBytes(t, d, s.Add(2*mib-2), 4), "a read spans two mappings")
	require.NoError(t, d.Memset(s.Add(2*mib-1), 2, 9, vmm.DefaultStream), "a memset spans two mappings")
	assert.Equal(t, []byte{2, 9}, readBytes(t, d, p2.Add(2*mib-2), 2))
	assert.Equal(t, []byte{9, 1}, readBytes(t, d, p1, 2))

	// Unmapping one alias keeps the contents; mapping the handle again shows them.
	require.NoError(t, d.Unmap(a, 4*mib))
	require.NoError(t, d.Unmap(b, 4*mib))
	c := mapAccess(t, d, h, 4*mib)
	assert.Equal(t, []byte{0xAB, 0xAB, 0, 0}, readBytes(t, d, c.Add(3*mib), 4))
}

// Rule 7: the physical memory returns only after Release and the last Unmap, in either order.
func TestDeviceLifetime(t *testing.T) {
	t.Run("release then unmap frees", func(t *testing.T) {
		d := NewDevice(DeviceConfig{Capacity: 8 * mib})
		h, err := d.Create(4 * mib)
		require.NoError(t, err)
		p := mapAccess(t, d, h, 4*mib)
		q := mapAccess(t, d, h, 4*mib)
		require.NoError(t, d.Release(h))
		assert.Equal(t, 4*mib, d.Used(), "a released handle still mapped holds its memory")
		_, err = d.Create(6 * mib)
		require.ErrorIs(t, err, vmm.ErrOutOfMemory)
		require.NoError(t, d.Unmap(p, 4*mib))
		assert.Equal(t, 4*mib, d.Used(), "one mapping is left")
		require.NoError(t, d.Memset(q, 10, 1, vmm.DefaultStream), "the remaining mapping still works")
		require.NoError(t, d.Unmap(q, 4*mib))
		assert.Equal(t, uint64(0), d.Used(), "released and unmapped: freed")
		free, total, err := d.MemInfo()
		require.NoError(t, err)
		assert.Equal(t, [2]uint64{8 * mib, 8 * mib}, [2]uint64{free, total})
	})
	t.Run("unmap then release frees", func(t *testing.T) {
		d := NewDevice(DeviceConfig{Capacity: 8 * mib})
		h, err := d.Create(4 * mib)
		require.NoError(t, err)
		p := mapAccess(t, d, h, 4*mib)
		require.NoError(t, d.Unmap(p, 4*mib))
		assert.Equal(t, 4*mib, d.Used(), "unmapped but not released: still held")
		require.NoError(t, d.Map(p, 4*mib, h, 0), "an unreleased handle can be mapped again")
		require.NoError(t, d.Unmap(p, 4*mib))
		require.NoError(t, d.Release(h))
		assert.Equal(t, uint64(0), d.Used())
	})
	t.Run("use after release", func(t *testing.T) {
		d := NewDevice(DeviceConfig{})
		h, err := d.Create(2 * mib)
		require.NoError(t, err)
		p := mapAccess(t, d, h, 2*mib)
		require.NoError(t, d.Release(h))
		q, err := d.Reserve(2 * mib)
		require.NoError(t, err)
		require.ErrorIs(t, d.Map(q, 2*mib, h, 0), vmm.ErrInvalidHandle, "map after release, still mapped")
		require.NoError(t, d.Unmap(p, 2*mib))
		require.ErrorIs(t, d.Map(q, 2*mib, h, 0), vmm.ErrInvalidHandle, "map after release, freed")
		require.ErrorIs(t, d.Release(h), vmm.ErrInvalidHandle)
		h2, err := d.Create(2 * mib)
		require.NoError(t, err)
		assert.NotEqual(t, h, h2, "handle ids are never reused")
	})
}

// Capacity: Create fails with OutOfMemory exactly when the free memory is short, and MemInfo agrees.
func TestDeviceCapacity(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	assert.Equal(t, uint64(141_000_000_000)/(2*mib)*(2*mib), d.Capacity(), "default: an H200's 141 GB")
	assert.Equal(t, 2*mib, d.Granularity())

	d = NewDevice(DeviceConfig{Capacity: 10*mib + 12345, Granularity: 4 * mib})
	assert.Equal(t, 8*mib, d.Capacity(), "capacity rounds down to the granularity")
	h1, err := d.Create(4 * mib)
	require.NoError(t, err)
	_, err = d.Create(8 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "asked 8388608", "the error says how much was asked")
	assert.Contains(t, err.Error(), "free 4194304")
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{4 * mib, 8 * mib}, [2]uint64{free, total})
	_, err = d.Create(4 * mib)
	require.NoError(t, err)
	_, err = d.Create(4 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfMemory)
	require.NoError(t, d.Release(h1))
	_, err = d.Create(4 * mib)
	require.NoError(t, err, "released memory is available again")
	assert.Equal(t, d.Capacity(), d.State().Used)
}

// Virtual addresses: aligned, from VABase upward, never overlapping a live reservation.
func TestDeviceReserveAddresses(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	var live []vmm.Range
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		if len(live) > 0 && rng.Intn(3) == 0 {
			j := rng.Intn(len(live))
			require.NoError(t, d.FreeAddress(live[j].Base, live[j].Size))
			live = append(live[:j], live[j+1:]...)
			continue
		}
		size := uint64(rng.Intn(8)+1) * 2 * mib
		p, err := d.Reserve(size)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p, VABase)
		require.Zero(t, uint64(p)%(2*mib))
		r := vmm.Range{Base: p, Size: size}
		for _, o := range live {
			require.False(t, r.Overlaps(o), "%v overlaps live %v", r, o)
		}
		live = append(live, r)
	}
	assert.Len(t, d.State().Reservations, len(live))
}

// Streams and events: work completes only when the test advances the clock; events capture the position.
func TestDeviceStreamsAndEvents(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	s, err := d.CreateStream()
	require.NoError(t, err)
	e, err := d.CreateEvent()
	require.NoError(t, err)
	q := func(e vmm.Event) bool {
		done, err := d.QueryEvent(e)
		require.NoError(t, err)
		return done
	}
	idle := func(s vmm.Stream) bool {
		ok, err := d.StreamQuery(s)
		require.NoError(t, err)
		return ok
	}
	assert.True(t, q(e), "a never recorded event counts as completed")
	assert.True(t, idle(s))
	require.NoError(t, d.RecordEvent(e, s))
	assert.True(t, q(e), "recorded on an idle stream: completed at once")

	d.Launch(s)
	d.Launch(s)
	require.NoError(t, d.RecordEvent(e, s))
	d.Launch(s)
	assert.False(t, q(e))
	assert.False(t, idle(s))
	assert.True(t, idle(vmm.DefaultStream), "streams are independent")
	d.Advance(s, 1)
	assert.False(t, q(e), "one of the two units before the event is done")
	d.Advance(s, 1)
	assert.True(t, q(e), "the event completes with the work recorded before it")
	assert.False(t, idle(s), "work after the event is still pending")
	assert.Equal(t, uint64(1), d.Pending(s))
	d.Complete(s)
	assert.True(t, idle(s))

	// Re-recording moves the event.
	d.Launch(s)
	require.NoError(t, d.RecordEvent(e, s))
	assert.False(t, q(e))
	d.CompleteAll()
	assert.True(t, q(e))

	// A destroyed stream's pending work still completes, and events on it still answer.
	s2, err := d.CreateStream()
	require.NoError(t, err)
	d.Launch(s2)
	require.NoError(t, d.RecordEvent(e, s2))
	require.NoError(t, d.DestroyStream(s2))
	assert.False(t, q(e))
	d.CompleteAll()
	assert.True(t, q(e))
	assert.Panics(t, func() { d.Launch(s2) }, "launching on a destroyed stream is a test bug")
}

// StreamWaitEvent: later work on s completes only after the event; completing s completes what it waits on.
func TestDeviceStreamWaitEvent(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	a, err := d.CreateStream()
	require.NoError(t, err)
	b, err := d.CreateStream()
	require.NoError(t, err)
	ea, err := d.CreateEvent()
	require.NoError(t, err)
	eb, err := d.CreateEvent()
	require.NoError(t, err)
	q := func(e vmm.Event) bool {
		done, err := d.QueryEvent(e)
		require.NoError(t, err)
		return done
	}

	d.Launch(a)
	require.NoError(t, d.RecordEvent(ea, a))
	d.Launch(a) // after ea: not needed by b
	d.Launch(b) // before the wait: does not depend on a
	require.NoError(t, d.StreamWaitEvent(b, ea))
	d.Launch(b)
	require.NoError(t, d.RecordEvent(eb, b))

	d.Advance(b, 1)
	assert.False(t, q(ea), "b's work before the wait does not run a")
	assert.False(t, q(eb))
	d.Complete(b)
	assert.True(t, q(eb))
	assert.True(t, q(ea), "completing b past the wait completed a up to ea")
	assert.Equal(t, uint64(1), d.Pending(a), "but not a's work after ea")

	// Waiting on a completed event adds nothing.
	require.NoError(t, d.StreamWaitEvent(b, ea))
	assert.Equal(t, uint64(0), d.Pending(b))

	// Chains: c waits on b which waits on a.
	c, err := d.CreateStream()
	require.NoError(t, err)
	d.CompleteAll()
	d.Launch(a)
	require.NoError(t, d.RecordEvent(ea, a))
	require.NoError(t, d.StreamWaitEvent(b, ea))
	require.NoError(t, d.RecordEvent(eb, b))
	require.NoError(t, d.StreamWaitEvent(c, eb))
	d.Launch(c)
	d.Complete(c)
	assert.True(t, q(eb))
	assert.True(t, q(ea), "completion chases the chain of waits")
}

// SyncStreams: every unit completes when submitted (trace replays).
func TestDeviceSyncStreams(t *testing.T) {
	d := NewDevice(DeviceConfig{SyncStreams: true})
	s, err := d.CreateStream()
	require.NoError(t, err)
	e, err := d.CreateEvent()
	require.NoError(t, err)
	d.Launch(s)
	require.NoError(t, d.RecordEvent(e, s))
	done, err := d.QueryEvent(e)
	require.NoError(t, err)
	assert.True(t, done)
	idle, err := d.StreamQuery(s)
	require.NoError(t, err)
	assert.True(t, idle)
}

// Memset is work on its stream; Read completes the stream's work first (cuMemcpyDtoH is synchronous).
func TestDeviceMemsetIsStreamWork(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	h, err := d.Create(2 * mib)
	require.NoError(t, err)
	p := mapAccess(t, d, h, 2*mib)
	s, err := d.CreateStream()
	require.NoError(t, err)
	e, err := d.CreateEvent()
	require.NoError(t, err)
	require.NoError(t, d.Memset(p, 10, 5, s))
	require.NoError(t, d.RecordEvent(e, s))
	done, err := d.QueryEvent(e)
	require.NoError(t, err)
	assert.False(t, done, "the memset is pending work on s")
	b := make([]byte, 1)
	require.NoError(t, d.Read(p, b, s))
	assert.Equal(t, []byte{5}, b)
	done, err = d.QueryEvent(e)
	require.NoError(t, err)
	assert.True(t, done, "Read waited for s")
}

// Access is per mapping (measured on the H200, harness TestConformanceReal): SetAccess over part of a
// mapping is refused and grants nothing, over whole adjacent mappings it grants each of them, and the grant
// belongs to the mapping, so a new mapping of the same handle at the same address starts without access.
func TestDeviceAccessIsPerMapping(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	h, err := d.Create(6 * mib)
	require.NoError(t, err)
	p, err := d.Reserve(12 * mib)
	require.NoError(t, err)
	require.NoError(t, d.Map(p, 6*mib, h, 0))
	require.ErrorIs(t, d.SetAccess(p.Add(2*mib), 2*mib), vmm.ErrInvalidValue, "part of a mapping")
	require.ErrorIs(t, d.SetAccess(p, 4*mib), vmm.ErrInvalidValue, "head of a mapping")
	require.ErrorIs(t, d.Memset(p.Add(2*mib), 1, 1, vmm.DefaultStream), vmm.ErrIllegalAddress, "the refused grant granted nothing")
	assert.False(t, d.State().Mappings[0].Accessible)
	require.NoError(t, d.SetAccess(p, 6*mib))
	assert.True(t, d.State().Mappings[0].Accessible)
	require.NoError(t, d.Memset(p, 6*mib, 1, vmm.DefaultStream))

	// Two adjacent mappings in one call: both accessible, a memset across the seam works.
	h2, err := d.Create(2 * mib)
	require.NoError(t, err)
	h3, err := d.Create(4 * mib)
	require.NoError(t, err)
	require.NoError(t, d.Map(p.Add(6*mib), 2*mib, h2, 0))
	require.NoError(t, d.Map(p.Add(8*mib), 4*mib, h3, 0))
	require.NoError(t, d.SetAccess(p.Add(6*mib), 6*mib))
	for _, m := range d.State().Mappings {
		assert.True(t, m.Accessible, "mapping %v", m.VA)
	}
	require.NoError(t, d.Memset(p.Add(8*mib-1), 2, 2, vmm.DefaultStream))

	// Remapping starts without access.
	require.NoError(t, d.Unmap(p, 6*mib))
	require.NoError(t, d.Map(p, 6*mib, h, 0))
	assert.False(t, d.State().Mappings[0].Accessible)
	require.ErrorIs(t, d.Memset(p, 1, 1, vmm.DefaultStream), vmm.ErrIllegalAddress)
}

// Fault injection: the n-th call fails with the given result and changes nothing; probabilistic faults
// repeat exactly under the same seed.
func TestDeviceFaultInjection(t *testing.T) {
	d := NewDevice(DeviceConfig{Capacity: 16 * mib})
	d.FailNth(vmm.CallCreate, 2, vmm.OutOfMemory)
	d.FailNth(vmm.CallCreate, 4, vmm.InvalidValue)
	_, err := d.Create(2 * mib)
	require.NoError(t, err)
	before := dump(d)
	_, err = d.Create(2 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfMemory)
	var ce *vmm.CallError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, vmm.CallCreate, ce.Call)
	assert.Contains(t, ce.Detail, "injected")
	assert.Equal(t, before, dump(d), "an injected failure changes nothing")
	_, err = d.Create(2 * mib)
	require.NoError(t, err)
	_, err = d.Create(2 * mib)
	require.ErrorIs(t, err, vmm.ErrInvalidValue)
	_, err = d.Create(2 * mib)
	require.NoError(t, err, "FailNth fires once")
	assert.Equal(t, uint64(5), d.Counts()[vmm.CallCreate], "injected failures are counted")

	d.FailNth(vmm.CallMap, 1, vmm.OutOfMemory)
	d.ClearFaults()
	h, err := d.Create(2 * mib)
	require.NoError(t, err)
	mapAccess(t, d, h, 2*mib)

	run := func(seed int64) []bool {
		d := NewDevice(DeviceConfig{Seed: seed})
		d.FailProb(vmm.CallReserve, 0.3, vmm.OutOfMemory)
		var fails []bool
		for i := 0; i < 200; i++ {
			_, err := d.Reserve(2 * mib)
			if err != nil {
				require.ErrorIs(t, err, vmm.ErrOutOfMemory)
			}
			// Calls of other kinds do not draw from the random source.
			_, _, _ = d.MemInfo()
			fails = append(fails, err != nil)
		}
		n := 0
		for _, f := range fails {
			if f {
				n++
			}
		}
		assert.InDelta(t, 60, n, 30, "about 30%% fail")
		assert.Len(t, d.State().Reservations, 200-n, "failed reserves reserved nothing")
		return fails
	}
	assert.Equal(t, run(7), run(7), "same seed, same faults")
	assert.NotEqual(t, run(7), run(8), "another seed, other faults")
}

// Injected tells an injected fault's answer from the device's own: the same out of memory, one armed by
// FailNth and one because the device is full (a judge may hold the engine only to the second).
func TestDeviceInjectedTellsFaultsFromRealAnswers(t *testing.T) {
	d := NewDevice(DeviceConfig{Capacity: 4 * mib})
	d.FailNth(vmm.CallCreate, 1, vmm.OutOfMemory)
	_, err := d.Create(2 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfMemory)
	assert.True(t, Injected(fmt.Errorf("engine: %w", err)), "an injected out of memory, wrapped")
	_, err = d.Create(8 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfMemory)
	assert.False(t, Injected(err), "the device is short of 8 MiB: its own answer")
	assert.False(t, Injected(nil))
	assert.False(t, Injected(vmm.ErrOutOfMemory))
}

// Counters and modeled time follow the cost model; Unmap and SetAccess are charged per mapping covered.
func TestDeviceCostAccounting(t *testing.T) {
	costs := vmm.H200Costs()
	d := NewDevice(DeviceConfig{})
	p, err := d.Reserve(16 * mib)
	require.NoError(t, err)
	for i := uint64(0); i < 8; i++ {
		h, err := d.Create(2 * mib)
		require.NoError(t, err)
		require.NoError(t, d.Map(p.Add(i*2*mib), 2*mib, h, 0))
	}
	d.ResetCounters()
	assert.Zero(t, d.ModeledTime())
	zero := d.Counts()
	assert.Zero(t, zero.Total())

	require.NoError(t, d.SetAccess(p, 16*mib))
	assert.Equal(t, 8*costs.Cost(vmm.CallSetAccess, 2*mib), d.ModeledTime(), "set access over 8 handles costs 8 handles")
	// 2 MiB is a point of the table: 8 times that point exactly (the table itself is vmm's, not repeated here).
	for _, pt := range costs.Points[vmm.CallSetAccess] {
		if pt.Size == 2*mib {
			assert.Equal(t, 8*pt.Latency, d.ModeledTime())
		}
	}
	d.ResetCounters()
	require.NoError(t, d.Unmap(p, 16*mib))
	assert.Equal(t, 8*costs.Cost(vmm.CallUnmap, 2*mib), d.ModeledTime())
	c := d.Counts()
	assert.Equal(t, uint64(1), c[vmm.CallUnmap])
	assert.Equal(t, uint64(1), c.Total())

	d.ResetCounters()
	h, err := d.Create(1 * vmm.GiB)
	require.NoError(t, err)
	q, err := d.Reserve(1 * vmm.GiB)
	require.NoError(t, err)
	require.NoError(t, d.Map(q, vmm.GiB, h, 0))
	require.NoError(t, d.SetAccess(q, vmm.GiB))
	require.NoError(t, d.Unmap(q, vmm.GiB))
	require.NoError(t, d.Release(h))
	require.NoError(t, d.FreeAddress(q, vmm.GiB))
	want := time.Duration(0)
	for _, k := range []vmm.CallKind{vmm.CallCreate, vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess, vmm.CallUnmap, vmm.CallRelease, vmm.CallFreeAddress} {
		want += costs.Cost(k, vmm.GiB)
		assert.Equal(t, uint64(1), d.Counts()[k], "%v", k)
	}
	assert.Equal(t, want, d.ModeledTime())

	// A failed call is counted and costs the smallest call of its kind.
	d.ResetCounters()
	require.Error(t, d.Unmap(q, vmm.GiB), "q was freed")
	assert.Equal(t, uint64(1), d.Counts()[vmm.CallUnmap])
	assert.Equal(t, costs.Cost(vmm.CallUnmap, 0), d.ModeledTime())

	// Unmap over holes costs the mappings it removes; with nothing mapped it costs the smallest call
	// (both succeed on the H200, harness TestConformanceReal).
	r, err := d.Reserve(16 * mib)
	require.NoError(t, err)
	for _, off := range []uint64{0, 8 * mib} {
		h, err := d.Create(4 * mib)
		require.NoError(t, err)
		require.NoError(t, d.Map(r.Add(off), 4*mib, h, 0))
	}
	d.ResetCounters()
	require.NoError(t, d.Unmap(r, 16*mib))
	assert.Equal(t, 2*costs.Cost(vmm.CallUnmap, 4*mib), d.ModeledTime(), "two mappings, holes free")
	d.ResetCounters()
	require.NoError(t, d.Unmap(r, 16*mib))
	assert.Equal(t, costs.Cost(vmm.CallUnmap, 0), d.ModeledTime(), "nothing mapped")
	assert.Empty(t, d.State().Mappings)

	// A custom cost model is used.
	var flat vmm.CostModel
	for k := range flat.Flat {
		flat.Flat[k] = time.Microsecond
	}
	d = NewDevice(DeviceConfig{Costs: &flat})
	_, err = d.Reserve(2 * mib)
	require.NoError(t, err)
	assert.Equal(t, time.Microsecond, d.ModeledTime())
}

// The leak report lists what is still reserved, mapped or holding memory, and is empty after a clean teardown.
func TestDeviceLeaks(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	assert.True(t, d.Leaks().Empty())
	assert.Equal(t, "no leaks", d.Leaks().String())
	hx, err := d.Create(2 * mib)
	require.NoError(t, err)
	assert.False(t, d.Leaks().Empty(), "an unreleased, unmapped handle is a leak")
	require.NoError(t, d.Release(hx))
	assert.True(t, d.Leaks().Empty())
	h1, err := d.Create(2 * mib)
	require.NoError(t, err)
	h2, err := d.Create(4 * mib)
	require.NoError(t, err)
	p := mapAccess(t, d, h1, 2*mib)
	e, err := d.CreateEvent()
	require.NoError(t, err)
	require.NoError(t, d.Release(h1))

	l := d.Leaks()
	require.False(t, l.Empty())
	assert.Equal(t, []vmm.Range{{Base: p, Size: 2 * mib}}, l.Reservations)
	assert.Equal(t, []DeviceMapping{{VA: vmm.Range{Base: p, Size: 2 * mib}, Handle: h1, Accessible: true}}, l.Mappings)
	assert.Equal(t, []HandleInfo{{Handle: h1, Size: 2 * mib, Released: true, Mappings: 1}, {Handle: h2, Size: 4 * mib}}, l.Handles)
	assert.Equal(t, []vmm.Event{e}, l.Events)
	assert.Equal(t, 6*mib, l.Used)
	s := l.String()
	for _, want := range []string{"1 reservations", "1 mappings", "2 handles", "6.00 MiB", "not released", "accessible"} {
		assert.Contains(t, s, want)
	}

	require.NoError(t, d.Unmap(p, 2*mib))
	require.NoError(t, d.FreeAddress(p, 2*mib))
	require.NoError(t, d.Release(h2))
	require.NoError(t, d.DestroyEvent(e))
	assert.True(t, d.Leaks().Empty(), d.Leaks().String())
	assert.Empty(t, d.Leaks().Events)
}

// State is a deep copy: changing it or the device afterwards does not affect the other.
func TestDeviceStateIsACopy(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	h, err := d.Create(2 * mib)
	require.NoError(t, err)
	p := mapAccess(t, d, h, 2*mib)
	st := d.State()
	st.Mappings[0].Handle = 99
	st.Reservations[0].Size = 1
	st2 := d.State()
	assert.Equal(t, h, st2.Mappings[0].Handle)
	require.NoError(t, d.Unmap(p, 2*mib))
	assert.Len(t, st2.Mappings, 1)
	assert.Equal(t, DeviceState{
		Reservations: []vmm.Range{{Base: p, Size: 2 * mib}},
		Mappings:     []DeviceMapping{},
		Handles:      []HandleInfo{{Handle: h, Size: 2 * mib}},
		Used:         2 * mib,
		Capacity:     d.Capacity(),
	}, d.State())
}

// Error details name the rule, sizes and addresses (what to fix).
func TestDeviceErrorDetails(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		err  error
		want []string
	}{
		{f.d.Map(f.R.Add(10*mib), 2*mib, f.h4, 2*mib), []string{"cuMemMap", "CUDA_ERROR_NOT_SUPPORTED", "offset 2097152"}},
		{f.d.Unmap(f.R, 4*mib), []string{"cuMemUnmap", "rule 4", "ends inside the mapping"}},
		{f.d.Unmap(f.R.Add(4*mib), 4*mib), []string{"cuMemUnmap", "rule 4", "starts inside the mapping"}},
		{f.d.Unmap(0x10_0000_0000, 2*mib), []string{"cuMemUnmap", "rule 4", "not reserved"}},
		{f.d.Unmap(f.R2.Add(2*mib), 4*mib), []string{"cuMemUnmap", "rule 4", "unreserved"}},
		{f.d.Map(f.R.Add(6*mib), mib, f.h3, 0), []string{"cuMemMap", "CUDA_ERROR_NOT_SUPPORTED", "size 1048576", "mapped whole"}},
		{f.d.SetAccess(f.R.Add(4*mib), 2*mib), []string{"cuMemSetAccess", "rule 5", "starts inside the mapping"}},
		{f.d.SetAccess(f.R.Add(2*mib), 2*mib), []string{"cuMemSetAccess", "rule 5", "ends inside the mapping"}},
		{f.d.SetAccess(f.R.Add(6*mib), 2*mib), []string{"cuMemSetAccess", "rule 5", "hole"}},
		{f.d.FreeAddress(f.R2, 2*mib), []string{"rule 6", "size 4194304, not 2097152"}},
		{f.d.Release(f.hf), []string{"CUDA_ERROR_INVALID_HANDLE", "released"}},
		{f.d.Memset(f.R.Add(2*mib), 1, 1, vmm.DefaultStream), []string{"CUDA_ERROR_ILLEGAL_ADDRESS", "no access"}},
	} {
		require.Error(t, c.err)
		for _, w := range c.want {
			assert.Contains(t, c.err.Error(), w)
		}
	}
}

// Concurrent use keeps the invariants (run with -race to check the locking).
func TestDeviceConcurrentUse(t *testing.T) {
	d := NewDevice(DeviceConfig{Capacity: 256 * mib})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			s, err := d.CreateStream()
			if !assert.NoError(t, err) {
				return
			}
			for i := 0; i < 200; i++ {
				size := uint64(rng.Intn(4)+1) * 2 * mib
				h, err := d.Create(size)
				if errors.Is(err, vmm.ErrOutOfMemory) {
					continue
				}
				assert.NoError(t, err)
				p, err := d.Reserve(size)
				assert.NoError(t, err)
				assert.NoError(t, d.Map(p, size, h, 0))
				assert.NoError(t, d.SetAccess(p, size))
				assert.NoError(t, d.Memset(p, 64, byte(seed), s))
				b := make([]byte, 64)
				assert.NoError(t, d.Read(p, b, s))
				assert.Equal(t, bytes.Repeat([]byte{byte(seed)}, 64), b, "another goroutine's data leaked in")
				assert.NoError(t, d.Unmap(p, size))
				assert.NoError(t, d.Release(h))
				assert.NoError(t, d.FreeAddress(p, size))
			}
			assert.NoError(t, d.DestroyStream(s))
		}(int64(g + 1))
	}
	wg.Wait()
	checkInvariants(t, d)
	assert.True(t, d.Leaks().Empty(), d.Leaks().String())
}

// Random legal and illegal calls keep every internal invariant, and every failure leaves the state as it was.
func TestDeviceRandomCallsKeepInvariants(t *testing.T) {
	steps := 3000
	if testingLong() {
		steps = 50000
	}
	d := NewDevice(DeviceConfig{Capacity: 64 * mib, Seed: 3})
	d.FailProb(vmm.CallMap, 0.05, vmm.OutOfMemory)
	rng := rand.New(rand.NewSource(42))
	var handles []vmm.Handle // every handle ever created (released ones too: their use must fail)
	var resv []vmm.Range
	pick := func() vmm.DevicePtr {
		if len(resv) == 0 || rng.Intn(10) == 0 {
			return vmm.DevicePtr(rng.Intn(1 << 30))
		}
		r := resv[rng.Intn(len(resv))]
		return r.Base.Add(uint64(rng.Intn(int(r.Size/(2*mib))+1)) * 2 * mib)
	}
	size := func() uint64 {
		if rng.Intn(20) == 0 {
			return uint64(rng.Intn(4 * int(mib)))
		}
		return uint64(rng.Intn(4)+1) * 2 * mib
	}
	h := func() vmm.Handle {
		if len(handles) == 0 || rng.Intn(10) == 0 {
			return vmm.Handle(rng.Intn(100))
		}
		return handles[rng.Intn(len(handles))]
	}
	var ok, failed [8]int
	for i := 0; i < steps; i++ {
		before := dump(d)
		var err error
		op := rng.Intn(8)
		switch op {
		case 0:
			var x vmm.Handle
			if x, err = d.Create(size()); err == nil {
				handles = append(handles, x)
			}
		case 1:
			err = d.Release(h())
		case 2:
			if len(resv) > 24 {
				break // keep the state small enough to compare after every step
			}
			var p vmm.DevicePtr
			sz := size()
			if p, err = d.Reserve(sz * 2); err == nil {
				resv = append(resv, vmm.Range{Base: p, Size: sz * 2})
			}
		case 3:
			if len(resv) > 0 {
				j := rng.Intn(len(resv))
				r := resv[j]
				if err = d.FreeAddress(r.Base, r.Size); err == nil {
					resv = append(resv[:j], resv[j+1:]...)
				}
			}
		case 4, 5:
			x := h()
			if rng.Intn(2) == 0 {
				// Prefer a handle that may be mapped: live and not released.
				d.mu.Lock()
				for _, y := range handles {
					if hd := d.mu.handles[y]; hd != nil && !hd.released && rng.Intn(3) == 0 {
						x = y
						break
					}
				}
				d.mu.Unlock()
			}
			sz := size()
			d.mu.Lock()
			if hd := d.mu.handles[x]; hd != nil && rng.Intn(2) == 0 {
				sz = hd.size
			}
			d.mu.Unlock()
			err = d.Map(pick(), sz, x, 0)
		case 6, 7:
			p, sz := pick(), size()
			if ms := d.State().Mappings; len(ms) > 0 && rng.Intn(2) == 0 {
				// Aim at real mappings: one, or a run from one to a later one (maybe with holes).
				j := rng.Intn(len(ms))
				k := j + rng.Intn(min(3, len(ms)-j))
				p, sz = ms[j].VA.Base, uint64(ms[k].VA.Limit()-ms[j].VA.Base)
			}
			if op == 6 {
				err = d.Unmap(p, sz)
			} else {
				err = d.SetAccess(p, sz)
			}
		}
		if err == nil {
			ok[op]++
		} else {
			failed[op]++
			var ce *vmm.CallError
			require.True(t, errors.As(err, &ce), "step %d: %T %v", i, err, err)
			require.Equal(t, before, dump(d), "step %d: failed call %v changed the device", i, err)
		}
		if i%50 == 0 {
			checkInvariants(t, d)
		}
	}
	checkInvariants(t, d)
	t.Logf("successes by op %v, failures %v", ok, failed)
	for op := range ok {
		assert.Positive(t, ok[op], "op %d never succeeded: the walk is too weak", op)
		assert.Positive(t, failed[op], "op %d never failed: the walk is too weak", op)
	}
}

func testingLong() bool { return strings.EqualFold(os.Getenv("GMLAKE_PROFILE"), "long") }

// Rule 9: unmapping a mapping with a pending write through it succeeds (as on CUDA) but is recorded as a
// hazard; doing it after the write completed is not.
func TestDeviceHazards(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	s, err := d.CreateStream()
	require.NoError(t, err)
	h, err := d.Create(2 * mib)
	require.NoError(t, err)
	p := mapAccess(t, d, h, 2*mib)
	q := mapAccess(t, d, h, 2*mib)

	require.NoError(t, d.Memset(p, 8, 1, s))
	require.NoError(t, d.Unmap(p, 2*mib), "CUDA does not refuse")
	require.NoError(t, d.Release(h))
	hz := d.Hazards()
	require.Len(t, hz, 1, "the unmap of p raced the write through p; the Release frees nothing (h is mapped at q)")
	assert.Equal(t, Hazard{Call: vmm.CallUnmap, Handle: h, VA: vmm.Range{Base: p, Size: 2 * mib}, Stream: s, Pending: 1}, hz[0])
	assert.Contains(t, hz[0].String(), "rule 9")

	d.ClearHazards()
	d.Complete(s)
	require.NoError(t, d.Unmap(q, 2*mib))
	assert.Empty(t, d.Hazards(), "the write completed before the unmap")

	// With SyncStreams nothing is ever pending.
	d = NewDevice(DeviceConfig{SyncStreams: true})
	h, err = d.Create(2 * mib)
	require.NoError(t, err)
	p = mapAccess(t, d, h, 2*mib)
	require.NoError(t, d.Memset(p, 8, 1, vmm.DefaultStream))
	require.NoError(t, d.Unmap(p, 2*mib))
	assert.Empty(t, d.Hazards())
}
