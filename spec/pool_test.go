package spec

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// INV-POOL: the checker accepts a run that keeps a living pool's memory to itself and flags each way of
// breaking it: its handle serving the default pool, its range overlapped by another pool, its memory
// released while it lives. After the pool is released its memory may go anywhere.
func TestCheckPool(t *testing.T) {
	graph := PoolID{1, 7}
	base := vmm.DevicePtr(0x1000_0000)
	m := vmm.Range{Base: base, Size: 8 * mb}
	inGraph := PoolAlloc{Ptr: base, Size: 2 * mb, Pool: graph, Handles: []vmm.Handle{1}}
	start := PoolStep{Live: []PoolAlloc{inGraph}, Alive: []PoolID{graph}, Held: []vmm.Handle{1, 2}, Mapped: []vmm.Range{m}}
	for _, tc := range []struct {
		name string
		next PoolStep
		want string // "" = no violation
	}{
		{"own pool reuses its memory", PoolStep{Live: []PoolAlloc{{Ptr: base, Size: 1 * mb, Pool: graph, Handles: []vmm.Handle{1}}},
			Alive: []PoolID{graph}, Held: []vmm.Handle{1, 2}, Mapped: []vmm.Range{m}}, ""},
		{"default pool on the graph's handle", PoolStep{Live: []PoolAlloc{{Ptr: base.Add(4 * mb), Size: 2 * mb, Handles: []vmm.Handle{1}}},
			Alive: []PoolID{graph}, Held: []vmm.Handle{1, 2}, Mapped: []vmm.Range{m}}, "backed by handle 1 of living pool"},
		{"default pool on the graph's addresses", PoolStep{Live: []PoolAlloc{{Ptr: base.Add(1 * mb), Size: 2 * mb, Handles: []vmm.Handle{2}}},
			Alive: []PoolID{graph}, Held: []vmm.Handle{1, 2}, Mapped: []vmm.Range{m}}, "overlaps range"},
		{"graph's memory released while it lives", PoolStep{Alive: []PoolID{graph}, Held: []vmm.Handle{2},
			Mapped: []vmm.Range{{Base: base.Add(4 * mb), Size: 4 * mb}}}, "was released"},
		{"after release, anything goes", PoolStep{Live: []PoolAlloc{{Ptr: base, Size: 2 * mb, Handles: []vmm.Handle{1}}},
			Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c PoolChecker
			if v := c.Step(start); len(v) != 0 {
				t.Fatalf("first step: %v", v)
			}
			v := c.Step(tc.next)
			if tc.want == "" && len(v) != 0 {
				t.Fatalf("unexpected violations: %v", v)
			}
			if tc.want != "" && (len(v) == 0 || !strings.Contains(v[0].Msg, tc.want) || v[0].Inv != InvPool) {
				t.Fatalf("want a %s violation containing %q, got %v", InvPool, tc.want, v)
			}
		})
	}
}
