package ops

import (
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-ACCESS): a step that sets access on two ranges side by side in one reservation is flagged
// (one cuMemSetAccess over both would do), under gmlake, caching and expandable; ranges side by side in two
// reservations, a range set twice (a retry), ranges apart, and gmlake-paper's per-piece calls are not. And a
// real stitch of two chunks through the Env sets access once.
func TestAccessJudgeBites(t *testing.T) {
	const mb = vmm.MiB
	base := vmm.DevicePtr(0x7f00_0000_0000)
	one := spec.View{Device: spec.Device{Reservations: []vmm.Range{{Base: base, Size: 8 * mb}}}}
	two := spec.View{Device: spec.Device{Reservations: []vmm.Range{{Base: base, Size: 2 * mb}, {Base: base.Add(2 * mb), Size: 6 * mb}}}}
	lo, hi := vmm.Range{Base: base, Size: 2 * mb}, vmm.Range{Base: base.Add(2 * mb), Size: 2 * mb}
	for _, pol := range []string{impl.PolicyGMLake, impl.PolicyCaching, impl.PolicyExpandable} {
		if vs := judgeAccess(pol, spec.View{}, one, []vmm.Range{hi, lo}); len(vs) != 1 || vs[0].Inv != spec.InvAccess {
			t.Errorf("%s: two calls side by side in one reservation: want one INV-ACCESS, got %v", pol, vs)
		}
		if vs := judgeAccess(pol, spec.View{}, two, []vmm.Range{lo, hi}); len(vs) != 0 {
			t.Errorf("%s: side by side in two reservations: %v", pol, vs)
		}
		if vs := judgeAccess(pol, spec.View{}, one, []vmm.Range{lo, lo}); len(vs) != 0 {
			t.Errorf("%s: one range set twice: %v", pol, vs)
		}
		if vs := judgeAccess(pol, spec.View{}, one, []vmm.Range{lo, {Base: base.Add(4 * mb), Size: 2 * mb}}); len(vs) != 0 {
			t.Errorf("%s: ranges apart: %v", pol, vs)
		}
	}
	if vs := judgeAccess(impl.PolicyGMLakePaper, spec.View{}, one, []vmm.Range{lo, hi}); len(vs) != 0 {
		t.Errorf("gmlake-paper's per-piece calls judged: %v", vs)
	}
	env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 << 20, Streams: 1},
		"alloc a0 4194304 s0\nalloc a1 2097152 s0\nalloc a2 4194304 s0\nalloc a3 2097152 s0\nfree a0\nfree a2\nalloc a4 8388608 s0\n")
	defer env.Finish()
	if env.A.Stats().NumStitches == 0 || len(env.calls.access) != 1 {
		t.Fatalf("the stitch of two 4 MiB blocks: %d stitches, access set by %v; want one stitch, one call", env.A.Stats().NumStitches, env.calls.access)
	}
}

// Property (INV-PAPEREVENTS): a successful gmlake-paper Alloc that created or destroyed no event is flagged
// (GLake's search key is a Block, with its event); one that made one of each passes, and other policies are
// not judged. And a real gmlake-paper Alloc through the Env makes them.
func TestPaperEventsJudgeBites(t *testing.T) {
	var before, none, one vmm.CallCounts
	one[vmm.CallCreateEvent], one[vmm.CallDestroyEvent] = 1, 1
	created := one
	created[vmm.CallDestroyEvent] = 0
	for _, c := range []struct {
		after vmm.CallCounts
		want  int
	}{{none, 1}, {created, 1}, {one, 0}} {
		if vs := judgePaperEvents(impl.PolicyGMLakePaper, before, c.after); len(vs) != c.want || (c.want == 1 && vs[0].Inv != spec.InvPaperEvents) {
			t.Errorf("created %d, destroyed %d: want %d INV-PAPEREVENTS, got %v", c.after[vmm.CallCreateEvent], c.after[vmm.CallDestroyEvent], c.want, vs)
		}
	}
	if vs := judgePaperEvents(impl.PolicyGMLake, before, none); len(vs) != 0 {
		t.Errorf("gmlake judged: %v", vs)
	}
	env, err := NewEnv(Config{Policy: impl.PolicyGMLakePaper, Capacity: 64 << 20, Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Finish()
	calls := env.Dev.Counts()
	if r := env.Step(Op{Kind: OpAlloc, ID: 0, Size: 4 << 20}); r.Err != nil || len(r.Violations) > 0 {
		t.Fatalf("alloc: %v %v", r.Err, r.Violations)
	}
	if vs := judgePaperEvents(impl.PolicyGMLakePaper, calls, env.Dev.Counts()); len(vs) != 0 {
		t.Fatalf("a real gmlake-paper Alloc: %v", vs)
	}
}
