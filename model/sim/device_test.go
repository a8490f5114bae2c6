package sim

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gmlake/gmlake/vmm"
)

const mib = vmm.MiB

// fixture is a small device in a known state, used by the rule tables:
//
//	R  = 16 MiB reservation:  [0,2) h1 accessible | [2,6) h2 no access | [6,8) free |
//	                          [8,10) hr (released, still mapped, accessible) | [10,16) free
//	R2 = 4 MiB reservation right after R, nothing mapped
//	h3 (2 MiB) and h4 (4 MiB) created, unmapped; hf created and released (memory freed)
//	s1 a created stream; e1 an event recorded on s1 with one pending unit
type fixture struct {
	d                      *Device
	R, R2                  vmm.DevicePtr
	h1, h2, h3, h4, hr, hf vmm.Handle
	s1                     vmm.Stream
	e1                     vmm.Event
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{d: NewDevice(DeviceConfig{Capacity: 64 * mib})}
	d := f.d
	var err error
	must := func(err error) {
		t.Helper()
		require.NoError(t, err)
	}
	f.R, err = d.Reserve(16 * mib)
	must(err)
	f.R2, err = d.Reserve(4 * mib)
	must(err)
	require.Equal(t, f.R.Add(16*mib), f.R2, "fixture wants R2 adjacent to R")
	create := func(size uint64) vmm.Handle {
		h, err := d.Create(size)
		must(err)
		return h
	}
	f.h1, f.h2, f.h3, f.h4, f.hr, f.hf = create(2*mib), create(4*mib), create(2*mib), create(4*mib), create(2*mib), create(2*mib)
	must(d.Map(f.R, 2*mib, f.h1, 0))
	must(d.SetAccess(f.R, 2*mib))
	must(d.Map(f.R.Add(2*mib), 4*mib, f.h2, 0))
	must(d.Map(f.R.Add(8*mib), 2*mib, f.hr, 0))
	must(d.SetAccess(f.R.Add(8*mib), 2*mib))
	must(d.Release(f.hr))
	must(d.Release(f.hf))
	f.s1, err = d.CreateStream()
	must(err)
	f.e1, err = d.CreateEvent()
	must(err)
	d.Launch(f.s1)
	must(d.RecordEvent(f.e1, f.s1))
	return f
}

// dump prints the whole device state (memory, shadows, streams, events), to prove a failed call changed
// nothing. Counters and modeled time are left out: every call is counted, failed ones too.
func dump(d *Device) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "used=%d nextVA=%v nextHandle=%d nextStream=%d nextEvent=%d\n", d.mu.used, d.mu.nextVA,
		d.mu.nextHandle, d.mu.nextStream, d.mu.nextEvent)
	d.mu.reservations.Ascend(func(r vmm.Range) bool { fmt.Fprintf(&b, "res %v\n", r); return true })
	d.mu.mappings.Ascend(func(m *mapping) bool {
		fmt.Fprintf(&b, "map %v+%d h%d access=%v\n", m.base, m.size, m.h.id, m.access)
		return true
	})
	var hs []string
	for _, h := range d.mu.handles {
		hs = append(hs, fmt.Sprintf("handle %d size=%d rel=%v maps=%d shadow=%v", h.id, h.size, h.released, h.mappings, h.shadow.runs))
	}
	var ss []string
	for _, s := range d.mu.streams {
		ss = append(ss, fmt.Sprintf("stream %d %d/%d waits=%d", s.id, s.completed, s.submitted, len(s.waits)))
	}
	var es []string
	for _, e := range d.mu.events {
		pos := "-"
		if e.recorded {
			pos = fmt.Sprintf("s%d@%d", e.on.id, e.pos)
		}
		es = append(es, fmt.Sprintf("event %d %s", e.id, pos))
	}
	sort.Strings(hs)
	sort.Strings(ss)
	sort.Strings(es)
	for _, l := range [][]string{hs, ss, es} {
		b.WriteString(strings.Join(l, "\n"))
		b.WriteString("\n")
	}
	return b.String()
}

