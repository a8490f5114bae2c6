package harness

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/gmlake/gmlake/impl"
)

// TestLinearizable records concurrent histories, one goroutine per stream (4 streams), for each policy,
// and checks each for linearizability against the allocator contract (INV-CONTRACT: C-NOOVERLAP,
// C-STREAM, C-OOM, C-FREE, i.e. INV-NOOVERLAP, INV-STREAM and INV-NOSPURIOUSOOM at the API). An illegal
// history writes porcupine's HTML visualization; the test prints its path.
func TestLinearizable(t *testing.T) {
	histories := 15
	if longProfile() {
		histories = 300
	}
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			ops := 0
			for seed := int64(1); seed <= int64(histories); seed++ {
				r := RunLinear(LinearConfig{Policy: p, Seed: seed})
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				ops += r.Ops
				switch r.Result {
				case porcupine.Illegal:
					t.Fatalf("seed %d: history of %d ops is not linearizable against the contract; visualization: %s\n"+
						"replay: go test ./harness -run 'TestLinearizable/%s$' -v", seed, r.Ops, r.VizPath, p)
				case porcupine.Unknown:
					t.Logf("seed %d: porcupine timed out (%d ops): inconclusive", seed, r.Ops)
				}
			}
			t.Logf("policy %s: %d histories checked, %d operations, 4 goroutines/streams", p, histories, ops)
		})
	}
}
