package harness

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/vmm"
)

// Ops print as text and parse back to themselves (the saved op list is the reproducer).
func TestOpsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := Op{Kind: OpKind(rapid.IntRange(0, int(numOpKinds)-1).Draw(t, "kind"))}
		switch o.Kind {
		case OpAlloc:
			o.ID, o.Size, o.Stream = rapid.IntRange(0, 1000).Draw(t, "id"), rapid.Uint64().Draw(t, "size"), rapid.IntRange(0, 8).Draw(t, "s")
		case OpFree:
			o.ID = rapid.IntRange(0, 1000).Draw(t, "id")
		case OpFreeInterior:
			o.ID, o.Offset = rapid.IntRange(0, 1000).Draw(t, "id"), rapid.Uint64().Draw(t, "off")
		case OpRecord:
			o.ID, o.Stream = rapid.IntRange(0, 1000).Draw(t, "id"), rapid.IntRange(0, 8).Draw(t, "s")
		case OpLaunch, OpComplete:
			o.Stream = rapid.IntRange(0, 8).Draw(t, "s")
		case OpFail:
			o.Call = rapid.SampledFrom(faultCalls).Draw(t, "call")
			o.N = rapid.IntRange(1, 9).Draw(t, "n")
			o.Result = rapid.SampledFrom(faultResults).Draw(t, "r")
		}
		back, err := ParseOp(o.String())
		if err != nil {
			t.Fatalf("%q: %v", o.String(), err)
		}
		if back != o {
			t.Fatalf("%q parsed as %+v, want %+v", o.String(), back, o)
		}
	})
	if _, err := ParseOps("alloc a1 12\n"); err == nil {
		t.Fatal("a short alloc line must not parse")
	}
	if _, err := ParseOp("fail create 0 CUDA_ERROR_OUT_OF_MEMORY"); err == nil {
		t.Fatal("fail needs N >= 1")
	}
	ops, err := ParseOps("# comment\nalloc a0 512 s1\n\nfail create 2 CUDA_ERROR_OUT_OF_MEMORY\ncompleteall\n")
	if err != nil || len(ops) != 3 || ops[1].Result != vmm.OutOfMemory {
		t.Fatalf("ParseOps: %v %v", ops, err)
	}
}