// checkInvariants asserts the device's internal invariants (see the field comments in device.go).
func checkInvariants(t testing.TB, d *Device) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var used uint64
	maps := map[*handle]int{}
	for _, h := range d.mu.handles {
		used += h.size
		require.False(t, h.released && h.mappings == 0, "handle %d released and unmapped but not freed", h.id)
	}
	require.Equal(t, used, d.mu.used, "used != sum of live handle sizes")
	require.LessOrEqual(t, d.mu.used, d.capacity)
	var prevRes vmm.Range
	d.mu.reservations.Ascend(func(r vmm.Range) bool {
		require.True(t, r.Size > 0 && r.Size%d.gran == 0 && uint64(r.Base)%d.gran == 0, "bad reservation %v", r)
		require.False(t, prevRes.Overlaps(r), "reservations %v and %v overlap", prevRes, r)
		prevRes = r
		return true
	})
	var prev *mapping
	d.mu.mappings.Ascend(func(m *mapping) bool {
		require.Same(t, d.mu.handles[m.h.id], m.h, "mapping at %v of a freed handle", m.base)
		require.Equal(t, m.h.size, m.size)
		if prev != nil {
			require.LessOrEqual(t, prev.limit(), m.base, "mappings overlap")
		}
		r, ok := d.reservationAtLocked(m.base)
		require.True(t, ok && m.limit() <= r.Limit(), "mapping %v not inside one reservation", m.base)
		maps[m.h]++
		prev = m
		return true
	})
	for _, h := range d.mu.handles {
		require.Equal(t, maps[h], h.mappings, "handle %d mapping count", h.id)
	}
}

// left passes err through, or checks that the mappings left in R start exactly at the given MiB offsets.
func (f *fixture) left(err error, mibs ...uint64) error {
	if err != nil {
		return err
	}
	var got, want []vmm.DevicePtr
	for _, m := range f.d.State().Mappings {
		if m.VA.Base >= f.R && m.VA.Base < f.R.Add(16*mib) {
			got = append(got, m.VA.Base)
		}
	}
	for _, o := range mibs {
		want = append(want, f.R.Add(o*mib))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("mappings left in R at %v, want %v", got, want)
	}
	return nil
}

// accessible passes err through, or checks that the accessible mappings in R start exactly at the given MiB
// offsets.
func (f *fixture) accessible(err error, mibs ...uint64) error {
	if err != nil {
		return err
	}
	var got, want []vmm.DevicePtr
	for _, m := range f.d.State().Mappings {
		if m.Accessible && m.VA.Base >= f.R && m.VA.Base < f.R.Add(16*mib) {
			got = append(got, m.VA.Base)
		}
	}
	for _, o := range mibs {
		want = append(want, f.R.Add(o*mib))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("accessible mappings in R at %v, want %v", got, want)
	}
	return nil
}

type ruleRow struct {
	name  string
	setup func(t *testing.T, f *fixture) // optional steps after the fixture, before the call under test
	call  func(f *fixture) error
	want  vmm.Result // Success for legal calls
}

