package harness

import (
	"fmt"
	"testing"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// INV-EMPTIED, directed: under every policy, with the cache holding free memory of both pools (a small and
// a large allocation freed, and a stitched block under gmlake), each call that returns memory (cuMemUnmap,
// cuMemRelease, cuMemAddressFree) failing once at its first, second or third call inside EmptyCache: the
// EmptyCache either reports the failure or leaves nothing behind (and a second one, with no fault, leaves
// nothing), and every other invariant holds. At least one case must see the failure reported, or the faults
// never reached a call. Replay one: the op list it prints, with GMLAKE_OPS=FILE go test ./harness -run TestOpsFile.
func TestEmptyCacheReportsWhatItKeeps(t *testing.T) {
	reported := 0
	for _, p := range impl.Policies {
		for _, k := range []vmm.CallKind{vmm.CallUnmap, vmm.CallRelease, vmm.CallFreeAddress} {
			for n := 1; n <= 3; n++ {
				prog := []ops.Op{
					{Kind: ops.OpAlloc, ID: 0, Size: 512},
					{Kind: ops.OpAlloc, ID: 1, Size: 6 * vmm.MiB},
					{Kind: ops.OpAlloc, ID: 2, Size: 6 * vmm.MiB},
					{Kind: ops.OpFree, ID: 0},
					{Kind: ops.OpFree, ID: 1},
					{Kind: ops.OpAlloc, ID: 3, Size: 8 * vmm.MiB}, // gmlake may stitch a1's chunks with new memory
					{Kind: ops.OpFree, ID: 2},
					{Kind: ops.OpFree, ID: 3},
					{Kind: ops.OpFail, Call: k, N: n, Result: vmm.UnknownCUDAError},
					{Kind: ops.OpEmptyCache},
					{Kind: ops.OpClearFaults},
					{Kind: ops.OpEmptyCache},
				}
				env, err := ops.NewEnv(ops.Config{Policy: p, Capacity: 64 * vmm.MiB, SyncStreams: true})
				if err != nil {
					t.Fatal(err)
				}
				var bad []string
				for _, o := range prog {
					r := env.Step(o)
					for _, v := range r.Violations {
						bad = append(bad, v.String())
					}
					if o.Kind == ops.OpEmptyCache && env.Faulty() && r.Err != nil {
						reported++
						if testing.Verbose() {
							fmt.Printf("%s, %v fails at call %d: %s\n", p, k, n, ops.Outcome(r))
						}
					}
				}
				for _, v := range env.Finish() {
					bad = append(bad, v.String())
				}
				if len(bad) > 0 {
					t.Errorf("%s, %v fails at call %d: %v\nreplay:\n%s", p, k, n, bad, env.Describe())
				}
			}
		}
	}
	if reported == 0 {
		t.Fatal("no EmptyCache reported a failure: the faults never reached a call that returns memory")
	}
	t.Logf("%d of %d EmptyCache calls reported the injected failure", reported, len(impl.Policies)*3*3)
}
