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
	case alloc && err != nil && errors.Is(err, vmm.ErrOutOfMemory) && !otherCallFailed(err):
		if dr != 1 || do != 1 {
			want = "an Alloc that fails with out of memory released the cache and retried once (num_alloc_retries +1) and raised once (num_ooms +1)"
		}
	case alloc && otherCallFailed(err):
		// A driver call that allocates nothing (a stream or event query) answered out of memory: the engine
		// may fail at once or after its retry; it raised at most once.
		if dr < 0 || dr > 1 || do < 0 || do > 1 {
			want = "an Alloc failed by a driver call that allocates nothing retries at most once and raises at most once"
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

// otherCallFailed reports whether err is a driver call's failure other than cuMemCreate's or cuMemAddressReserve's
// (the calls whose out of memory is the device's): a CUDA_ERROR_OUT_OF_MEMORY from cuStreamQuery, say, is a
// driver error that PyTorch raises as it comes, not the allocator's out of memory after a retry.
func otherCallFailed(err error) bool {
	var ce *vmm.CallError
	return errors.As(err, &ce) && ce.Call != vmm.CallCreate && ce.Call != vmm.CallReserve
}
