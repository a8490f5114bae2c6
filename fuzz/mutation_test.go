package fuzz

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
)

// slowToCatch are the seeded bugs that need a long search (a driver failure mid-stitch, a best-fit or
// out-of-memory corner): checked with GMLAKE_PROFILE=long only, to keep CI fast.
var slowToCatch = impl.MutLeakOnStitchFailure | impl.MutWrongBestFit | impl.MutSpuriousOOM

// Property: the fuzz target's executor bites: for every seeded engine bug (impl.Mutation) some program of
// the seed corpus or of the random generator fails with the bug switched on, for some policy. Prints the
// table of which check caught which bug first.
func TestExecCatchesMutations(t *testing.T) {
	skipUnlessSeeded(t)
	long := os.Getenv("GMLAKE_PROFILE") == "long"
	var progs []*ops.Program
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzOps", "*"))
	for _, f := range files {
		if p, err := ReadProgramFile(f); err == nil {
			progs = append(progs, p)
		}
	}
	r := rand.New(rand.NewSource(7))
	for len(progs) < len(files)+40 {
		progs = append(progs, randomProgram(r, 40+r.Intn(120)))
	}
	missed := 0
	for _, m := range impl.AllMutations() {
		if m&slowToCatch != 0 && !long {
			continue
		}
		caught := ""
	search:
		for i, p := range progs {
			for _, policy := range impl.Policies {
				// Only count programs that pass without the bug, so the catch is the bug's.
				f, inv, step := runMutated(p, policy, m)
				if f == "" {
					continue
				}
				if clean := runProgram(p, policy); clean != "" {
					continue
				}
				caught = policy + " " + inv
				t.Logf("%-26v caught by %-18s (program %d, %s, step %d)", m, inv, i, policy, step)
				break search
			}
		}
		if caught == "" {
			missed++
			t.Logf("%-26v NOT caught by %d programs x %d policies", m, len(progs), len(impl.Policies))
		}
	}
	if missed > 0 {
		t.Errorf("%d seeded bugs not caught: the fuzz target's checks are vacuous for them", missed)
	}
}

// skipUnlessSeeded skips a test of a seeded bug in a build without them (-tags gmlake_mutants).
func skipUnlessSeeded(t *testing.T) {
	t.Helper()
	if !impl.SeededBugs {
		t.Skip("seeded bugs need -tags gmlake_mutants")
	}
}
