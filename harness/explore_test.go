package harness

import (
	"testing"
	"time"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// TestExplore enumerates every op sequence up to a fixed depth over small universes, through the real engine
// of each policy on the reference device, with every invariant after every step and INV-NOLEAK after closing
// from every distinct state: INV-CONTRACT, INV-NOOVERLAP, INV-MAPPED, INV-NOALIAS, INV-REFCOUNT, INV-STATS,
// INV-MIRROR, INV-BLOCKS, INV-BESTFIT, INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM, INV-NOLEAK,
// INV-SELFCHECK. States are deduplicated by a canonical hash. The universes:
//   - "roomy": a device of 8 x 2 MiB chunks (64 MiB for the PyTorch policies, whose segments are 20 MiB),
//     2 streams, 4 sizes (sub-chunk, one chunk, a split remainder, several chunks);
//   - "tight": 3 chunks (40 MiB for the PyTorch policies), 3 sizes, so that out-of-memory, release and
//     stitching under pressure come within a few ops.
//
// Ops: alloc of each size on each stream, free and record-stream of each live allocation, launch and
// complete on each stream, empty-cache, and allocations under an injected driver fault (map, set-access,
// create).
func TestExplore(t *testing.T) {
	// make test: depth 4 until the budget (depth 3 at least, in full); make verify: depth 6 until 10 min.
	depth, roomy, tight := 4, 7*time.Second, 3*time.Second
	if longProfile() {
		depth, roomy, tight = 6, 10*time.Minute, 5*time.Minute
	}
	if mutationProfile() { // gmlake mutate runs this once per mutant
		roomy, tight = 1500*time.Millisecond, 750*time.Millisecond
	}
	for _, p := range impl.Policies {
		universes := []struct {
			name string
			cfg  ExploreConfig
		}{
			{"roomy", ExploreConfig{Policy: p, Depth: depth, Faults: true, Deadline: roomy}},
			{"tight", ExploreConfig{Policy: p, Depth: depth, Faults: true, Deadline: tight,
				Capacity: 6 * vmm.MiB, Sizes: []uint64{512, 2 * vmm.MiB, 4 * vmm.MiB}}},
		}
		if p == impl.PolicyCaching || p == impl.PolicyExpandable {
			universes[1].cfg.Capacity, universes[1].cfg.Sizes = 40*vmm.MiB, []uint64{512, 2 * vmm.MiB, 22 * vmm.MiB}
		}
		// The tight universe again through the serving layer (what libgmlake runs): its out of memory
		// synchronises every stream and retries, so the pending states meet the retry.
		served := universes[1]
		served.name, served.cfg.Serve = "tight-served", true
		universes = append(universes, served)
		for _, u := range universes {
			t.Run(p+"/"+u.name, func(t *testing.T) {
				r, err := Explore(u.cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("policy %s, %s universe: depth %d explored in full (truncated=%v): %d distinct states, %d sequences, %d steps, %v",
					p, u.name, r.Depth, r.Truncated, r.States, r.Sequences, r.Steps, r.Elapsed.Round(time.Millisecond))
				if r.Violation != nil {
					path := saveOps(r.Program().String())
					t.Fatalf("violation after %d ops: %v\nreplay and shrink: gmlake fuzz --replay %s --minimize\n%s",
						len(r.Ops), r.Violation, path, ops.Format(r.Ops))
				}
			})
		}
	}
}

// TestExploreDeep enumerates narrower universes to depth 8 (make test; 10 under make verify): at most two
// live allocations, one unit of pending work per stream, two streams, and two sizes on either side of the
// policy's decisive threshold: a small-pool request and one at gmlake's stitching threshold (two granules;
// gmlake-paper's knob set to it too, so its stitching runs at this scale); for caching exactly 1 MiB and
// 10 MiB (the boundaries of PyTorch's segment sizes), for expandable 1 MiB and a 20 MiB page less 512 B. The devices hold only a few of those, so
// out-of-memory, release, stitching and cross-stream waits meet within eight ops. The "faults" universes
// (depth 5; 6 under make verify) arm a fault on every call kind the engine makes, before an allocation, a
// free and an EmptyCache. Every invariant after every step, INV-NOLEAK from every distinct state:
// INV-CONTRACT, INV-NOOVERLAP, INV-MAPPED, INV-NOALIAS, INV-REFCOUNT, INV-STATS, INV-MIRROR, INV-BLOCKS,
// INV-SIZEPOOL, INV-BESTFIT, INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM, INV-NOLEAK, INV-SELFCHECK.
func TestExploreDeep(t *testing.T) {
	depth, faultDepth, budget := 8, 5, 25*time.Second
	if longProfile() {
		depth, faultDepth, budget = 10, 6, 20*time.Minute
	}
	if mutationProfile() {
		budget = 2 * time.Second
	}
	type universe struct {
		policy string
		cfg    ExploreConfig
	}
	var us []universe
	for _, p := range impl.Policies {
		c := ExploreConfig{Policy: p, Streams: 2, MaxLive: 2, MaxPending: 1, Capacity: 8 * vmm.MiB,
			Sizes: []uint64{512, 4 * vmm.MiB}}
		switch p {
		case impl.PolicyGMLakePaper:
			c.Knobs.StitchMin, c.Capacity = 4*vmm.MiB, 40*vmm.MiB
		case impl.PolicyCaching:
			// Exactly kSmallSize and kMinLargeAlloc: the two boundaries of get_allocation_size (INV-TORCH).
			c.Capacity, c.Sizes = 40*vmm.MiB, []uint64{vmm.MiB, 10 * vmm.MiB}
		case impl.PolicyExpandable:
			c.Capacity, c.Sizes = 40*vmm.MiB, []uint64{vmm.MiB, 20*vmm.MiB - 512} // a page minus the split threshold
		}
		deep, faults := c, c
		deep.Depth, deep.Deadline = depth, budget
		faults.Depth, faults.Deadline, faults.Faults, faults.FaultCalls = faultDepth, budget/2, true, ops.SwarmFaultCalls
		us = append(us, universe{p + "/deep", deep}, universe{p + "/faults", faults})
	}
	for _, u := range us {
		t.Run(u.policy, func(t *testing.T) {
			r, err := Explore(u.cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: depth %d explored in full (asked %d, truncated=%v): %d distinct states, %d sequences, %d steps, %v",
				u.policy, r.Depth, u.cfg.Depth, r.Truncated, r.States, r.Sequences, r.Steps, r.Elapsed.Round(time.Millisecond))
			if r.Violation != nil {
				path := saveOps(r.Program().String())
				t.Fatalf("violation after %d ops: %v\nreplay and shrink: gmlake fuzz --replay %s --minimize\n%s",
					len(r.Ops), r.Violation, path, ops.Format(r.Ops))
			}
		})
	}
}
