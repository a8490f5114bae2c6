package ops

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// streamCall is one event or stream call of the engine, which INV-CAPTURESAFE judges while a stream captures a
// graph: querying an event, recording one on a capturing stream, querying a capturing stream.
type streamCall struct {
	kind   vmm.CallKind // a driver call's, or callSynchronize
	stream vmm.Stream   // the stream recorded on, queried or waited for (0 for an event query)
}

// callSynchronize marks, among the step's stream calls, the bare engine's wait for a stream on its
// out-of-memory path (vmm.StreamSyncer, through the Env's clock; not a call the device counts).
const callSynchronize = vmm.NumCallKinds

func (l *failLog) RecordEvent(e vmm.Event, s vmm.Stream) error {
	l.syncs = append(l.syncs, streamCall{vmm.CallRecordEvent, s})
	err := l.Device.RecordEvent(e, s)
	l.noteEvent(vmm.CallRecordEvent, err)
	l.events = append(l.events, eventCall{kind: vmm.CallRecordEvent, ev: e, stream: s, err: err})
	return err
}

func (l *failLog) QueryEvent(e vmm.Event) (bool, error) {
	l.syncs = append(l.syncs, streamCall{vmm.CallQueryEvent, 0})
	done, err := l.Device.QueryEvent(e)
	l.noteEvent(vmm.CallQueryEvent, err)
	l.events = append(l.events, eventCall{kind: vmm.CallQueryEvent, ev: e, done: done, err: err})
	return done, err
}

func (l *failLog) StreamWaitEvent(s vmm.Stream, e vmm.Event) error {
	err := l.Device.StreamWaitEvent(s, e)
	l.noteEvent(vmm.CallStreamWaitEvent, err)
	return err
}

func (l *failLog) DestroyEvent(e vmm.Event) error {
	err := l.Device.DestroyEvent(e)
	l.noteEvent(vmm.CallDestroyEvent, err)
	return err
}

func (l *failLog) StreamQuery(s vmm.Stream) (bool, error) {
	l.syncs = append(l.syncs, streamCall{vmm.CallStreamQuery, s})
	return l.Device.StreamQuery(s)
}

// callStreamCapturing marks, among the step's stream calls, the capture-safe stream check (vmm.CaptureQuerier,
// impl/cudavmm's cuStreamIsCapturing): legal while streams capture.
const callStreamCapturing = vmm.NumCallKinds + 1

// StreamCapturing is the Env device's capture-safe stream check (vmm.CaptureQuerier): the simulated device
// validates s as StreamQuery does, and the call is noted as legal during a capture. The simulated device
// knows no capture, so it answers false.
func (l *failLog) StreamCapturing(s vmm.Stream) (bool, error) {
	l.syncs = append(l.syncs, streamCall{callStreamCapturing, s})
	_, err := l.Device.StreamQuery(s)
	return false, err
}

// judgeCapture judges the two capture rules (spec/SPEC.md) after a step:
//
// INV-CAPTURESAFE: while a stream captures a CUDA graph (after the step, so capture-begin's own call counts and
// capture-end's flush, once no stream captures, does not), the engine queries no event (PyTorch's
// process_events waits until no capture is underway: cudaEventQuery is illegal then, and its frees wait in
// insert_events_deferred_until_no_capture), and neither records an event on a capturing stream (it would
// become a node of the graph) nor queries any stream (cuStreamQuery invalidates the capture of a capturing
// stream, and of one that joined the capture unbeknown to the engine: the Env's driver has the capture-safe
// check, vmm.CaptureQuerier, for streams met during a capture). A stream that does not
// capture may be recorded on (ForgetStream's last event); ForgetStream of a stream that captures is refused
// (C-FORGET, judgeForgetCapturing) and records nothing.
//
// INV-FLUSHED: once no stream captures, the frees deferred during the capture proceed: after a capture-end or
// an EmptyCache that returned no error, or an Alloc that succeeded with no fault armed (PyTorch's malloc
// records the deferred events first), with no stream capturing, no block is pending without an outstanding
// event — such a block waits for nothing that can complete, and its memory is never reusable again.
func (e *Env) judgeCapture(op Op, err error, after spec.View) []spec.Violation {
	var out []spec.Violation
	if e.calls != nil && len(e.capturing) > 0 {
		capturing := map[vmm.Stream]bool{}
		for i := range e.capturing {
			capturing[e.stream(i)] = true
		}
		for _, c := range e.calls.syncs {
			// With a capture-safe stream check on the driver, no stream is queried while streams capture:
			// one that joined a capture (a side stream waiting on a capturing stream's event, which
			// SetCapturing never names) would be invalidated by cuStreamQuery.
			if c.kind == vmm.CallQueryEvent || c.kind == callSynchronize || c.kind == vmm.CallStreamQuery || capturing[c.stream] && c.kind != callStreamCapturing {
				out = append(out, spec.Violation{Inv: spec.InvCaptureSafe, Msg: fmt.Sprintf(
					"%v called %v (stream %d) while streams %v capture", op, c.kind, c.stream, slices.Sorted(maps.Keys(e.capturing)))})
				break
			}
		}
	}
	if len(e.capturing) > 0 || err != nil || e.closed ||
		!(op.Kind == OpCaptureEnd || op.Kind == OpEmptyCache || op.Kind == OpAlloc && !e.faulty) {
		return out
	}
	for _, b := range after.Blocks {
		if deferredFree(b) {
			out = append(out, spec.Violation{Inv: spec.InvFlushed, Msg: fmt.Sprintf(
				"after %v no stream captures, yet block %d %v is pending with no event outstanding (a free deferred during a capture that never proceeds)",
				op, b.ID, b.Range)})
		}
	}
	return out
}

// deferredFree reports whether b is a free deferred by a capture and not yet flushed: pending, with no event
// outstanding (its events are recorded when no stream captures any more).
func deferredFree(b spec.Block) bool { return b.State == spec.BlockPending && b.Events == 0 }
