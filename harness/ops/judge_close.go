package ops

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
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

// closeReport is what a Close reported: the live allocations it released anyway (nil through the C
// library, which gives only their count), their count, and the physical bytes it returned to the device.
type closeReport struct {
	live     []vmm.DevicePtr
	nLive    int
	released uint64
}

// judgeCloseReport judges C-CLOSE's report (impl.CloseReport, what gmlake_close and the Go API tell their
// caller): the bytes it says it returned are exactly the physical bytes the device got back during the
// call (freed bytes is what a caller reads to learn what Close gave back, failure or not), and the
// allocations it lists as never freed are exactly the Env's live ones (their count, through the C
// library).
func (e *Env) judgeCloseReport(op Op, rep closeReport, returned uint64) []spec.Violation {
	var vs []spec.Violation
	bad := func(format string, args ...any) {
		vs = append(vs, spec.Violation{Inv: spec.InvContract, Msg: "C-CLOSE: " + op.String() + ": " + fmt.Sprintf(format, args...)})
	}
	if rep.released != returned {
		bad("the report says %s returned to the device; the device got back %s", vmm.FormatBytes(rep.released), vmm.FormatBytes(returned))
	}
	var want []vmm.DevicePtr
	for id := range e.live {
		want = append(want, e.ptrs[id])
	}
	slices.Sort(want)
	if rep.nLive != len(want) {
		bad("the report counts %d allocations never freed; %d are live", rep.nLive, len(want))
	} else if rep.live != nil {
		got := slices.Sorted(slices.Values(rep.live))
		if !slices.Equal(got, want) {
			bad("the report lists %v as never freed; the live allocations are %v", got, want)
		}
	}
	return vs
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
