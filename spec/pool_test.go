package spec

import (
	"fmt"
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

// INV-POOL and INV-EMPTIED: a pool released while the allocator still holds its memory and created again
// under the same id takes that memory back (impl: it comes back to life with it): the checker parks what the
// released pool owned, gives back what is still held and mapped when it lives again (Kept reports it, so
// INV-EMPTIED leaves it out; another pool may not use it), and forgets what was released meanwhile.
func TestPoolCheckerParksReleasedPoolMemory(t *testing.T) {
	graph := PoolID{1, 7}
	base := vmm.DevicePtr(0x1000_0000)
	m := vmm.Range{Base: base, Size: 8 * mb}
	var c PoolChecker
	steps := []PoolStep{
		{Live: []PoolAlloc{{Ptr: base, Size: 2 * mb, Pool: graph, Handles: []vmm.Handle{1}}}, Alive: []PoolID{graph}, Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}},
		{Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}},                         // freed, then released: parked
		{Alive: []PoolID{graph}, Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}}, // created again: taken back
	}
	for i, s := range steps {
		if v := c.Step(s); len(v) != 0 {
			t.Fatalf("step %d: %v", i, v)
		}
		if k := c.Kept(); k.Handles[1] != (i != 1) {
			t.Fatalf("step %d: Kept says handle 1 is a living pool's: %v, want %v", i, k.Handles[1], i != 1)
		}
	}
	if v := c.Step(PoolStep{Live: []PoolAlloc{{Ptr: base.Add(4 * mb), Size: 2 * mb, Handles: []vmm.Handle{1}}},
		Alive: []PoolID{graph}, Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}}); len(v) == 0 || v[0].Inv != InvPool {
		t.Fatalf("the default pool on the revived pool's handle: want %s, got %v", InvPool, v)
	}
	var d PoolChecker
	d.Step(steps[0])
	d.Step(PoolStep{}) // released, and its memory returned
	if v := d.Step(PoolStep{Alive: []PoolID{graph}}); len(v) != 0 || len(d.Kept().Handles) != 0 || len(d.Kept().Ranges) != 0 {
		t.Fatalf("a pool created again after its memory returned owns nothing: %v, kept %v", v, d.Kept())
	}
}

// INV-POOL on a real driver: a released pool's segment is freed and, within the same call, its virtual
// range handed out again to a segment of the default pool (other handles); the pool created again under the
// same id takes back only what its own handles still map, so the default pool's allocation there is no
// violation. Its own handle still mapping the range is taken back, and then the overlap is one.
func TestCheckPoolRangeReusedByTheDriver(t *testing.T) {
	graph := PoolID{2, 1}
	base := vmm.DevicePtr(0x340600000)
	m := vmm.Range{Base: base, Size: 4 * mb}
	for _, tc := range []struct {
		name   string
		handle vmm.Handle // what maps m when the pool lives again
		want   string
	}{{"the range mapped by another handle", 9, ""}, {"the range still the pool's handle", 1, "overlaps range"}} {
		t.Run(tc.name, func(t *testing.T) {
			var c PoolChecker
			steps := []PoolStep{
				{Live: []PoolAlloc{{Ptr: base, Size: 2 * mb, Pool: graph, Handles: []vmm.Handle{1}}}, Alive: []PoolID{graph},
					Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}, MappedBy: []vmm.Handle{1}},
				{Held: []vmm.Handle{1}, Mapped: []vmm.Range{m}, MappedBy: []vmm.Handle{1}}, // released, still cached
				{Live: []PoolAlloc{{Ptr: base, Size: 3 * mb, Handles: []vmm.Handle{tc.handle}}}, Alive: []PoolID{graph},
					Held: []vmm.Handle{tc.handle}, Mapped: []vmm.Range{m}, MappedBy: []vmm.Handle{tc.handle}},
			}
			var v []Violation
			for _, st := range steps {
				v = c.Step(st)
			}
			if got := fmt.Sprint(v); tc.want == "" && len(v) != 0 || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("after the range came back: %v, want %q", v, tc.want)
			}
		})
	}
}
