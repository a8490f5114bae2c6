package ops

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeAccess is INV-ACCESS over the cuMemSetAccess calls of one step (calls, in call order) and the Views
// around it: under gmlake, caching and expandable, what one step maps in one reservation side by side gets
// one cuMemSetAccess over the whole range (impl/doc.go: every call costs ~30 us whatever its size; PyTorch's
// map_block sets access once over the pages it mapped), so no two of the step's calls cover ranges that
// touch inside one reservation. gmlake-paper sets access once per piece, as GLake's VirBlock: not judged.
// A call that repeats a range (a retry after a failure) touches nothing new and is not counted twice.
func judgeAccess(policy string, before, after spec.View, calls []vmm.Range) []spec.Violation {
	if policy == impl.PolicyGMLakePaper || len(calls) < 2 {
		return nil
	}
	rs := slices.Clone(calls)
	slices.SortFunc(rs, func(x, y vmm.Range) int { return cmp.Or(cmp.Compare(x.Base, y.Base), cmp.Compare(x.Size, y.Size)) })
	rs = slices.Compact(rs)
	within := func(x, y vmm.Range) bool {
		for _, v := range []spec.View{after, before} {
			for _, r := range v.Device.Reservations {
				if r.Contains(x.Base) && r.Contains(y.Limit()-1) {
					return true
				}
			}
		}
		return false
	}
	for i := 1; i < len(rs); i++ {
		if x, y := rs[i-1], rs[i]; x.Limit() == y.Base && within(x, y) {
			return []spec.Violation{{Inv: spec.InvAccess, Msg: fmt.Sprintf(
				"one step set access on %v and %v apart, side by side in one reservation: one cuMemSetAccess over %v would do (calls: %v)",
				x, y, vmm.Range{Base: x.Base, Size: x.Size + y.Size}, calls)}}
		}
	}
	return nil
}
