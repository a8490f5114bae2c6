package impl

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// The pointer table holds only blocks that exist (live or cached), so host memory does not grow with the
// number of distinct pointers ever handed out (issue 14 item 2): alloc/free/EmptyCache rounds that each get a
// fresh address leave as many entries as there are blocks, and Snapshot lists exactly the live ones.
func TestPointerTableBoundedByBlocks(t *testing.T) {
	const rounds = 200_000
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 4<<30, true /* sync */)
			keep := mustAlloc(t, a, 3*MiB, vmm.DefaultStream) // one live block throughout
			n := rounds
			if testing.Short() {
				n = rounds / 10
			}
			for i := 0; i < n; i++ {
				p := mustAlloc(t, a, uint64(1+i%4)*MiB, vmm.DefaultStream)
				mustFree(t, a, p)
				if err := a.EmptyCache(); err != nil {
					t.Fatalf("round %d: EmptyCache: %v", i, err)
				}
			}
			blocks := a.countBlocks()
			if got := len(a.ptrs); got > blocks {
				t.Fatalf("after %d alloc/free/EmptyCache rounds the pointer table has %d entries for %d blocks (1 live)", n, got, blocks)
			}
			if s := a.Snapshot(); len(s.Live) != 1 || s.Live[0].Ptr != keep {
				t.Fatalf("Snapshot lists %d live allocations, want only %v", len(s.Live), keep)
			}
			// A second Free is still a double free while the block exists, and an error of the free kinds
			// once its memory went back to the device.
			p := mustAlloc(t, a, 5*MiB, vmm.DefaultStream)
			mustFree(t, a, p)
			if err := a.Free(p); !errors.Is(err, ErrDoubleFree) {
				t.Fatalf("second Free(%v) = %v, want %v", p, err, ErrDoubleFree)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if err := a.Free(p); !errors.Is(err, ErrDoubleFree) && !errors.Is(err, ErrUnknownPointer) {
				t.Fatalf("Free(%v) after EmptyCache = %v, want %v or %v", p, err, ErrDoubleFree, ErrUnknownPointer)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// countBlocks counts the block structs in use: every block of every segment (mapped or not) and every sBlock.
func (a *Allocator) countBlocks() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.sblocks)
	for _, seg := range a.segs {
		for b := seg.head; b != nil; b = b.next {
			n++
		}
	}
	return n
}
