package ops

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
			o.Call = rapid.SampledFrom(FaultCalls).Draw(t, "call")
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
	if _, err := Parse("alloc a1 12\n"); err == nil {
		t.Fatal("a short alloc line must not parse")
	}
	if _, err := ParseOp("fail create 0 CUDA_ERROR_OUT_OF_MEMORY"); err == nil {
		t.Fatal("fail needs N >= 1")
	}
	ops, err := Parse("# comment\nalloc a0 512 s1\n\nfail create 2 CUDA_ERROR_OUT_OF_MEMORY\ncompleteall\n")
	if err != nil || len(ops) != 3 || ops[1].Result != vmm.OutOfMemory {
		t.Fatalf("Parse: %v %v", ops, err)
	}
}

// INV-SELFCHECK: a panic inside a step (the engine's own invariant checks panic) is reported as a
// violation, not a crash of the checker.
func TestStepReportsEnginePanic(t *testing.T) {
	env, err := NewEnv(Config{Capacity: 64 * vmm.MiB})
	if err != nil {
		t.Fatal(err)
	}
	env.A = nil // every engine call now panics
	r := env.Step(Op{Kind: OpAlloc, Size: 4096})
	if len(r.Violations) != 1 || r.Violations[0].Inv != "INV-SELFCHECK" {
		t.Fatalf("a panic must be reported as INV-SELFCHECK, got %v", r.Violations)
	}
}

// A clean sequence through every op kind passes every check, and the contract state follows it.
func TestEnvCleanSequence(t *testing.T) {
	ops, err := Parse(`
alloc a0 4096 s0
alloc a1 8388608 s1
record a0 s1
launch s1
free a0
free a0
free-interior a1 +512
complete s1
alloc a2 4096 s1
emptycache
fail create 1 CUDA_ERROR_OUT_OF_MEMORY
alloc a3 33554432 s0
clearfaults
completeall
free a1
free a2
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"gmlake", "caching", "expandable", "gmlake-paper"} {
		i, vs, env, err := Run(Config{Policy: p, Capacity: 256 * vmm.MiB}, ops)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 0 {
			t.Fatalf("%s: step %d violates %v\n%s", p, i, vs, env.Describe())
		}
	}
}

// Any bytes decode into ops that print and parse back, and that the Env runs without the harness itself
// failing (violations are the engine's business here: the fuzz targets judge them).
func TestOpsFromBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		ops := OpsFromBytes(b, 3)
		back, err := Parse(Format(ops))
		if err != nil || len(back) != len(ops) {
			t.Fatalf("round trip: %v (%d vs %d ops)", err, len(back), len(ops))
		}
		for i := range ops {
			if ops[i] != back[i] {
				t.Fatalf("op %d: %v != %v", i, ops[i], back[i])
			}
		}
	})
}

// Ops naming streams the environment does not have are harmless: launch/complete do nothing, alloc and
// record must be refused by the engine (ErrUnknownStream), which the contract checks.
func TestEnvUnknownStreamOps(t *testing.T) {
	ops, err := Parse("launch s9\ncomplete s9\nalloc a0 4096 s9\nalloc a1 4096 s0\nrecord a1 s9\nfree a1\n")
	if err != nil {
		t.Fatal(err)
	}
	if i, vs, env, err := Run(Config{Capacity: 64 * vmm.MiB}, ops); err != nil || i >= 0 {
		t.Fatalf("step %d: %v %v\n%s", i, vs, err, env.Describe())
	}
}
