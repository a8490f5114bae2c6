package harness

import (
	"os"
	"testing"
)

func TestZZDebugRandom(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	for seed := int64(1); seed <= 200; seed++ {
		if vs, env := randomRun(seed, 0, map[string]bool{"INV-NOSPURIOUSOOM": true}); len(vs) > 0 {
			t.Logf("seed %d: %v", seed, vs)
			os.WriteFile("/tmp/verify/rand.ops", []byte(env.Describe()), 0o644)
			return
		}
	}
}

func TestZZDebugExplore(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	for _, p := range []string{"gmlake", "caching", "expandable", "gmlake-paper"} {
		r, err := Explore(ExploreConfig{Policy: p, Capacity: 6 << 20, Sizes: []uint64{512, 2 << 20, 4 << 20}, Depth: 4, Faults: true})
		t.Logf("%s %+v %v", p, r.States, err)
		if r.Violation != nil {
			t.Logf("%v\n%s", r.Violation, FormatOps(r.Ops))
		}
	}
}
