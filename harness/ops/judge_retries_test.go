package ops

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-RETRIES): an Alloc that fails with out of memory counts one retry and one out of memory; a
// successful Alloc at most one retry and none; any other op neither. The judge passes the right counts and
// flags each wrong one (the first attempt run as the last resort: an out of memory with no retry).
func TestRetriesJudgeBites(t *testing.T) {
	oom := &impl.OOMError{Requested: 4 << 20}
	if !errors.Is(oom, vmm.ErrOutOfMemory) {
		t.Fatal("an OOMError does not match vmm.ErrOutOfMemory")
	}
	alloc, free := Op{Kind: OpAlloc, ID: 1, Size: 4 << 20}, Op{Kind: OpFree, ID: 1}
	for _, c := range []struct {
		name        string
		op          Op
		err         error
		retries, oo int64
		bad         bool
	}{
		{"an out of memory after its retry", alloc, oom, 1 /* retries */, 1 /* ooms */, false},
		{"an out of memory with no retry", alloc, oom, 0, 1, true},
		{"an out of memory not counted", alloc, oom, 1, 0, true},
		{"two retries in one out of memory", alloc, oom, 2, 1, true},
		{"a success after a retry", alloc, nil, 1, 0, false},
		{"a success with none", alloc, nil, 0, 0, false},
		{"a success counted as an out of memory", alloc, nil, 1, 1, true},
		{"a success with two retries", alloc, nil, 2, 0, true},
		{"a free that retries", free, nil, 1, 0, true},
	} {
		j := retriesJudge{retries: 3, ooms: 2}
		got := impl.DeviceStats{NumAllocRetries: 3 + c.retries, NumOOMs: 2 + c.oo}
		if vs := j.check(c.op, c.err, got); (len(vs) > 0) != c.bad {
			t.Errorf("%s: violations %v, want bad=%v", c.name, vs, c.bad)
		}
		if j.retries != got.NumAllocRetries || j.ooms != got.NumOOMs {
			t.Errorf("%s: the judge did not move to the counts it judged", c.name)
		}
	}
}
