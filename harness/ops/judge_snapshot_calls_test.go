package ops

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-SNAPSHOT): the driver calls a Snapshot counts are those the simulated device answered: a
// Snapshot whose count of one memory or event call differs from the device's is flagged, the engine's own
// is not.
func TestSnapshotCountsTheDevicesCalls(t *testing.T) {
	env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 64 << 20, Streams: 2},
		"alloc a0 4194304 s0\nrecord a0 s1\nlaunch s1\nfree a0\ncomplete s1\nemptycache\n")
	defer env.Finish()
	snap := env.A.Snapshot()
	if vs := env.judgeSnapshot(snap); len(vs) != 0 {
		t.Fatalf("the engine's own Snapshot: %v", vs)
	}
	for _, k := range engineOnlyCalls {
		bad := snap
		bad.Stats.DriverCalls[k]++
		if vs := env.judgeSnapshot(bad); len(vs) != 1 || !strings.Contains(vs[0].Msg, k.String()) {
			t.Errorf("a Snapshot counting one %s call too many: want one INV-SNAPSHOT naming it, got %v", k, vs)
		}
	}
	var zero vmm.CallCounts
	bad := snap
	bad.Stats.DriverCalls = zero
	if vs := env.judgeSnapshot(bad); len(vs) != 1 {
		t.Errorf("a Snapshot counting no calls: want one INV-SNAPSHOT, got %v", vs)
	}
}
