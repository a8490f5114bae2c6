package gpu_test

import (
	"flag"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness"
	"github.com/gmlake/gmlake/impl"
)

// recorder is a rapid.TB that records a failure instead of failing the test: the bite test asks whether
// the GPU checkers failed under each seeded bug.
type recorder struct {
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "gpu-bite" }
func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log.Len() < 1<<16 {
		fmt.Fprintf(&r.log, format+"\n", args...)
	}
}
func (r *recorder) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.Logf(format, args...) }
func (r *recorder) Skip(args ...any)                  { r.Log(args...) }
func (r *recorder) SkipNow()                          {}
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...) }
func (r *recorder) FailNow()                          { r.Fail() }
func (r *recorder) Fail()                             { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }

var invRE = regexp.MustCompile(`INV-[A-Z]+`)

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
		rec := &recorder{}
		rapid.Check(rec, func(rt *rapid.T) {
			harness.RunRapid(rt, harness.RapidConfig{Policy: impl.PolicyGMLake, NoFaults: true, Serve: true, MemoryLimit: *capacity,
				Device: openDevice(*capacity), Mutations: m})
		})
		invs := map[string]bool{}
		for _, s := range invRE.FindAllString(rec.log.String(), -1) {
			invs[s] = true
		}
		var names []string
		for k := range invs {
			names = append(names, k)
		}
		sort.Strings(names)
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
