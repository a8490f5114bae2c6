package harness

import (
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// setFlag sets a flag for the duration of a test and returns the restore func.
func setFlag(t *testing.T, name, value string) func() {
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("flag %s not registered", name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	return func() { _ = f.Value.Set(old) }
}

// A checker runs under a mutation (0: none) with some invariants ignored and says whether it failed, and
// with which invariants.
type mutChecker struct {
	name string
	run  func(mut impl.Mutation, ignore map[string]bool) (failed bool, invs []string, detail string)
}

const mutPolicy = impl.PolicyGMLake

func mutCheckers(long bool) []mutChecker {
	randomSeqs, linearHistories, exploreDepth, exploreBudget := 200, 8, 4, 8*time.Second
	if long {
		randomSeqs, linearHistories, exploreDepth, exploreBudget = 2000, 50, 5, 2*time.Minute
	}
	return []mutChecker{
		{"rapid", func(mut impl.Mutation, ignore map[string]bool) (bool, []string, string) {
			rec := NewRecorderTB("TestMutationsCaught_rapid")
			rapid.Check(rec, func(t *rapid.T) {
				RunRapid(t, RapidConfig{Policy: mutPolicy, Mutations: mut, Ignore: ignore, Differential: true})
			})
			log := rec.Output()
			return rec.Failed(), InvsIn(firstFailure(log)), firstLine(log, "INV-")
		}},
		{"random-ops", func(mut impl.Mutation, ignore map[string]bool) (bool, []string, string) {
			for seed := int64(1); seed <= int64(randomSeqs); seed++ {
				if vs, env := randomRun(seed, mut, ignore); len(vs) > 0 {
					return true, invNames(vs), fmt.Sprintf("seed %d after %d ops: %v", seed, len(env.Ops), vs[0])
				}
			}
			return false, nil, ""
		}},
		{"explore", func(mut impl.Mutation, ignore map[string]bool) (bool, []string, string) {
			r, err := Explore(ExploreConfig{Policy: mutPolicy, Capacity: 6 * vmm.MiB, Sizes: []uint64{512, 2 * vmm.MiB, 4 * vmm.MiB},
				Depth: exploreDepth, Faults: true, Deadline: exploreBudget, Mutations: mut, Ignore: ignore, Differential: true})
			if err != nil {
				return true, []string{"setup"}, err.Error()
			}
			if r.Violation != nil {
				return true, invNames(r.Violation), fmt.Sprintf("%d ops: %v", len(r.Ops), r.Violation[0])
			}
			return false, nil, fmt.Sprintf("%d states", r.States)
		}},
		{"porcupine", func(mut impl.Mutation, ignore map[string]bool) (bool, []string, string) {
			for seed := int64(1); seed <= int64(linearHistories); seed++ {
				r := RunLinear(LinearConfig{Policy: mutPolicy, Seed: seed, Mutations: mut, Timeout: 5 * time.Second})
				if r.Err != nil {
					return true, []string{"setup"}, r.Err.Error()
				}
				if r.Result == porcupine.Illegal {
					return true, []string{spec.InvContract}, fmt.Sprintf("seed %d: not linearizable (%s)", seed, r.VizPath)
				}
			}
			return false, nil, ""
		}},
	}
}

func firstFailure(log string) string {
	if i := strings.Index(log, "invariant violated"); i >= 0 {
		end := strings.Index(log[i:], "# policy")
		if end < 0 {
			end = len(log) - i
		}
		return log[i : i+end]
	}
	return log
}

func firstLine(log, substr string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, substr) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func invNames(vs []spec.Violation) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if !seen[v.Inv] {
			seen[v.Inv] = true
			out = append(out, v.Inv)
		}
	}
	return out
}

