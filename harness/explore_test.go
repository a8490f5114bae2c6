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
//   - "roomy": a device of 8 x 2 MiB chunks (64 MiB for the PyTorch policies and gmlake-paper, whose
//     segments are 20 MiB), 2 streams, 4 sizes (sub-chunk, one chunk, a split remainder, several chunks);
//   - "tight": 3 chunks (40 MiB for the PyTorch policies and gmlake-paper), 3 sizes, so that
//     out-of-memory, release and stitching under pressure come within a few ops.
//
// gmlake-paper stitches from 4 MiB here (its default, 512 MiB, is past every universe).
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
		if p == impl.PolicyCaching || p == impl.PolicyExpandable || p == impl.PolicyGMLakePaper {
			universes[1].cfg.Capacity, universes[1].cfg.Sizes = 40*vmm.MiB, []uint64{512, 2 * vmm.MiB, 22 * vmm.MiB}
		}
		if p == impl.PolicyGMLakePaper {
			// GLake stitches from 512 MiB (fragment_limit): from 4 MiB here, so that its stitching runs.
			for i := range universes {
				universes[i].cfg.Knobs.StitchMin = 4 * vmm.MiB
			}
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
				t.Logf("policy %s, %s universe: depth %d explored in full (truncated=%v): %d distinct states (fingerprint %016x), %d sequences, %d steps, %v",
					p, u.name, r.Depth, r.Truncated, r.States, r.Fingerprint, r.Sequences, r.Steps, r.Elapsed.Round(time.Millisecond))
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
// free and an EmptyCache. The "pools" universes (depth 8 asked; 10 under make verify) add private pools and
// CUDA graph capture: pool-create, an allocation from the pool on each stream, pool-release, a refused
// allocation from the released pool, capture-begin and capture-end on stream 0, at the larger size only;
// "pools-pending" roots the same universe at a block of the pool recorded on the other stream with work
// pending there (pool-create p1, alloc a0 SIZE s0 p1, record a0 s1, launch s1), so that its free, the
// pool's release while it is pending, frees deferred by a capture and EmptyCache meet within the budget.
// gmlake-paper has no private pools: its pools universes run captures only, rooted at a default-pool block.
// Then the targeted universes (targetedUniverses: the stitch choice over chunks of several granules, the
// fence at a free, gmlake-paper's collection in realloc_block, the capture flush on two streams with a
// stream forgotten, the flush of one deferred free in two ops, with a record fault at capture-end and
// EmptyCache, realloc_block's test before it collects, and the statistics' resets under caching), each
// explored in full to its depth; the last three also explore reset-peak and reset-acc, INV-TORCHSTATS's
// model in the state hash (ExploreConfig.Resets).
// Every invariant after every step, INV-NOLEAK from every distinct state: INV-CONTRACT, INV-NOOVERLAP,
// INV-MAPPED, INV-NOALIAS, INV-REFCOUNT, INV-STATS, INV-MIRROR, INV-BLOCKS, INV-SIZEPOOL, INV-BESTFIT,
// INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM, INV-NOLEAK, INV-SELFCHECK; INV-POOL and the pool queries
// once a pool op ran; INV-EMPTIED while no pool lives.
func TestExploreDeep(t *testing.T) {
	depth, faultDepth, poolDepth, budget, poolBudget := 8, 5, 8, 25*time.Second, 6*time.Second
	if longProfile() {
		depth, faultDepth, poolDepth, budget, poolBudget = 10, 6, 10, 20*time.Minute, 20*time.Minute
	}
	if mutationProfile() {
		budget, poolBudget = 2*time.Second, 2*time.Second
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
		deep, faults, pc := c, c, c
		deep.Depth, deep.Deadline = depth, budget
		faults.Depth, faults.Deadline, faults.Faults, faults.FaultCalls = faultDepth, budget/2, true, ops.SwarmFaultCalls
		// Private pools and CUDA graph capture: one pool (gmlake-paper has none: capture only), stream 0's
		// capture begun and ended, the larger size only, so pool memory, pending frees on the other stream,
		// frees deferred by a capture, pool release and EmptyCache meet within a few ops.
		pc.Depth, pc.Deadline, pc.CaptureStreams = poolDepth, poolBudget, 1
		pc.Sizes, pc.PoolSizes = c.Sizes[1:], c.Sizes[1:]
		if p != impl.PolicyGMLakePaper {
			pc.Pools = 1
		}
		// The same rooted at a block of the pool (of the default pool under gmlake-paper) recorded on the
		// other stream with work pending there: its free, the pool's release, a capture deferring frees
		// and EmptyCache then meet in the first ops.
		rooted := pc
		rooted.Prefix = []ops.Op{{Kind: ops.OpAlloc, ID: 0, Size: pc.Sizes[0], Stream: 0, Pool: pc.Pools},
			{Kind: ops.OpRecord, ID: 0, Stream: 1}, {Kind: ops.OpLaunch, Stream: 1}}
		if pc.Pools > 0 {
			rooted.Prefix = append([]ops.Op{{Kind: ops.OpPoolCreate, Pool: 1}}, rooted.Prefix...)
		}
		us = append(us, universe{p + "/deep", deep}, universe{p + "/faults", faults}, universe{p + "/pools", pc},
			universe{p + "/pools-pending", rooted})
	}
	us = append(us, targetedUniverses()...)
	for _, u := range us {
		t.Run(u.policy, func(t *testing.T) {
			r, err := Explore(u.cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: depth %d explored in full (asked %d, truncated=%v): %d distinct states (fingerprint %016x), %d sequences, %d steps, %v",
				u.policy, r.Depth, u.cfg.Depth, r.Truncated, r.States, r.Fingerprint, r.Sequences, r.Steps, r.Elapsed.Round(time.Millisecond))
			if r.Violation != nil {
				path := saveOps(r.Program().String())
				t.Fatalf("violation after %d ops: %v\nreplay and shrink: gmlake fuzz --replay %s --minimize\n%s",
					len(r.Ops), r.Violation, path, ops.Format(r.Ops))
			}
		})
	}
}

// TestExploreHashSeparatesPoolCaptureAndForgottenStates: the explorer's state hash keeps apart states whose
// View is the same but whose future differs: a free block of a private pool and one of the default pool, a
// pool that lives and one released, a stream capturing and one not, a run with a pool op and one without
// (the Env judges them differently from then on), a stream forgotten and one not (allocations on it are
// refused from then on); and it merges two runs that reach the same state by different addresses (a pool's
// block freed, then the same block asked again).
func TestExploreHashSeparatesPoolCaptureAndForgottenStates(t *testing.T) {
	const size = 4 * vmm.MiB
	hash := func(prog ...ops.Op) uint64 {
		t.Helper()
		env, err := ops.NewEnv(ops.Config{Policy: impl.PolicyGMLake, Capacity: 16 * vmm.MiB, Streams: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer env.Finish()
		for _, o := range prog {
			if r := env.Step(o); len(r.Violations) > 0 {
				t.Fatalf("%v: %v", o, r.Violations)
			}
		}
		return canonicalHash(env, 1 /* pools */)
	}
	create, release := ops.Op{Kind: ops.OpPoolCreate, Pool: 1}, ops.Op{Kind: ops.OpPoolRelease, Pool: 1}
	inPool := ops.Op{Kind: ops.OpAlloc, ID: 0, Size: size, Pool: 1}
	inDefault := ops.Op{Kind: ops.OpAlloc, ID: 0, Size: size}
	free := ops.Op{Kind: ops.OpFree, ID: 0}
	again := ops.Op{Kind: ops.OpAlloc, ID: 1, Size: size, Pool: 1}
	for _, c := range []struct {
		what string
		x, y []ops.Op
		same bool
	}{
		{"a free block of the pool vs one of the default pool", []ops.Op{create, inPool, free}, []ops.Op{create, inDefault, free}, false},
		{"the pool alive vs released", []ops.Op{create}, []ops.Op{create, release, create, release}, false},
		{"a pool op ran vs none", []ops.Op{create, release}, nil, false},
		{"stream 0 capturing vs not", []ops.Op{{Kind: ops.OpCaptureBegin, Stream: 0}}, nil, false},
		{"a capture begun and ended vs none", []ops.Op{{Kind: ops.OpCaptureBegin, Stream: 0}, {Kind: ops.OpCaptureEnd, Stream: 0}}, nil, true},
		{"a live allocation of the pool vs of the default pool", []ops.Op{create, inPool}, []ops.Op{create, inDefault}, false},
		{"stream 1 forgotten vs not", []ops.Op{{Kind: ops.OpForget, Stream: 1}}, nil, false},
		{"stream 1 forgotten with a block recorded on it vs not", []ops.Op{inDefault, {Kind: ops.OpRecord, ID: 0, Stream: 1}, free, {Kind: ops.OpForget, Stream: 1}},
			[]ops.Op{inDefault, {Kind: ops.OpRecord, ID: 0, Stream: 1}, free}, false},
		{"the pool's block asked again vs kept", []ops.Op{create, inPool, free, again}, []ops.Op{create, {Kind: ops.OpAlloc, ID: 1, Size: size, Pool: 1}}, true},
	} {
		if got := hash(c.x...) == hash(c.y...); got != c.same {
			t.Errorf("%s: same hash %v, want %v\n%s\nvs\n%s", c.what, got, c.same, ops.Format(c.x), ops.Format(c.y))
		}
	}
}

type universe struct {
	policy string
	cfg    ExploreConfig
}

// targetedUniverses are small universes, most rooted at a prefix, that reach within a few ops the states
// where a decision of the engine shows and that the per-policy universes above reach only past their
// budget: gmlake's choice of chunks to stitch between several free chunks of different sizes, the fence a
// free records when it leaves a whole chunk free, gmlake-paper's growth failing while its cached stitched
// blocks add up to the segment, and the frees a CUDA graph capture deferred, on two streams, flushed when
// it ends (or not, under a fault), a stream forgotten with frees pending on it; the statistics' resets
// after each of those (flush, paper-grow, stats). Each is explored in full to its depth within about 2-7 s
// on the shared 2 cores (make test; 8 s at most); make verify goes 2 deeper; gmlake mutate keeps the depth
// under a 4 s budget.
func targetedUniverses() []universe {
	const mib = vmm.MiB
	extra, budget := 0, 8*time.Second
	if longProfile() {
		extra, budget = 2, 10*time.Minute
	}
	if mutationProfile() {
		budget = 4 * time.Second
	}
	alloc := func(id int, size uint64, s int) ops.Op {
		return ops.Op{Kind: ops.OpAlloc, ID: id, Size: size, Stream: s}
	}
	free := func(id int) ops.Op { return ops.Op{Kind: ops.OpFree, ID: id} }
	// stitch: gmlake arena chunks of several granules (ChunkSize 4 MiB: a request maps one chunk of its
	// size up to 4 MiB), five blocks 2|2|4|2|4 MiB side by side, then 2, 4 and 6 MiB requests and frees:
	// two 4 MiB chunks apart and a 6 MiB request (the largest, then the smallest chunk covering the rest:
	// both 4 MiB chunks, no new memory), a 4 MiB block of two 2 MiB chunks beside a 4 MiB chunk (largest
	// first: 4 + 2, not 2 + 2 + 4), best fit over a merged run, growth at the arena's end (INV-STITCH,
	// INV-GROWTH).
	stitch := ExploreConfig{Policy: impl.PolicyGMLake, Streams: 1, MaxLive: 5, MaxPending: 1, Capacity: 24 * mib,
		Sizes: []uint64{2 * mib, 4 * mib, 6 * mib}, Knobs: impl.Config{ChunkSize: 4 * mib}, Depth: 4 + extra,
		Prefix: []ops.Op{alloc(0, 2*mib, 0), alloc(1, 2*mib, 0), alloc(2, 4*mib, 0), alloc(3, 2*mib, 0), alloc(4, 4*mib, 0)}}
	// handoff: a device of 8 MiB, chunks up to 8 MiB, the smallest large-pool request (1 MiB + 512 B) and
	// one of 6 MiB behind it that ends at its chunk's end, on two streams: freed with work launched after
	// the free, the small size asked on the other stream must get the 6 MiB chunk back (the fence recorded
	// at the free says the free completed before that work; INV-NOSPURIOUSOOM, INV-RELEASESAFE).
	handoff := ExploreConfig{Policy: impl.PolicyGMLake, Streams: 2, MaxLive: 2, MaxPending: 1, Capacity: 8 * mib,
		Sizes: []uint64{mib + 512, 6 * mib}, Knobs: impl.Config{ChunkSize: 8 * mib}, Depth: 6 + extra}
	// paper-gc: gmlake-paper stitching from 4 MiB, one 20 MiB segment holding 2|4|2|2 MiB with the 4 MiB
	// block freed, on a 24 MiB device: a 14 MiB request stitches the hole and the segment's rest, freed
	// it stays cached; once a block is taken from its parts, the next 14 MiB request's new segment does not
	// fit, and realloc_block may not collect the cached block (the device has less free than the
	// segment; INV-PAPERGC), then release_cached_blocks, the retry, out of memory.
	paper := ExploreConfig{Policy: impl.PolicyGMLakePaper, Streams: 1, MaxLive: 5, MaxPending: 1, Capacity: 24 * mib,
		Sizes: []uint64{2 * mib, 4 * mib, 14 * mib}, Knobs: impl.Config{StitchMin: 4 * mib}, Depth: 5 + extra,
		Prefix: []ops.Op{alloc(0, 2*mib, 0), alloc(1, 4*mib, 0), alloc(2, 2*mib, 0), alloc(3, 2*mib, 0), free(1)}}
	// capture: a block of each stream recorded on the other, work pending on both, a capture begun on
	// stream 0; both streams may capture (a second capture), so frees deferred by a capture on two streams,
	// their flush when the last capture ends, the work completing before or after, requests that need the
	// deferred memory back (the device holds only the two blocks) and EmptyCache meet within the depth;
	// a record-event or query-event fault before a free, an allocation, an EmptyCache, a capture's end (its
	// flush fails: the frees stay deferred for the next call to try again) and a forget; stream 1 may be
	// forgotten, so a deferred free whose streams are all forgotten and done is freed at the flush, one
	// whose stream's last work is pending waits for it. Depth 8 in full (3,716 states, about 5 s): at 6 it
	// met a false INV-NOSPURIOUSOOM and at 7 a false C-OOM, both fixed in the judges (the history's lazy
	// marks: a free during a capture waits for the work launched up to the flush; scenarios
	// capture-fence-* and capture-flush-after-work-gmlake).
	capture := ExploreConfig{Policy: impl.PolicyGMLake, Streams: 2, MaxLive: 2, MaxPending: 1, Capacity: 8 * mib,
		Sizes: []uint64{4 * mib}, CaptureStreams: 2, Forget: true, Depth: 8, Faults: true,
		FaultCalls: []vmm.CallKind{vmm.CallRecordEvent, vmm.CallQueryEvent},
		Prefix: []ops.Op{alloc(0, 4*mib, 0), {Kind: ops.OpRecord, ID: 0, Stream: 1}, alloc(1, 4*mib, 1),
			{Kind: ops.OpRecord, ID: 1, Stream: 0}, {Kind: ops.OpLaunch, Stream: 0}, {Kind: ops.OpLaunch, Stream: 1},
			{Kind: ops.OpCaptureBegin, Stream: 0}}}
	// flush: the capture universe's flush in two ops: a block of stream 0 recorded on stream 1 with work
	// pending there, freed while stream 0 captures (deferred), then stream 1 forgotten, its work completed,
	// the capture ended (the flush frees the block at once: every stream it was used on is gone and done), or
	// the capture's end under a record-event fault (the free stays deferred) and then EmptyCache under one too
	// (its flush fails: the call must say so; INV-FLUSHED judges an EmptyCache that returns no error), an
	// allocation needing the deferred memory back, the resets. Depth 5 in full.
	flush := ExploreConfig{Policy: impl.PolicyGMLake, Streams: 2, MaxLive: 2, MaxPending: 1, Capacity: 8 * mib,
		Sizes: []uint64{4 * mib}, CaptureStreams: 1, Forget: true, Resets: true, Depth: 5 + extra, Faults: true,
		FaultCalls: []vmm.CallKind{vmm.CallRecordEvent},
		Prefix: []ops.Op{alloc(0, 4*mib, 0), {Kind: ops.OpRecord, ID: 0, Stream: 1}, {Kind: ops.OpLaunch, Stream: 1},
			{Kind: ops.OpCaptureBegin, Stream: 0}, free(0)}}
	// paper-grow: paper-gc's segment with the 14 MiB stitched block built and cached: a 4 MiB request takes
	// the hole back from under it, and the next 14 MiB request's segment does not fit a device with 4 MiB free
	// while the stream's cached stitched blocks add up to the segment: realloc_block must not collect them
	// (paperGrowLocked's `devFree <= size || garbage < size`; INV-PAPERGC), then release_cached_blocks, the
	// retry and out of memory; with the resets, so that the statistics of an out of memory (num_alloc_retries,
	// num_ooms) are reset and counted again. Depth 4 in full.
	paperGrow := paper
	paperGrow.Prefix = append(append([]ops.Op(nil), paper.Prefix...), alloc(4, 14*mib, 0), free(4))
	paperGrow.Sizes, paperGrow.Resets, paperGrow.Depth = []uint64{4 * mib, 14 * mib}, true, 4+extra
	// paper-reuse: paper-grow's cached 14 MiB stitched block under reuseLimit 1.1, the free pBlocks of its
	// segment at most 10 MiB: a 12 MiB request may not reuse it (14 > 13.2: GLake stitches anew), a 14 MiB one
	// takes it, a 10 MiB one is best fit's; what each leaves cached meets the next (INV-REUSE's gmlake-paper
	// clause). Depth 4 in full.
	paperReuse := paperGrow
	paperReuse.Knobs = impl.Config{StitchMin: 4 * mib, ReuseLimit: 1.1}
	paperReuse.Sizes, paperReuse.Resets, paperReuse.Depth = []uint64{10 * mib, 12 * mib, 14 * mib}, false, 4+extra
	// paper-realloc: gmlake-paper with reAlloc through the serving layer, a 20 MiB segment whose 2 and 8 MiB
	// blocks are free beside live ones on a 64 MiB device: requests the free blocks cover below fragLimit,
	// whose rest would make a segment larger than the whole one, or that fail after reAlloc grew (the
	// retry's whole segment, FINDINGS F14; the error's figures after the grown segments went back, F13).
	// Depth 4 in full.
	paperRealloc := ExploreConfig{Policy: impl.PolicyGMLakePaper, Streams: 1, MaxLive: 6, MaxPending: 1, Capacity: 64 * mib,
		Sizes: []uint64{10 * mib, 12 * mib, 44 * mib}, Knobs: impl.Config{ReAlloc: true}, Serve: true, Depth: 4 + extra,
		Prefix: []ops.Op{alloc(0, 2*mib, 0), alloc(1, 2*mib, 0), alloc(2, 8*mib, 0), alloc(3, 2*mib, 0), free(0), free(2)}}
	// reuse: gmlake's cached stitched block at its reuse limit, max(r/4*5, r + 2 granules): three 4 MiB pieces
	// with a 2 MiB block after each, freed, stitched into 12 MiB and freed, so that the 12 MiB stitched block is
	// cached with every chunk free and no free pBlock holds more than 4 MiB; then 6 MiB (a granule beyond the
	// limit: a new stitch, not the cached block), 8 MiB (the additive bound exactly: the cached block), 10 MiB
	// (the ratio) and 12 MiB requests, freed and asked again (INV-REUSE: the reuse taken, within the limit, of
	// the smallest); and an unmap fault at any step, so that the cached block's teardown (EmptyCache, the
	// release after an out of memory) meets a refused unmap (INV-EMPTIED: EmptyCache reports it). Depth 4 in
	// full.
	reuse := ExploreConfig{Policy: impl.PolicyGMLake, Streams: 1, MaxLive: 6, MaxPending: 1, Capacity: 20 * mib,
		Sizes: []uint64{6 * mib, 8 * mib, 10 * mib, 12 * mib}, Depth: 4 + extra, Faults: true,
		FaultCalls: []vmm.CallKind{vmm.CallUnmap},
		Prefix: []ops.Op{alloc(0, 4*mib, 0), alloc(1, 2*mib, 0), alloc(2, 4*mib, 0), alloc(3, 2*mib, 0), alloc(4, 4*mib, 0),
			alloc(5, 2*mib, 0), free(0), free(2), free(4), alloc(6, 12*mib, 0), free(6)}}
	// arena-run: gmlake's arena [4 MiB unmapped | 4 MiB free, mapped | 2 MiB live | unmapped tail]: a 6 MiB
	// request's candidate run starts at the unmapped hole and takes 2 of the free block's 4 mapped MiB, so
	// the arena would map 4 MiB where stitching the free block's chunks maps 2 (INV-STITCH's whether, and
	// INV-GROWTH: the run's mapped bytes counted only as far as the request reaches, arenaCandidateLocked);
	// with 2, 4 and 8 MiB requests, frees and EmptyCache after. Depth 3 in full.
	arenaRun := ExploreConfig{Policy: impl.PolicyGMLake, Streams: 1, MaxLive: 4, MaxPending: 1, Capacity: 32 * mib,
		Sizes: []uint64{2 * mib, 4 * mib, 6 * mib, 8 * mib}, Depth: 3 + extra,
		Prefix: []ops.Op{alloc(0, 4*mib, 0), alloc(1, 4*mib, 0), alloc(2, 2*mib, 0), free(0), {Kind: ops.OpEmptyCache}, free(1)}}
	// stats: the tight universe of caching (PyTorch's segments: 2 MiB small, 20 MiB large, released whole)
	// with the resets: a peak or a total that does not restart, or restarts from the wrong value, after
	// allocations, splits, frees, out of memory and EmptyCache (INV-TORCHSTATS's reset model).
	stats := ExploreConfig{Policy: impl.PolicyCaching, Streams: 2, MaxLive: 2, MaxPending: 1, Capacity: 40 * mib,
		Sizes: []uint64{512, 22 * mib}, Resets: true, Depth: 5 + extra}
	us := []universe{{"gmlake/stitch", stitch}, {"gmlake/handoff", handoff}, {"gmlake-paper/paper-gc", paper},
		{"gmlake/capture", capture}, {"gmlake/flush", flush}, {"gmlake-paper/paper-grow", paperGrow},
		{"gmlake-paper/paper-reuse", paperReuse}, {"gmlake-paper/paper-realloc", paperRealloc}, {"gmlake/reuse", reuse}, {"gmlake/arena-run", arenaRun}, {"caching/stats", stats}}
	for i := range us {
		us[i].cfg.Deadline = budget
	}
	return us
}

// TestExploreStatsHashSeparatesResetStates: in a universe with the reset moves the state hash keeps apart
// states that differ only in what INV-TORCHSTATS reads (a peak left by a freed allocation and the same state
// after reset-peak; totals counted before and after reset-acc), which the hash without them merges, and it
// merges what the judges cannot tell apart (a second reset right after the first).
func TestExploreStatsHashSeparatesResetStates(t *testing.T) {
	run := func(prog ...ops.Op) *ops.Env {
		t.Helper()
		env, err := ops.NewEnv(ops.Config{Policy: impl.PolicyGMLake, Capacity: 16 * vmm.MiB, Streams: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { env.Finish() })
		for _, o := range prog {
			if r := env.Step(o); len(r.Violations) > 0 {
				t.Fatalf("%v: %v", o, r.Violations)
			}
		}
		return env
	}
	peak, acc := ops.Op{Kind: ops.OpResetPeak}, ops.Op{Kind: ops.OpResetAcc}
	used := []ops.Op{{Kind: ops.OpAlloc, ID: 0, Size: 4 * vmm.MiB}, {Kind: ops.OpFree, ID: 0}, {Kind: ops.OpEmptyCache}}
	with := func(extra ...ops.Op) []ops.Op { return append(append([]ops.Op(nil), used...), extra...) }
	for _, c := range []struct {
		what       string
		x, y       []ops.Op
		sameStates bool // canonicalHash alone
		sameStats  bool // with statsHash
	}{
		{"the peak of a freed allocation vs reset", with(), with(peak), true, false},
		{"totals before vs after reset-acc", with(), with(acc), true, false},
		{"reset-peak once vs twice", with(peak), with(peak, peak), true, true},
		{"reset-acc once vs twice", with(acc), with(acc, acc), true, true},
	} {
		x, y := run(c.x...), run(c.y...)
		hx, hy := canonicalHash(x, 0 /* pools */), canonicalHash(y, 0)
		if (hx == hy) != c.sameStates {
			t.Errorf("%s: same state hash %v, want %v", c.what, hx == hy, c.sameStates)
		}
		if got := statsHash(hx, x) == statsHash(hy, y); got != c.sameStats {
			t.Errorf("%s: same hash with the statistics %v, want %v\n%s\nvs\n%s", c.what, got, c.sameStats, ops.Format(c.x), ops.Format(c.y))
		}
	}
}
