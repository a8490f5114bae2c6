package ops

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeSnapshot judges the engine's Snapshot (INV-SNAPSHOT) against the Env's own record of the allocations
// it holds (ptr and requested size per live id), not against the engine's other answers: the live list is
// exactly the pointers the ops hold, each with the bytes its alloc asked for; a block reports a request
// (BlockInfo.Requested) exactly when it is handed out: live, starting at a pointer the ops hold, and (a
// pBlock) held by no stitched block; and then that pointer's request; and the driver calls it counts are
// those the device answered. The View is built from this same Snapshot, so a wrong field here would
// mislead every other judge.
func (e *Env) judgeSnapshot(s impl.Snapshot) []spec.Violation {
	want := e.engineHeld()
	var errs []string
	bad := func(format string, args ...any) {
		if len(errs) < 8 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	if len(s.Live) != len(want) {
		bad("Snapshot lists %d live allocations, the ops hold %d", len(s.Live), len(want))
	}
	for _, l := range s.Live {
		if r, ok := want[l.Ptr]; !ok {
			bad("Snapshot lists %v live: no op holds it", l.Ptr)
		} else if l.Requested != r {
			bad("Snapshot: %v requested %d, its alloc asked for %d", l.Ptr, l.Requested, r)
		}
	}
	for _, b := range s.Blocks {
		r, held := want[b.Range.Base]
		handed := held && b.State == impl.Live && (b.Kind == impl.Stitched || b.HeldBy == 0)
		switch {
		case handed && b.Requested != r:
			bad("Snapshot block %d at %v (handed out for %d B) reports requested %d", b.ID, b.Range.Base, r, b.Requested)
		case !handed && b.Requested != 0:
			bad("Snapshot block %d at %v (state %v, held by %d) reports requested %d, but it is handed out to no op", b.ID, b.Range.Base, b.State, b.HeldBy, b.Requested)
		}
	}
	if e.Dev != nil && e.S == nil && e.C == nil {
		// The driver calls the Snapshot counts (Stats.DriverCalls) are the engine's: on the simulated
		// device, which counts every call made on it, the memory and event calls are the engine's alone
		// (through a serving layer the engine's driver is the layer's cap, which answers some itself).
		dev := e.Dev.Counts()
		for _, k := range engineOnlyCalls {
			if got := s.Stats.DriverCalls[k]; got != dev[k] {
				bad("Snapshot counts %d %s calls, the device answered %d", got, k, dev[k])
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvSnapshot, Msg: strings.Join(errs, "; ")}}
}

// engineOnlyCalls are the driver calls no one but the engine makes on an Env's simulated device (the Env
// creates and synchronises streams and writes patterns itself).
var engineOnlyCalls = []vmm.CallKind{vmm.CallCreate, vmm.CallRelease, vmm.CallReserve, vmm.CallFreeAddress, vmm.CallMap,
	vmm.CallUnmap, vmm.CallSetAccess, vmm.CallCreateEvent, vmm.CallRecordEvent, vmm.CallQueryEvent,
	vmm.CallStreamWaitEvent, vmm.CallDestroyEvent}

// judgeSnapshotQuery is the snapshot op's own judgement (INV-SNAPSHOT): Snapshot is a query and a deep copy,
// so a second call returns the same state, and writing into what the first returned changes nothing the
// next one shows.
func (e *Env) judgeSnapshotQuery(first impl.Snapshot) []spec.Violation {
	second := e.A.Snapshot()
	if !reflect.DeepEqual(first, second) {
		return []spec.Violation{{Inv: spec.InvSnapshot, Msg: "two Snapshots with no call between them differ: a query changed the state"}}
	}
	for i := range first.Blocks {
		b := &first.Blocks[i]
		b.Range.Size++
		for j := range b.Parts {
			b.Parts[j]++
		}
		for j := range b.Backing {
			b.Backing[j].Handle++
		}
	}
	for i := range first.Live {
		l := &first.Live[i]
		for j := range l.Uses {
			l.Uses[j]++
		}
	}
	for i := range first.Chunks {
		first.Chunks[i].Refs++
	}
	for i := range first.Mappings {
		first.Mappings[i].Handle++
	}
	for i := range first.Reservations {
		first.Reservations[i].Size++
	}
	if third := e.A.Snapshot(); !reflect.DeepEqual(second, third) {
		return []spec.Violation{{Inv: spec.InvSnapshot, Msg: "writing into a Snapshot's slices changed the next Snapshot: it shares the engine's memory"}}
	}
	return nil
}
