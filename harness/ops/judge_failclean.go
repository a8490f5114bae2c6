package ops

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeFailClean judges INV-FAILCLEAN (spec/SPEC.md) for an Alloc that failed, whatever its error (bad input,
// out of memory, a driver fault): it leaves neither more reserved bytes nor more physical memory on the
// device than the View before it showed. The engine's release-and-retry and the serving layer's
// synchronisation may lower both (released cache), never raise them. A handle the engine tried to release
// and could not even after its retries is an orphan (its snapshot lists it as a chunk with Orphan set, counted
// in the reserved bytes: the device holds it): it is what a failing driver left, not the engine's growth, and
// is counted neither in the reserved bytes nor on the device, before or after.
func judgeFailClean(op Op, before, after spec.View, err error) []spec.Violation {
	rb, ra := before.Stats.Reserved-orphanBytes(before), after.Stats.Reserved-orphanBytes(after)
	ub, hb := heldOnDevice(before)
	ua, ha := heldOnDevice(after)
	if ra <= rb && ua <= ub && ha <= hb {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvFailClean, Msg: fmt.Sprintf(
		"%v failed (%v) but raised what the engine holds: reserved %s -> %s, device memory %s in %d handles -> %s in %d",
		op, err, vmm.FormatBytes(rb), vmm.FormatBytes(ra), vmm.FormatBytes(ub), hb, vmm.FormatBytes(ua), ha)}}
}

// orphanBytes returns the bytes of v's orphan chunks, both pools.
func orphanBytes(v spec.View) uint64 {
	b := heldOrphans(v)
	return uint64(b[impl.StatSmall] + b[impl.StatLarge])
}

// heldOnDevice returns the bytes and the number of the device's handles not released, orphans left out.
func heldOnDevice(v spec.View) (used uint64, handles int) {
	orphan := map[vmm.Handle]bool{}
	for _, c := range v.Chunks {
		if c.Orphan {
			orphan[c.Handle] = true
		}
	}
	for _, h := range v.Device.Handles {
		if !h.Released && !orphan[h.Handle] {
			used += h.Size
			handles++
		}
	}
	return used, handles
}

// judgeFailedAlloc judges what a failed Alloc answers beside its error, on every path, also those the
// contract does not model (after Close, from a private pool): C-FAILZERO, no pointer (0: a caller that reads
// the pointer before the error, as a C caller of the library may, gets nothing it could free or use); and
// C-SIZE-ERR, for ErrInvalidSize a message that says which bound the size broke: for 0 bytes, to ask for at
// least 1 byte; for more, that it is more than the device holds.
func judgeFailedAlloc(op Op, r StepResult) []spec.Violation {
	var vs []spec.Violation
	if r.Ptr != 0 {
		vs = append(vs, spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("%v failed (%v) but answered pointer %#x: a failed Alloc answers 0 (C-FAILZERO)", op, r.Err, uint64(r.Ptr))})
	}
	if errors.Is(r.Err, impl.ErrInvalidSize) {
		want := "more than the device"
		if op.Size == 0 {
			want = "at least 1 byte"
		}
		if !strings.Contains(r.Err.Error(), want) {
			vs = append(vs, spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("%v: the invalid-size error %q does not say %q (C-SIZE-ERR)", op, r.Err, want)})
		}
	}
	return vs
}
