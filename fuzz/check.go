package fuzz

// The campaign's judge: at each lock-step pause the campaign calls checkState, which evaluates the spec's
// state invariants (spec.Check) on the View of the allocator's snapshot and the device's state (built by
// ops.ViewOf), and compares the allocator's live set with the one the workers tracked (what was
// allocated and not freed is live, with its size and stream; nothing else is). Programs (the fuzz targets,
// replays of saved failures) run single-threaded through ops.Env instead, which also runs the contract and
// the history invariants step by step.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// liveAlloc is what the fuzzer knows of one allocation it holds.
type liveAlloc struct {
	id     uint64
	ptr    vmm.DevicePtr
	size   uint64 // requested
	stream vmm.Stream
	val    byte // the pattern written into it
	local  int  // the worker's own id of it (the generator's; the log says id)
}

// Names of the campaign's own checks (beside the spec's INV names), the Inv of its spec.Violations.
const (
	CheckIntegrity = ops.CheckIntegrity // the pattern written into an allocation was not read back
	CheckContract  = "CONTRACT"         // the allocator's live set differs from what was allocated and not freed
	CheckError     = "ERROR"            // an operation failed that must not (or a misuse was accepted)
	CheckLeak      = "LEAK"             // memory held after Close
	CheckPanic     = "PANIC"            // the allocator (or a checker) panicked
	CheckHang      = "HANG"             // no operation completed for a long time (a deadlock)
	CheckLedger    = "LEDGER"           // the campaign's ledger of driver calls disagrees with the device (a fuzzer bug)
	CheckHazard    = "HAZARD"           // the allocator unmapped memory with GPU work pending through it (sim rule 9)
)

// checkState returns the violations of the state (a, dev) given the live set the fuzzer tracked. It is the
// one place the invariants are evaluated (swap point for the harness adapter).
func checkState(snap impl.Snapshot, dev sim.DeviceState, live []*liveAlloc) []spec.Violation {
	var out []spec.Violation
	for _, v := range spec.Check(ops.ViewOf(snap, dev)) {
		out = append(out, spec.Violation{Inv: v.Inv, Msg: v.Msg})
	}
	return append(out, checkContract(snap, live)...)
}

// checkContract compares the allocator's live set with the fuzzer's.
func checkContract(snap impl.Snapshot, live []*liveAlloc) []spec.Violation {
	var out []spec.Violation
	byPtr := make(map[vmm.DevicePtr]*liveAlloc, len(live))
	for _, l := range live {
		byPtr[l.ptr] = l
	}
	seen := 0
	for _, li := range snap.Live {
		l := byPtr[li.Ptr]
		if l == nil {
			out = append(out, spec.Violation{Inv: CheckContract, Msg: fmt.Sprintf("allocator reports live %v (%d B, stream %d) that was never allocated or was freed",
				li.Ptr, li.Requested, li.Stream)})
			continue
		}
		seen++
		if li.Requested != l.size || li.Stream != l.stream {
			out = append(out, spec.Violation{Inv: CheckContract, Msg: fmt.Sprintf("allocation %d at %v: allocator says %d B on stream %d, was %d B on stream %d",
				l.id, l.ptr, li.Requested, li.Stream, l.size, l.stream)})
		}
		if li.Size < l.size {
			out = append(out, spec.Violation{Inv: CheckContract, Msg: fmt.Sprintf("allocation %d at %v: block of %d B is smaller than the %d B requested",
				l.id, l.ptr, li.Size, l.size)})
		}
	}
	if seen != len(live) {
		var missing []string
		snapPtrs := make(map[vmm.DevicePtr]bool, len(snap.Live))
		for _, li := range snap.Live {
			snapPtrs[li.Ptr] = true
		}
		for _, l := range live {
			if !snapPtrs[l.ptr] {
				missing = append(missing, fmt.Sprintf("%d at %v (%d B)", l.id, l.ptr, l.size))
			}
		}
		sort.Strings(missing)
		out = append(out, spec.Violation{Inv: CheckContract, Msg: "allocations missing from the allocator's live set: " + strings.Join(missing, ", ")})
	}
	return out
}
