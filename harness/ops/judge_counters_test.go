package ops

import (
	"errors"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-COUNTERS): the engine's operation counters are judged from the op, its answer and the
// Views: an Alloc that succeeded without counting, a failed Alloc or another op that counts, a Free that
// does not count, a reuse of a cached stitched block not counted (or one counted where a new block served),
// and stitched blocks made less those torn down that differ from the View's are each flagged; the engine's
// own counters through the Env pass (a stitch, its reuse, a teardown).
func TestCountersJudgeBites(t *testing.T) {
	p := vmm.DevicePtr(0x7f00_0040_0000)
	sb := spec.Block{ID: 7, Stitched: true, State: spec.BlockFree, Range: vmm.Range{Base: p, Size: 8 << 20}}
	before := spec.View{Blocks: []spec.Block{sb}}
	live := sb
	live.State = spec.BlockLive
	after := spec.View{Blocks: []spec.Block{live}}
	fresh := live
	fresh.ID = 8 // a new stitched block at the same address: not a reuse
	grown := spec.View{Blocks: []spec.Block{fresh}}
	base := impl.Stats{NumAllocs: 3, NumFrees: 1, NumStitches: 1}
	with := func(f func(*impl.Stats)) impl.Stats { s := base; f(&s); return s }
	alloc, free := Op{Kind: OpAlloc, Size: 8 << 20}, Op{Kind: OpFree}
	oom := errors.New("out of memory")
	for _, c := range []struct {
		name          string
		op            Op
		ran           bool
		err           error
		before, after spec.View
		now           impl.Stats
		want          string // a word of the violation; "" for none
	}{
		{"a reuse counted", alloc, true, nil, before, after, with(func(s *impl.Stats) { s.NumAllocs++; s.NumStitchReuses++ }), ""},
		{"an Alloc not counted", alloc, true, nil, before, after, with(func(s *impl.Stats) { s.NumStitchReuses++ }), "NumAllocs"},
		{"a reuse not counted", alloc, true, nil, before, after, with(func(s *impl.Stats) { s.NumAllocs++ }), "NumStitchReuses"},
		{"a new block counted as a reuse", alloc, true, nil, before, grown, with(func(s *impl.Stats) { s.NumAllocs++; s.NumStitchReuses++; s.NumStitches++; s.NumStitchFrees++ }), "NumStitchReuses"},
		{"a failed Alloc counted", alloc, true, oom, before, before, with(func(s *impl.Stats) { s.NumAllocs++ }), "NumAllocs"},
		{"an op the Env refused counted", alloc, false, nil, before, before, with(func(s *impl.Stats) { s.NumAllocs++ }), "NumAllocs"},
		{"a Free counted", free, true, nil, after, before, with(func(s *impl.Stats) { s.NumFrees++ }), ""},
		{"a Free not counted", free, true, nil, after, before, base, "NumFrees"},
		{"a teardown not counted", Op{Kind: OpEmptyCache}, true, nil, before, spec.View{}, base, "stitched blocks"},
		{"a teardown counted", Op{Kind: OpEmptyCache}, true, nil, before, spec.View{}, with(func(s *impl.Stats) { s.NumStitchFrees++ }), ""},
	} {
		vs := judgeCounters(c.op, c.ran, p, c.err, c.before, c.after, true, base, c.now)
		switch {
		case c.want == "" && len(vs) > 0:
			t.Errorf("%s: %v", c.name, vs)
		case c.want != "" && (len(vs) != 1 || vs[0].Inv != spec.InvCounters || !strings.Contains(vs[0].Msg, c.want)):
			t.Errorf("%s: want one INV-COUNTERS naming %q, got %v", c.name, c.want, vs)
		}
	}
	env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 << 20, Streams: 2}, stitchScene+"alloc a7 8388608 s0\nfree a7\nemptycache\n")
	defer env.Finish()
	if st := env.A.Stats(); st.NumStitches == 0 || st.NumStitchReuses == 0 || st.NumStitchFrees == 0 {
		t.Fatalf("the scene made %d stitches, %d reuses, %d teardowns: want each", st.NumStitches, st.NumStitchReuses, st.NumStitchFrees)
	}
}
