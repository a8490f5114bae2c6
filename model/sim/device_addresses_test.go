package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gmlake/gmlake/vmm"
)

// Devices made with UniqueAddresses hand out virtual addresses no other such device of the process hands
// out, as GPUs of one process do (issue 14 item 3: device 1's first pointer equalled device 0's, so the C
// library freed device 0's block for a pointer of device 1). Devices without it keep starting at VABase.
func TestUniqueAddressesDisjointAcrossDevices(t *testing.T) {
	var devs []*Device
	seen := map[vmm.DevicePtr]int{}
	for i := 0; i < 4; i++ {
		d := NewDevice(DeviceConfig{Capacity: 64 * mib, UniqueAddresses: true})
		devs = append(devs, d)
		for j := 0; j < 3; j++ {
			p, err := d.Reserve(8 * mib)
			require.NoError(t, err)
			if k, dup := seen[p]; dup {
				t.Fatalf("device %d reserved %v, which device %d reserved too", i, p, k)
			}
			seen[p] = i
		}
	}
	for i, d := range devs {
		lo, hi := d.AddressRange()
		for j, e := range devs {
			if elo, ehi := e.AddressRange(); i != j && lo < ehi && elo < hi {
				t.Fatalf("devices %d [%v, %v) and %d [%v, %v) overlap", i, lo, hi, j, elo, ehi)
			}
		}
	}
	a, b := NewDevice(DeviceConfig{}), NewDevice(DeviceConfig{})
	pa, err := a.Reserve(2 * mib)
	require.NoError(t, err)
	pb, err := b.Reserve(2 * mib)
	require.NoError(t, err)
	require.Equal(t, VABase, pa, "a default device starts at VABase (deterministic addresses)")
	require.Equal(t, pa, pb)
}

// A device whose bump pointer reaches the end of its address range reuses freed ranges (first fit) rather
// than running into another device's, and fails with out of memory when no gap fits.
func TestUniqueAddressesWrapIntoFreedGaps(t *testing.T) {
	d := NewDevice(DeviceConfig{Capacity: 64 * mib, UniqueAddresses: true})
	lo, hi := d.AddressRange()
	span := uint64(hi - lo)
	big, err := d.Reserve(span - 4*mib) // leaves 4 MiB at the end
	require.NoError(t, err)
	tail, err := d.Reserve(4 * mib)
	require.NoError(t, err)
	_, err = d.Reserve(2 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfMemory, "the range is full")
	require.NoError(t, d.FreeAddress(big, span-4*mib))
	p, err := d.Reserve(16 * mib)
	require.NoError(t, err)
	require.Equal(t, lo, p, "first fit from the start of the range")
	require.True(t, p >= lo && p.Add(16*mib) <= hi)
	require.NoError(t, d.FreeAddress(tail, 4*mib))
	require.NoError(t, d.FreeAddress(p, 16*mib))
}

// Rule 9 is about address ranges: unmapping a mapping races only the pending work that went through it.
// Tearing down a stitched view of a handle while a write through the handle's other mapping is pending is
// not a hazard; unmapping that other mapping is; a Release while a mapping remains frees nothing and races
// nothing (issue 14 item 8).
func TestHazardsPerAddressRange(t *testing.T) {
	d := NewDevice(DeviceConfig{})
	s, err := d.CreateStream()
	require.NoError(t, err)
	h, err := d.Create(4 * mib)
	require.NoError(t, err)
	primary := mapAccess(t, d, h, 4*mib)
	view := mapAccess(t, d, h, 4*mib)
	require.NoError(t, d.Memset(primary.Add(mib), 8, 1, s)) // pending on s, through the primary mapping
	require.NoError(t, d.Unmap(view, 4*mib))
	require.Empty(t, d.Hazards(), "the view's teardown races nothing: the pending write went through the primary mapping")
	require.NoError(t, d.HazardError())
	require.NoError(t, d.Release(h))
	require.Empty(t, d.Hazards(), "h is still mapped: Release frees nothing")
	require.NoError(t, d.Unmap(primary, 4*mib))
	hz := d.Hazards()
	require.Len(t, hz, 1)
	require.Equal(t, Hazard{Call: vmm.CallUnmap, Handle: h, VA: vmm.Range{Base: primary, Size: 4 * mib}, Stream: s, Pending: 1}, hz[0])
	err = d.HazardError()
	require.ErrorIs(t, err, ErrHazard)
	require.Contains(t, err.Error(), primary.String())
}