// randomRun is the plain random checker: a seeded sequence of ops (no shrinking) through an Env.
func randomRun(seed int64, mut impl.Mutation, ignore map[string]bool) ([]spec.Violation, *ops.Env) {
	rng := rand.New(rand.NewSource(seed))
	caps := []uint64{16 * vmm.MiB, 64 * vmm.MiB, 512 * vmm.MiB}
	env, err := ops.NewEnv(ops.Config{Policy: mutPolicy, Capacity: caps[rng.Intn(len(caps))], Streams: 3, Mutations: mut, Ignore: ignore,
		Differential: true})
	if err != nil {
		return []spec.Violation{{Inv: "setup", Msg: err.Error()}}, env
	}
	sizes := TraceSizes()
	for i := 0; i < 60; i++ {
		var op ops.Op
		switch r := rng.Intn(20); {
		case r < 8:
			var sz uint64
			switch {
			case len(sizes) > 0 && rng.Intn(2) == 0:
				sz = sizes[rng.Intn(len(sizes))]
			case rng.Intn(2) == 0:
				sz = uint64(rng.Intn(4096) + 1)
			default:
				sz = uint64(rng.Int63n(int64(24*vmm.MiB)) + 1)
			}
			op = ops.Op{Kind: ops.OpAlloc, ID: env.NextID(), Size: sz, Stream: rng.Intn(3)}
		case r < 13:
			ids := env.LiveIDs()
			if len(ids) == 0 {
				continue
			}
			op = ops.Op{Kind: ops.OpFree, ID: ids[rng.Intn(len(ids))]}
		case r < 14:
			ids := env.LiveIDs()
			if len(ids) == 0 {
				continue
			}
			op = ops.Op{Kind: ops.OpRecord, ID: ids[rng.Intn(len(ids))], Stream: rng.Intn(3)}
		case r < 16:
			op = ops.Op{Kind: ops.OpLaunch, Stream: rng.Intn(3)}
		case r < 17:
			op = ops.Op{Kind: ops.OpComplete, Stream: rng.Intn(3)}
		case r < 18:
			op = ops.Op{Kind: ops.OpEmptyCache}
		case r < 19:
			op = ops.Op{Kind: ops.OpFail, Call: ops.FaultCalls[rng.Intn(len(ops.FaultCalls))], N: 1 + rng.Intn(3),
				Result: []vmm.Result{vmm.OutOfMemory, vmm.UnknownCUDAError}[rng.Intn(2)]}
		default:
			op = ops.Op{Kind: ops.OpClearFaults}
		}
		if r := env.Step(op); len(r.Violations) > 0 {
			return r.Violations, env
		}
	}
	return env.Finish(), env
}

// TestMutationsCaught switches on each seeded bug of the engine (impl.Mutation) and runs every checker
// (rapid against the contract with all invariants, plain seeded random op sequences, the bounded
// exhaustive explorer, porcupine on concurrent histories) under it; each bug must be caught by at least
// one. The checkers run differentially: a violation counts only if the engine without the mutation does not
// show it on the same ops, so a catch is the mutation's doing. Prints the table mutation x checker, each
// cell naming the invariants that fired.
func TestMutationsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if !impl.SeededBugs {
		t.Skip("seeded bugs need -tags gmlake_mutants")
	}
	long := longProfile()
	defer setFlag(t, "rapid.seed", "7")()
	defer setFlag(t, "rapid.nofailfile", "true")()
	defer setFlag(t, "rapid.shrinktime", "2s")()
	defer setFlag(t, "rapid.checks", map[bool]string{false: "150", true: "1000"}[long])()
	checkers := mutCheckers(long)

	// Every checker runs differentially (EnvConfig.Differential): a violation counts only if the same ops
	// on the engine without the mutation do not break the same invariant, so bugs the engine has anyway
	// (spec/FINDINGS.md) neither hide nor fake a catch.
	ignore := make([]map[string]bool, len(checkers))
	type cell struct {
		caught bool
		invs   []string
		detail string
	}
	table := map[impl.Mutation][]cell{}
	for _, m := range impl.AllMutations() {
		row := make([]cell, len(checkers))
		for i, c := range checkers {
			start := time.Now()
			failed, invs, detail := c.run(m, ignore[i])
			row[i] = cell{failed, invs, detail}
			t.Logf("%-26s %-10s caught=%-5v %v %s (%v)", m, c.name, failed, invs, detail, time.Since(start).Round(time.Millisecond))
		}
		table[m] = row
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-26s", "mutation \\ checker")
	for _, c := range checkers {
		fmt.Fprintf(&b, " | %-30s", c.name)
	}
	b.WriteString("\n")
	for _, m := range impl.AllMutations() {
		fmt.Fprintf(&b, "%-26s", m)
		any := false
		for _, c := range table[m] {
			s := "-"
			if c.caught {
				s = strings.Join(c.invs, ",")
				any = true
			}
			fmt.Fprintf(&b, " | %-30s", s)
		}
		b.WriteString("\n")
		if !any {
			t.Errorf("mutation %s is caught by no checker", m)
		}
	}
	t.Log(b.String())
}
