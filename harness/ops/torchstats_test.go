package ops

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-TORCHSTATS): the judge accepts the statistics of a real run after every step, and each kind
// of disagreement in them is a violation that names the value: a count that differs from the ops' record, a
// peak below a value seen, all != small + large, device allocations that do not match the handles held,
// inactive split blocks the View does not show, and a snapshot that counts other bytes than the statistics.
func TestTorchStatsJudgeBites(t *testing.T) {
	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Parse("alloc a0 5000000 s0\nalloc a1 512 s1\nfree a0\nalloc a2 3000000 s0\n", "scene")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Ops {
		if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v", op, r.Err, r.Violations)
		}
	}
	live, requested := env.liveRequested()
	if live != 2 || requested != 3000512 {
		t.Fatalf("the Env's record: %d live, %d requested; want 2, 3000512", live, requested)
	}
	got, snap, view := env.A.TorchStats(), env.A.TorchSnapshot(), env.View()
	held := len(view.Chunks)
	judge := env.torch // a copy: what it has seen so far
	if vs := judge.check(got, snap, view, live, requested, held); len(vs) != 0 {
		t.Fatalf("the judge rejects a real run: %v", vs)
	}
	for _, c := range []struct {
		name, want string
		edit       func(s *impl.DeviceStats, snap *impl.TorchSnapshot, live *int, req *uint64, held *int)
	}{
		{"live count", "allocation.current", func(_ *impl.DeviceStats, _ *impl.TorchSnapshot, live *int, _ *uint64, _ *int) { *live++ }},
		{"requested", "requested_bytes.current", func(_ *impl.DeviceStats, _ *impl.TorchSnapshot, _ *int, r *uint64, _ *int) { *r -= 512 }},
		{"peak", "allocated_bytes[0].peak", func(s *impl.DeviceStats, _ *impl.TorchSnapshot, _ *int, _ *uint64, _ *int) {
			s.AllocatedBytes[0].Peak = s.AllocatedBytes[0].Current
		}},
		{"all = small + large", "all", func(s *impl.DeviceStats, _ *impl.TorchSnapshot, _ *int, _ *uint64, _ *int) {
			s.Segment[1].Freed++
		}},
		{"device allocations", "num_device_alloc", func(_ *impl.DeviceStats, _ *impl.TorchSnapshot, _ *int, _ *uint64, h *int) { *h++ }},
		{"inactive split", "beside a mapped one", func(s *impl.DeviceStats, _ *impl.TorchSnapshot, _ *int, _ *uint64, _ *int) {
			s.InactiveSplit[2].Current++ // a free block no longer split still counted (noteRemoved skipped)
			s.InactiveSplit[0].Current++
		}},
		{"snapshot", "snapshot pool", func(_ *impl.DeviceStats, sn *impl.TorchSnapshot, _ *int, _ *uint64, _ *int) {
			sn.Segments = sn.Segments[1:]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, sn, l, r, h := got, snap, live, requested, held
			sn.Segments = append([]impl.TorchSegment(nil), snap.Segments...)
			c.edit(&s, &sn, &l, &r, &h)
			j := judge
			vs := j.check(s, sn, view, l, r, h)
			if len(vs) != 1 || vs[0].Inv != spec.InvTorchStats || !strings.Contains(vs[0].Msg, c.want) {
				t.Fatalf("want one %s naming %q, got %v", spec.InvTorchStats, c.want, vs)
			}
		})
	}
}

// Property (INV-TORCHSTATS, the snapshot's order): memory_snapshot() lists segments and stitched blocks by
// address, as PyTorch's does; a real snapshot with several of each passes, and one with two swapped is caught.
func TestSnapshotOrderJudged(t *testing.T) {
	env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 * vmm.MiB, Streams: 2, Knobs: impl.Config{ChunkSize: 2 * vmm.MiB}},
		stitchScene+"alloc a7 4194304 s1\nalloc a8 2097152 s1\nalloc a9 4194304 s1\nalloc a10 2097152 s1\nfree a7\nfree a9\nalloc a11 8388608 s1\n")
	snap, st := env.A.TorchSnapshot(), env.A.TorchStats()
	orphans := heldOrphans(env.View())
	if len(snap.Segments) < 2 || len(snap.Stitched) < 2 {
		t.Fatalf("the scene has %d segments and %d stitched blocks, want two of each", len(snap.Segments), len(snap.Stitched))
	}
	if errs := snapshotAgrees(snap, st, orphans); len(errs) != 0 {
		t.Fatalf("a real snapshot judged: %v", errs)
	}
	for _, c := range []struct {
		name string
		swap func(s *impl.TorchSnapshot)
		want string
	}{
		{"segments", func(s *impl.TorchSnapshot) { s.Segments[0], s.Segments[1] = s.Segments[1], s.Segments[0] }, "segments are not in address order"},
		{"stitched", func(s *impl.TorchSnapshot) { s.Stitched[0], s.Stitched[1] = s.Stitched[1], s.Stitched[0] }, "stitched blocks are not in address order"},
	} {
		s := env.A.TorchSnapshot()
		c.swap(&s)
		errs := snapshotAgrees(s, st, orphans)
		if len(errs) != 1 || !strings.Contains(errs[0], c.want) {
			t.Errorf("%s swapped: want one error naming %q, got %v", c.name, c.want, errs)
		}
	}
}
