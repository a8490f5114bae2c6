package ops

import (
	"errors"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Property (C-CLOSE): a Close that returns no error left nothing on the device. The scene: a block cached,
// an unmap fault armed four times in a row (past the engine's retries), Close. The Env judges the real run
// clean (Close reports the failure), and the judge flags a Close that returned no error over the same leak
// report, a leaked event too unless an event may have been lost before, and passes an empty report.
func TestCloseJudgeBites(t *testing.T) {
	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Capacity: 256 << 20, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Parse("alloc a0 4194304 s0\nfree a0\ncompleteall\nfail unmap 1 CUDA_ERROR_UNKNOWN\n"+
		"fail unmap 2 CUDA_ERROR_UNKNOWN\nfail unmap 3 CUDA_ERROR_UNKNOWN\nfail unmap 4 CUDA_ERROR_UNKNOWN\nclose\n", "scene")
	if err != nil {
		t.Fatal(err)
	}
	var last StepResult
	for _, op := range prog.Ops {
		if last = env.Step(op); len(last.Violations) > 0 {
			t.Fatalf("%v: %v", op, last.Violations)
		}
	}
	if last.Err == nil {
		t.Fatal("Close under four unmap faults returned no error: the scene missed its fault")
	}
	leaks := env.Device.Leaks()
	if leaks.Empty() {
		t.Fatal("the failed Close left nothing on the device: the scene tests nothing")
	}
	if vs := judgeClose(Op{Kind: OpClose}, last.Err, leaks, false); len(vs) != 0 {
		t.Fatalf("the judge rejects a Close that reported its failure: %v", vs)
	}
	if vs := judgeClose(Op{Kind: OpClose}, nil, leaks, false); len(vs) != 1 || !strings.Contains(vs[0].Msg, "C-CLOSE") {
		t.Fatalf("a Close that hid its failure: want one C-CLOSE violation, got %v", vs)
	}
	event := sim.LeakReport{Events: []vmm.Event{7}}
	if vs := judgeClose(Op{Kind: OpClose}, nil, event, false); len(vs) != 1 {
		t.Fatalf("a Close that left an event and reported no error: want one violation, got %v", vs)
	}
	if vs := judgeClose(Op{Kind: OpClose}, nil, event, true); len(vs) != 0 {
		t.Fatalf("an event a fault hit before Close is not Close's: got %v", vs)
	}
	if vs := judgeClose(Op{Kind: OpClose}, nil, sim.LeakReport{Streams: []vmm.Stream{1}}, false); len(vs) != 0 {
		t.Fatalf("the environment's own streams are not the allocator's: got %v", vs)
	}
}

// Property (C-FORGET, INV-CAPTURESAFE): ForgetStream of a stream that captures a graph is refused with exactly
// ErrStreamCapturing; the judge passes that answer (ErrClosed after Close) and flags a success or another error.
func TestForgetCapturingJudgeBites(t *testing.T) {
	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Capacity: 256 << 20, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []Op{{Kind: OpAlloc, ID: 0, Size: 4 << 20, Stream: 1}, {Kind: OpCaptureBegin, Stream: 1}} {
		if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v", op, r.Err, r.Violations)
		}
	}
	op := Op{Kind: OpForget, Stream: 1}
	if r := env.Step(op); !errors.Is(r.Err, impl.ErrStreamCapturing) || len(r.Violations) > 0 {
		t.Fatalf("%v while s1 captures: %v %v, want ErrStreamCapturing and no violation", op, r.Err, r.Violations)
	}
	for _, c := range []struct {
		err error
		bad bool
	}{{impl.ErrStreamCapturing, false}, {nil, true}, {impl.ErrUnknownStream, true}} {
		if vs := env.judgeForgetCapturing(op, c.err); (len(vs) > 0) != c.bad {
			t.Errorf("answer %v: violations %v, want bad=%v", c.err, vs, c.bad)
		}
	}
}

