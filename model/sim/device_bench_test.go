package sim

import (
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// BenchmarkDeviceMapCycle measures one reserve/create/map/set-access/unmap/release/free cycle with n other
// mappings live, to show the cost does not grow with the number of mappings (btree, O(log n)).
func BenchmarkDeviceMapCycle(b *testing.B) {
	for _, n := range []int{10, 100_000} {
		b.Run(map[int]string{10: "live=10", 100_000: "live=100k"}[n], func(b *testing.B) {
			d := NewDevice(DeviceConfig{Capacity: 1 << 50})
			for i := 0; i < n; i++ {
				h, err := d.Create(2 * mib)
				if err != nil {
					b.Fatal(err)
				}
				p, _ := d.Reserve(2 * mib)
				if err := d.Map(p, 2*mib, h, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h, _ := d.Create(4 * mib)
				p, _ := d.Reserve(4 * mib)
				if err := d.Map(p, 4*mib, h, 0); err != nil {
					b.Fatal(err)
				}
				if err := d.SetAccess(p, 4*mib); err != nil {
					b.Fatal(err)
				}
				if err := d.Unmap(p, 4*mib); err != nil {
					b.Fatal(err)
				}
				_ = d.Release(h)
				_ = d.FreeAddress(p, 4*mib)
			}
		})
	}
}

// BenchmarkDeviceStreamOps measures launch/record/query/complete, the replay's event traffic.
func BenchmarkDeviceStreamOps(b *testing.B) {
	d := NewDevice(DeviceConfig{})
	e, _ := d.CreateEvent()
	for i := 0; i < b.N; i++ {
		d.Launch(vmm.DefaultStream)
		_ = d.RecordEvent(e, vmm.DefaultStream)
		_, _ = d.QueryEvent(e)
		d.Complete(vmm.DefaultStream)
	}
}
