package ops

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeFence is INV-FENCE over the event records of one successful Free of the allocation at p (calls, the
// step's event and stream calls in call order) and the Views around it, under gmlake, caching and expandable:
// a Free records an event on a stream the allocation was not recorded on (a fence: the work its own stream
// was given so far, which another stream's reuse of the memory must wait for) at most once, on the stream it
// was allocated on, and only when the fence has something to cover: the freed block is pending after the step
// (its recorded streams still work; the fence stamps its own stream's last use, which came before the free),
// or it is free and one of the physical handles mapped under it (after it merged with its free neighbours)
// holds no live block, so that memory could be released or stitched once the fence completes. A fence anywhere else is one cuEventRecord more on
// the hot path of every free, which PyTorch's allocator never pays (impl/doc.go, the fence at a free).
//
// Handles are the units the judge counts, finer than the engine's for a fixed segment (which it fences only
// when no live block is left in the whole segment), so the judge never flags a fence the engine's rule
// records. A stitched block's free gives its parts back to other streams' pools and is not judged, nor is
// gmlake-paper (GLake records an event at every free: INV-PAPEREVENTS's churn).
func judgeFence(policy string, before, after spec.View, p vmm.DevicePtr, calls []streamCall) []spec.Violation {
	if policy == impl.PolicyGMLakePaper {
		return nil
	}
	i, ok := slices.BinarySearchFunc(before.Live, p, func(l spec.Alloc, p vmm.DevicePtr) int { return cmp.Compare(l.Ptr, p) })
	if !ok {
		return nil
	}
	l := before.Live[i]
	if b := blockByID(before, l.Block); b == nil || b.Stitched {
		return nil
	}
	var fences []vmm.Stream
	for _, c := range calls {
		if c.kind == vmm.CallRecordEvent && !slices.Contains(l.Uses, c.stream) {
			fences = append(fences, c.stream)
		}
	}
	if len(fences) == 0 {
		return nil
	}
	bad := func(format string, args ...any) []spec.Violation {
		return []spec.Violation{{Inv: spec.InvFence, Msg: fmt.Sprintf("Free(%v) (%s on stream %d, recorded on %v) recorded an event on stream(s) %v: ",
			p, vmm.FormatBytes(l.Size), l.Stream, l.Uses, fences) + fmt.Sprintf(format, args...)}}
	}
	if len(fences) > 1 {
		return bad("one fence covers every free so far; a free records at most one")
	}
	if fences[0] != l.Stream {
		return bad("a fence stands for the work of the stream the block was allocated on, not another's")
	}
	var freed *spec.Block // the free pBlock that holds p after the step: the freed block merged with its neighbours
	for k := range after.Blocks {
		if b := &after.Blocks[k]; !b.Stitched && b.Range.Contains(p) {
			freed = b
		}
	}
	switch {
	case freed == nil || freed.Range.Limit() < l.Range().Limit():
		return nil // its memory went back to the device within the step (a released private pool's): the View lost it
	case freed.State == spec.BlockPending:
		return nil // its own stream's last use came before the free: the fence stamps it, whenever the others finish
	case freed.State != spec.BlockFree:
		return bad("the block is %s after the free", freed.State)
	}
	for _, m := range after.Mappings {
		if m.VA.Overlaps(freed.Range) && !liveIn(after, m.VA) {
			return nil
		}
	}
	return bad("every handle under the freed block %v holds a live block still: nothing could be released or stitched when the fence completes", freed.Range)
}

// liveIn reports whether a live pBlock of v overlaps r.
func liveIn(v spec.View, r vmm.Range) bool {
	for _, b := range v.Blocks {
		if !b.Stitched && b.State == spec.BlockLive && b.Range.Overlaps(r) {
			return true
		}
	}
	return false
}

func blockByID(v spec.View, id uint64) *spec.Block {
	for k := range v.Blocks {
		if v.Blocks[k].ID == id {
			return &v.Blocks[k]
		}
	}
	return nil
}

// judgeFenceAfterWait is INV-FENCE's clause for an Alloc whose out-of-memory path waited for a stream
// (the bare engine's wait, F6: calls holds it as callSynchronize, in call order): the wait proved every free
// made on that stream so far complete, so no fence is recorded on it after the wait within the call (one
// would be a driver call, and on a stream given more work since, a wait for that work too). Not judged under
// gmlake-paper (GLake records events as it stitches) or while a free deferred by a capture may be flushed in
// the call (before, a block pending with no event outstanding: its records go on its streams).
func judgeFenceAfterWait(policy string, op Op, before spec.View, calls []streamCall) []spec.Violation {
	if policy == impl.PolicyGMLakePaper {
		return nil
	}
	if slices.ContainsFunc(before.Blocks, deferredFree) {
		return nil
	}
	waited := map[vmm.Stream]bool{}
	for _, c := range calls {
		switch {
		case c.kind == callSynchronize:
			waited[c.stream] = true
		case c.kind == vmm.CallRecordEvent && waited[c.stream]:
			return []spec.Violation{{Inv: spec.InvFence, Msg: fmt.Sprintf(
				"%v waited for stream %d on its out-of-memory path, then recorded an event on it: the wait proved every free on it so far complete",
				op, c.stream)}}
		}
	}
	return nil
}
