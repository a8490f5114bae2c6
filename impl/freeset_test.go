package impl

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// TestFreeSetIsASortedSet: after every insert and remove of random blocks (sizes from a few values, so equal
// sizes order by address; runs that grow the set to thousands of blocks and shrink it again, so leaves split
// and merge), the set passes its invariant check and answers lowerBound, upperBelow, max and eachFrom (with an
// early stop) as a sorted slice of the same blocks does.
func TestFreeSetIsASortedSet(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewSource(seed))
		blocks := make([]pBlock, 3000)
		sizes := 1 + rng.Intn(40)
		for i := range blocks {
			b := &blocks[i]
			b.p = b
			b.id = uint64(i + 1)
			b.state, b.mapped, b.pool = Free, true, largePool
			b.size = vmm.Bytes(512 * (1 + rng.Intn(sizes)))
			b.ptr = vmm.DevicePtr(0x7f0000000000 + 512*uint64(i)*7)
		}
		fs := freeSet{pool: largePool}
		var want []*pBlock // sorted by (size, ptr)
		pos := func(size vmm.Bytes, ptr vmm.DevicePtr) int {
			i, _ := slices.BinarySearchFunc(want, size, func(b *pBlock, _ vmm.Bytes) int {
				switch {
				case less(b.size, b.ptr, &pBlock{block: block{size: size, ptr: ptr}}):
					return -1
				case b.size == size && b.ptr == ptr:
					return 0
				}
				return 1
			})
			return i
		}
		fail := func(op int, format string, args ...any) {
			t.Helper()
			args = append([]any{seed, op}, args...)
			t.Fatalf("seed %d op %d: "+format+" (go test ./impl -run TestFreeSetIsASortedSet)", args...)
		}
		grow := true
		for op := 0; op < 30000; op++ {
			if op%3000 == 0 {
				grow = !grow
			}
			b := &blocks[rng.Intn(len(blocks))]
			if insert := rng.Intn(10) < map[bool]int{true: 8, false: 2}[grow]; insert && !b.node.inSet {
				fs.insert(b)
				i := pos(b.size, b.ptr)
				want = slices.Insert(want, i, b)
			} else if !insert && b.node.inSet {
				fs.remove(b)
				want = slices.Delete(want, pos(b.size, b.ptr), pos(b.size, b.ptr)+1)
			}
			if err := fs.check(nil, largePool); err != nil {
				fail(op, "%v", err)
			}
			if fs.n != len(want) {
				fail(op, "%d blocks, want %d", fs.n, len(want))
			}
			size := vmm.Bytes(512 * rng.Intn(sizes+2))
			ptr := vmm.DevicePtr(0x7f0000000000 + 512*uint64(rng.Intn(7*len(blocks))))
			i := pos(size, ptr)
			var lb, ub, mx *pBlock
			if i < len(want) {
				lb = want[i]
			}
			if i > 0 {
				ub = want[i-1]
			}
			if len(want) > 0 {
				mx = want[len(want)-1]
			}
			if got := fs.lowerBound(size, ptr); got != lb {
				fail(op, "lowerBound(%s, %v) = %v, want %v", size, ptr, got, lb)
			}
			if got := fs.upperBelow(size, ptr); got != ub {
				fail(op, "upperBelow(%s, %v) = %v, want %v", size, ptr, got, ub)
			}
			if got := fs.max(); got != mx {
				fail(op, "max() = %v, want %v", got, mx)
			}
			if op%50 == 0 {
				stop := rng.Intn(len(want) + 1)
				var got []*pBlock
				fs.eachFrom(size, func(b *pBlock) bool {
					got = append(got, b)
					return len(got) < stop
				})
				from := want[pos(size, 0):]
				if len(from) > stop && stop > 0 {
					from = from[:stop]
				}
				if stop == 0 && len(from) > 0 {
					from = from[:1] // f is called once before it can say stop
				}
				if !slices.Equal(got, from) {
					fail(op, "eachFrom(%s) visits %d blocks, want %d", size, len(got), len(from))
				}
			}
		}
	}
}

// TestFreeSetAllocatesNothingOnceWarm: inserting and removing blocks in a set that held as many before
// allocates nothing, however many leaves the churn splits and merges (the hot path's 0 allocations a pair).
func TestFreeSetAllocatesNothingOnceWarm(t *testing.T) {
	blocks := make([]pBlock, 400)
	for i := range blocks {
		b := &blocks[i]
		b.p, b.id, b.state, b.mapped = b, uint64(i+1), Free, true
		b.size, b.ptr = vmm.Bytes(512*(1+i%5)), vmm.DevicePtr(0x7f0000000000+512*uint64(i))
	}
	var fs freeSet
	cycle := func() {
		for i := range blocks {
			fs.insert(&blocks[i])
		}
		for i := range blocks {
			fs.remove(&blocks[(i*7)%len(blocks)])
		}
	}
	cycle()
	if n := testing.AllocsPerRun(20, cycle); n != 0 {
		t.Fatalf("a warm cycle of %d inserts and removes allocates %.1f times", 2*len(blocks), n)
	}
}
