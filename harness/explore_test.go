package harness

import (
	"testing"
	"time"

	"github.com/gmlake/gmlake/impl"
)

// TestExplore enumerates every op sequence up to a fixed depth over a small universe (a device of 8 x
// 2 MiB chunks, 64 MiB for the PyTorch policies; 2 streams; 4 sizes; alloc, free, record-stream, launch,
// complete, empty-cache, and allocations under injected driver faults) through the real engine of each
// policy, with every invariant after every step and INV-NOLEAK after closing from every state:
// INV-CONTRACT, INV-NOOVERLAP, INV-MAPPED, INV-NOALIAS, INV-REFCOUNT, INV-STATS, INV-MIRROR, INV-BLOCKS,
// INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM, INV-NOLEAK. States are deduplicated by a canonical hash.
func TestExplore(t *testing.T) {
	// make test: depth 3 in full, then depth 4 until the budget (each policy); make verify: depth 5.
	depth, budget := 4, 10*time.Second
	if longProfile() {
		depth, budget = 5, 30*time.Minute
	}
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			r, err := Explore(ExploreConfig{Policy: p, Depth: depth, Faults: true, Deadline: budget})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("policy %s: depth %d explored (truncated=%v): %d distinct states, %d sequences, %d steps, %v",
				p, r.Depth, r.Truncated, r.States, r.Sequences, r.Steps, r.Elapsed.Round(time.Millisecond))
			if r.Violation != nil {
				path := saveOps(FormatOps(r.Ops))
				t.Fatalf("violation after %d ops: %v\nops (GMLAKE_OPS=%s go test ./harness -run TestOpsFile; header: # policy=%s capacity=%d streams=2):\n%s",
					len(r.Ops), r.Violation, path, p, DefaultExploreCapacity(p), FormatOps(r.Ops))
			}
		})
	}
}
