package ops

import (
	"fmt"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
)

// judgeSBlockCache judges INV-SBCACHE (spec/SPEC.md) after a successful Free under gmlake with no fault armed
// and no private pool in play: the stitched-block cache keeps up to its limit (Config.SBlockCache, default
// 256), and StitchFree tears down the least recently used cached stitched blocks only beyond it. So when a
// stitched block of the View before the Free is gone after it (a cached one, or the one the Free cached), at
// least the limit of cached stitched blocks remain.
func (e *Env) judgeSBlockCache(op Op, err error, before, after spec.View) []spec.Violation {
	if op.Kind != OpFree || err != nil || e.Cfg.Policy != impl.PolicyGMLake || e.faulty || e.pooled || len(e.capturing) > 0 {
		return nil
	}
	limit := e.Cfg.Knobs.SBlockCache
	switch {
	case limit < 0:
		return nil // no limit: nothing is torn down by it
	case limit == 0:
		limit = 256 // impl: gmlake's default
	}
	cached := func(v spec.View) map[uint64]bool {
		m := map[uint64]bool{}
		for _, b := range v.Blocks {
			if b.Stitched && b.State == spec.BlockFree {
				m[b.ID] = true
			}
		}
		return m
	}
	now := cached(after)
	kept := map[uint64]bool{}
	for _, b := range after.Blocks {
		kept[b.ID] = true
	}
	gone := 0
	for _, b := range before.Blocks {
		if b.Stitched && !kept[b.ID] { // torn down: a cached one, or the one this Free cached
			gone++
		}
	}
	if gone > 0 && len(now) < limit {
		return []spec.Violation{{Inv: spec.InvSBlockCache, Msg: fmt.Sprintf(
			"%v tore down %d cached stitched blocks, leaving %d cached under a limit of %d (StitchFree tears down only beyond it)",
			op, gone, len(now), limit)}}
	}
	return nil
}
