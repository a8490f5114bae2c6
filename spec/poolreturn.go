package spec

// INV-POOLRETURN (SPEC.md): a released private pool returns its free memory at once.

import (
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// Returned judges INV-POOLRETURN over the View after a step, once Step has seen that step: a physical handle that
// a released private pool owned (it backed one of the pool's allocations) and that the allocator still holds must
// still be needed. It is needed while a live block lies on one of its mappings — on its whole reservation when the
// policy releases whole segments (cudaFree of an unsplit segment: wholeSegments) — or while it is owed later: a
// handle that was under a pending block (a free waiting for its recorded streams) or under a mark of the history
// (stream work that may still use it was pending at its free; the engine learns that work completed only by
// asking, at the next EmptyCache or out of memory, which INV-EMPTIED judges), or that was held during a step that
// ran while a stream captured (no event may be recorded or queried then) or with a fault armed (a failed unmap or
// release leaves memory held; a later call tries again). Everything else a released pool held returns to the
// device in the step that made it free: ReleasePool bringing the use count to 0 (PyTorch's ~MemPool: releasePool,
// then emptyCache of the pool) and each later Free of the pool's allocations.
//
// marks are the history's outstanding marks after the step; excuse says the step ran while a stream captured or a
// fault was armed. A handle of any pool under a pending block, or under a mark, is owed from then on (in-flight
// work used it: released at the next EmptyCache), until it is released.
func (c *PoolChecker) Returned(v View, marks []Mark, excuse, wholeSegments bool) []Violation {
	if c.owed == nil {
		c.owed = map[vmm.Handle]bool{}
	}
	for _, m := range marks {
		c.owed[m.Phys.Handle] = true
	}
	for h := range c.owed {
		if !v.holds(h) {
			delete(c.owed, h) // released: a handle of the same name later is another
		}
	}
	pools := make([]vmm.Handle, 0, len(c.owner)+len(c.parkedOwner))
	for h := range c.owner {
		pools = append(pools, h)
	}
	for h := range c.parkedOwner {
		pools = append(pools, h)
		if excuse {
			c.owed[h] = true
		}
	}
	anyPending := false
	for _, b := range v.Blocks {
		anyPending = anyPending || b.State == BlockPending
	}
	for _, h := range pools {
		if !anyPending {
			break
		}
		if _, pending := v.needs(h, wholeSegments); pending {
			c.owed[h] = true // in-flight work still uses it: returned once it completed (EmptyCache)
		}
	}
	if v.Closed {
		return nil
	}
	var out []Violation
	hs := make([]vmm.Handle, 0, len(c.parkedOwner))
	for h := range c.parkedOwner {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	for _, h := range hs {
		if c.owed[h] || !v.holds(h) {
			continue
		}
		if live, _ := v.needs(h, wholeSegments); !live {
			out = append(out, violation(InvPoolReturn,
				"handle %d of released pool %v is still held (mapped at %v) though no live block lies on it and nothing it waited for was pending",
				h, c.parkedOwner[h], v.mappedAt(h)))
		}
	}
	return out
}

// holds reports whether the allocator still holds handle h (the device has not released it).
func (v View) holds(h vmm.Handle) bool {
	i := sort.Search(len(v.Device.Handles), func(i int) bool { return v.Device.Handles[i].Handle >= h })
	return i < len(v.Device.Handles) && v.Device.Handles[i].Handle == h && !v.Device.Handles[i].Released
}

// needs reports whether a live block, and whether a pending block, lies on one of handle h's device mappings
// (anywhere in the mapping's reservation, with wholeSegments).
func (v View) needs(h vmm.Handle, wholeSegments bool) (live, pending bool) {
	for _, m := range v.Device.Mappings {
		if m.Handle != h {
			continue
		}
		r := m.VA
		if wholeSegments {
			for _, res := range v.Device.Reservations {
				if res.Overlaps(m.VA) {
					r = res
				}
			}
		}
		for _, b := range v.Blocks {
			if b.Range.Overlaps(r) {
				live = live || b.State == BlockLive
				pending = pending || b.State == BlockPending
			}
		}
	}
	return live, pending
}

// mappedAt returns the virtual ranges at which the device maps handle h.
func (v View) mappedAt(h vmm.Handle) []vmm.Range {
	var at []vmm.Range
	for _, m := range v.Device.Mappings {
		if m.Handle == h {
			at = append(at, m.VA)
		}
	}
	return at
}
