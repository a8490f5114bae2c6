package ops

import (
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/spec"
)

// Shrink reduces a failing op list to a shorter one that still violates the same invariant (the first
// violation's INV), by deleting chunks of ops and then single ops while the failure persists (delta
// debugging). It returns ops unchanged if they do not fail.
func Shrink(cfg Config, ops []Op) ([]Op, []spec.Violation) {
	fails := func(ops []Op) (string, []spec.Violation) {
		i, vs, _, err := Run(cfg, ops)
		if err != nil || i < 0 {
			return "", nil
		}
		return vs[0].Inv, vs
	}
	inv, vs := fails(ops)
	if inv == "" {
		return ops, nil
	}
	for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(ops); {
			try := append(append([]Op(nil), ops[:i]...), ops[i+chunk:]...)
			if got, v := fails(try); got == inv {
				ops, vs = try, v
				continue
			}
			i += chunk
		}
	}
	return ops, vs
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
