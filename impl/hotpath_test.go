package impl

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// TestWarmPairMakesNoDriverCall: the steady-state hot path makes no driver call (gmlake-paper: only the
// event calls GMLake makes there). After warm-up, 1000
// Alloc+Free pairs of one size on one stream, every policy, small to large sizes, leave the device's call
// counts unchanged. The warm-up is longer than maxFences pairs: each of the first frees leaves a whole
// chunk or segment free and records a fence, until maxFences are outstanding (spec/FINDINGS.md F6 says
// what that bound costs).
func TestWarmPairMakesNoDriverCall(t *testing.T) {
	for _, pol := range Policies {
		for _, size := range []uint64{512, 1 << 20, 8 << 20, 256 << 20} {
			dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
			a, err := New(dev, Config{Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			pair := warmPair(t, a, pol, size)
			before := dev.Counts()
			for i := 0; i < 1000; i++ {
				pair()
			}
			after := dev.Counts()
			var want vmm.CallCounts
			if pol == PolicyGMLakePaper {
				// GMLake's block events, the calls it makes on its hot path: the search key's event
				// (create, destroy), the split head's new event (create; the rest's is destroyed when
				// they merge at free), the free's record (insert_free_event_into_alloc_stream).
				split := uint64(0)
				if size < 256<<20 {
					split = 1000
				}
				want[vmm.CallCreateEvent], want[vmm.CallDestroyEvent] = 1000+split, 1000+split
				want[vmm.CallRecordEvent] = 1000
			}
			for k := range after {
				if n := after[k] - before[k]; n != want[k] {
					t.Errorf("%s, %d B: 1000 warm Alloc+Free pairs made %d %v calls, want %d", pol, size, n, vmm.CallKind(k), want[k])
				}
			}
			if _, err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestWarmPairAllocatesNothing: the steady-state hot path allocates no host memory (the free sets are
// intrusive, block structs are recycled, the pointer table keeps its entries): after warm-up, an Alloc+Free
// pair of one size on one stream makes no heap allocation, small to large sizes, every policy but
// gmlake-paper (whose GMLake block events are allocated objects on the engine and on the device).
func TestWarmPairAllocatesNothing(t *testing.T) {
	for _, pol := range Policies {
		if pol == PolicyGMLakePaper {
			continue
		}
		for _, size := range []uint64{512, 1 << 20, 8 << 20, 256 << 20} {
			a, _ := newTest(t, pol, 0 /* capacity: an H200 */, true /* sync */)
			pair := warmPair(t, a, pol, size)
			if n := testing.AllocsPerRun(200, pair); n != 0 {
				t.Errorf("%s, %d B: a warm Alloc+Free pair makes %.1f heap allocations, want 0", pol, size, n)
			}
		}
	}
}

// warmPair returns one Alloc+Free pair of size on the default stream, after running it past the warm-up:
// more than maxFences pairs, since each of the first frees leaves a chunk or segment free and records a fence.
func warmPair(t *testing.T, a *Allocator, pol string, size uint64) func() {
	t.Helper()
	pair := func() {
		p, err := a.Alloc(size, vmm.DefaultStream)
		if err != nil {
			t.Fatalf("%s: Alloc(%d): %v", pol, size, err)
		}
		if err := a.Free(p); err != nil {
			t.Fatalf("%s: Free: %v", pol, err)
		}
	}
	for i := 0; i < maxFences+2; i++ {
		pair()
	}
	return pair
}

// Property (INV-BUDGET rule 3, on the engine): reusing, on stream s1, an sBlock stitched over memory stream s0
// freed makes no driver call per pair once warm (beyond the frees' capped fences), under every policy: the sBlock's parts wait only for s1's own
// work, which s1 may take back at once (stream order). The engine before the fix recorded and queried a fence
// on s1 in every Alloc (found by bench/torch/hotpath_bench.sh on the H100: 256 MiB on a second stream).
func TestReuseOverAnotherStreamsMemoryAsksNothing(t *testing.T) {
	const size = 256 << 20
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
			a, err := New(dev, Config{Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			s1, err := dev.CreateStream()
			if err != nil {
				t.Fatal(err)
			}
			pair := func(s vmm.Stream) {
				t.Helper()
				p, err := a.Alloc(size, s)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Free(p); err != nil {
					t.Fatal(err)
				}
			}
			pair(0)
			pair(s1) // the first pair on s1 may stitch, grow or fence
			pair(s1)
			before := dev.Counts()
			const n = 100
			for range n {
				pair(s1)
			}
			after := dev.Counts()
			calls := map[string]uint64{}
			for k, v := range after.Map() {
				if d := v - before.Map()[k]; d > 0 {
					calls[k] = d
				}
			}
			// The frees' fences (INV-FENCE: at most maxFences outstanding per stream, each a new event) are
			// the only calls allowed; no query, and nothing per pair.
			fences := calls["record_event"]
			delete(calls, "record_event")
			delete(calls, "create_event")
			if pol != PolicyGMLakePaper && (len(calls) > 0 || fences > maxFences) { // gmlake-paper: GLake's event per Block
				t.Errorf("%d warm Alloc+Free pairs of %d MiB on s1 after s0 freed the memory recorded %d fences and made driver calls %v, want at most %d fences and nothing else",
					n, size>>20, fences, calls, maxFences)
			}
			checkState(t, a, dev)
		})
	}
}

// footprint is the size of every growable structure of the engine's host state, the number of segments and
// sBlocks included: what a steady state must leave as it found it.
func footprint(a *Allocator) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	fences := 0
	for _, ss := range a.order {
		fences += len(ss.fences)
	}
	return map[string]int{"pend": len(a.pend), "evFree": len(a.evFree), "sblocks": len(a.sblocks), "segs": len(a.segs),
		"ptrs": a.ptrs.len(), "spare": len(a.spare), "spareParts": len(a.spareParts), "fences": fences,
		"streams": len(a.streams), "deferred": len(a.deferred), "segEv": len(a.segEv)}
}

// TestWarmPairsLeaveTheEngineAsTheyFoundIt: once a pair (Alloc then Free of one size on one stream) is warm,
// repeating it changes no part of the engine's host state: a structure that grows by an entry per pair is a
// leak that makes every later call slower (an sBlock over another stream's memory left one stale cross-stream
// wait in pend per pair: 37 us per pair after 25000 pairs, bench/torch/hotpath_bench.sh's 256 MiB thread).
// Each seed builds a random state first: allocations on three streams, some kept live, some freed; then every
// size on every stream is warmed and repeated.
func TestWarmPairsLeaveTheEngineAsTheyFoundIt(t *testing.T) {
	sizes := []uint64{512, 1 << 20, 8 << 20, 256 << 20}
	for _, pol := range Policies {
		for seed := int64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", pol, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 0))
				dev := sim.NewDevice(sim.DeviceConfig{Capacity: 8 << 30, SyncStreams: true})
				a, err := New(dev, Config{Policy: pol})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				streams := []vmm.Stream{0}
				for range 2 {
					s, err := dev.CreateStream()
					if err != nil {
						t.Fatal(err)
					}
					streams = append(streams, s)
				}
				var ops []string
				var live []vmm.DevicePtr
				for range 40 {
					sz, s := sizes[rng.IntN(len(sizes))]>>rng.IntN(3), streams[rng.IntN(len(streams))]
					p, err := a.Alloc(sz, s)
					if err != nil {
						t.Fatal(err)
					}
					ops = append(ops, fmt.Sprintf("alloc %d on %d", sz, s))
					if rng.IntN(3) == 0 {
						live = append(live, p)
					} else if err := a.Free(p); err != nil {
						t.Fatal(err)
					}
				}
				for _, s := range streams {
					for _, sz := range sizes {
						pair := func() {
							p, err := a.Alloc(sz, s)
							if err != nil {
								t.Fatal(err)
							}
							if err := a.Free(p); err != nil {
								t.Fatal(err)
							}
						}
						for range 2*maxFences + 2 {
							pair()
						}
						before := footprint(a)
						for range 100 {
							pair()
						}
						if after := footprint(a); !maps.Equal(before, after) {
							t.Fatalf("100 warm pairs of %d B on stream %d changed the engine's host state from %v to %v\n"+
								"after %d live of: %s\nreproduce: go test ./impl -run 'TestWarmPairsLeaveTheEngineAsTheyFoundIt/%s/seed=%d$' -v",
								sz, s, before, after, len(live), strings.Join(ops, "; "), pol, seed)
						}
						ops = append(ops, fmt.Sprintf("pairs %d on %d", sz, s))
					}
				}
				checkState(t, a, dev)
			})
		}
	}
}
