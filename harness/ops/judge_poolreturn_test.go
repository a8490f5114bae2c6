package ops

import (
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
)

// Property (INV-POOLRETURN): a released private pool returns its free memory at once, the rest as it is freed,
// and what pending work still used at its free at the next EmptyCache. Every policy with private pools runs
// the scene clean through the Env (its handles are gone the step they became free, or owed while work was
// pending), and the judge flags the same step's View with a block of the released pool shown free where the
// engine kept it live: the memory under it would have had to go.
func TestPoolReturnJudgeBites(t *testing.T) {
	const scene = `pool-create p1
alloc a0 4194304 s0 p1
alloc a1 1048576 s0 p1
alloc a2 8388608 s0 p1
free a0
free a1
pool-release p1
free a2
pool-create p2
alloc a3 8388608 s1 p2
launch s1
free a3
pool-release p2
complete s1
emptycache
pool-create p3
alloc a4 8388608 s0 p3
alloc a5 4194304 s0 p3
pool-release p3
`
	prog, err := Parse(scene, "scene")
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{impl.PolicyGMLake, impl.PolicyCaching, impl.PolicyExpandable} {
		t.Run(policy, func(t *testing.T) {
			env, err := NewEnv(Config{Policy: policy, Capacity: 1 << 30, Streams: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range prog.Ops {
				if r := env.Step(op); r.Err != nil || len(r.Violations) > 0 {
					t.Fatalf("%v: %v %v\n%s", op, r.Err, r.Violations, env.History())
				}
			}
			// p3 is released with a4 and a5 live: shown free, the View says the engine kept its memory.
			v := env.View()
			for i, b := range v.Blocks {
				if b.State == spec.BlockLive {
					v.Blocks[i].State = spec.BlockFree
				}
			}
			if vs := env.poolChk.Returned(v, nil, false, env.Rule.WholeSegments); len(vs) == 0 {
				t.Fatalf("a released pool's memory under no live block was not flagged:\n%s", env.History())
			} else {
				t.Logf("flagged: %v", vs[0])
			}
		})
	}
}
