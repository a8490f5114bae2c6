package ops

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// runScene runs a program's ops in a fresh Env under cfg and fails t at any error or violation.
func runScene(t *testing.T, cfg Config, text string) *Env {
	t.Helper()
	env, err := NewEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Parse(text, "scene")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Ops {
		if r := env.Step(op); len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v\n%s", op, r.Err, r.Violations, env.History())
		}
	}
	return env
}

// stitchScene leaves a cached stitched block of 8 MiB over two free 4 MiB pieces (gmlake, one-granule
// chunks), with a live 2 MiB separator after each piece, and a free 2 MiB block elsewhere.
const stitchScene = "alloc a0 4194304 s0\nalloc a1 2097152 s0\nalloc a2 4194304 s0\nalloc a3 2097152 s0\n" +
	"free a0\nfree a2\nalloc a4 8388608 s0\nfree a4\nalloc a5 2097152 s1\nalloc a6 2097152 s1\nfree a5\n"

// Property (INV-LARGEST): the judge accepts LargestCachedBlock's answers on real runs (a cached stitched block
// larger than every free pBlock counts; once torn down, it does not), and rejects an answer below the
// largest free block and the size of no cached block.
func TestLargestJudgeBites(t *testing.T) {
	env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 * vmm.MiB, Streams: 2, Knobs: impl.Config{ChunkSize: 2 * vmm.MiB}}, stitchScene+"largest\n")
	v := env.View()
	got := env.A.LargestCachedBlock()
	if got != 8*vmm.MiB {
		t.Fatalf("LargestCachedBlock() = %d in the scene, want the cached stitched block's 8 MiB\n%s", got, env.History())
	}
	for _, c := range []struct {
		name   string
		answer uint64
		want   string
	}{
		{"below the stitched block", 4 * vmm.MiB, "below"},
		{"no such block", 8*vmm.MiB + 512, "the size of no cached block"},
		{"zero", 0, "below"},
	} {
		vs := judgeLargest(v, c.answer, false /* pooled */)
		if len(vs) != 1 || vs[0].Inv != spec.InvLargest || !strings.Contains(vs[0].Msg, c.want) {
			t.Errorf("%s: want one %s naming %q, got %v", c.name, spec.InvLargest, c.want, vs)
		}
	}
	// A request its pieces could not serve (1.25x reuse limit) grew new memory and the stitched block is
	// gone: its size counts no more.
	env = runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 * vmm.MiB, Streams: 2, Knobs: impl.Config{ChunkSize: 2 * vmm.MiB}}, stitchScene+
		"alloc a7 6291456 s0\nlargest\n")
	v, got = env.View(), env.A.LargestCachedBlock()
	if got >= 8*vmm.MiB {
		t.Fatalf("LargestCachedBlock() = %d after the stitched block was torn down\n%s", got, env.History())
	}
	if vs := judgeLargest(v, 8*vmm.MiB, false /* pooled */); len(vs) != 1 || !strings.Contains(vs[0].Msg, "the size of no cached block") {
		t.Errorf("a stitched block no longer cached counted: want one %s, got %v", spec.InvLargest, vs)
	}
}

// Property (INV-SNAPSHOT): the judge accepts real snapshots, and rejects a block that reports a request it
// was not handed out for (the handed-out flag wrong either way), a wrong request, and a live list that is not
// the ops' record.
func TestSnapshotJudgeBites(t *testing.T) {
	env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 * vmm.MiB, Streams: 2, Knobs: impl.Config{ChunkSize: 2 * vmm.MiB}}, stitchScene+
		"alloc a7 8388608 s0\nsnapshot\n")
	snap := env.A.Snapshot()
	if vs := env.judgeSnapshot(snap); len(vs) != 0 {
		t.Fatalf("the judge rejects a real snapshot: %v", vs)
	}
	var held, handed int = -1, -1
	for i, b := range snap.Blocks {
		if b.HeldBy != 0 && held < 0 {
			held = i
		}
		if b.Requested != 0 && handed < 0 {
			handed = i
		}
	}
	if held < 0 || handed < 0 {
		t.Fatalf("the scene has no held pBlock (%d) or no handed-out block (%d)", held, handed)
	}
	for _, c := range []struct {
		name string
		edit func(s *impl.Snapshot)
		want string
	}{
		{"a held pBlock reports a request", func(s *impl.Snapshot) { s.Blocks[held].Requested = 4096 }, "handed out to no op"},
		{"a handed-out block reports none", func(s *impl.Snapshot) { s.Blocks[handed].Requested = 0 }, "reports requested 0"},
		{"a live allocation missing", func(s *impl.Snapshot) { s.Live = s.Live[1:] }, "live allocations"},
		{"a wrong request", func(s *impl.Snapshot) { s.Live[0].Requested++ }, "asked for"},
	} {
		s := env.A.Snapshot()
		c.edit(&s)
		vs := env.judgeSnapshot(s)
		if len(vs) != 1 || vs[0].Inv != spec.InvSnapshot || !strings.Contains(vs[0].Msg, c.want) {
			t.Errorf("%s: want one %s naming %q, got %v", c.name, spec.InvSnapshot, c.want, vs)
		}
	}
}

// Property (INV-TORCHSTATS): the reset model — a run with reset-peak and reset-acc between its steps is
// judged clean, and statistics that did not reset (the peaks, the accumulated totals, the num_* counters)
// are violations right after the reset and at later steps.
func TestResetStatsJudged(t *testing.T) {
	scene := "alloc a0 5000000 s0\nalloc a1 512 s1\nfree a0\nreset-peak\nalloc a2 3000000 s0\nreset-acc\nfree a2\n" +
		"alloc a3 30000000 s1\nreset-peak\nreset-acc\nfree a3\nemptycache\n"
	env := runScene(t, Config{Policy: impl.PolicyCaching, Streams: 2}, scene)
	// The same ops without the resets: their statistics, shown after each reset, must be caught.
	plain := runScene(t, Config{Policy: impl.PolicyCaching, Streams: 2}, "alloc a0 5000000 s0\nalloc a1 512 s1\nfree a0\n")
	stale, v := plain.A.TorchStats(), plain.View()
	j := plain.torch
	if vs := j.reset(OpResetPeak, stale, v, len(v.Chunks)); len(vs) != 1 || !strings.Contains(vs[0].Msg, "peak") {
		t.Errorf("peaks not reset: want one %s naming the peak, got %v", spec.InvTorchStats, vs)
	}
	j = plain.torch
	if vs := j.reset(OpResetAcc, stale, v, len(v.Chunks)); len(vs) != 1 || !strings.Contains(vs[0].Msg, "after reset-acc") {
		t.Errorf("totals not reset: want one %s, got %v", spec.InvTorchStats, vs)
	}
	// At a later step: the judge's base is the reset's, so totals that kept counting do not add up.
	j = env.torch
	live, requested := env.liveRequested()
	if vs := j.check(stale, plain.A.TorchSnapshot(), v, live, requested, len(v.Chunks)); len(vs) == 0 {
		t.Error("statistics of a run without the resets pass the judge of a run with them")
	}
	if vs := env.Finish(); len(vs) > 0 {
		t.Fatal(vs)
	}
}
