package ops

import (
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
)

// Property (INV-SBCACHE): StitchFree tears down cached stitched blocks only beyond the cache's limit. Two
// stitched blocks over four free 4 MiB chunks are freed under a cache of one: the Env judges the real run clean
// (the second free tears down the least recently used, one stays), and the judge flags the same Free had it
// left none cached.
func TestSBlockCacheJudgeBites(t *testing.T) {
	const scene = `alloc a0 4194304 s0
alloc a1 4194304 s0
alloc a2 4194304 s0
alloc a3 4194304 s0
alloc a4 4194304 s0
alloc a5 4194304 s0
alloc a6 4194304 s0
alloc a7 4194304 s0
free a0
free a2
free a4
free a6
alloc a8 8388608 s0
alloc a9 8388608 s0
free a8
`
	env, err := NewEnv(Config{Policy: impl.PolicyGMLake, Capacity: 64 << 20, Streams: 1, Knobs: impl.Config{SBlockCache: 1}})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Parse(scene, "scene")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Ops {
		if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
			t.Fatalf("%v: %v %v\n%s", op, r.Err, r.Violations, env.History())
		}
	}
	before := env.View()
	op := Op{Kind: OpFree, ID: 9}
	if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
		t.Fatalf("%v: %v %v", op, r.Err, r.Violations)
	}
	after := env.View()
	stitched := 0
	var kept []spec.Block
	for _, b := range after.Blocks {
		if b.Stitched {
			stitched++
			continue
		}
		kept = append(kept, b)
	}
	if stitched != 1 {
		t.Fatalf("the scene left %d stitched blocks cached, want the cache's 1: it no longer reaches the limit", stitched)
	}
	after.Blocks = kept
	if vs := env.judgeSBlockCache(op, nil, before, after); len(vs) != 1 || vs[0].Inv != spec.InvSBlockCache {
		t.Fatalf("a Free that left none cached under a limit of 1: want one %s, got %v", spec.InvSBlockCache, vs)
	}
}
