package impl

import (
	"errors"
	"math/rand"
	"slices"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Property (host cache, impl/doc.go "The host cache"): replaying a host-cache log — frees of blocks HostClass
// admitted, and hits that hand a block freed earlier in the log out again for a size in its class — leaves the
// engine exactly where the separate calls leave a twin engine whose Alloc took the same block: every statistic
// and peak (Stats, TorchStats), the reserved memory, the invariants; and a replay maps nothing. Random
// programs on one stream under gmlake, caching and expandable (gmlake-paper's blocks are never admitted); the
// twin's Alloc picks the block, and the request is a hit when the cache holds that block for its size.
// Half the misses are AllocHost (the replay, the miss and its class under one hold), checked the same way.
func TestReplayIsTheSeparateCalls(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyCaching, PolicyExpandable} {
		t.Run(pol, func(t *testing.T) {
			compared, hits := 0, 0
			for seed := int64(1); seed <= 30; seed++ {
				c, h := replayAgainstCalls(t, pol, seed)
				compared, hits = compared+c, hits+h
			}
			if hits < 100 || compared != hits {
				t.Fatalf("%d of %d hits compared with the twin: the programs no longer test the replay", compared, hits)
			}
		})
	}
}

func replayAgainstCalls(t *testing.T, pol string, seed int64) (compared, hits int) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	newEng := func() (*Allocator, *sim.Device) {
		dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
		a, err := New(dev, Config{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		return a, dev
	}
	a, adev := newEng() // replays the log
	b, _ := newEng()    // the separate calls, at the log's places
	defer a.Close()
	defer b.Close()
	sizes := []uint64{512, 700, 4096, 1 << 20, 3 << 20, 12 << 20, 64 << 20}
	type live struct {
		p      vmm.DevicePtr
		lo, hi uint64
	}
	var lives, cached []live
	var log []HostOp
	var compare func(where string)
	flush := func(where string) {
		t.Helper()
		before := adev.Counts()
		n, err := a.Replay(log)
		if err != nil || n != len(log) {
			t.Fatalf("seed %d %s: Replay of %d entries = %d, %v (log %v)", seed, pol, len(log), n, err, log)
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatalf("seed %d %s: after a replay: %v", seed, pol, err)
		}
		onlyFrees := true
		for _, op := range log {
			onlyFrees = onlyFrees && op.Size == 0
		}
		if after := adev.Counts(); !onlyFrees && after[vmm.CallMap] != before[vmm.CallMap] {
			t.Fatalf("seed %d %s: a replay mapped memory", seed, pol)
		}
		for _, op := range log {
			if op.Size > 0 {
				compared++
			}
		}
		log, cached = log[:0], cached[:0]
		if where != "" {
			compare(where)
		}
	}
	compare = func(where string) {
		t.Helper()
		as, bs := a.Stats(), b.Stats()
		as.DriverCalls, bs.DriverCalls = vmm.CallCounts{}, vmm.CallCounts{}
		if as != bs {
			t.Fatalf("seed %d %s (%s): after the replay, stats\n%+v\nthe separate calls:\n%+v", seed, pol, where, as, bs)
		}
		if at, bt := a.TorchStats(), b.TorchStats(); at != bt {
			t.Fatalf("seed %d %s (%s): after the replay, torch stats\n%+v\nthe separate calls:\n%+v", seed, pol, where, at, bt)
		}
	}
	for step := 0; step < 400; step++ {
		if r := rng.Intn(10); r < 5 || len(lives) == 0 { // allocate: the twin's Alloc says which block
			size := sizes[rng.Intn(len(sizes))] + uint64(rng.Intn(3))*100
			q, err := b.Alloc(size, 0)
			if err != nil {
				t.Fatal(err)
			}
			hit := slices.IndexFunc(cached, func(c live) bool { return c.p == q && c.lo <= size && size <= c.hi })
			if hit >= 0 { // the cache holds the twin's block for this size: a hit
				c := cached[hit]
				cached = slices.Delete(cached, hit, hit+1)
				log = append(log, HostOp{Ptr: c.p, Size: size})
				lives = append(lives, c)
				hits++
				continue
			}
			var p vmm.DevicePtr
			var lo, hi uint64
			if rng.Intn(2) == 0 { // the miss as three calls
				flush("") // the twin allocated already: compare after the miss
				if p, err = a.Alloc(size, 0); err != nil || p != q {
					t.Fatalf("seed %d %s: a miss after the replay: %v, the twin %v (%v)", seed, pol, p, q, err)
				}
				lo, hi = a.HostClass(p)
			} else { // the miss as one (AllocHost): the same replay, allocation and class
				r, err := a.AllocHost(log, size, 0)
				if r.Replayed != len(log) || r.ReplayErr != nil || err != nil || r.Ptr != q {
					t.Fatalf("seed %d %s: AllocHost of %d entries and %d B = %+v, %v; the twin allocated %v (log %v)",
						seed, pol, len(log), size, r, err, q, log)
				}
				for _, op := range log {
					if op.Size > 0 {
						compared++
					}
				}
				log, cached = log[:0], cached[:0]
				p, lo, hi = r.Ptr, r.Lo, r.Hi
				if l, h := a.HostClass(p); l != lo || h != hi {
					t.Fatalf("seed %d %s: AllocHost's class of %v is [%d, %d], HostClass says [%d, %d]", seed, pol, p, lo, hi, l, h)
				}
				if err := a.CheckInvariants(); err != nil {
					t.Fatalf("seed %d %s: after AllocHost: %v", seed, pol, err)
				}
			}
			compare("after a miss")
			if hi != 0 && (lo > size || size > hi) {
				t.Fatalf("seed %d %s: HostClass(%v) = [%d, %d] does not hold its own request of %d", seed, pol, p, lo, hi, size)
			}
			lives = append(lives, live{p, lo, hi})
			continue
		}
		i := rng.Intn(len(lives)) // free: into the cache when HostClass admitted it
		l := lives[i]
		lives = append(lives[:i], lives[i+1:]...)
		if l.hi == 0 {
			flush("before a free the cache may not keep")
			if err := a.Free(l.p); err != nil {
				t.Fatal(err)
			}
		} else {
			log = append(log, HostOp{Ptr: l.p})
			cached = append(cached, l)
		}
		if err := b.Free(l.p); err != nil {
			t.Fatal(err)
		}
		if len(log) >= 64 {
			flush("a full log")
		}
	}
	flush("the end")
	return compared, hits
}

// Property (ErrHostLog): Replay refuses an entry the engine cannot apply — a hit on a block still live, a
// free of an unknown pointer — with the entries before it applied and nothing after; HostClass admits no
// gmlake-paper block and no block used on another stream.
func TestReplayRefusesWhatTheEngineDoesNotHold(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, err := New(dev, Config{Policy: PolicyCaching})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p, _ := a.Alloc(4096, 0)
	q, _ := a.Alloc(4096, 0)
	n, err := a.Replay([]HostOp{{Ptr: p}, {Ptr: q, Size: 4096}, {Ptr: p, Size: 4096}})
	if n != 1 || !errors.Is(err, ErrHostLog) {
		t.Fatalf("a hit on a live block: Replay = %d, %v; want 1, ErrHostLog", n, err)
	}
	if st := a.Stats(); st.NumLive != 1 {
		t.Fatalf("after the refused entry %d live, want 1 (the free applied, nothing after)", st.NumLive)
	}
	if n, err := a.Replay([]HostOp{{Ptr: 0x1234}}); n != 0 || !errors.Is(err, ErrHostLog) || !errors.Is(err, ErrUnknownPointer) {
		t.Fatalf("a free of an unknown pointer: Replay = %d, %v", n, err)
	}
	s1, _ := dev.CreateStream()
	if err := a.RecordStream(q, s1); err != nil {
		t.Fatal(err)
	}
	if _, hi := a.HostClass(q); hi != 0 {
		t.Fatal("HostClass admitted a block used on another stream")
	}
	pa, err := New(sim.NewDevice(sim.DeviceConfig{SyncStreams: true}), Config{Policy: PolicyGMLakePaper})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	r, _ := pa.Alloc(4096, 0)
	if _, hi := pa.HostClass(r); hi != 0 {
		t.Fatal("HostClass admitted a gmlake-paper block")
	}
	checkState(t, a, dev)
}

// Property (HostClass's window): for every policy that admits blocks, the class of an allocation is every
// request of its 512-byte step that rounds to the same size: hi is the request rounded, and lo is hi-511 when
// each of the 512 sizes (hi-512, hi] rounds to hi (checked one by one, not by the engine's own arithmetic),
// else hi itself (the cache then serves only the exact rounded size).
func TestHostClassIsTheStepRoundingToTheBlock(t *testing.T) {
	for _, pol := range []string{PolicyCaching, PolicyExpandable, PolicyGMLake} {
		a, dev := newTest(t, pol, 0, true)
		for _, n := range []uint64{1, 511, 512, 513, 1000, 4096, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3<<20 + 7, 20 << 20, 97<<20 + 3} {
			p := mustAlloc(t, a, n, 0)
			lo, hi := a.HostClass(p)
			rs := uint64(a.p.round(vmm.Bytes(n)))
			if hi != rs {
				t.Fatalf("%s: HostClass of a %d-byte request: hi %d, want the rounded size %d", pol, n, hi, rs)
			}
			want := hi
			if hi > 511 {
				all := true
				for m := hi - 511; m <= hi; m++ {
					all = all && uint64(a.p.round(vmm.Bytes(m))) == hi
				}
				if all {
					want = hi - 511
				}
			}
			if lo != want {
				t.Fatalf("%s: HostClass of a %d-byte request: [%d, %d], want [%d, %d]", pol, n, lo, hi, want, hi)
			}
			mustFree(t, a, p)
		}
		closeClean(t, a, dev)
	}
}

// Property (ErrHostLog, the kinds HostClass refuses): Replay refuses a logged free of a block the host cache
// may not keep — one used on another stream, a private pool's, a stitched block, any block while a capture is
// underway — and applies nothing of it.
func TestReplayRefusesFreesTheCacheMayNotKeep(t *testing.T) {
	a, dev := newStitchTest(t, 0, true)
	stitchScene(t, a, 0)
	sb := mustAlloc(t, a, 256*MiB, 0)
	used := mustAlloc(t, a, 4096, 0)
	s1, _ := dev.CreateStream()
	if err := a.RecordStream(used, s1); err != nil {
		t.Fatal(err)
	}
	pool := PoolID{A: 1, B: 2}
	if _, err := a.CreateOrIncrefPool(pool); err != nil {
		t.Fatal(err)
	}
	inPool, err := a.AllocPool(4096, 0, pool)
	if err != nil {
		t.Fatal(err)
	}
	plain := mustAlloc(t, a, 4096, 0)
	check := func(what string, p vmm.DevicePtr) {
		t.Helper()
		live := a.Stats().NumLive
		if n, err := a.Replay([]HostOp{{Ptr: p}}); n != 0 || !errors.Is(err, ErrHostLog) {
			t.Fatalf("a logged free of %s: Replay = %d, %v; want 0, ErrHostLog", what, n, err)
		}
		if a.Stats().NumLive != live {
			t.Fatalf("the refused free of %s changed the live count", what)
		}
	}
	check("a stitched block", sb)
	check("a block used on another stream", used)
	check("a private pool's block", inPool)
	s2, _ := dev.CreateStream()
	if err := a.SetCapturing(s2, true); err != nil {
		t.Fatal(err)
	}
	check("a block while a capture is underway", plain)
	if err := a.SetCapturing(s2, false); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Replay([]HostOp{{Ptr: plain}}); n != 1 || err != nil {
		t.Fatalf("the same free after the capture: Replay = %d, %v; want 1, nil", n, err)
	}
	checkState(t, a, dev)
}
