package impl

import (
	"math/rand"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// TestPtrTableIsAMap: after every set, del and get of random block starts (clustered, so probe runs collide and
// wrap), the table answers as a Go map does, its count is the map's, ranging yields exactly the map's entries,
// and every key sits in its probe run (no empty slot between its home and its slot).
func TestPtrTableIsAMap(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var tab ptrTable
		want := map[vmm.DevicePtr]*block{}
		blocks := make([]block, 64)
		span := 1 + rng.Intn(4096)
		key := func() vmm.DevicePtr { return vmm.DevicePtr(0x7f0000000000 + 512*uint64(1+rng.Intn(span))) }
		for op := 0; op < 5000; op++ {
			p := key()
			switch r := rng.Intn(10); {
			case r < 5:
				b := &blocks[rng.Intn(len(blocks))]
				tab.set(p, b)
				want[p] = b
			case r < 8:
				tab.del(p)
				delete(want, p)
			case r < 9:
				if got := tab.get(p); got != want[p] {
					t.Fatalf("seed %d op %d: get(%#x) = %p, want %p (go test ./impl -run TestPtrTableIsAMap)", seed, op, uint64(p), got, want[p])
				}
			default:
				tab.clear()
				clear(want)
			}
			if tab.len() != len(want) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, tab.len(), len(want))
			}
		}
		seen := 0
		for p, b := range tab.all {
			seen++
			if want[p] != b {
				t.Fatalf("seed %d: range yields %#x -> %p, want %p", seed, uint64(p), b, want[p])
			}
		}
		if seen != len(want) {
			t.Fatalf("seed %d: range yields %d entries, want %d", seed, seen, len(want))
		}
		mask := len(tab.keys) - 1
		for i, k := range tab.keys {
			if k == 0 {
				continue
			}
			for j := tab.home(k); j != i; j = (j + 1) & mask {
				if tab.keys[j] == 0 {
					t.Fatalf("seed %d: key %#x at slot %d, an empty slot %d between it and its home %d", seed, uint64(k), i, j, tab.home(k))
				}
			}
		}
		if 2*tab.n > len(tab.keys) {
			t.Fatalf("seed %d: %d entries in %d slots: over half full", seed, tab.n, len(tab.keys))
		}
	}
}

// TestPtrTableEmpty: a zero table answers get and del without an array, and ranges over nothing.
func TestPtrTableEmpty(t *testing.T) {
	var tab ptrTable
	if tab.get(512) != nil || tab.len() != 0 {
		t.Fatal("empty table has an entry")
	}
	tab.del(512)
	for range tab.all {
		t.Fatal("empty table yields an entry")
	}
}
