package gpu_test

import (
	"flag"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness"
	"github.com/gmlake/gmlake/impl"
)

var (
	biteChecks    = flag.String("gpu.bitechecks", "100", "rapid sequences per seeded bug in TestGPUCheckersBite")
	biteHistories = flag.Int("gpu.bitehistories", 30, "porcupine histories per seeded bug in TestGPUCheckersBite")
)

// setFlag sets a flag for the rest of the test and returns the function that restores it.
func setFlag(t *testing.T, name, value string) func() {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	return func() { _ = flag.Set(name, old) }
}

// TestGPUCheckersBite: the GPU checkers are not vacuous: each seeded bug of the engine (built with -tags
// gmlake_mutants), run through the serving layer on the real driver, is caught by rapid (an invariant
// violated) or porcupine (an illegal history). It reports which caught each; every bug must be caught by
// one of them (but the one that needs an injected driver fault). Without the tag, or without a GPU, it skips.
func TestGPUCheckersBite(t *testing.T) {
	if !impl.SeededBugs {
		t.Skip("the seeded bugs are compiled only with -tags gmlake_mutants")
	}
	requireGPU(t)
	defer setFlag(t, "rapid.checks", *biteChecks)()
	defer setFlag(t, "rapid.shrinktime", "1s")()
	defer setFlag(t, "rapid.nofailfile", "true")()
	caught := 0
	start := time.Now()
	tried := 0
	for i := 0; i < impl.NumMutations; i++ {
		m := impl.Mutation(1 << i)
		if m == impl.MutLeakOnStitchFailure {
			// Needs a driver failure in the middle of a stitch: the real driver has no fault injection, so
			// the bug is unreachable here (rapid catches it on the simulated device, TestMutationsCaught).
			t.Logf("seeded bug %-26v not tried: it needs an injected driver fault", m)
			continue
		}
		tried++
		rec := harness.NewRecorderTB("gpu-bite")
		rapid.Check(rec, func(rt *rapid.T) {
			harness.RunRapid(rt, harness.RapidConfig{Policy: impl.PolicyGMLake, NoFaults: true, Serve: true, MemoryLimit: *capacity,
				Device: openDevice(*capacity), Mutations: m})
		})
		names := harness.InvsIn(rec.Output())
		illegal := 0
		for seed := int64(1); seed <= int64(*biteHistories); seed++ {
			r := harness.RunLinear(harness.LinearConfig{Policy: impl.PolicyGMLake, Seed: seed, Ops: 60, Serve: true,
				MemoryLimit: 256 << 20, Device: openDevice(256 << 20), Mutations: m})
			if r.Err == nil && r.Result == porcupine.Illegal {
				illegal++
			}
		}
		if rec.Failed() || illegal > 0 {
			caught++
		} else {
			t.Errorf("seeded bug %v was caught by neither rapid nor porcupine on the GPU", m)
		}
		t.Logf("seeded bug %-26v rapid: caught=%v %v; porcupine: %d of %d histories illegal", m, rec.Failed(), names, illegal, *biteHistories)
	}
	report(t, figures{Checker: "bite", Policy: impl.PolicyGMLake, Histories: *biteHistories,
		Violations: caught, Seconds: time.Since(start).Seconds(), Device: deviceName()})
	t.Logf("the GPU checkers caught %d of the %d seeded bugs reachable without fault injection", caught, tried)
}
