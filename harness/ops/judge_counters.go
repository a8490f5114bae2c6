package ops

import (
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeCounters judges INV-COUNTERS: the engine's operation counters (impl.Stats: NumAllocs, NumFrees,
// NumStitches, NumStitchReuses, NumStitchFrees, which the replay and conformance reports print and Go callers
// read) say what the ops did, judged from the op, its answer and the Views, not from the engine's other
// counters: a successful Alloc counts one allocation and any other op none; a successful Free one free and
// any other op none; an Alloc served by a stitched block the View before showed cached or pending (the same
// block, now live at the pointer returned) counts one stitched-block reuse, and any other step none; and the stitched
// blocks made so far less those torn down are the stitched blocks the View shows. prev are the counters
// after the previous step, now after this one; ran is false for an op the Env did not run.
func judgeCounters(op Op, ran bool, ptr vmm.DevicePtr, err error, before, after spec.View, haveBefore bool, prev, now impl.Stats) []spec.Violation {
	var errs []string
	free := op.Kind == OpFree || op.Kind == OpFreeInterior
	want := func(name string, got uint64, w uint64, why string) {
		if got != w {
			errs = append(errs, fmt.Sprintf("%s %+d, want %+d (%s)", name, int64(got), int64(w), why))
		}
	}
	one := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	ok := err == nil && ran // an op the Env refused (on a stream forgotten through the layer) called nothing
	want("NumAllocs", now.NumAllocs-prev.NumAllocs, one(op.Kind == OpAlloc && ok), "one per successful Alloc")
	want("NumFrees", now.NumFrees-prev.NumFrees, one(free && ok), "one per successful Free")
	if op.Kind != OpAlloc || haveBefore {
		reused := false
		if op.Kind == OpAlloc && ok {
			for _, b := range before.Blocks {
				if b.Stitched && b.State != spec.BlockLive && b.Range.Base == ptr { // cached, or pending until the Alloc's own processing of events
					if x := blockByID(after, b.ID); x != nil && x.Stitched && x.State == spec.BlockLive && x.Range.Base == ptr {
						reused = true
					}
				}
			}
		}
		want("NumStitchReuses", now.NumStitchReuses-prev.NumStitchReuses, one(reused), "one per Alloc a cached stitched block served")
	}
	if !after.Closed {
		n := uint64(0)
		for _, b := range after.Blocks {
			if b.Stitched {
				n++
			}
		}
		if made := now.NumStitches - min(now.NumStitches, now.NumStitchFrees); made != n || now.NumStitchFrees > now.NumStitches {
			errs = append(errs, fmt.Sprintf("NumStitches %d less NumStitchFrees %d, but the View shows %d stitched blocks", now.NumStitches, now.NumStitchFrees, n))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvCounters, Msg: fmt.Sprintf("after %v (err %v): %s", op, err, strings.Join(errs, "; "))}}
}
