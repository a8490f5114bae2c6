package ops

import (
	"slices"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-SEGEVENTS): the judge accepts the engine's own segment events on a real run (growth, a
// stitched block, EmptyCache), and rejects each way the event stream can lie: a map event lost, an unmap
// event lost, a map event on the wrong stream, a map twice, an unmap of memory never mapped, and a
// SegmentEventsPending answer that disagrees with the events (stale after a take, or false with events
// waiting).
func TestSegEventsJudgeBites(t *testing.T) {
	cfg := Config{Policy: impl.PolicyGMLake, Capacity: 64 * vmm.MiB, Streams: 2, Knobs: impl.Config{ChunkSize: 2 * vmm.MiB}}
	env := runScene(t, cfg, stitchScene+"emptycache\nalloc a8 6291456 s1\n")
	if !env.segev.on || len(env.segev.runs) == 0 {
		t.Fatalf("the judge replayed no mapped memory on a run that grew (on=%v, runs=%v)", env.segev.on, env.segev.runs)
	}
	// One more step, driven by hand: a growth on s0 (map events) and the emptycache that gives it back
	// (unmap events), each taken and judged against the snapshot as Env.Step does.
	grow := func() (*segEventsJudge, []impl.SegmentEvent, impl.TorchSnapshot) {
		j := env.segev
		j.runs = slices.Clone(env.segev.runs)
		p, err := env.A.Alloc(10*vmm.MiB, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !env.A.SegmentEventsPending() {
			t.Fatal("a growth of 10 MiB recorded no segment event")
		}
		evs := env.A.TakeSegmentEvents()
		snap := env.A.TorchSnapshot()
		if err := env.A.Free(p); err != nil {
			t.Fatal(err)
		}
		if err := env.A.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		_ = env.A.TakeSegmentEvents()
		return &j, evs, snap
	}
	j, evs, snap := grow()
	if vs := j.judge(true, evs, false, &snap); len(vs) != 0 {
		t.Fatalf("the judge rejects the engine's own events: %v\nevents %v", vs, evs)
	}
	var mapAt int = -1
	for i, ev := range evs {
		if ev.Action == impl.SegmentMap {
			mapAt = i
		}
	}
	if mapAt < 0 {
		t.Fatalf("the growth recorded no map event: %v", evs)
	}
	for _, c := range []struct {
		name    string
		edit    func(evs []impl.SegmentEvent) []impl.SegmentEvent
		pending bool
		after   bool
		want    string
	}{
		{"a map event lost", func(e []impl.SegmentEvent) []impl.SegmentEvent { return slices.Delete(e, mapAt, mapAt+1) }, true, false, "memory_snapshot() shows"},
		{"a map event on the wrong stream", func(e []impl.SegmentEvent) []impl.SegmentEvent { e[mapAt].Stream++; return e }, true, false, "memory_snapshot() shows"},
		{"a map twice", func(e []impl.SegmentEvent) []impl.SegmentEvent { return append(e, e[mapAt]) }, true, false, "mapped already"},
		{"an unmap of memory never mapped", func(e []impl.SegmentEvent) []impl.SegmentEvent {
			return append(e, impl.SegmentEvent{Action: impl.SegmentUnmap, Addr: vmm.DevicePtr(1 << 50), Size: 2 * vmm.MiB})
		}, true, false, "do not say is mapped"},
		{"pending stale after the take", func(e []impl.SegmentEvent) []impl.SegmentEvent { return e }, true, true, "right after TakeSegmentEvents"},
		{"pending false with events waiting", func(e []impl.SegmentEvent) []impl.SegmentEvent { return e }, false, false, "SegmentEventsPending said false"},
	} {
		j, evs, snap := grow()
		vs := j.judge(c.pending, c.edit(slices.Clone(evs)), c.after, &snap)
		if len(vs) != 1 || vs[0].Inv != spec.InvSegEvents || !strings.Contains(vs[0].Msg, c.want) {
			t.Errorf("%s: want one %s naming %q, got %v", c.name, spec.InvSegEvents, c.want, vs)
		}
	}
	// An unmap event lost: the next snapshot (after emptycache) shows nothing where the events say mapped.
	j, evs, snap = grow()
	_ = j.judge(true, evs, false, &snap)
	after := env.A.TorchSnapshot()
	if vs := j.judge(false, nil, false, &after); len(vs) != 1 || !strings.Contains(vs[0].Msg, "memory_snapshot() shows") {
		t.Errorf("an unmap event lost: want one %s, got %v", spec.InvSegEvents, vs)
	}
	// (No env.Finish: the steps driven by hand are not in the Env's record, and its other judges would say so.)
}
