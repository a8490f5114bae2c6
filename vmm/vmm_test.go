package vmm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Property: every CUDA result used by the project maps one to one onto a sentinel that errors.Is finds
// through a CallError and through fmt.Errorf wrapping, and onto no other sentinel.
func TestErrorsMapResultsOneToOne(t *testing.T) {
	sentinels := map[Result]error{
		InvalidValue: ErrInvalidValue, OutOfMemory: ErrOutOfMemory, NotInitialized: ErrNotInitialized,
		NoDevice: ErrNoDevice, InvalidDevice: ErrInvalidDevice, InvalidContext: ErrInvalidContext,
		NotMapped: ErrNotMapped, InvalidHandle: ErrInvalidHandle, NotFound: ErrNotFound, NotReady: ErrNotReady,
		IllegalAddress: ErrIllegalAddress, NotPermitted: ErrNotPermitted, NotSupported: ErrNotSupported,
		DriverNotLoaded: ErrDriverNotLoaded,
	}
	for r, s := range sentinels {
		err := fmt.Errorf("allocator: %w", Errorf(CallMap, r, "ptr %#x", 0x1000))
		assert.True(t, errors.Is(err, s), "%v should match its sentinel", r)
		assert.Equal(t, r, ResultOf(err))
		for r2, s2 := range sentinels {
			if r2 != r {
				assert.False(t, errors.Is(err, s2), "%v must not match %v", r, r2)
			}
		}
		assert.Contains(t, err.Error(), r.Name())
		assert.Contains(t, err.Error(), fmt.Sprintf("(%d)", int32(r)))
		assert.Contains(t, err.Error(), "cuMemMap")
	}
	assert.Equal(t, Success, ResultOf(nil))
	assert.Nil(t, Success.Err())
	assert.Equal(t, UnknownCUDAError, ResultOf(errors.New("plain")))
	assert.Equal(t, "CUresult(12345)", Result(12345).Name())
}

// Property: the cost model returns the H200 medians measured by `gmlake probe` (docs/gpu.md) at the measured sizes, interpolates
// monotonically between them, and charges small calls what the smallest measured call cost.
func TestCostModelMatchesNotesTable(t *testing.T) {
	m := H200Costs()
	cases := []struct {
		k    CallKind
		size uint64
		want float64 // microseconds
	}{
		{CallCreate, 2 * MiB, 15.1}, {CallCreate, GiB, 88.7},
		{CallSetAccess, 2 * MiB, 29.1}, {CallSetAccess, 256 * MiB, 55.1}, {CallSetAccess, GiB, 93.2},
		{CallUnmap, 20 * MiB, 20.2}, {CallRelease, GiB, 489.0}, {CallMap, 2 * MiB, 1.6},
		{CallFreeAddress, 2 * MiB, 1.1}, {CallReserve, 20 * MiB, 1.9},
	}
	for _, c := range cases {
		got := float64(m.Cost(c.k, c.size)) / float64(time.Microsecond)
		assert.InDelta(t, c.want, got, 0.01, "%v at %s", c.k, FormatBytes(c.size))
	}
	assert.Equal(t, m.Cost(CallSetAccess, 2*MiB), m.Cost(CallSetAccess, 4096), "below the table: flat")
	mid := m.Cost(CallRelease, 64*MiB)
	assert.Greater(t, mid, m.Cost(CallRelease, 20*MiB))
	assert.Less(t, mid, m.Cost(CallRelease, 256*MiB))
	assert.Greater(t, m.Cost(CallRelease, 4*GiB), m.Cost(CallRelease, GiB), "extrapolates past the table")
	// The event calls: gmlake probe's event rows (docs/results/probe-h200-events.txt), flat in size.
	for k, ns := range map[CallKind]time.Duration{CallCreateEvent: 380, CallRecordEvent: 390, CallQueryEvent: 290,
		CallDestroyEvent: 190} {
		assert.Equal(t, ns*time.Nanosecond, m.Cost(k, 0), "%v", k)
		assert.Equal(t, ns*time.Nanosecond, m.Cost(k, GiB), "%v", k)
	}
	assert.Zero(t, m.Cost(NumCallKinds, 1))
}

// Property: call kinds have unique names that parse back.
func TestCallKindNamesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for k := CallKind(0); k < NumCallKinds; k++ {
		require.False(t, seen[k.Short()], "duplicate %s", k.Short())
		seen[k.Short()] = true
		for _, s := range []string{k.Short(), k.String()} {
			got, ok := ParseCallKind(s)
			require.True(t, ok, s)
			require.Equal(t, k, got)
		}
	}
	var c CallCounts
	c[CallMap] = 3
	c[CallUnmap] = 2
	assert.Equal(t, uint64(5), c.Total())
	assert.Equal(t, map[string]uint64{"map": 3, "unmap": 2}, c.Map())
}

// Property: ranges are half-open.
func TestRangeHalfOpen(t *testing.T) {
	r := Range{Base: 0x1000, Size: 0x1000}
	assert.True(t, r.Contains(0x1000))
	assert.False(t, r.Contains(0x2000))
	assert.False(t, r.Overlaps(Range{Base: 0x2000, Size: 1}))
	assert.True(t, r.Overlaps(Range{Base: 0x1fff, Size: 1}))
	assert.False(t, r.Overlaps(Range{Base: 0x1800, Size: 0}))
	assert.Equal(t, uint64(4*MiB), AlignUp(2*MiB+1, 2*MiB))
	assert.Equal(t, "1.50 GiB", FormatBytes(GiB+GiB/2))
}

// Property: RoundUp rounds to any multiple, where AlignUp needs a power of two (a 6 MiB chunk: 20 MiB rounds
// to 24 MiB, 7 MiB to 12 MiB, where AlignUp's mask answers 8 MiB).
func TestRoundUpTakesAnyMultiple(t *testing.T) {
	assert.Equal(t, uint64(24*MiB), RoundUp(20*MiB, 6*MiB))
	assert.Equal(t, uint64(6*MiB), RoundUp(6*MiB, 6*MiB))
	assert.Equal(t, uint64(0), RoundUp(0, 6*MiB))
	assert.Equal(t, AlignUp(2*MiB+1, 2*MiB), RoundUp(2*MiB+1, 2*MiB))
	assert.Equal(t, uint64(12*MiB), RoundUp(7*MiB, 6*MiB))
	assert.Equal(t, uint64(8*MiB), AlignUp(7*MiB, 6*MiB), "AlignUp's mask, wrong for a multiple not a power of two")
}
