package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
)

// longProfile reports whether GMLAKE_PROFILE=long (make verify) asks for the long profile.
func longProfile() bool { return os.Getenv("GMLAKE_PROFILE") == "long" }

// mutationProfile reports whether GMLAKE_PROFILE=mutation (gmlake mutate, once per mutant) asks the
// time-bound checkers for a short budget.
func mutationProfile() bool { return os.Getenv("GMLAKE_PROFILE") == "mutation" }

// setRapidChecks sets -rapid.checks to n unless the command line (or RAPID_CHECKS) chose it, and returns
// a func that restores it.
func setRapidChecks(n int) func() { return ops.SetRapidDefault("checks", strconv.Itoa(n)) }

// TestRapid runs the engine of each policy against the allocator contract with random operations (sizes
// biased to real traces, frees, double and interior frees, RecordStream, stream work launched and
// completed, EmptyCache, driver faults), checking after every step: INV-CONTRACT, INV-NOOVERLAP,
// INV-MAPPED, INV-NOALIAS, INV-REFCOUNT, INV-STATS, INV-MIRROR, INV-BLOCKS, INV-SIZEPOOL, INV-STREAM, INV-RELEASESAFE,
// INV-NOSPURIOUSOOM, and INV-NOLEAK at the end. Each sequence draws its own configuration (swarm.go:
// streams, sync, capacity, knobs, a fault schedule over every call kind, actions switched off), sizes aim
// at the policy's thresholds and repeat earlier ones, and the pending-pair template builds multi-stream
// pending states. A failure shrinks; rapid prints -rapid.seed / -rapid.failfile
// to replay it, and the op list is saved for TestOpsFile.
func TestRapid(t *testing.T) {
	// make test: a fixed seed, so CI runs the same sequences every time (pass -rapid.seed=0 for fresh
	// ones); make verify: fresh random seeds and many more sequences.
	checks := 400
	if longProfile() {
		checks = 5000
	} else {
		defer ops.SetRapidDefault("seed", "20261129")()
		defer ops.SetRapidDefault("shrinktime", "10s")()
	}
	defer setRapidChecks(checks)()
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			var c RapidCounters
			defer func() { // rapid.Check ends a failed test with FailNow
				t.Logf("policy %s: %d sequences, %d steps, %d out-of-memory answers, %d faults injected",
					p, c.Sequences.Load(), c.Steps.Load(), c.OOMs.Load(), c.Faults.Load())
				if t.Failed() {
					t.Logf("replay the shrunk failure: %s", rapidReplayCommand(t.Name()))
				}
			}()
			rapid.Check(t, func(rt *rapid.T) { RunRapid(rt, RapidConfig{Policy: p, Counters: &c}) })
		})
	}
}

// rapidReplayCommand returns the exact go test command that replays the newest rapid fail file of a test.
func rapidReplayCommand(name string) string {
	dir := filepath.Join("testdata", "rapid", strings.ReplaceAll(name, "/", "_"))
	files, _ := filepath.Glob(filepath.Join(dir, "*.fail"))
	sort.Strings(files) // names end in a timestamp
	run := "^" + regexp.QuoteMeta(strings.Split(name, "/")[0]) + "$/^" + regexp.QuoteMeta(strings.Join(strings.Split(name, "/")[1:], "/")) + "$"
	if len(files) == 0 {
		return fmt.Sprintf("go test ./harness -run '%s' -v -rapid.seed=<the seed above>", run)
	}
	return fmt.Sprintf("go test ./harness -run '%s' -v -rapid.failfile=%s", run, files[len(files)-1])
}

// TestOpsFile replays a program saved by a failing check (a program, a history or a trace):
// GMLAKE_OPS=path go test ./harness -run TestOpsFile (GMLAKE_SHRINK=1 also shrinks it and prints the state
// before the failing op). gmlake fuzz --replay path [--minimize] does the same from the command line.
func TestOpsFile(t *testing.T) {
	path := os.Getenv("GMLAKE_OPS")
	if path == "" {
		t.Skip("set GMLAKE_OPS to an op list to replay it")
	}
	p, err := ops.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, vs, env, err := ops.Run(p.Cfg, p.Ops)
	if err != nil {
		t.Fatal(err)
	}
	if i >= 0 {
		if os.Getenv("GMLAKE_SHRINK") != "" {
			small, svs := ops.Shrink(p.Cfg, p.Ops, 0)
			senv, err := ops.NewEnv(p.Cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range small[:max(len(small)-1, 0)] {
				senv.Step(o)
			}
			t.Logf("shrunk to %d ops (%v); state before the last op:\n%s\n%s", len(small), svs, ops.DescribeView(senv.View()), ops.Format(small))
		}
		t.Fatalf("step %d (%v) violates: %v\n%s", i, opAt(p.Ops, i), vs, env.Describe())
	}
	t.Logf("%d ops ran clean", len(p.Ops))
}

func opAt(seq []ops.Op, i int) string {
	if i < len(seq) {
		return seq[i].String()
	}
	return "finish"
}
