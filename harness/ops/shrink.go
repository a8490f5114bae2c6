package ops

import (
	"fmt"
	"strings"
	"time"

	"github.com/gmlake/gmlake/spec"
)

// Shrink reduces a failing op list to a shorter one that still violates the same invariant (the first
// violation's INV), so that it does not slide to another bug: it cuts the list after the failing step,
// deletes chunks of ops and then single ops while the failure persists (delta debugging, Zeller's ddmin),
// and last tries smaller sizes for each alloc (1 B, half). Any subsequence is a program (an op about an
// id no alloc bound is a misuse the engine must refuse). It stops at budget (0: no limit) with the smallest
// list found, and returns the ops unchanged if they do not fail.
func Shrink(cfg Config, seq []Op, budget time.Duration) ([]Op, []spec.Violation) {
	deadline := time.Now().Add(budget)
	more := func() bool { return budget <= 0 || time.Now().Before(deadline) }
	// fails returns the invariant the ops violate first, the violations, and how many ops to keep (up
	// to and including the failing step).
	fails := func(seq []Op) (string, []spec.Violation, int) {
		i, vs, _, err := Run(cfg, seq)
		if err != nil || i < 0 {
			return "", nil, 0
		}
		return vs[0].Inv, vs, min(i+1, len(seq))
	}
	inv, vs, keep := fails(seq)
	if inv == "" {
		return seq, nil
	}
	seq = append([]Op(nil), seq[:keep]...)
	for chunk := len(seq) / 2; chunk >= 1 && more(); chunk /= 2 {
		for i := 0; i+chunk <= len(seq) && more(); {
			try := append(append([]Op(nil), seq[:i]...), seq[i+chunk:]...)
			if got, v, k := fails(try); got == inv {
				seq, vs = try[:k], v
				continue
			}
			i += chunk
		}
	}
	// Smaller allocations fail the same way surprisingly often, and read more easily.
	for i := 0; i < len(seq) && more(); i++ {
		if seq[i].Kind != OpAlloc || seq[i].Size <= 1 {
			continue
		}
		for _, sz := range []uint64{1, seq[i].Size / 2} {
			try := append([]Op(nil), seq...)
			try[i].Size = sz
			if got, v, k := fails(try); got == inv {
				seq, vs = try[:k], v
				break
			}
		}
	}
	return seq, vs
}

// DescribeView prints the parts of a View a human needs to debug a violation.
func DescribeView(v spec.View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s closed=%v device used %d of %d\n", v.Policy, v.Closed, v.Device.Used, v.Device.Capacity)
	for _, a := range v.Live {
		fmt.Fprintf(&b, "  live %v req %d s%d uses %v block %d\n", a.Range(), a.Requested, a.Stream, a.Uses, a.Block)
	}
	for _, bl := range v.Blocks {
		fmt.Fprintf(&b, "  block %d stitched=%v state=%d %v s%d parts %v events %d\n", bl.ID, bl.Stitched, bl.State, bl.Range, bl.Stream, bl.Parts, bl.Events)
	}
	for _, c := range v.Chunks {
		fmt.Fprintf(&b, "  chunk %d size %d refs %d\n", c.Handle, c.Size, c.Refs)
	}
	for _, r := range v.Device.Reservations {
		fmt.Fprintf(&b, "  reservation %v (%d MiB)\n", r, r.Size>>20)
	}
	for _, m := range v.Device.Mappings {
		fmt.Fprintf(&b, "  devmap %v -> %d access=%v\n", m.VA, m.Handle, m.Accessible)
	}
	fmt.Fprintf(&b, "  stats %+v\n", v.Stats)
	return b.String()
}
