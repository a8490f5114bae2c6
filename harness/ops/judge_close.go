package ops

import (
	"errors"
	"fmt"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
)

// judgeClose judges C-CLOSE (spec/SPEC.md, the calls) for a Close that returned err, from the device's leak
// report after it: a Close that reports no error released everything the allocator held on the device,
// reservations, mappings, physical handles and events; under an injected fault it may fail to release
// something (a call that fails for good), and then it must say so. INV-NOLEAK, judged at the end of a run
// after the faults are cleared, cannot tell a failure Close swallowed from none: this can, with the fault
// armed inside Close. eventsLost: a fault on cuEventDestroy may have fired before this Close (the event it hit
// stays on the device and the engine, told it is gone, cannot destroy it again), so events are not counted.
func judgeClose(op Op, err error, leaks sim.LeakReport, eventsLost bool) []spec.Violation {
	if err != nil || leaks.Empty() && (len(leaks.Events) == 0 || eventsLost) {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvContract, Msg: fmt.Sprintf(
		"C-CLOSE: %v returned no error but left the device holding %s", op, leaks)}}
}

// judgeForgetCapturing judges C-FORGET's clause for a stream that captures a CUDA graph (the contract has no
// captures, so the Env judges it): ForgetStream of it is refused with exactly ErrStreamCapturing, changing
// nothing (the caller may not destroy the stream until its capture ends: cudaStreamDestroy would invalidate
// it, and the last event it would record on the stream would become a node of the graph; INV-CAPTURESAFE
// judges the record). After Close every call is ErrClosed.
func (e *Env) judgeForgetCapturing(op Op, err error) []spec.Violation {
	want := impl.ErrStreamCapturing
	if e.closed {
		want = impl.ErrClosed
	}
	if errors.Is(err, want) {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvContract, Msg: fmt.Sprintf(
		"C-FORGET: %v of a stream that captures a graph -> %v: want exactly %v, nothing changed", op, err, want)}}
}
