package ops

import (
	"errors"
	"fmt"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// retriesJudge judges INV-RETRIES (spec/SPEC.md): PyTorch's num_ooms and num_alloc_retries move only as
// CUDACachingAllocator's malloc moves them. An Alloc that fails with out of memory released the cache and
// retried first (alloc_block(isRetry) counts num_alloc_retries) and then raised (num_ooms): both rise by one.
// Any other Alloc retried at most once and raised nothing; any other op counts neither. It is judged from
// the op and its answer alone, not from what the engine says it did.
type retriesJudge struct {
	// retries, ooms: num_alloc_retries and num_ooms after the last step (zero at the start and right after
	// reset-acc, which INV-TORCHSTATS judges zero).
	retries, ooms int64
	_             struct{}
}

// note moves the judge to got without judging (light replays, reset-acc, a serving layer).
func (j *retriesJudge) note(got impl.DeviceStats) {
	j.retries, j.ooms = got.NumAllocRetries, got.NumOOMs
}

// check judges the counters got after op answered err. Through a serving layer one Alloc of the ops may be
// several of the engine's (its sync-and-retry), so the caller notes instead.
func (j *retriesJudge) check(op Op, err error, got impl.DeviceStats) []spec.Violation {
	dr, do := got.NumAllocRetries-j.retries, got.NumOOMs-j.ooms
	j.note(got)
	if op.Kind == OpResetAcc {
		return nil
	}
	alloc := op.Kind == OpAlloc // with a pool or not
	var want string
	switch {
	case alloc && err != nil && errors.Is(err, vmm.ErrOutOfMemory):
		if dr != 1 || do != 1 {
			want = "an Alloc that fails with out of memory released the cache and retried once (num_alloc_retries +1) and raised once (num_ooms +1)"
		}
	case alloc:
		if dr < 0 || dr > 1 || do != 0 {
			want = "an Alloc that does not fail with out of memory retries at most once and raises no out of memory"
		}
	default:
		if dr != 0 || do != 0 {
			want = "only an Alloc retries or runs out of memory"
		}
	}
	if want == "" {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvRetries, Msg: fmt.Sprintf("%v (err %v): num_alloc_retries %+d, num_ooms %+d; %s",
		op, err, dr, do, want)}}
}