// Property (INV-EMPTIED, reported failures): an EmptyCache during which the driver refused an unmap reports
// it. The scenes, under gmlake, caching and expandable: a freed block (gmlake: a stitched one, cached) and an
// unmap fault armed for the release's first unmap. The Env judges the real run clean, and the EmptyCache
// fails; the judge flags the same failed call under an EmptyCache that returned no error, and passes one with
// no failed unmap, and gmlake-paper's (its collection stops quietly, as GLake's).
func TestEmptyCacheReportsARefusedUnmap(t *testing.T) {
	scenes := map[string]string{
		impl.PolicyGMLake: "alloc a0 4194304 s0\nalloc a1 2097152 s0\nalloc a2 4194304 s0\nalloc a3 2097152 s0\n" +
			"free a0\nfree a2\nalloc a4 8388608 s0\nfree a4\n",
		impl.PolicyCaching:    "alloc a0 4194304 s0\nfree a0\n",
		impl.PolicyExpandable: "alloc a0 4194304 s0\nfree a0\n",
	}
	for pol, scene := range scenes {
		t.Run(pol, func(t *testing.T) {
			env := runScene(t, Config{Policy: pol, Capacity: 64 << 20, Streams: 1}, scene+"fail unmap 1 CUDA_ERROR_UNKNOWN\n")
			defer env.Finish()
			last := env.Step(Op{Kind: OpEmptyCache})
			if len(last.Violations) > 0 {
				t.Fatalf("emptycache: %v", last.Violations)
			}
			if pol == impl.PolicyGMLake && env.A.Stats().NumStitches == 0 {
				t.Fatal("the scene stitched nothing: no cached stitched block to release")
			}
			if last.Err == nil {
				t.Fatal("EmptyCache under an unmap fault returned no error")
			}
			failed := env.failedCalls()
			if len(failed) == 0 || failed[0].Call != vmm.CallUnmap {
				t.Fatalf("the EmptyCache's failed calls are %v, want the refused unmap", failed)
			}
			unmaps := env.unmapCalls()
			if vs := judgeEmptyCacheReports(pol, nil, unmaps); len(vs) != 1 || vs[0].Inv != "INV-EMPTIED" {
				t.Errorf("an EmptyCache that hid a refused unmap: want one INV-EMPTIED, got %v", vs)
			}
			if vs := judgeEmptyCacheReports(pol, last.Err, unmaps); len(vs) != 0 {
				t.Errorf("an EmptyCache that reported the refused unmap: %v", vs)
			}
			if vs := judgeEmptyCacheReports(impl.PolicyGMLakePaper, nil, unmaps); len(vs) != 0 {
				t.Errorf("gmlake-paper judged: %v", vs)
			}
		})
	}
}

// Property: INV-EMPTIED's report clause excuses a refused unmap that a later unmap of the same range in the
// same EmptyCache made good (an orphan mapping's retry: F17), and no other: an unmap of another range, or a
// later refusal, leaves it the caller's to hear.
func TestEmptyCacheJudgeExcusesOnlyAnUnmapMadeGood(t *testing.T) {
	r := vmm.Range{Base: 0x7f0000000000, Size: 2 << 20}
	other := vmm.Range{Base: 0x7f0000200000, Size: 2 << 20}
	refused := errors.New("refused")
	for _, c := range []struct {
		name   string
		unmaps []unmapCall
		bad    bool
	}{
		{"refused, then made good", []unmapCall{{r, refused}, {r, refused}, {r, nil}}, false},
		{"refused for good", []unmapCall{{r, refused}, {r, refused}}, true},
		{"refused, another range unmapped", []unmapCall{{r, refused}, {other, nil}}, true},
		{"made good, then refused again", []unmapCall{{r, refused}, {r, nil}, {r, refused}}, true},
		{"none refused", []unmapCall{{r, nil}, {other, nil}}, false},
	} {
		vs := judgeEmptyCacheReports(impl.PolicyCaching, nil, c.unmaps)
		if got := len(vs) > 0; got != c.bad {
			t.Errorf("%s: violations %v, want some: %v", c.name, vs, c.bad)
		}
	}
}
