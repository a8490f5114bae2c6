package spec

// INV-EMPTIED (SPEC.md): what a successful EmptyCache leaves behind.

import (
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// Idle reports whether every unit of work the test launched has completed, on every stream.
func (h *History) Idle() bool {
	for s := range h.launched {
		if h.Pending(s) > 0 {
			return false
		}
	}
	return true
}

// CheckEmptied is INV-EMPTIED, over the View after an EmptyCache that returned no error. EmptyCache returns
// the cached memory that no live allocation and no pending stream work needs (SPEC.md, the calls), and a
// driver call it could not make is an error it reports; so after it succeeded:
//   - always: no reservation of the allocator is left with nothing mapped in it (an address range that holds
//     no memory is needed by nobody; a failed cuMemAddressFree must be reported, not kept quietly);
//   - when quiet (every stream's work completed, and no fault armed on a call that
//     tells the engine whether work completed: KeepsCache; a failed unmap or release must be reported),
//     for the policies whose EmptyCache is PyTorch's release_cached_blocks extended to stitched blocks
//     (gmlake, caching, expandable; gmlake-paper collects its sBlocks by GLake's own rules): no cached
//     (free) stitched block remains; under caching no fixed segment is all free blocks (cudaFree of every
//     unsplit free segment); under the arena policies (gmlake, expandable) no physical handle's primary mapping
//     lies wholly in free blocks (unmap_block of every free page).
//
// The memory of the private pools that live (kept: PoolChecker.Kept) is theirs, not the cache's (INV-POOL):
// their segments, arenas and stitched blocks are left out; everything else is judged.
func CheckEmptied(after View, idle bool, armed []vmm.CallKind, kept PoolMemory) []Violation {
	quiet := idle
	for _, k := range armed {
		quiet = quiet && !KeepsCache(k)
	}
	var out []Violation
	var resv []vmm.Range // the reservations judged: the allocator's, but the living pools'
	for _, r := range after.Reservations {
		if !kept.holds(r, overlappingDev(after.Device.Mappings, r)) {
			resv = append(resv, r)
		}
	}
	sort.Slice(resv, func(i, j int) bool { return resv[i].Base < resv[j].Base })
	for _, r := range resv {
		if len(overlappingDev(after.Device.Mappings, r)) == 0 {
			out = append(out, violation(InvEmptied, "EmptyCache succeeded but left reservation %v (%s) with nothing mapped in it",
				r, vmm.FormatBytes(r.Size)))
		}
	}
	if !quiet {
		return out
	}
	fixed := after.Policy == "caching"
	if !fixed && after.Policy != "gmlake" && after.Policy != "expandable" {
		return out
	}
	resOf := func(p vmm.DevicePtr) int {
		i := sort.Search(len(resv), func(i int) bool { return resv[i].Limit() > p })
		if i < len(resv) && resv[i].Contains(p) {
			return i
		}
		return -1
	}
	// The pBlocks of each reservation, in address order.
	blocks := map[int][]Block{}
	for _, b := range after.Blocks {
		if resOf(b.Range.Base) < 0 {
			continue // a living pool's (or outside every reservation: INV-BLOCKS's to judge)
		}
		if b.Stitched {
			if b.State == BlockFree {
				out = append(out, violation(InvEmptied, "EmptyCache succeeded with every stream idle but left the cached stitched block %d %v",
					b.ID, b.Range))
			}
			continue
		}
		if i := resOf(b.Range.Base); i >= 0 {
			blocks[i] = append(blocks[i], b)
		}
	}
	idx := make([]int, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		bs := blocks[i]
		sort.Slice(bs, func(x, y int) bool { return bs[x].Range.Base < bs[y].Range.Base })
		if fixed {
			allFree := true
			for _, b := range bs {
				allFree = allFree && b.State == BlockFree
			}
			if allFree {
				out = append(out, violation(InvEmptied, "EmptyCache succeeded with every stream idle but kept the free segment %v (%s)",
					resv[i], vmm.FormatBytes(resv[i].Size)))
			}
			continue
		}
		// Arenas: a primary mapping lying wholly in free blocks is memory nobody needs.
		for _, m := range overlappingDev(after.Device.Mappings, resv[i]) {
			if inFreeBlocks(bs, m.VA) {
				out = append(out, violation(InvEmptied, "EmptyCache succeeded with every stream idle but kept handle %d mapped at %v, wholly in free blocks",
					m.Handle, m.VA))
			}
		}
	}
	return out
}

// KeepsCache reports whether a failure of driver call k may rightly leave cached memory in place with no
// error: the calls through which the engine learns that stream work completed (an event it cannot create,
// record or query, a stream it cannot query): not knowing, it must keep the memory. A failed unmap, release
// or address free is different: EmptyCache reports it.
func KeepsCache(k vmm.CallKind) bool {
	switch k {
	case vmm.CallCreateEvent, vmm.CallRecordEvent, vmm.CallQueryEvent, vmm.CallStreamQuery, vmm.CallStreamWaitEvent:
		return true
	}
	return false
}

// inFreeBlocks reports whether the blocks bs (sorted, one reservation's) cover r with free blocks only.
func inFreeBlocks(bs []Block, r vmm.Range) bool {
	cur := r.Base
	for _, b := range bs {
		if b.Range.Limit() <= cur {
			continue
		}
		if b.Range.Base > cur || b.State != BlockFree {
			return false
		}
		cur = b.Range.Limit()
		if cur >= r.Limit() {
			return true
		}
	}
	return false
}
