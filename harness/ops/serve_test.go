package ops

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// pendingThenOtherStream: 56 MiB of a 64 MiB device freed on stream 1 with its work pending, then asked
// for on stream 2: the bare engine must wait (an out of memory is legal), the serving layer synchronises
// and retries.
const pendingThenOtherStream = `alloc a0 58720256 s1
launch s1
free a0
alloc a1 58720256 s2
free a1
`

func runText(t *testing.T, cfg Config, text string) (*Env, []StepResult) {
	t.Helper()
	ops, err := ParseOps(text)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rs []StepResult
	for _, o := range ops {
		rs = append(rs, e.Step(o))
	}
	return e, rs
}

func noViolations(t *testing.T, e *Env, rs []StepResult) {
	t.Helper()
	for i, r := range rs {
		if len(r.Violations) > 0 {
			t.Fatalf("step %d (%v): %v\n%s", i, r.Op, r.Violations, e.History())
		}
	}
	if vs := e.Finish(); len(vs) > 0 {
		t.Fatalf("at the end: %v\n%s", vs, e.History())
	}
}

// TestServeRetryIsJudgedWithTheWorkCompleted: through the serving layer the request on the other stream
// succeeds after the layer synchronises the streams (the bare engine runs out of memory, legally), and the
// judges accept the reuse of memory freed on stream 1 because they were told stream 1's work completed.
func TestServeRetryIsJudgedWithTheWorkCompleted(t *testing.T) {
	cfg := Config{Capacity: 64 * vmm.MiB, Streams: 3}
	bare, rs := runText(t, cfg, pendingThenOtherStream)
	if !errors.Is(rs[3].Err, vmm.ErrOutOfMemory) {
		t.Fatalf("the bare engine: %v, want out of memory (the memory waits for stream 1)", rs[3].Err)
	}
	noViolations(t, bare, rs)

	cfg.Serve = true
	e, rs := runText(t, cfg, pendingThenOtherStream)
	if rs[3].Err != nil {
		t.Fatalf("through the serving layer: %v, want success after the synchronisation", rs[3].Err)
	}
	if c := e.S.Counters(); c.SyncRetries != 1 {
		t.Fatalf("serving layer counters %+v, want one retry", c)
	}
	if e.Hist.Pending(e.Streams[1]) != 0 {
		t.Fatalf("the history still has stream 1's work pending after the layer synchronised it: %v", e.Hist)
	}
	noViolations(t, e, rs)
	if !strings.Contains(e.Describe(), "serve=true") {
		t.Fatalf("the reproducer's header does not say the serving layer was on:\n%s", e.Describe())
	}
}

// TestServeOOMAfterSyncIsJudgedSpurious: the oracle accounts for the synchronisation: an out of memory after
// the layer synchronised every stream, with the freed memory then usable, is a violation (C-OOM and
// INV-NOSPURIOUSOOM), not the legal wait of the bare engine.
func TestServeOOMAfterSyncIsJudgedSpurious(t *testing.T) {
	ops, err := ParseOps(pendingThenOtherStream)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnv(Config{Capacity: 64 * vmm.MiB, Streams: 3, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	e.syncTellsOnly = true // the retry then fails, and the judges, told the work completed, must call it spurious
	var got []spec.Violation
	for _, o := range ops[:4] {
		got = append(got, e.Step(o).Violations...)
	}
	invs := map[string]bool{}
	for _, v := range got {
		invs[v.Inv] = true
	}
	if !invs[spec.InvContract] || !invs[spec.InvNoSpuriousOOM] {
		t.Fatalf("an out of memory after every stream was (said to be) synchronised: violations %v, want C-OOM (%s) and %s\n%s",
			got, spec.InvContract, spec.InvNoSpuriousOOM, e.History())
	}
}

// TestServeMapsEveryStreamIndex: under the layer's mapping on the simulated device the engine is called
// with caller values, every stream index is a stream (an index the environment does not have is one more
// stream, which the contract knows), and the judge sees the device's streams.
func TestServeMapsEveryStreamIndex(t *testing.T) {
	e, rs := runText(t, Config{Capacity: 64 * vmm.MiB, Streams: 2, Serve: true}, `alloc a0 1048576 s1
alloc a1 1048576 s7
record a0 s7
free a0
free a1
`)
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("step %d (%v): %v", i, r.Op, r.Err)
		}
	}
	if e.callers[1] == e.Streams[1] {
		t.Fatalf("caller value %#x is the device's stream itself: the layer mapped nothing", uint64(e.callers[1]))
	}
	noViolations(t, e, rs)
}

