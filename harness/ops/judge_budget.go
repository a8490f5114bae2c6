package ops

import (
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// eventCall is one event call the engine made (cuEventRecord, cuEventQuery) or one wait for a stream (the
// bare engine's own, F6, or the serving layer's: callSynchronize), in call order: what INV-BUDGET judges.
type eventCall struct {
	kind   vmm.CallKind // vmm.CallRecordEvent, vmm.CallQueryEvent or callSynchronize
	ev     vmm.Event    // the event recorded or queried
	stream vmm.Stream   // the stream recorded on, or waited for
	done   bool         // a query's answer (complete); a wait's: it completed the stream's work
	err    error        // the driver's answer to a record or query
}

// budgetJudge is INV-BUDGET's record across steps: what the engine was told of each event it recorded.
type budgetJudge struct {
	evs map[vmm.Event]*evRecord
	rec uint64 // records seen so far: an event's place in the order of records
	// done[s]: the latest record (by place) on stream s whose query answered complete. Work on a stream
	// completes in order, so every event recorded on s at or before it has completed too.
	done map[vmm.Stream]doneMark
}

// evRecord is the latest record of one event.
type evRecord struct {
	stream   vmm.Stream
	rec      uint64 // its place in the order of records
	step     int    // the step that recorded it
	done     bool   // a query answered complete since
	doneStep int    // the step of that query
}

// doneMark is the latest record on a stream whose query answered complete: its place and the step that asked.
type doneMark struct {
	rec  uint64
	step int
}

// judge is INV-BUDGET (spec/SPEC.md) over one step's event calls and waits (calls, in call order), the Views
// around it, for a Free the pointer freed, and for an Alloc the device's call counts before and after it
// (countsOK: both are known). failedCalls: a driver call failed in the step. pooled: private pools are in play (a released pool's memory goes back as it
// frees). The rules, each a cost PyTorch's allocator keeps and the engine's design states (impl/doc.go: "the
// steady-state hot path makes no driver call"):
//
//   - Known complete is never asked again (every op): an event whose query answered complete is not queried
//     again until it is recorded again.
//   - On the hot path (an Alloc served from the memory the engine holds, a Free, a RecordStream, a capture
//     begin or end, ForgetStream and the queries), a stream's events are polled in order and its first
//     incomplete one ends its poll: once a query of an event recorded on stream s answered incomplete, no
//     event recorded on s at or after it is queried again in the op until a wait for s (the engine's own, F6,
//     or the serving layer's) made s progress (PyTorch's process_events keeps one queue per stream and
//     breaks at cudaErrorNotReady); and no event recorded on s before one that answered complete is queried
//     (a stream's work completes in order).
//   - An Alloc served from what the engine holds while no block waits for an event and no recorded event is
//     outstanding (not known complete: a fence may stamp the memory it takes) makes no driver call. The
//     parts of the Alloc's stream's own freed sBlocks, waiting only for that stream's work, do not count as
//     waiting: the stream may take them back at once, so reusing an sBlock stitched over another stream's
//     memory costs nothing either.
//   - A Free of a block no other stream used (no RecordStream), not stitched, that gives no memory back,
//     with no private pool in play, queries no event and waits for no stream (its fence is INV-FENCE's).
//
// Not judged by the hot-path rules: an Alloc that grows, stitches or releases (its miss path asks whether
// each candidate's last use completed, and its out-of-memory path polls again before the retry, where
// PyTorch waits for every event), EmptyCache, pool-release and Close. gmlake-paper is not judged: GLake
// records and queries a CUDA event per Block as it searches, splits and collects (INV-PAPEREVENTS).
func (j *budgetJudge) judge(policy string, step int, op Op, res StepResult, before, after spec.View, haveBefore, pooled, failedCalls bool,
	freed vmm.DevicePtr, callsBefore, callsAfter vmm.CallCounts, countsOK bool, calls []eventCall) []spec.Violation {
	if j.evs == nil {
		j.evs, j.done = map[vmm.Event]*evRecord{}, map[vmm.Stream]doneMark{}
	}
	// Before this step's calls: the streams with an event recorded and not known complete.
	fenced := j.outstanding()
	var out []spec.Violation
	bad := func(format string, args ...any) {
		if len(out) == 0 { // the first of the op's excess calls says it
			out = append(out, spec.Violation{Inv: spec.InvBudget, Msg: fmt.Sprintf("%v: ", op) + fmt.Sprintf(format, args...)})
		}
	}
	judged := policy != impl.PolicyGMLakePaper
	waits := 0
	for _, c := range calls {
		if c.kind == callSynchronize {
			waits++
		}
	}
	// hit: an Alloc served from what the engine holds, with no out-of-memory path on the way (no driver call
	// failed, no stream waited for: the serving layer's retry is one op of two engine calls).
	hit := op.Kind == OpAlloc && res.Err == nil && haveBefore && sameMemory(before, after) && waits == 0 && !failedCalls
	hot := judged && (hit || op.Kind != OpAlloc && op.Kind != OpEmptyCache && op.Kind != OpPoolRelease && op.Kind != OpClose)
	// stuck[s]: the earliest record (by place) on s that a query answered incomplete in this op since the
	// last wait for s.
	stuck := map[vmm.Stream]uint64{}
	queries := 0
	for _, c := range calls {
		switch c.kind {
		case callSynchronize:
			delete(stuck, c.stream)
		case vmm.CallRecordEvent:
			if c.err == nil {
				j.rec++
				j.evs[c.ev] = &evRecord{stream: c.stream, rec: j.rec, step: step}
			}
		case vmm.CallQueryEvent:
			queries++
			r := j.evs[c.ev]
			if r == nil || c.err != nil {
				continue // never recorded (complete by CUDA's rule), or the driver refused: nothing learnt
			}
			d, known := j.done[r.stream]
			switch m, ok := stuck[r.stream]; {
			case judged && r.done:
				bad("queried event %d (recorded on stream %d at step %d) again after its query answered complete at step %d, not recorded since: a completed event is never asked again",
					c.ev, r.stream, r.step, r.doneStep)
			case hot && known && r.rec < d.rec:
				bad("queried event %d (recorded on stream %d at step %d) after an event recorded later on that stream answered complete at step %d: a stream's work completes in order, so it has completed too",
					c.ev, r.stream, r.step, d.step)
			case hot && ok && r.rec >= m:
				bad("queried event %d (recorded on stream %d at step %d) after a query in this op answered that an event recorded on that stream no later was incomplete, with no wait for the stream between: it cannot have completed (a stream's poll ends at its first incomplete event)",
					c.ev, r.stream, r.step)
			}
			if c.done {
				r.done, r.doneStep = true, step
				if r.rec > d.rec {
					j.done[r.stream] = doneMark{rec: r.rec, step: step}
				}
			} else if m, ok := stuck[r.stream]; !ok || r.rec < m {
				stuck[r.stream] = r.rec
			}
		}
	}
	if !judged || res.Err != nil {
		return out
	}
	switch op.Kind {
	case OpAlloc:
		// A fence of the Alloc's own stream stamps nothing it must ask about (stream order); one of another
		// stream may stamp memory it takes.
		pend, other := pendingIn(before), len(fenced) > 0
		if l, ok := liveAt(after, res.Ptr); ok {
			pend = pendingFor(before, l.Stream)
			other = len(fenced) > 1 || len(fenced) == 1 && !fenced[l.Stream]
		}
		if !hit || !countsOK || pend || other {
			return out
		}
		var n uint64
		var kinds []string
		for k := range vmm.NumCallKinds {
			if k == vmm.CallMemset || k == vmm.CallRead { // the Env's own pattern writes and reads
				continue
			}
			if d := callsAfter[k] - callsBefore[k]; d > 0 {
				n += d
				kinds = append(kinds, fmt.Sprintf("%s x%d", k, d))
			}
		}
		if n > 0 {
			bad("served from the memory the engine holds while no block waits for an event it must ask about, yet made %d driver call(s) (%s): a cached allocation makes none",
				n, strings.Join(kinds, ", "))
		}
	case OpFree:
		l, ok := liveAt(before, freed)
		if !haveBefore || !ok || len(l.Uses) > 0 || pooled || !sameMemory(before, after) || (queries == 0 && waits == 0) {
			return out
		}
		if b := blockByID(before, l.Block); b == nil || b.Stitched {
			return out // caching a stitched block beyond the cache's limit asks whether the oldest one's use completed
		}
		bad("freed %s on stream %d that no other stream used (no RecordStream), yet queried %d event(s) and waited for %d stream(s): such a free asks the device nothing",
			vmm.FormatBytes(l.Size), l.Stream, queries, waits)
	}
	return out
}

// opCalls returns the event calls and waits of the op that just ran and the device's call counts after it,
// taken before the Env's own judges ask the engine anything (LargestCachedBlock, Snapshot, the statistics).
func (e *Env) opCalls() ([]eventCall, vmm.CallCounts) {
	var counts vmm.CallCounts
	if e.Dev != nil {
		counts = e.Dev.Counts()
	}
	if e.calls == nil {
		return nil, counts
	}
	return e.calls.events[:len(e.calls.events):len(e.calls.events)], counts
}

// liveAt returns v's live allocation at p.
func liveAt(v spec.View, p vmm.DevicePtr) (spec.Alloc, bool) {
	for _, l := range v.Live {
		if l.Ptr == p {
			return l, true
		}
	}
	return spec.Alloc{}, false
}

// outstanding returns the streams with an event the engine recorded (a fence at a free, a RecordStream's
// event) not known to have completed: no query answered complete since its record, and no later record of its
// stream did. A cached Alloc may have to ask such an event whether the memory it stamps may be reused on
// another stream (gmlake/deep: memory freed on s0 taken by s1 asks s0's fences), so the no-call rule holds
// only when none is outstanding on a stream other than the Alloc's.
func (j *budgetJudge) outstanding() map[vmm.Stream]bool {
	var out map[vmm.Stream]bool
	for _, r := range j.evs {
		if r.done {
			continue
		}
		if d, ok := j.done[r.stream]; ok && d.rec >= r.rec {
			continue
		}
		if out == nil {
			out = map[vmm.Stream]bool{}
		}
		out[r.stream] = true
	}
	return out
}

// pendingIn reports whether some block of v waits for an event (or for a capture's end to record one).
func pendingIn(v spec.View) bool {
	for _, b := range v.Blocks {
		if b.State == spec.BlockPending {
			return true
		}
	}
	return false
}

// pendingFor reports whether some block of v waits for an event (or for a capture's end to record one) that an
// Alloc on stream s would have to ask about: the parts of s's own freed sBlocks, which wait only for s's work
// (WaitsOnStream), do not count, for s may take them back at once (stream order).
func pendingFor(v spec.View, s vmm.Stream) bool {
	for _, b := range v.Blocks {
		if b.State == spec.BlockPending && !(b.WaitsOnStream && b.WaitStream == s) {
			return true
		}
	}
	return false
}

// sameMemory reports whether the engine holds the same reservations, mappings and physical handles in a and
// b: an Alloc between them was served from what it held.
func sameMemory(a, b spec.View) bool {
	if len(a.Reservations) != len(b.Reservations) || len(a.Mappings) != len(b.Mappings) || len(a.Chunks) != len(b.Chunks) {
		return false
	}
	for i := range a.Reservations {
		if a.Reservations[i] != b.Reservations[i] {
			return false
		}
	}
	for i := range a.Mappings {
		if a.Mappings[i] != b.Mappings[i] {
			return false
		}
	}
	for i := range a.Chunks {
		if a.Chunks[i].Handle != b.Chunks[i].Handle {
			return false
		}
	}
	return true
}
