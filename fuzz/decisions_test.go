package fuzz

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
)

// decisionsDir holds the decision goldens: generated programs, one policy each, with every step's answer
// and decision digest (ops.Env.DecisionHistory).
const decisionsDir = "testdata/decisions"

// decisionPrograms is how many programs TestDecisionHistories generates per policy (GMLAKE_GEN_DECISIONS=1).
const decisionPrograms = 12

// Property: every decision the engine makes on the committed generated programs is the one it made when the
// goldens were written: where each allocation went, the bytes reserved, mapped and allocated after each
// step, the free, pending and stitched blocks, and the driver calls each step made (ops.Env.Decisions).
// The contract and the spec judge whether an answer is legal; this pins which legal answer the engine
// gives, so a change that moves a decision the judges allow (a different best fit, a segment of another
// size, a stitch where growth was due, an event more per call) fails here and is reviewed. An intended
// change: GMLAKE_UPDATE=1 go test ./fuzz -run TestDecisionHistories, then read the diff.
func TestDecisionHistories(t *testing.T) {
	if os.Getenv("GMLAKE_GEN_DECISIONS") != "" {
		generateDecisionPrograms(t)
	}
	paths, err := filepath.Glob(filepath.Join(decisionsDir, "*.history"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no decision goldens in %s (%v): GMLAKE_GEN_DECISIONS=1 go test ./fuzz -run TestDecisionHistories writes them", decisionsDir, err)
	}
	update := os.Getenv("GMLAKE_UPDATE") != ""
	for _, path := range paths {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ops.Parse(string(want), path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := ops.RunDecisions(p)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		comment, _ := ops.LeadingComments(string(want))
		if update {
			if err := os.WriteFile(path, []byte(comment+got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if d := firstDifference(strings.TrimPrefix(string(want), comment), got); d != "" {
			t.Errorf("%s: a decision moved: %s\n(replay: go run ./cmd/gmlake fuzz --replay %s; an intended change: GMLAKE_UPDATE=1 go test ./fuzz -run TestDecisionHistories, then review the diff)",
				path, d, path)
		}
	}
}

// firstDifference describes the first line where got departs from want ("" if none): its number, both lines.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d\n  want: %s\n  got:  %s", i+1, a, b)
		}
	}
	return ""
}

// generateDecisionPrograms writes decisionPrograms new goldens per policy: programs decoded from seeded
// random bytes (randomProgram: every configuration the decoder draws, the knob byte included), kept when
// they run clean and make at least 30 steps.
func generateDecisionPrograms(t *testing.T) {
	if err := os.MkdirAll(decisionsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The engine's scenarios and findings (harness/testdata), whose programs build on purpose the states
	// random bytes rarely reach (multi-stream pending frees, captures, pools, gmlake-paper's collection):
	// their goldens there pin the answers, these the decisions.
	for _, glob := range []string{"../harness/testdata/scenarios/*.history", "../harness/testdata/findings/*.history"} {
		paths, _ := filepath.Glob(glob)
		for _, path := range paths {
			p, err := ops.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(decisionsDir, "scenario-"+filepath.Base(path))
			comment := fmt.Sprintf("# The program of %s with every step's answer and decision digest\n# (TestDecisionHistories: GMLAKE_GEN_DECISIONS=1).\n", strings.TrimPrefix(path, "../"))
			if err := ops.WriteDecisionGolden(name, comment, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := rand.New(rand.NewSource(2036))
	for _, policy := range impl.Policies {
		for n, tries := 0, 0; n < decisionPrograms; tries++ {
			if tries > 50*decisionPrograms {
				t.Fatalf("%s: only %d clean programs of 30 steps or more in %d tries", policy, n, tries)
			}
			p := randomProgram(r, 30+r.Intn(60))
			if len(p.Ops) < 30 {
				continue
			}
			p.Cfg.Policy = policy
			if f := runProgram(p, policy); f != "" {
				continue // a failure is the fuzz targets' to report
			}
			name := filepath.Join(decisionsDir, fmt.Sprintf("%s-%02d.history", policy, n))
			comment := "# A generated program (TestDecisionHistories: GMLAKE_GEN_DECISIONS=1, seed 2036) with every step's\n# answer and decision digest: outcome || placement, bytes, blocks, driver calls (ops.Env.DecisionHistory).\n"
			if err := ops.WriteDecisionGolden(name, comment, p); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
}
