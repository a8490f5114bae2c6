package ops

import (
	"errors"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-DRIVERRULES): a memory call the simulated device refuses for a broken rule (here a real
// refusal: cuMemSetAccess over a range with a hole, rule 5) is a violation, named with the call and the
// rule; a refusal a fault op injected and an out-of-memory answer are not; and a real run through a failed
// stitch (the stitch-orphan-view scenario's faults) makes no refused call.
func TestDriverRulesJudgeBites(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 16 * vmm.MiB, Granularity: 2 * vmm.MiB})
	l := &failLog{Device: d}
	base, err := l.Reserve(8 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.Create(2 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Map(base, 2*vmm.MiB, h, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.SetAccess(base, 4*vmm.MiB); err == nil {
		t.Fatal("the device set access over a hole")
	}
	vs := judgeDriverRules(l.failed)
	if len(vs) != 1 || vs[0].Inv != spec.InvDriverRules || !strings.Contains(vs[0].Msg, "rule 5") || !strings.Contains(vs[0].Msg, "cuMemSetAccess") {
		t.Fatalf("a SetAccess over a hole: want one %s naming the call and rule 5, got %v", spec.InvDriverRules, vs)
	}
	// A released handle used again (rule 7) is caught the same way.
	l.failed = nil
	if err := l.Unmap(base, 2*vmm.MiB); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(h); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(h); err == nil {
		t.Fatal("the device released a handle twice")
	}
	if vs := judgeDriverRules(l.failed); len(vs) != 1 || !strings.Contains(vs[0].Msg, "rule 7") {
		t.Fatalf("a handle released twice: want one %s naming rule 7, got %v", spec.InvDriverRules, vs)
	}
	// Injected faults and out of memory are the device's answers, not the engine's misuse.
	l.failed = nil
	d.FailNth(vmm.CallMap, 1, vmm.UnknownCUDAError)
	h2, err := l.Create(2 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Map(base, 2*vmm.MiB, h2, 0); err == nil {
		t.Fatal("the injected map fault missed")
	}
	if _, err := l.Create(64 * vmm.MiB); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("a create beyond the device: %v, want out of memory", err)
	}
	if vs := judgeDriverRules(l.failed); len(vs) != 0 || len(l.failed) != 2 {
		t.Fatalf("an injected fault and an out of memory (%d failed calls) judged: %v", len(l.failed), vs)
	}
	// An event destroyed twice is the engine's misuse; a record on a stream the caller destroyed is not.
	l.failed = nil
	ev, err := l.CreateEvent()
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordEvent(ev, s); err == nil {
		t.Fatal("the device recorded on a destroyed stream")
	}
	if vs := judgeDriverRules(l.failed); len(vs) != 0 {
		t.Fatalf("a record on a destroyed stream judged: %v", vs)
	}
	if err := l.DestroyEvent(ev); err != nil {
		t.Fatal(err)
	}
	if err := l.DestroyEvent(ev); err == nil {
		t.Fatal("the device destroyed an event twice")
	}
	if vs := judgeDriverRules(l.failed); len(vs) != 1 || !strings.Contains(vs[0].Msg, "does not exist") {
		t.Fatalf("an event destroyed twice: want one %s, got %v", spec.InvDriverRules, vs)
	}
	// The engine through a failed stitch and its refused undo: no call it makes breaks a rule.
	runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 16 * vmm.MiB, Streams: 1},
		"alloc a0 4194304 s0\nalloc a1 2097152 s0\nalloc a2 4194304 s0\nalloc a3 2097152 s0\nfree a0\nfree a2\n"+
			"fail map 2 CUDA_ERROR_UNKNOWN\nfail unmap 1 CUDA_ERROR_UNKNOWN\nfail unmap 2 CUDA_ERROR_UNKNOWN\n"+
			"fail unmap 3 CUDA_ERROR_UNKNOWN\nfail unmap 4 CUDA_ERROR_UNKNOWN\nalloc a4 8388608 s0\nclearfaults\nemptycache\n")
}
