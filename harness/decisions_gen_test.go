package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
)

// TestGenerateDecisionPrograms writes rapid's share of the decision goldens (fuzz/testdata/decisions/rapid-*,
// judged by fuzz's TestDecisionHistories) when GMLAKE_GEN_DECISIONS=1: sequences of rapid's swarm (each draws
// its configuration: streams, sync, capacity, knobs, faults, the serving layer, the default name, and the
// templates that build multi-stream pending states, fragments and hand-offs), seed 2036, every seventh one
// that ran clean with 40 ops or more, 12 per policy.
func TestGenerateDecisionPrograms(t *testing.T) {
	if os.Getenv("GMLAKE_GEN_DECISIONS") == "" {
		t.Skip("set GMLAKE_GEN_DECISIONS=1 to draw rapid's decision goldens anew")
	}
	const perPolicy, every = 12, 7
	dir := repoFile("fuzz/testdata/decisions")
	defer ops.SetRapidDefault("seed", "2036")()
	defer setRapidChecks(perPolicy * every * 3)()
	for _, policy := range impl.Policies {
		var progs []*ops.Program
		seen := 0
		rapid.Check(t, func(rt *rapid.T) {
			RunRapid(rt, RapidConfig{Policy: policy, Finished: func(e *ops.Env) {
				if len(e.Ops) < 40 || len(progs) == perPolicy {
					return
				}
				if seen++; seen%every == 0 {
					progs = append(progs, e.Program())
				}
			}})
		})
		if len(progs) < perPolicy {
			t.Fatalf("%s: only %d clean sequences of 40 ops or more were kept", policy, len(progs))
		}
		for i, p := range progs {
			comment := "# A sequence of rapid's swarm (TestGenerateDecisionPrograms: GMLAKE_GEN_DECISIONS=1, seed 2036) with every\n# step's answer and decision digest: outcome || placement, bytes, blocks, statistics, driver calls.\n"
			name := filepath.Join(dir, fmt.Sprintf("rapid-%s-%02d.history", policy, i))
			if err := ops.WriteDecisionGolden(name, comment, p); err != nil {
				t.Fatal(err)
			}
		}
	}
}
