package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// INV-POOLRETURN: once a private pool is released, a handle it owned that the allocator still holds must lie
// under a live or pending block (under its whole reservation when segments are released whole), or be owed
// (a mark, a capture or an armed fault since); every other is flagged, and a handle the pool still owns while
// it lives is not judged.
func TestPoolReturnedFlagsWhatAReleasedPoolKeeps(t *testing.T) {
	graph := PoolID{1, 7}
	base := vmm.DevicePtr(0x1000_0000)
	resv := vmm.Range{Base: base, Size: 8 * mb}
	h1 := vmm.Range{Base: base, Size: 2 * mb}             // handle 1
	h2 := vmm.Range{Base: base.Add(2 * mb), Size: 2 * mb} // handle 2
	view := func(blocks ...Block) View {
		return View{Blocks: blocks, Device: Device{
			Reservations: []vmm.Range{resv},
			Mappings:     []DevMapping{{VA: h1, Handle: 1, Accessible: true}, {VA: h2, Handle: 2, Accessible: true}},
			Handles:      []DevHandle{{Handle: 1, Size: 2 * mb, Mappings: 1}, {Handle: 2, Size: 2 * mb, Mappings: 1}},
		}}
	}
	free := func(r vmm.Range) Block { return Block{ID: 1, State: BlockFree, Range: r} }
	live := func(r vmm.Range) Block { return Block{ID: 2, State: BlockLive, Range: r} }
	pending := func(r vmm.Range) Block { return Block{ID: 3, State: BlockPending, Range: r} }
	mark := []Mark{{Phys: PhysRange{Handle: 2, Lo: 0, Hi: 2 * mb, VA: h2.Base}, VA: h2}}
	owned := PoolStep{Live: []PoolAlloc{{Ptr: base, Size: 4 * mb, Pool: graph, Handles: []vmm.Handle{1, 2}}},
		Alive: []PoolID{graph}, Held: []vmm.Handle{1, 2}, Mapped: []vmm.Range{resv}}
	released := PoolStep{Held: []vmm.Handle{1, 2}, Mapped: []vmm.Range{resv}}
	for _, tc := range []struct {
		name          string
		v             View
		marks         []Mark
		excuse, whole bool
		alive         bool
		want          []vmm.Handle // the handles flagged
	}{
		{"both free after the release", view(free(resv)), nil, false, false, false, []vmm.Handle{1, 2}},
		{"one still live", view(live(h1), free(h2)), nil, false, false, false, []vmm.Handle{2}},
		{"one still pending on its events", view(free(h1), pending(h2)), nil, false, false, false, []vmm.Handle{1}},
		{"one under a mark: owed to a later EmptyCache", view(free(resv)), mark, false, false, false, []vmm.Handle{1}},
		{"whole segments: a live block keeps the segment", view(live(h1), free(h2)), nil, false, true, false, nil},
		{"a capture or a fault excuses the step", view(free(resv)), nil, true, false, false, nil},
		{"the pool lives: INV-POOL's, not judged", view(free(resv)), nil, false, false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c PoolChecker
			c.Step(owned)
			next := released
			if tc.alive {
				next = owned
				next.Live = nil
			}
			c.Step(next)
			vs := c.Returned(tc.v, tc.marks, tc.excuse, tc.whole)
			if len(vs) != len(tc.want) {
				t.Fatalf("want %d violations (handles %v), got %v", len(tc.want), tc.want, vs)
			}
			for i, v := range vs {
				if v.Inv != InvPoolReturn || !strings.Contains(v.Msg, fmt.Sprintf("handle %d ", tc.want[i])) {
					t.Errorf("violation %d: want %s on handle %d, got %v", i, InvPoolReturn, tc.want[i], v)
				}
			}
			// What was owed stays owed after the mark is gone.
			if tc.marks != nil {
				if vs := c.Returned(tc.v, nil, false, tc.whole); len(vs) != len(tc.want) {
					t.Errorf("the next step forgot what was owed: %v", vs)
				}
			}
		})
	}
}
