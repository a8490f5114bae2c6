package ops

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-FAILCLEAN): an Alloc that fails leaves no more reserved bytes and no more device memory than
// it found. The scene is the one exploration found when the engine kept a stitch's new memory after the view
// failed (on a 16 MiB device, where a stitch need save little, a 6 MiB request on s0 stitching s1's free
// 4 MiB chunk and 2 MiB of new memory, the view's map failing): the Env judges the real run clean, and the judge flags the same step with one more handle or
// more reserved bytes after it, and ignores an orphan (a handle the engine could not release) and a lower
// reserve (released cache).
func TestFailCleanJudgeBites(t *testing.T) {
	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Capacity: 16 << 20, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Parse("alloc a0 3145728 s1\nfree a0\nfail map 2 CUDA_ERROR_UNKNOWN\n", "scene")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Ops {
		if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v", op, r.Err, r.Violations)
		}
	}
	before := env.View()
	op := Op{Kind: OpAlloc, ID: 1, Size: 6 << 20, Stream: 0}
	r := env.Step(op)
	if r.Err == nil {
		t.Fatal("the scene's Alloc did not fail: the injected map fault missed it")
	}
	if len(r.Violations) > 0 {
		t.Fatalf("a failed Alloc judged unclean: %v", r.Violations)
	}
	after := env.View()
	if vs := judgeFailClean(op, before, after, r.Err); len(vs) != 0 {
		t.Fatalf("the judge rejects the real run: %v", vs)
	}
	const g = 2 << 20
	extra := vmm.Handle(1 << 30)
	for _, c := range []struct {
		name string
		edit func(v *spec.View)
		bad  bool
	}{
		{"one more handle", func(v *spec.View) {
			v.Device.Handles = append(v.Device.Handles, spec.DevHandle{Handle: extra, Size: g, Mappings: 1})
		}, true},
		{"more reserved bytes", func(v *spec.View) { v.Stats.Reserved += g }, true},
		{"an orphan handle, counted as reserved", func(v *spec.View) {
			v.Device.Handles = append(v.Device.Handles, spec.DevHandle{Handle: extra, Size: g, Mappings: 1})
			v.Chunks = append(v.Chunks, spec.Chunk{Handle: extra, Size: g, Refs: 1, Orphan: true})
			v.Stats.Reserved += g
		}, false},
		{"a new chunk not flagged as an orphan", func(v *spec.View) {
			v.Device.Handles = append(v.Device.Handles, spec.DevHandle{Handle: extra, Size: g, Mappings: 1})
			v.Chunks = append(v.Chunks, spec.Chunk{Handle: extra, Size: g, Refs: 1})
			v.Stats.Reserved += g
		}, true},
		{"a released handle", func(v *spec.View) {
			v.Device.Handles = append(v.Device.Handles, spec.DevHandle{Handle: extra, Size: g, Released: true})
		}, false},
		{"released cache", func(v *spec.View) { v.Stats.Reserved -= min(v.Stats.Reserved, g) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := after
			v.Device.Handles = append([]spec.DevHandle(nil), after.Device.Handles...)
			v.Chunks = append([]spec.Chunk(nil), after.Chunks...)
			c.edit(&v)
			vs := judgeFailClean(op, before, v, r.Err)
			if got := len(vs) == 1 && vs[0].Inv == spec.InvFailClean; got != c.bad || !c.bad && len(vs) != 0 {
				t.Fatalf("want INV-FAILCLEAN %v, got %v", c.bad, vs)
			}
			if c.bad && !strings.Contains(vs[0].Msg, "failed") {
				t.Fatalf("the violation does not say what failed: %s", vs[0].Msg)
			}
		})
	}
}

// TestFailedAllocJudgeBites: a failed Alloc that answers a pointer, or an invalid-size error that names the
// wrong bound, is flagged; the engine's own answers are not.
func TestFailedAllocJudgeBites(t *testing.T) {
	e, err := NewEnv(Config{Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	zero, huge := Op{Kind: OpAlloc, Size: 0}, Op{Kind: OpAlloc, Size: 1 << 40}
	for _, op := range []Op{zero, huge} {
		if r := e.Step(op); r.Err == nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v, want an invalid-size error and no violation", op, r.Err, r.Violations)
		}
	}
	_, errZero := e.A.Alloc(0, 0)
	_, errHuge := e.A.Alloc(1<<40, 0)
	for _, c := range []struct {
		op Op
		r  StepResult
	}{
		{Op{Kind: OpAlloc, Size: 4096}, StepResult{Ptr: 1, Err: impl.ErrClosed}},
		{zero, StepResult{Err: errHuge}},
		{huge, StepResult{Err: errZero}},
	} {
		if vs := judgeFailedAlloc(c.op, c.r); len(vs) != 1 || vs[0].Inv != spec.InvContract {
			t.Errorf("%v answering %#x, %v: want one INV-CONTRACT, got %v", c.op, uint64(c.r.Ptr), c.r.Err, vs)
		}
	}
}
