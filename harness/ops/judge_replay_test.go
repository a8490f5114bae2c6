package ops

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
)

// replayScene is PyTorch's test_repeat_graph_capture_cublas_workspace_memory in ops: a graph captured on
// s1 frees its temporary during the capture, replays on s0 (the engine is not told), and is destroyed
// (pool-release) while the replay may still run; twice, the second time with work left pending.
const replayScene = `pool-create p1
capture-begin s1
alloc a0 8388608 s1 p1
free a0
capture-end s1
replay p1 s0
pool-release p1
pool-create p2
capture-begin s1
alloc a1 4194304 s1 p2
alloc a2 1048576 s1 p2
free a1
capture-end s1
replay p2 s0
replay p2 s1
pool-release p2
free a2
emptycache
`

// Property (INV-RELEASESAFE, a graph's replays): a released pool's memory is not unmapped or released while a
// replay of its graphs, launched on a stream the engine was never told of, may still use it. Every policy
// with private pools runs the scene clean through the Env, the bare engine and the serving layer, and the
// engine waits for the device's streams at each release (the Env's device wait: every stream synchronised).
func TestReleasedPoolMemoryOutlivesItsReplays(t *testing.T) {
	prog, err := Parse(replayScene, "replay scene")
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{impl.PolicyGMLake, impl.PolicyCaching, impl.PolicyExpandable} {
		for _, serve := range []bool{false, true} {
			t.Run(policy+map[bool]string{false: "/engine", true: "/serve"}[serve], func(t *testing.T) {
				env, err := NewEnv(Config{Policy: policy, Capacity: 1 << 30, Streams: 2, Serve: serve})
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range prog.Ops {
					waits := env.devSyncs
					if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
						t.Fatalf("%v: %v %v\n%s", op, r.Err, r.Violations, env.History())
					}
					if op.Kind == OpPoolRelease && env.devSyncs-waits != 1 {
						t.Fatalf("%v: %d device waits, want 1: a replay may run on any stream", op, env.devSyncs-waits)
					}
				}
			})
		}
	}
}

// Property: the judge bites. The same replay, with its pool's memory unmapped while the replay is pending
// (the View shows the mapping gone), is flagged by INV-RELEASESAFE.
func TestReplayMarksJudgeTheRelease(t *testing.T) {
	prog, err := Parse("pool-create p1\nalloc a0 8388608 s1 p1\nfree a0\nreplay p1 s0\n", "replay")
	if err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Capacity: 1 << 30, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Ops {
		if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v", op, r.Err, r.Violations)
		}
	}
	v := env.View()
	v.Device.Mappings = nil
	vs := env.Hist.CheckRelease(v)
	if len(vs) == 0 || vs[0].Inv != spec.InvReleaseSafe || !strings.Contains(vs[0].Msg, "graph replay") {
		t.Fatalf("unmapping a pool's memory under a pending replay: %v, want an INV-RELEASESAFE violation naming the replay", vs)
	}
}
