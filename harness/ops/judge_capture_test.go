package ops

import (
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-CAPTURESAFE, INV-FLUSHED): during a capture the engine queries no event and neither records an
// event on a capturing stream nor queries one; once the capture ends the frees it deferred proceed, also when recording their
// events failed at capture-end and an EmptyCache tries again. Every policy runs the scenes clean through the
// Env; the judge flags an event query, a record on or a query of a capturing stream made during the capture
// (and not a record on or a query of a stream that does not capture), and a pending block with no event once no stream captures.
func TestCaptureJudgesBite(t *testing.T) {
	scenes := map[string]string{
		"deferred free flushed at capture-end": "alloc a0 4194304 s0\nrecord a0 s1\ncapture-begin s1\nfree a0\ncapture-end s1\nalloc a1 4194304 s0\n",
		"capture on a stream met first":        "capture-begin s1\nalloc a0 4194304 s1\nfree a0\ncapture-end s1\n",
		"failed flush retried by EmptyCache": "alloc a0 4194304 s0\nrecord a0 s1\ncapture-begin s1\nfree a0\n" +
			"fail record_event 1 CUDA_ERROR_UNKNOWN\ncapture-end s1\nfail record_event 1 CUDA_ERROR_UNKNOWN\nemptycache\nclearfaults\nemptycache\n",
	}
	for _, policy := range impl.Policies {
		for name, scene := range scenes {
			t.Run(policy+"/"+name, func(t *testing.T) {
				env, err := NewEnv(Config{Policy: policy, Capacity: 1 << 30, Streams: 2})
				if err != nil {
					t.Fatal(err)
				}
				prog, err := Parse(scene, name)
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range prog.Ops {
					if r := env.Step(op); len(r.Violations) > 0 {
						t.Fatalf("%v: %v\n%s", op, r.Violations, env.History())
					}
				}
			})
		}
	}

	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Capacity: 1 << 30, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []Op{{Kind: OpAlloc, ID: 0, Size: 4 << 20, Stream: 0}, {Kind: OpCaptureBegin, Stream: 1}} {
		if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v", op, r.Err, r.Violations)
		}
	}
	during := Op{Kind: OpAlloc, ID: 1, Size: 4 << 20, Stream: 1}
	for _, c := range []struct {
		call streamCall
		bad  bool
	}{
		{streamCall{vmm.CallRecordEvent, env.stream(1)}, true},
		{streamCall{vmm.CallRecordEvent, env.stream(0)}, false},
		{streamCall{vmm.CallQueryEvent, 0}, true},
		{streamCall{vmm.CallStreamQuery, env.stream(1)}, true},
		{streamCall{vmm.CallStreamQuery, env.stream(0)}, true}, // it may have joined the capture
		{streamCall{callStreamCapturing, env.stream(0)}, false},
		{streamCall{callStreamCapturing, env.stream(1)}, false},
	} {
		env.calls.syncs = append(env.calls.syncs[:0], c.call)
		vs := env.judgeCapture(during, nil, env.View())
		if got := len(vs) > 0 && vs[0].Inv == spec.InvCaptureSafe; got != c.bad {
			t.Errorf("%v (stream %d) during a capture of s1: flagged %v, want %v (%v)", c.call.kind, c.call.stream, got, c.bad, vs)
		}
	}
	env.calls.syncs = env.calls.syncs[:0]
	if r := env.Step(Op{Kind: OpCaptureEnd, Stream: 1}); r.Err != nil || len(r.Violations) > 0 {
		t.Fatalf("capture-end: %v %v", r.Err, r.Violations)
	}
	v := env.View()
	v.Blocks = append(v.Blocks, spec.Block{ID: 1 << 40, State: spec.BlockPending, Range: vmm.Range{Base: 1 << 44, Size: 2 << 20}})
	for _, op := range []Op{{Kind: OpCaptureEnd, Stream: 1}, {Kind: OpEmptyCache}, during} {
		if vs := env.judgeCapture(op, nil, v); len(vs) != 1 || vs[0].Inv != spec.InvFlushed {
			t.Errorf("after %v, a pending block with no event: want one %s, got %v", op, spec.InvFlushed, vs)
		}
	}
	if vs := env.judgeCapture(Op{Kind: OpLaunch, Stream: 0}, nil, v); len(vs) != 0 {
		t.Errorf("a launch flushes nothing, judged %v", vs)
	}
}