// TestServeForgetGoesThroughTheLayer: forget under the serving layer is the layer's ForgetStream: the
// caller value of stream 1 is unmapped (a new stream given the same value would get a new device stream,
// where it used to keep the forgotten one), the memory freed on it still waits for its work, and the ops
// that would hand the layer that value again are refused (the judges' streams are fixed), never misjudged.
func TestServeForgetGoesThroughTheLayer(t *testing.T) {
	e, rs := runText(t, Config{Capacity: 64 * vmm.MiB, Streams: 3, Serve: true}, `alloc a0 58720256 s1
launch s1
free a0
forget s1
alloc a1 1048576 s1
forget s1
alloc a2 58720256 s2
free a2
`)
	for _, i := range []int{4, 5} {
		if rs[i].Err != nil || rs[i].Ptr != 0 {
			t.Fatalf("step %d (%v) on the forgotten caller value: %#x, %v; want it refused (not run)", i, rs[i].Op, rs[i].Ptr, rs[i].Err)
		}
	}
	if rs[6].Err != nil {
		t.Fatalf("%v: %v, want success after the layer synchronised the forgotten stream's work", rs[6].Op, rs[6].Err)
	}
	noViolations(t, e, rs)
	s, err := e.S.Stream(e.callers[1])
	if err != nil || s == e.Streams[1] {
		t.Fatalf("caller value %#x after forget s1 maps to %d (%v): still the forgotten stream %d", uint64(e.callers[1]), s, err, e.Streams[1])
	}
}

// TestServeJudgeBites: INV-SERVE flags an out of memory answered without synchronising every stream the
// engine was given work on, an EmptyCache that did not synchronise, and counters that disagree with the
// steps; the real runs above pass it.
func TestServeJudgeBites(t *testing.T) {
	e, rs := runText(t, Config{Capacity: 64 * vmm.MiB, Streams: 3, Serve: true}, "alloc a0 1048576 s1\nfree a0\n")
	for _, r := range rs {
		if len(r.Violations) > 0 {
			t.Fatalf("%v: %v", r.Op, r.Violations)
		}
	}
	oom := StepResult{Err: vmm.ErrOutOfMemory}
	cases := []struct {
		name   string
		op     Op
		res    StepResult
		synced []vmm.Stream
		want   string
	}{
		{"oom without a synchronisation", Op{Kind: OpAlloc, Size: vmm.MiB, Stream: 2}, oom, nil, "without synchronising"},
		{"oom without stream 1", Op{Kind: OpAlloc, Size: vmm.MiB, Stream: 2}, oom, []vmm.Stream{vmm.DefaultStream}, "without synchronising"},
		{"empty cache without a synchronisation", Op{Kind: OpEmptyCache}, StepResult{}, nil, "did not synchronise"},
		{"a retry the layer did not count", Op{Kind: OpAlloc, Size: vmm.MiB, Stream: 2}, StepResult{}, []vmm.Stream{vmm.DefaultStream, e.Streams[1]}, "counters"},
		{"more than the device as an invalid size", Op{Kind: OpAlloc, Size: 65 * vmm.MiB, Stream: 2}, StepResult{Err: impl.ErrInvalidSize}, nil, "want an out of memory"},
		{"an error with the wrong figures", Op{Kind: OpAlloc, Size: vmm.MiB, Stream: 2}, StepResult{Err: &impl.OOMError{Requested: vmm.MiB, Reserved: 1}},
			[]vmm.Stream{vmm.DefaultStream, e.Streams[1]}, "the out-of-memory error says"},
	}
	for _, c := range cases {
		e.synced = c.synced
		saved, served := e.serve.want, maps.Clone(e.serve.served)
		vs := e.judgeServe(c.op, c.res, false /* refused */)
		e.synced, e.serve.want, e.serve.served = nil, saved, served
		if len(vs) == 0 || !strings.Contains(vs[0].Msg, c.want) || vs[0].Inv != spec.InvServe {
			t.Errorf("%s: %v, want an %s violation saying %q", c.name, vs, spec.InvServe, c.want)
		}
	}
	// Every stream synchronised, the counters told: nothing to say.
	e.synced = []vmm.Stream{vmm.DefaultStream, e.Streams[1]}
	e.serve.want.Syncs-- // (judgeServe counts this synchronisation; the layer made none)
	e.serve.want.OOMs--
	if vs := e.judgeServe(Op{Kind: OpAlloc, Size: vmm.MiB, Stream: 2}, oom, false /* refused */); len(vs) != 0 {
		t.Errorf("an out of memory after synchronising every stream: %v, want none", vs)
	}
	e.synced = nil
}
