package spec

import (
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// INV-TORCH, gmlake-paper's large pool: GLake's should_split splits the rest off a free block when it is at least
// one 2 MiB piece (kGranularity), requests rounded up to whole pieces; a block next to a pending one is not
// judged (it may merge during the call), nor a small request (PyTorch's rule, CheckTorch).
func TestCheckPaperSplit(t *testing.T) {
	const piece = 2 * mb
	base := vmm.DevicePtr(0x7f00_0000_0000)
	free := Block{ID: 1, State: BlockFree, Range: vmm.Range{Base: base, Size: 12 * mb}}
	view := func(bs ...Block) View { return View{Blocks: bs} }
	live := func(size uint64) Block {
		return Block{ID: 1, State: BlockLive, Range: vmm.Range{Base: base, Size: size}}
	}
	pending := Block{ID: 2, State: BlockPending, Range: vmm.Range{Base: base.Add(12 * mb), Size: piece}}
	for _, c := range []struct {
		name   string
		before View
		size   uint64
		got    uint64
		bad    bool
	}{
		{"a rest of one piece is split off", view(free), 10 * mb, 10 * mb, false},
		{"a rest of one piece kept", view(free), 10 * mb, 12 * mb, true},
		{"a request rounded up to the whole block", view(free), 11*mb + 1, 12 * mb, false},
		{"a rest of two pieces kept", view(free), 8 * mb, 12 * mb, true},
		{"next to a pending block: not judged", view(free, pending), 10 * mb, 12 * mb, false},
		{"a small request: PyTorch's rule", view(free), 1 * mb, 12 * mb, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs := CheckPaperSplit(c.before, view(live(c.got)), base, c.size, piece)
			if bad := len(vs) > 0; bad != c.bad {
				t.Fatalf("flagged %v, want %v: %v", bad, c.bad, vs)
			}
			if c.bad && vs[0].Inv != InvTorch {
				t.Fatalf("want %s, got %v", InvTorch, vs)
			}
		})
	}
}
