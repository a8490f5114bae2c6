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

// checkStatsPaused judges the statistics (INV-TORCHSTATS) at a lock-step pause of a campaign, as far as a
// run whose steps are not each observed allows (ops.Env judges every step: it also knows the highest value
// each reached): no Current below 0 or above its Peak; small plus large is all; allocated - freed counts
// from the Currents at the last reset-acc (base; zero before any), and num_device_alloc - num_device_free
// from the physical handles held then (heldBase); the allocations and requested bytes current are what the
// workers hold.
func checkStatsPaused(got, base impl.DeviceStats, heldBase, held int, live []*liveAlloc) []spec.Violation {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	names := []string{"allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
		"active_bytes", "inactive_split_bytes", "requested_bytes"}
	ga := []impl.StatArray{got.Allocation, got.Segment, got.Active, got.InactiveSplit, got.AllocatedBytes,
		got.ReservedBytes, got.ActiveBytes, got.InactiveSplitBytes, got.RequestedBytes}
	ba := []impl.StatArray{base.Allocation, base.Segment, base.Active, base.InactiveSplit, base.AllocatedBytes,
		base.ReservedBytes, base.ActiveBytes, base.InactiveSplitBytes, base.RequestedBytes}
	for k := range ga {
		for i, g := range ga[k] {
			if g.Current < 0 || g.Peak < g.Current {
				bad("%s[%d]: current %d, peak %d", names[k], i, g.Current, g.Peak)
			}
			if g.Allocated-g.Freed != g.Current-ba[k][i].Current {
				bad("%s[%d]: allocated %d - freed %d != current %d - %d at the last reset-acc", names[k], i, g.Allocated, g.Freed, g.Current, ba[k][i].Current)
			}
		}
		a, s, l := ga[k][impl.StatAll], ga[k][impl.StatSmall], ga[k][impl.StatLarge]
		if s.Current+l.Current != a.Current || s.Allocated+l.Allocated != a.Allocated || s.Freed+l.Freed != a.Freed {
			bad("%s: all %+v != small %+v + large %+v", names[k], a, s, l)
		}
	}
	if got.NumDeviceAlloc-got.NumDeviceFree != int64(held-heldBase) {
		bad("num_device_alloc %d - num_device_free %d != %d physical handles held - %d at the last reset-acc", got.NumDeviceAlloc, got.NumDeviceFree, held, heldBase)
	}
	var requested uint64
	for _, l := range live {
		requested += l.size
	}
	if c := got.Allocation[impl.StatAll].Current; c != int64(len(live)) {
		bad("allocation.current = %d, the workers hold %d live allocations", c, len(live))
	}
	if c := got.RequestedBytes[impl.StatAll].Current; c != int64(requested) {
		bad("requested_bytes.current = %d, the workers' live allocations asked for %d", c, requested)
	}
	if len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvTorchStats, Msg: strings.Join(errs, "; ")}}
}
