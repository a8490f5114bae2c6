package ops

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// segEventsJudge judges INV-SEGEVENTS: the segment events the engine records (impl.Allocator's
// RecordSegmentEvents and TakeSegmentEvents: what PyTorch's memory history and its allocator trace hooks are
// given, through the C library's event hook) replay, in order, to exactly the memory memory_snapshot() shows
// mapped after every step, each range on the stream and pool of the segment that shows it; a map never
// covers memory already mapped, an unmap only memory mapped; SegmentEventsPending says whether events wait,
// and nothing waits right after they are taken.
//
// The judge keeps its own replay of the events (runs), not the engine's: it learns the mapped memory from
// the events alone and compares it with the snapshot, which the engine builds from its blocks.
type segEventsJudge struct {
	on bool // recording was switched on at NewEnv (not through the C library, whose hook takes the events)
	// runs: the mapped memory the events say, as disjoint ranges by address, each with the stream and pool of
	// the map event that made it. Invariant: sorted by lo, no two overlap, lo < hi.
	// After a disagreement the runs are reset from the snapshot: one report per disagreement, not one per
	// later step.
	runs []segRun
}

// segRun is a range of mapped memory [lo, hi) and the stream and pool its map event named.
type segRun struct {
	lo, hi uint64
	stream vmm.Stream
	pool   impl.PoolID
}

// apply replays the events evs (oldest first) into the runs and returns what was wrong with them.
func (j *segEventsJudge) apply(evs []impl.SegmentEvent) []string {
	var errs []string
	for _, ev := range evs {
		lo, hi := uint64(ev.Addr), uint64(ev.Addr)+ev.Size
		if ev.Size == 0 {
			errs = append(errs, fmt.Sprintf("a %s event of 0 bytes at %v", segAction(ev.Action), ev.Addr))
			continue
		}
		switch ev.Action {
		case impl.SegmentMap:
			i, _ := slices.BinarySearchFunc(j.runs, lo, func(r segRun, p uint64) int { return cmp.Compare(r.lo, p) })
			if i > 0 && j.runs[i-1].hi > lo || i < len(j.runs) && j.runs[i].lo < hi {
				errs = append(errs, fmt.Sprintf("a map event for %v (%s) over memory the events say is mapped already", ev.Addr, vmm.FormatBytes(ev.Size)))
				j.unmap(lo, hi) // replace, so that the replay follows the engine
			}
			i, _ = slices.BinarySearchFunc(j.runs, lo, func(r segRun, p uint64) int { return cmp.Compare(r.lo, p) })
			j.runs = slices.Insert(j.runs, i, segRun{lo, hi, ev.Stream, ev.Pool})
		case impl.SegmentUnmap:
			if !j.covered(lo, hi) {
				errs = append(errs, fmt.Sprintf("an unmap event for %v (%s) over memory the events do not say is mapped", ev.Addr, vmm.FormatBytes(ev.Size)))
			}
			j.unmap(lo, hi)
		default:
			errs = append(errs, fmt.Sprintf("an event of action %d at %v, no SegmentAction", ev.Action, ev.Addr))
		}
	}
	return errs
}

// covered reports whether the runs map every byte of [lo, hi).
func (j *segEventsJudge) covered(lo, hi uint64) bool {
	at := lo
	for _, r := range j.runs {
		if r.hi <= at {
			continue
		}
		if r.lo > at {
			return false
		}
		at = r.hi
		if at >= hi {
			return true
		}
	}
	return at >= hi
}

// unmap removes [lo, hi) from the runs, cutting the runs it overlaps.
func (j *segEventsJudge) unmap(lo, hi uint64) {
	out := j.runs[:0:0]
	for _, r := range j.runs {
		if r.hi <= lo || r.lo >= hi {
			out = append(out, r)
			continue
		}
		if r.lo < lo {
			out = append(out, segRun{r.lo, lo, r.stream, r.pool})
		}
		if r.hi > hi {
			out = append(out, segRun{hi, r.hi, r.stream, r.pool})
		}
	}
	j.runs = out
}

// fromSnapshot returns the mapped memory snap shows, as runs by address.
func fromSnapshot(snap impl.TorchSnapshot) []segRun {
	var out []segRun
	for _, s := range snap.Segments {
		out = append(out, segRun{uint64(s.Addr), uint64(s.Addr) + s.Size, s.Stream, s.Pool})
	}
	slices.SortFunc(out, func(x, y segRun) int { return cmp.Compare(x.lo, y.lo) })
	return out
}

// coalesce joins the runs that touch and name the same stream and pool: the events map an arena's run in
// stretches and unmap it chunk by chunk, the snapshot shows it whole.
func coalesce(rs []segRun) []segRun {
	var out []segRun
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].hi == r.lo && out[n-1].stream == r.stream && out[n-1].pool == r.pool {
			out[n-1].hi = r.hi
			continue
		}
		out = append(out, r)
	}
	return out
}

// check takes the events a recorded during a step and judges them against the snapshot snap taken after it
// (nil in light mode: the events are replayed, not judged).
func (j *segEventsJudge) check(a *impl.Allocator, snap *impl.TorchSnapshot) []spec.Violation {
	if !j.on {
		return nil
	}
	pending := a.SegmentEventsPending()
	evs := a.TakeSegmentEvents()
	return j.judge(pending, evs, a.SegmentEventsPending(), snap)
}

// judge judges one step's events evs, the SegmentEventsPending answers before (pending) and right after
// (after) they were taken, and the snapshot snap taken after the step (nil: replay only).
func (j *segEventsJudge) judge(pending bool, evs []impl.SegmentEvent, after bool, snap *impl.TorchSnapshot) []spec.Violation {
	var errs []string
	if pending != (len(evs) > 0) {
		errs = append(errs, fmt.Sprintf("SegmentEventsPending said %v with %d events to take", pending, len(evs)))
	}
	if after {
		errs = append(errs, "SegmentEventsPending says events wait right after TakeSegmentEvents took them")
	}
	errs = append(errs, j.apply(evs)...)
	if snap != nil {
		want := coalesce(fromSnapshot(*snap))
		if got := coalesce(j.runs); !slices.Equal(got, want) {
			errs = append(errs, fmt.Sprintf("the segment events replay to mapped memory %s, memory_snapshot() shows %s", formatRuns(got), formatRuns(want)))
			j.runs = want
		}
	}
	if snap == nil || len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvSegEvents, Msg: strings.Join(errs, "; ")}}
}

func formatRuns(rs []segRun) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%v+%s s%d p%d.%d", vmm.DevicePtr(r.lo), vmm.FormatBytes(r.hi-r.lo), r.stream, r.pool.A, r.pool.B)
	}
	return strings.Join(parts, ", ")
}

func segAction(a impl.SegmentAction) string {
	if a == impl.SegmentUnmap {
		return "unmap"
	}
	return "map"
}
