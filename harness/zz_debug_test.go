package harness

import (
	"testing"

	"github.com/gmlake/gmlake/spec"
)

func TestZZDebugOOM(t *testing.T) {
	ops, _ := ParseOps(`alloc a5 8388608 s2
alloc a9 8388608 s0
alloc a10 1 s0
alloc a13 1 s1
launch s2
free a5`)
	env, _ := NewEnv(EnvConfig{Policy: "gmlake-paper", Capacity: 67108864, Streams: 3})
	for _, o := range ops {
		env.Step(o)
	}
	v := env.View()
	t.Logf("marks %+v", env.Hist.Marks())
	t.Logf("%v", spec.CheckNoSpuriousOOM(v, env.Hist, env.Rule, 23068672, 0))
	t.Logf("%s", DescribeView(v))
}
