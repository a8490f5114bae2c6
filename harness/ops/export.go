package ops

import (
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
)

// The Env's judges of the query ops (largest, snapshot, reset-peak, reset-acc) for a checker that runs no Env:
// the campaign (fuzz.RunCampaign), many goroutines on one engine, runs each query with every worker paused and
// judges it here, by the same code as ops.Env.

// JudgeLargest is INV-LARGEST: LargestCachedBlock's answer got against the View v of the same state (pooled:
// private pools in play).
func JudgeLargest(v spec.View, got uint64, pooled bool) []spec.Violation {
	return judgeLargest(v, got, pooled)
}

// JudgeReset is INV-TORCHSTATS's reset model right after a reset-peak or reset-acc (OpResetPeak, OpResetAcc):
// got is TorchStats and after the View right after it. Other kinds: nil.
func JudgeReset(k OpKind, got impl.DeviceStats, after spec.View) []spec.Violation {
	var j torchStatsJudge
	return j.reset(k, got, after, 0 /* held: only the judge's model of later steps reads it */)
}

// JudgeSnapshotQuery is INV-SNAPSHOT's judgement of the snapshot op: first is what a Snapshot of a just
// returned; a second and a third must show the same, whatever is written into first's slices.
func JudgeSnapshotQuery(a *impl.Allocator, first impl.Snapshot) []spec.Violation {
	return (&Env{A: a}).judgeSnapshotQuery(first)
}

// StatsModel is what INV-TORCHSTATS remembers of the run (the explorer's state hash covers it in a universe
// with the reset moves): for each value the highest Current seen after a step since the last reset-peak, its
// Current at the last reset-acc, and the physical handles held then.
func (e *Env) StatsModel() (seen, base impl.DeviceStats, heldBase int) {
	return e.torch.seen, e.torch.base, e.torch.heldBase
}
