package spec

// INV-POOL (SPEC.md): private memory pools (CUDA graph pools) are never shared while they live.

import (
	"fmt"
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// PoolID names a memory pool (PyTorch's MempoolId_t); the zero value is the default pool, which always
// lives.
type PoolID [2]uint64

// PoolAlloc is one live allocation, with the pool it was asked from (as the caller knows it, not as the
// allocator labels it) and the physical handles backing its block.
type PoolAlloc struct {
	Ptr     vmm.DevicePtr
	Size    uint64
	Pool    PoolID
	Handles []vmm.Handle
}

// PoolStep is what INV-POOL sees after one call.
type PoolStep struct {
	Live   []PoolAlloc
	Alive  []PoolID     // the private pools whose use count is above 0
	Held   []vmm.Handle // every physical handle the allocator holds
	Mapped []vmm.Range  // every virtual range the allocator has mapped
	// MappedBy is the physical handle mapped at each range of Mapped (the same index; nil: not known). A
	// released pool's parked range is taken back only where its own handles still map it: a real driver
	// hands a freed virtual range out again, so within one call a released pool's segment may go and a
	// segment of another pool come at the same addresses.
	MappedBy []vmm.Handle
}

// PoolChecker checks INV-POOL over a run, one step at a time. It remembers, for each physical handle, the
// pool whose allocation it first backed (its owner, until the handle is released or the owner released),
// and, for each private pool that lives, the virtual ranges handed out from it. The zero value is ready.
type PoolChecker struct {
	owner map[vmm.Handle]PoolID
	va    map[PoolID][]vmm.Range
	// parked: what released pools owned that the allocator still holds (handles) and maps (ranges). A pool
	// created again under the same id takes back what is still parked (impl: a released pool whose memory
	// is still held comes back to life with it); while released, nothing parked constrains anyone.
	parkedOwner map[vmm.Handle]PoolID
	parkedVA    map[PoolID][]vmm.Range
	// owed: parked handles the allocator may keep until a later EmptyCache (INV-POOLRETURN, Returned):
	// stream work that may use them was pending, or a capture or an armed fault kept the engine from
	// returning them.
	owed map[vmm.Handle]bool
}

// Step checks one step and remembers what it handed out:
//   - no live allocation is backed by a handle owned by another pool that lives (not handed out, not
//     stitched into another pool's block);
//   - no live allocation of another pool overlaps the virtual ranges a living private pool handed out (a
//     CUDA graph replays at those addresses);
//   - a living private pool's handles stay held and its ranges stay mapped (not released by EmptyCache or
//     an out-of-memory of another pool).
func (c *PoolChecker) Step(s PoolStep) []Violation {
	if c.owner == nil {
		c.owner, c.va = map[vmm.Handle]PoolID{}, map[PoolID][]vmm.Range{}
		c.parkedOwner, c.parkedVA = map[vmm.Handle]PoolID{}, map[PoolID][]vmm.Range{}
	}
	alive := map[PoolID]bool{{}: true}
	for _, p := range s.Alive {
		alive[p] = true
	}
	held := map[vmm.Handle]bool{}
	for _, h := range s.Held {
		held[h] = true
	}
	mapped := mergeRanges(s.Mapped)
	// mappedFor is what pool p's parked ranges may be covered by: the ranges its own handles map.
	mappedFor := func(p PoolID) []vmm.Range {
		if len(s.MappedBy) != len(s.Mapped) {
			return mapped
		}
		var own []vmm.Range
		for i, r := range s.Mapped {
			if o, ok := c.parkedOwner[s.MappedBy[i]]; ok && o == p {
				own = append(own, r)
			}
		}
		return mergeRanges(own)
	}
	for p, rs := range c.va {
		if !alive[p] {
			c.parkedVA[p] = rs
			delete(c.va, p)
		}
	}
	for h, p := range c.owner {
		if !alive[p] {
			c.parkedOwner[h] = p
			delete(c.owner, h)
		}
	}
	for p, rs := range c.parkedVA { // what a released pool still maps: taken back if it lives again
		var keep []vmm.Range
		own := mappedFor(p)
		for _, r := range rs {
			if covered(own, r) {
				keep = append(keep, r)
			}
		}
		switch {
		case len(keep) == 0:
		case alive[p]:
			c.va[p] = mergeRanges(append(c.va[p], keep...))
		default:
			c.parkedVA[p] = keep
			continue
		}
		delete(c.parkedVA, p)
	}
	for h, p := range c.parkedOwner {
		switch {
		case !held[h]:
		case alive[p]:
			c.owner[h] = p
		default:
			continue
		}
		delete(c.parkedOwner, h)
	}
	var out []Violation
	for h, p := range c.owner {
		switch {
		case !held[h]:
			if p != (PoolID{}) {
				out = append(out, violation(InvPool, "handle %d of living pool %v was released", h, p))
			}
			delete(c.owner, h)
		}
	}
	for p, rs := range c.va {
		for _, r := range rs {
			if !covered(mapped, r) {
				out = append(out, violation(InvPool, "range %v handed out by living pool %v is no longer mapped", r, p))
			}
		}
	}
	for _, a := range s.Live {
		r := vmm.Range{Base: a.Ptr, Size: a.Size}
		for _, h := range a.Handles {
			if o, ok := c.owner[h]; ok && o != a.Pool {
				out = append(out, violation(InvPool, "allocation %v of pool %v is backed by handle %d of living pool %v",
					a.Ptr, a.Pool, h, o))
			}
		}
		for p, rs := range c.va {
			if p == a.Pool {
				continue
			}
			for _, x := range rs {
				if x.Base < r.Base.Add(r.Size) && r.Base < x.Base.Add(x.Size) {
					out = append(out, violation(InvPool, "allocation %v of pool %v overlaps range %v handed out by living pool %v",
						r, a.Pool, x, p))
				}
			}
		}
	}
	for _, a := range s.Live {
		if !alive[a.Pool] {
			continue // a released pool's allocation: it owns nothing any more
		}
		for _, h := range a.Handles {
			if _, ok := c.owner[h]; !ok {
				c.owner[h] = a.Pool
			}
		}
		if a.Pool != (PoolID{}) {
			c.va[a.Pool] = mergeRanges(append(c.va[a.Pool], vmm.Range{Base: a.Ptr, Size: a.Size}))
		}
	}
	return out
}

// PoolMemory is what the private pools that live keep (INV-POOL), as the caller's side learned it: the
// physical handles that backed their allocations and the virtual ranges they handed out. A segment or arena
// is a pool's when one of its mappings is such a handle or it overlaps such a range (every segment, arena
// and stitched block of a pool was made for one of the pool's requests). The zero value keeps nothing.
type PoolMemory struct {
	Handles map[vmm.Handle]bool
	Ranges  []vmm.Range // merged (mergeRanges)
}

// Kept returns the memory of the private pools living at the last Step (INV-EMPTIED judges the rest).
func (c *PoolChecker) Kept() PoolMemory {
	var k PoolMemory
	for h, p := range c.owner {
		if p != (PoolID{}) {
			if k.Handles == nil {
				k.Handles = map[vmm.Handle]bool{}
			}
			k.Handles[h] = true
		}
	}
	var rs []vmm.Range
	for _, r := range c.va {
		rs = append(rs, r...)
	}
	k.Ranges = mergeRanges(rs)
	return k
}

// holds reports whether reservation r, whose device mappings are ms, is a living pool's.
func (k PoolMemory) holds(r vmm.Range, ms []DevMapping) bool {
	for _, m := range ms {
		if k.Handles[m.Handle] {
			return true
		}
	}
	for _, x := range k.Ranges {
		if x.Overlaps(r) {
			return true
		}
	}
	return false
}

// mergeRanges returns rs sorted, overlapping and touching ranges merged.
func mergeRanges(rs []vmm.Range) []vmm.Range {
	s := append([]vmm.Range(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Base < s[j].Base })
	var out []vmm.Range
	for _, r := range s {
		if n := len(out); n > 0 && r.Base <= out[n-1].Base.Add(out[n-1].Size) {
			if end := r.Base.Add(r.Size); end > out[n-1].Base.Add(out[n-1].Size) {
				out[n-1].Size = uint64(end - out[n-1].Base)
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// covered reports whether r lies inside one range of merged.
func covered(merged []vmm.Range, r vmm.Range) bool {
	i := sort.Search(len(merged), func(i int) bool { return merged[i].Base.Add(merged[i].Size) > r.Base })
	return i < len(merged) && merged[i].Base <= r.Base && r.Base.Add(r.Size) <= merged[i].Base.Add(merged[i].Size)
}

func (p PoolID) String() string { return fmt.Sprintf("(%d, %d)", p[0], p[1]) }
