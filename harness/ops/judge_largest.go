package ops

import (
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeLargest judges LargestCachedBlock's answer got (INV-LARGEST, PyTorch's cacheInfo) from the View v taken
// in the same state, without the engine's code: which blocks count is computed here from the blocks, their
// states and the mappings.
//
// What counts (impl/torchapi.go's contract, PyTorch's cache_info_aux over the device's large and small pools):
// a free pBlock of the default pool, of any stream, either size pool (PyTorch's pools hold exactly the free
// blocks; a pending block, waiting for another stream's work, is not in them); or a cached (free) stitched
// block all of whose chunks lie in free pBlocks usable on its stream, since an allocation of its stream
// gets it whole without new memory. A pBlock under a live allocation, or held by a live stitched block,
// never counts, nor does a stitched block over a chunk such a pBlock holds.
//
// The View does not say everything the engine decides this with, so the judge brackets the answer:
//   - at least the largest free pBlock, and the largest free stitched block whose chunks lie in free pBlocks of
//     its own stream (surely usable there: stream order) — unless private pools are in play (pooled), whose
//     free blocks the View does not tell apart and which do not count;
//   - exactly the size of some free pBlock, or of a free stitched block none of whose chunks lies in a live
//     pBlock, or 0 when there is none (a chunk pending for another stream may have become usable: the View
//     does not show the fences that say so).
func judgeLargest(v spec.View, got uint64, pooled bool) []spec.Violation {
	var lower uint64
	allowed := []uint64{0}
	// home: each handle's mapping outside every stitched block (its pBlock's), by handle.
	var views []vmm.Range // the stitched blocks' ranges
	for _, b := range v.Blocks {
		if b.Stitched {
			views = append(views, b.Range)
		}
	}
	stitched := func(va vmm.DevicePtr) bool {
		return slices.ContainsFunc(views, func(r vmm.Range) bool { return r.Contains(va) })
	}
	home := map[vmm.Handle]vmm.Range{}
	if len(views) > 0 {
		for _, m := range v.Mappings {
			if !stitched(m.VA.Base) {
				home[m.Handle] = m.VA
			}
		}
	}
	under := func(r vmm.Range) *spec.Block { // the pBlock whose range holds r wholly
		for i := range v.Blocks {
			b := &v.Blocks[i]
			if !b.Stitched && b.Range.Base <= r.Base && r.Limit() <= b.Range.Limit() {
				return b
			}
		}
		return nil
	}
	for _, b := range v.Blocks {
		if b.State != spec.BlockFree {
			continue
		}
		if !b.Stitched {
			lower = max(lower, b.Range.Size)
			allowed = append(allowed, b.Range.Size)
			continue
		}
		sure, possible := true, true
		for _, m := range v.Mappings {
			if !b.Range.Contains(m.VA.Base) {
				continue
			}
			h, ok := home[m.Handle]
			var pb *spec.Block
			if ok {
				pb = under(h)
			}
			switch {
			case pb == nil:
				sure = false
			case pb.State == spec.BlockLive:
				sure, possible = false, false
			case pb.State != spec.BlockFree || pb.Stream != b.Stream:
				sure = false
			}
		}
		if possible {
			allowed = append(allowed, b.Range.Size)
		}
		if sure {
			lower = max(lower, b.Range.Size)
		}
	}
	var msg string
	switch {
	case !pooled && got < lower:
		msg = fmt.Sprintf("LargestCachedBlock() = %s, below %s: a free block of the default pool that size is cached", vmm.FormatBytes(got), vmm.FormatBytes(lower))
	case !slices.Contains(allowed, got):
		slices.Sort(allowed)
		msg = fmt.Sprintf("LargestCachedBlock() = %d, the size of no cached block an allocation could get whole (free pBlocks and stitched blocks over no live chunk: %v)", got, slices.Compact(allowed))
	}
	if msg == "" {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvLargest, Msg: msg}}
}