// TestDeviceRules checks every rule of the vmm package doc, legal and illegal, against the exact CUDA
// result, and that an illegal call changes nothing.
func TestDeviceRules(t *testing.T) {
	rows := []ruleRow{
		// Rule 1: sizes are positive multiples of the granularity; addresses aligned.
		{"rule1/create 2MiB", nil, func(f *fixture) error { _, err := f.d.Create(2 * mib); return err }, vmm.Success},
		{"rule1/create 0", nil, func(f *fixture) error { _, err := f.d.Create(0); return err }, vmm.InvalidValue},
		{"rule1/create 1 byte", nil, func(f *fixture) error { _, err := f.d.Create(1); return err }, vmm.InvalidValue},
		{"rule1/create 3MiB", nil, func(f *fixture) error { _, err := f.d.Create(3 * mib); return err }, vmm.InvalidValue},
		{"rule1/reserve 4MiB", nil, func(f *fixture) error { _, err := f.d.Reserve(4 * mib); return err }, vmm.Success},
		{"rule1/reserve 0", nil, func(f *fixture) error { _, err := f.d.Reserve(0); return err }, vmm.InvalidValue},
		{"rule1/reserve 1MiB", nil, func(f *fixture) error { _, err := f.d.Reserve(mib); return err }, vmm.InvalidValue},
		{"rule1/map unaligned ptr", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib+4096), 2*mib, f.h3, 0) }, vmm.InvalidValue},
		{"rule1/unmap size 1MiB", nil, func(f *fixture) error { return f.d.Unmap(f.R, mib) }, vmm.InvalidValue},
		{"rule1/unmap size 0", nil, func(f *fixture) error { return f.d.Unmap(f.R, 0) }, vmm.InvalidValue},
		{"rule1/unmap unaligned ptr", nil, func(f *fixture) error { return f.d.Unmap(f.R.Add(4096), 2*mib) }, vmm.InvalidValue},
		{"rule1/set access 1MiB", nil, func(f *fixture) error { return f.d.SetAccess(f.R, mib) }, vmm.InvalidValue},
		{"rule1/set access 0", nil, func(f *fixture) error { return f.d.SetAccess(f.R, 0) }, vmm.InvalidValue},
		{"rule1/set access unaligned", nil, func(f *fixture) error { return f.d.SetAccess(f.R.Add(4096), 2*mib) }, vmm.InvalidValue},

		// Rule 2: whole handle, offset 0. Any size other than the handle's is NOT_SUPPORTED, a size that is not
		// a granularity multiple too, and it is checked before the address (measured on the H200, harness
		// TestConformanceReal: map-part-of-handle, map-beyond-handle, map-misaligned-size).
		{"rule2/map whole handle offset 0", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), 2*mib, f.h3, 0) }, vmm.Success},
		{"rule2/map offset 2MiB", nil, func(f *fixture) error { return f.d.Map(f.R.Add(10*mib), 2*mib, f.h4, 2*mib) }, vmm.NotSupported},
		{"rule2/map offset 0 size below handle", nil, func(f *fixture) error { return f.d.Map(f.R.Add(10*mib), 2*mib, f.h4, 0) }, vmm.NotSupported},
		{"rule2/map size above handle", nil, func(f *fixture) error { return f.d.Map(f.R.Add(10*mib), 4*mib, f.h3, 0) }, vmm.NotSupported},
		{"rule2/map size 1MiB (not a granularity multiple)", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), mib, f.h3, 0) }, vmm.NotSupported},
		{"rule2/map size 2MiB-4KiB (not a granularity multiple)", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), 2*mib-4096, f.h3, 0) }, vmm.NotSupported},
		{"rule2/map bad size at an unaligned ptr: size checked first", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib+4096), mib, f.h3, 0) }, vmm.NotSupported},
		{"rule2/map bad size outside any reservation: size checked first", nil, func(f *fixture) error { return f.d.Map(0x10_0000_0000, 4*mib, f.h3, 0) }, vmm.NotSupported},

		// Rule 3: inside one reservation, onto unmapped addresses.
		{"rule3/map at reservation end", nil, func(f *fixture) error { return f.d.Map(f.R.Add(14*mib), 2*mib, f.h3, 0) }, vmm.Success},
		{"rule3/map into second reservation", nil, func(f *fixture) error { return f.d.Map(f.R2, 4*mib, f.h4, 0) }, vmm.Success},
		{"rule3/map outside any reservation", nil, func(f *fixture) error { return f.d.Map(0x10_0000_0000, 2*mib, f.h3, 0) }, vmm.InvalidValue},
		{"rule3/map past the last reservation", nil, func(f *fixture) error { return f.d.Map(f.R2.Add(4*mib), 2*mib, f.h3, 0) }, vmm.InvalidValue},
		{"rule3/map across two adjacent reservations", nil, func(f *fixture) error { return f.d.Map(f.R.Add(14*mib), 4*mib, f.h4, 0) }, vmm.InvalidValue},
		{"rule3/map onto a mapping's start", nil, func(f *fixture) error { return f.d.Map(f.R, 2*mib, f.h3, 0) }, vmm.InvalidValue},
		{"rule3/map starting inside a mapping", nil, func(f *fixture) error { return f.d.Map(f.R.Add(4*mib), 2*mib, f.h3, 0) }, vmm.InvalidValue},
		{"rule3/map running into a mapping", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), 4*mib, f.h4, 0) }, vmm.InvalidValue},
		{"rule3/map in freed reservation", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.FreeAddress(f.R2, 4*mib))
		}, func(f *fixture) error {
			return f.d.Map(f.R2, 2*mib, f.h3, 0)
		}, vmm.InvalidValue},

		// Rule 4: unmap removes the whole mappings in the range; unmapped holes are allowed and a range with
		// nothing mapped is a no-op, but a range that cuts a mapping is refused (measured on the H200, harness
		// TestConformanceReal: unmap-with-hole, unmap-unmapped, unmap-part-of-mapping). The fixture maps R+0,
		// R+2 MiB and R+8 MiB; f.left checks which of them remain.
		{"rule4/unmap one mapping", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R, 2*mib), 2, 8) }, vmm.Success},
		{"rule4/unmap two adjacent mappings", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R, 6*mib), 8) }, vmm.Success},
		{"rule4/unmap part of a mapping (head)", nil, func(f *fixture) error { return f.d.Unmap(f.R.Add(2*mib), 2*mib) }, vmm.InvalidValue},
		{"rule4/unmap part of a mapping (tail)", nil, func(f *fixture) error { return f.d.Unmap(f.R.Add(4*mib), 2*mib) }, vmm.InvalidValue},
		{"rule4/unmap ending inside a mapping", nil, func(f *fixture) error { return f.d.Unmap(f.R, 4*mib) }, vmm.InvalidValue},
		{"rule4/unmap with a hole", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R, 10*mib)) }, vmm.Success},
		{"rule4/unmap starting at a hole", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R.Add(6*mib), 4*mib), 0, 2) }, vmm.Success},
		{"rule4/unmap mapping plus trailing hole", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R.Add(8*mib), 4*mib), 0, 2) }, vmm.Success},
		{"rule4/unmap the whole reservation", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R, 16*mib)) }, vmm.Success},
		{"rule4/unmap unmapped range is a no-op", nil, func(f *fixture) error { return f.left(f.d.Unmap(f.R.Add(10*mib), 2*mib), 0, 2, 8) }, vmm.Success},
		{"rule4/unmap nothing mapped across adjacent reservations", nil, func(f *fixture) error {
			return f.left(f.d.Unmap(f.R.Add(14*mib), 4*mib), 0, 2, 8)
		}, vmm.Success},
		{"rule4/unmap part of a mapping then a hole", nil, func(f *fixture) error { return f.d.Unmap(f.R.Add(4*mib), 4*mib) }, vmm.InvalidValue},
		{"rule4/unmap a hole, a mapping, then part of a mapping", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.Map(f.R.Add(10*mib), 4*mib, f.h4, 0))
		}, func(f *fixture) error {
			return f.d.Unmap(f.R.Add(6*mib), 6*mib)
		}, vmm.InvalidValue},
		// Not measured on the H200 (the suite unmaps only inside its reservations): the model refuses to
		// unmap address space that is not reserved.
		{"rule4/unmap outside any reservation", nil, func(f *fixture) error { return f.d.Unmap(0x10_0000_0000, 2*mib) }, vmm.InvalidValue},
		{"rule4/unmap running past the last reservation", nil, func(f *fixture) error { return f.d.Unmap(f.R2.Add(2*mib), 4*mib) }, vmm.InvalidValue},
		{"rule4/unmap in a freed reservation", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.FreeAddress(f.R2, 4*mib))
		}, func(f *fixture) error {
			return f.d.Unmap(f.R2, 2*mib)
		}, vmm.InvalidValue},

		// Rule 5: SetAccess needs the range fully mapped, by whole mappings: over part of one it is
		// INVALID_VALUE (measured on the H200, harness TestConformanceReal: set-access-part-of-mapping).
		// No access, no memset/read.
		{"rule5/set access one mapping", nil, func(f *fixture) error { return f.accessible(f.d.SetAccess(f.R.Add(2*mib), 4*mib), 0, 2, 8) }, vmm.Success},
		{"rule5/set access again", nil, func(f *fixture) error { return f.accessible(f.d.SetAccess(f.R, 2*mib), 0, 8) }, vmm.Success},
		{"rule5/set access part of a mapping (tail)", nil, func(f *fixture) error { return f.d.SetAccess(f.R.Add(4*mib), 2*mib) }, vmm.InvalidValue},
		{"rule5/set access part of a mapping (head)", nil, func(f *fixture) error { return f.d.SetAccess(f.R.Add(2*mib), 2*mib) }, vmm.InvalidValue},
		{"rule5/set access a mapping and part of the next", nil, func(f *fixture) error { return f.d.SetAccess(f.R, 4*mib) }, vmm.InvalidValue},
		{"rule5/set access across adjacent mappings", nil, func(f *fixture) error { return f.accessible(f.d.SetAccess(f.R, 6*mib), 0, 2, 8) }, vmm.Success},
		{"rule5/set access with a hole", nil, func(f *fixture) error { return f.d.SetAccess(f.R, 10*mib) }, vmm.InvalidValue},
		{"rule5/set access starting at a hole", nil, func(f *fixture) error { return f.d.SetAccess(f.R.Add(6*mib), 4*mib) }, vmm.InvalidValue},
		{"rule5/set access unmapped", nil, func(f *fixture) error { return f.d.SetAccess(f.R.Add(10*mib), 2*mib) }, vmm.InvalidValue},
		{"rule5/set access mapping plus trailing hole", nil, func(f *fixture) error { return f.d.SetAccess(f.R.Add(8*mib), 4*mib) }, vmm.InvalidValue},
		{"rule5/memset accessible", nil, func(f *fixture) error { return f.d.Memset(f.R.Add(100), 1000, 7, vmm.DefaultStream) }, vmm.Success},
		{"rule5/memset zero bytes anywhere", nil, func(f *fixture) error { return f.d.Memset(0, 0, 7, vmm.DefaultStream) }, vmm.Success},
		{"rule5/memset no access yet", nil, func(f *fixture) error { return f.d.Memset(f.R.Add(2*mib), 10, 7, vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/memset into no-access neighbour", nil, func(f *fixture) error { return f.d.Memset(f.R.Add(2*mib-1), 2, 7, vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/memset unmapped", nil, func(f *fixture) error { return f.d.Memset(f.R.Add(6*mib), 1, 7, vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/memset outside reservations", nil, func(f *fixture) error { return f.d.Memset(0x1000, 1, 7, vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/memset past a mapping's end", nil, func(f *fixture) error { return f.d.Memset(f.R.Add(8*mib), 2*mib+1, 7, vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/memset across a hole between accessible mappings", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.Map(f.R.Add(12*mib), 2*mib, f.h3, 0))
			require.NoError(t, f.d.SetAccess(f.R.Add(12*mib), 2*mib))
		}, func(f *fixture) error { return f.d.Memset(f.R.Add(10*mib-1), 2*mib+2, 7, vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/read across a hole between accessible mappings", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.Map(f.R.Add(12*mib), 2*mib, f.h3, 0))
			require.NoError(t, f.d.SetAccess(f.R.Add(12*mib), 2*mib))
		}, func(f *fixture) error { return f.d.Read(f.R.Add(10*mib-1), make([]byte, 2*mib+2), vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/read accessible", nil, func(f *fixture) error { return f.d.Read(f.R, make([]byte, 64), vmm.DefaultStream) }, vmm.Success},
		{"rule5/read no access yet", nil, func(f *fixture) error { return f.d.Read(f.R.Add(3*mib), make([]byte, 64), vmm.DefaultStream) }, vmm.IllegalAddress},
		{"rule5/read unmapped", nil, func(f *fixture) error { return f.d.Read(f.R.Add(7*mib), make([]byte, 64), vmm.DefaultStream) }, vmm.IllegalAddress},

		// Rule 6: FreeAddress takes the exact reservation, fully unmapped.
		{"rule6/free exact unmapped reservation", nil, func(f *fixture) error { return f.d.FreeAddress(f.R2, 4*mib) }, vmm.Success},
		{"rule6/free reservation with mappings", nil, func(f *fixture) error { return f.d.FreeAddress(f.R, 16*mib) }, vmm.InvalidValue},
		{"rule6/free wrong size (smaller)", nil, func(f *fixture) error { return f.d.FreeAddress(f.R2, 2*mib) }, vmm.InvalidValue},
		{"rule6/free wrong size (larger)", nil, func(f *fixture) error { return f.d.FreeAddress(f.R2, 8*mib) }, vmm.InvalidValue},
		{"rule6/free inside a reservation", nil, func(f *fixture) error { return f.d.FreeAddress(f.R2.Add(2*mib), 2*mib) }, vmm.InvalidValue},
		{"rule6/free never reserved", nil, func(f *fixture) error { return f.d.FreeAddress(0x1000_0000, 2*mib) }, vmm.InvalidValue},
		{"rule6/free twice", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.FreeAddress(f.R2, 4*mib))
		}, func(f *fixture) error {
			return f.d.FreeAddress(f.R2, 4*mib)
		}, vmm.InvalidValue},
		{"rule6/free after unmapping everything", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.Unmap(f.R, 6*mib))
			require.NoError(t, f.d.Unmap(f.R.Add(8*mib), 2*mib))
		}, func(f *fixture) error {
			return f.d.FreeAddress(f.R, 16*mib)
		}, vmm.Success},

		// Rule 7: release once; no use after release.
		{"rule7/release unmapped handle", nil, func(f *fixture) error { return f.d.Release(f.h3) }, vmm.Success},
		{"rule7/release mapped handle", nil, func(f *fixture) error { return f.d.Release(f.h1) }, vmm.Success},
		{"rule7/release twice (still mapped)", nil, func(f *fixture) error { return f.d.Release(f.hr) }, vmm.InvalidHandle},
		{"rule7/release twice (freed)", nil, func(f *fixture) error { return f.d.Release(f.hf) }, vmm.InvalidHandle},
		{"rule7/release handle 0", nil, func(f *fixture) error { return f.d.Release(0) }, vmm.InvalidHandle},
		{"rule7/release never created", nil, func(f *fixture) error { return f.d.Release(9999) }, vmm.InvalidHandle},
		{"rule7/map released, still mapped handle", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), 2*mib, f.hr, 0) }, vmm.InvalidHandle},
		{"rule7/map released, freed handle", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), 2*mib, f.hf, 0) }, vmm.InvalidHandle},
		{"rule7/map never created handle", nil, func(f *fixture) error { return f.d.Map(f.R.Add(6*mib), 2*mib, 9999, 0) }, vmm.InvalidHandle},
		{"rule7/unmap released handle's mapping", nil, func(f *fixture) error { return f.d.Unmap(f.R.Add(8*mib), 2*mib) }, vmm.Success},

		// Capacity: 64 MiB; the fixture holds 2+4+2+4+2 = 14 MiB.
		{"capacity/create all that is free", nil, func(f *fixture) error { _, err := f.d.Create(50 * mib); return err }, vmm.Success},
		{"capacity/create one granule too much", nil, func(f *fixture) error { _, err := f.d.Create(52 * mib); return err }, vmm.OutOfMemory},
		{"capacity/create far too much", nil, func(f *fixture) error { _, err := f.d.Create(1 << 40); return err }, vmm.OutOfMemory},

		// Streams and events: unknown or destroyed ones are InvalidHandle.
		{"stream/destroy created", nil, func(f *fixture) error { return f.d.DestroyStream(f.s1) }, vmm.Success},
		{"stream/destroy default", nil, func(f *fixture) error { return f.d.DestroyStream(vmm.DefaultStream) }, vmm.InvalidHandle},
		{"stream/destroy unknown", nil, func(f *fixture) error { return f.d.DestroyStream(77) }, vmm.InvalidHandle},
		{"stream/destroy twice", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.DestroyStream(f.s1))
		}, func(f *fixture) error {
			return f.d.DestroyStream(f.s1)
		}, vmm.InvalidHandle},
		{"stream/query default", nil, func(f *fixture) error { _, err := f.d.StreamQuery(vmm.DefaultStream); return err }, vmm.Success},
		{"stream/query unknown", nil, func(f *fixture) error { _, err := f.d.StreamQuery(77); return err }, vmm.InvalidHandle},
		{"stream/query destroyed", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.DestroyStream(f.s1))
		}, func(f *fixture) error {
			_, err := f.d.StreamQuery(f.s1)
			return err
		}, vmm.InvalidHandle},
		{"stream/memset on unknown stream", nil, func(f *fixture) error { return f.d.Memset(f.R, 1, 1, 77) }, vmm.InvalidHandle},
		{"stream/read on unknown stream", nil, func(f *fixture) error { return f.d.Read(f.R, make([]byte, 1), 77) }, vmm.InvalidHandle},
		{"event/record", nil, func(f *fixture) error { return f.d.RecordEvent(f.e1, vmm.DefaultStream) }, vmm.Success},
		{"event/record unknown event", nil, func(f *fixture) error { return f.d.RecordEvent(77, f.s1) }, vmm.InvalidHandle},
		{"event/record event 0", nil, func(f *fixture) error { return f.d.RecordEvent(0, f.s1) }, vmm.InvalidHandle},
		{"event/record on unknown stream", nil, func(f *fixture) error { return f.d.RecordEvent(f.e1, 77) }, vmm.InvalidHandle},
		{"event/query unknown", nil, func(f *fixture) error { _, err := f.d.QueryEvent(77); return err }, vmm.InvalidHandle},
		{"event/wait", nil, func(f *fixture) error { return f.d.StreamWaitEvent(vmm.DefaultStream, f.e1) }, vmm.Success},
		{"event/wait unknown event", nil, func(f *fixture) error { return f.d.StreamWaitEvent(vmm.DefaultStream, 77) }, vmm.InvalidHandle},
		{"event/wait unknown stream", nil, func(f *fixture) error { return f.d.StreamWaitEvent(77, f.e1) }, vmm.InvalidHandle},
		{"event/destroy", nil, func(f *fixture) error { return f.d.DestroyEvent(f.e1) }, vmm.Success},
		{"event/destroy twice", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.DestroyEvent(f.e1))
		}, func(f *fixture) error {
			return f.d.DestroyEvent(f.e1)
		}, vmm.InvalidHandle},
		{"event/query destroyed", func(t *testing.T, f *fixture) {
			require.NoError(t, f.d.DestroyEvent(f.e1))
		}, func(f *fixture) error {
			_, err := f.d.QueryEvent(f.e1)
			return err
		}, vmm.InvalidHandle},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := newFixture(t)
			if row.setup != nil {
				row.setup(t, f)
			}
			checkInvariants(t, f.d)
			before := dump(f.d)
			err := row.call(f)
			if row.want == vmm.Success {
				require.NoError(t, err)
				checkInvariants(t, f.d)
				return
			}
			require.Error(t, err, "the device accepted an illegal call")
			assert.Equal(t, row.want, vmm.ResultOf(err), "err = %v", err)
			require.True(t, errors.Is(err, row.want), "errors.Is(%v, %v)", err, row.want)
			var ce *vmm.CallError
			require.True(t, errors.As(err, &ce), "not a *vmm.CallError: %T", err)
			assert.NotEmpty(t, ce.Detail, "a failed call names the rule it broke")
			require.Equal(t, before, dump(f.d), "a failed call changed the device")
		})
	}
}
