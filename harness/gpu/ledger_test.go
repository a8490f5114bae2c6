package gpu_test

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness"
	"github.com/gmlake/gmlake/harness/gpu"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// ledgerSim is the GPU's shape on the simulated device: the engine's driver is a Ledger, the judge sees the
// Ledger's account (not the device's own) under a cap, and the clock is the device's. It runs the GPU
// checkers' whole path on any machine.
type ledgerSim struct {
	*gpu.Ledger
	d   *sim.Device
	cap uint64
}

func (l ledgerSim) Launch(s vmm.Stream)   { l.d.Launch(s) }
func (l ledgerSim) Complete(s vmm.Stream) { l.d.Complete(s) }
func (l ledgerSim) CompleteAll()          { l.d.CompleteAll() }
func (l ledgerSim) Capacity() uint64      { return l.cap }
func (l ledgerSim) State() sim.DeviceState {
	st := l.Ledger.State()
	st.Capacity = l.cap
	return st
}
func (l ledgerSim) Leaks() sim.LeakReport {
	st := l.Ledger.State()
	return sim.LeakReport{Reservations: st.Reservations, Mappings: st.Mappings, Handles: st.Handles, Used: st.Used}
}

func openLedgerSim(limit uint64) func() (ops.Device, error) {
	return func() (ops.Device, error) {
		d := sim.NewDevice(sim.DeviceConfig{Capacity: limit}) // a device of the judge's size, as gpu.Device reports
		return ledgerSim{Ledger: gpu.NewLedger(d), d: d, cap: limit}, nil
	}
}

// TestGPUPathOnTheSimulatedDevice: the GPU checkers' configuration (an external device whose state is the
// Ledger's, the serving layer under a cap below the device, no fault injection) on the simulated device:
// rapid and porcupine find nothing, so a violation on the GPU is the GPU's (or the driver's), not the path's.
func TestGPUPathOnTheSimulatedDevice(t *testing.T) {
	const limit = 256 * vmm.MiB
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			var c harness.RapidCounters
			rapid.Check(t, func(rt *rapid.T) {
				harness.RunRapid(rt, harness.RapidConfig{Policy: p, NoFaults: true, Serve: true, MemoryLimit: limit,
					Device: openLedgerSim(limit), Counters: &c})
			})
			for seed := int64(1); seed <= 10; seed++ {
				r := harness.RunLinear(harness.LinearConfig{Policy: p, Seed: seed, Ops: 40, Serve: true, MemoryLimit: limit / 4,
					Device: openLedgerSim(limit / 4)})
				if r.Err != nil || r.Result != porcupine.Ok {
					t.Fatalf("seed %d: %v %v %s", seed, r.Err, r.Result, r.VizPath)
				}
			}
			t.Logf("policy %s: %d sequences, %d steps, %d out of memory", p, c.Sequences.Load(), c.Steps.Load(), c.OOMs.Load())
		})
	}
}

// reusing is a driver that names physical handles as CUDA does: a released handle's value is handed out
// again by a later Create (CUmemGenericAllocationHandle is the driver's pointer to its own record). The
// simulated device never reuses one.
type reusing struct {
	*sim.Device
	real map[vmm.Handle]vmm.Handle // the value handed out -> the device's handle
	free []vmm.Handle              // values released, handed out again first (last released, first)
	next vmm.Handle
}

func newReusing(d *sim.Device) *reusing {
	return &reusing{Device: d, real: map[vmm.Handle]vmm.Handle{}, next: 1}
}

func (r *reusing) Create(size uint64) (vmm.Handle, error) {
	h, err := r.Device.Create(size)
	if err != nil {
		return 0, err
	}
	v := r.next
	if n := len(r.free); n > 0 {
		v, r.free = r.free[n-1], r.free[:n-1]
	} else {
		r.next++
	}
	r.real[v] = h
	return v, nil
}

func (r *reusing) Release(h vmm.Handle) error {
	if err := r.Device.Release(r.real[h]); err != nil {
		return err
	}
	delete(r.real, h)
	r.free = append(r.free, h)
	return nil
}

func (r *reusing) Map(p vmm.DevicePtr, size uint64, h vmm.Handle, off uint64) error {
	return r.Device.Map(p, size, r.real[h], off)
}

// Property: the Ledger names every physical handle the engine gets once, even where the driver hands a
// released handle's value out again (CUDA does): the judges key ownership and history by handle, and a
// value reused within one step read as one handle was both a pool's and the default pool's (a false
// INV-POOL on the H200, FuzzOpsOnGPU, 2026-12-01: the program below, clean on the simulated device).
func TestLedgerNamesReusedHandlesAfresh(t *testing.T) {
	r := newReusing(sim.NewDevice(sim.DeviceConfig{Capacity: vmm.GiB}))
	l := gpu.NewLedger(r)
	a, err := l.Create(2 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(a); err != nil {
		t.Fatal(err)
	}
	b, err := l.Create(2 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if b == a {
		t.Fatalf("the ledger handed out handle %d twice (the driver reused its value)", a)
	}
	p, err := l.Reserve(2 * vmm.MiB)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Map(p, 2*vmm.MiB, b, 0); err != nil {
		t.Fatalf("mapping the fresh name %d: %v", b, err)
	}
	if st := l.State(); len(st.Handles) != 1 || st.Handles[0].Handle != b || st.Handles[0].Mappings != 1 {
		t.Fatalf("the ledger's account: %+v", st.Handles)
	}
	if err := l.Unmap(p, 2*vmm.MiB); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(b); err != nil {
		t.Fatal(err)
	}
	if err := l.FreeAddress(p, 2*vmm.MiB); err != nil {
		t.Fatal(err)
	}
	if ok, what := l.Empty(); !ok {
		t.Fatalf("left: %s", what)
	}

	const prog = `# policy=gmlake capacity=67108864 granularity=0 streams=3 sync=false serve=true limit=65011712
alloc a1 20971519 s0
complete s2
completeall
free a1
alloc a2 864817 s0
free a1
pool-create p1
alloc a3 12582912 s2 p1
free a3
alloc a4 12582912 s2
pool-release p1
emptycache
free-interior a4 +1569
alloc a5 20971520 s0
record a5 s0
launch s0
capture-begin s0
free a5
alloc a6 20971520 s0
capture-end s0
complete s0
free a6
free-interior a4 +89
pool-create p2
alloc a7 33095681 s2 p2
free a7
alloc a8 33095681 s2
pool-release p2
emptycache
free a2
free a4
free a8
`
	p2, err := ops.Parse(prog, "h200-fuzzopsongpu-e2952b0df294b5d6")
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range impl.Policies {
		d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB})
		cfg := p2.Cfg
		cfg.Policy, cfg.Device = policy, ledgerSim{Ledger: gpu.NewLedger(newReusing(d)), d: d, cap: 64 * vmm.MiB}
		if i, vs, _, err := ops.Run(cfg, p2.Ops); err != nil || i >= 0 {
			t.Errorf("%s: step %d: %v %v", policy, i, vs, err)
		}
	}
}

// Ledger.Reclaim gives back everything an engine that never closed still holds (mapped, accessible,
// unreleased handles and reservations), through the ledger, so that its books and the device both end empty;
// on an empty ledger it reclaims nothing.
func TestLedgerReclaimGivesBackWhatAnUnclosedEngineHeld(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB})
	l := gpu.NewLedger(d)
	a, err := impl.New(l, impl.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []uint64{512, 3 * vmm.MiB, 20 * vmm.MiB} {
		if _, err := a.Alloc(size, 0 /* the default stream */); err != nil {
			t.Fatalf("Alloc(%d): %v", size, err)
		}
	}
	// The engine is dropped without Close, as a rapid case cut short drops it.
	held, err := l.Reclaim()
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if held == "" {
		t.Fatal("Reclaim reported nothing held, with three allocations live")
	}
	if empty, left := l.Empty(); !empty {
		t.Errorf("the ledger still books %s after Reclaim", left)
	}
	if leaks := d.Leaks(); !leaks.Empty() {
		t.Errorf("the device still holds %s after Reclaim", leaks.String())
	}
	if held, err := l.Reclaim(); held != "" || err != nil {
		t.Errorf("a second Reclaim = %q, %v; want nothing reclaimed", held, err)
	}
}

// closeCheckingSim is ledgerSim with a Close that notes whether the engine had given everything back by then
// (the order gpu.Device needs: engine, then device), and a State that books a phantom handle so that every
// case fails at its first check.
type closeCheckingSim struct {
	ledgerSim
	closes, heldAtClose *int
}

func (c closeCheckingSim) State() sim.DeviceState {
	st := c.ledgerSim.State()
	st.Handles = append(st.Handles, sim.HandleInfo{Handle: 1 << 50, Size: 2 * vmm.MiB})
	st.Used += 2 * vmm.MiB
	return st
}

func (c closeCheckingSim) Close() error {
	*c.closes++
	if empty, _ := c.Ledger.Empty(); !empty {
		*c.heldAtClose++
	}
	return nil
}

// failingTB is a rapid.TB whose failures are recorded, not reported, so a test can run a property that must
// fail and look at what happened around it.
type failingTB struct {
	*testing.T
	failed bool
}

func (f *failingTB) Errorf(string, ...any) { f.failed = true }
func (f *failingTB) Error(...any)          { f.failed = true }
func (f *failingTB) Fatalf(string, ...any) { f.failed = true }
func (f *failingTB) Fatal(...any)          { f.failed = true }
func (f *failingTB) Fail()                 { f.failed = true }
func (f *failingTB) FailNow()              { f.failed = true }
func (f *failingTB) Failed() bool          { return f.failed }
func (f *failingTB) Logf(string, ...any)   {}
func (f *failingTB) Log(...any)            {}

// A rapid case cut short by a violation, and every case rapid runs while shrinking it, closes its engine
// before its device: on the GPU an engine left open keeps its memory for the rest of the process, and the
// cases after it (other policies, porcupine) would fail with out of memory on a full device.
func TestRapidClosesTheEngineOfEveryCaseCutShort(t *testing.T) {
	const limit = 64 * vmm.MiB
	var closes, heldAtClose int
	open := func() (ops.Device, error) {
		d, _ := openLedgerSim(limit)()
		return closeCheckingSim{ledgerSim: d.(ledgerSim), closes: &closes, heldAtClose: &heldAtClose}, nil
	}
	tb := &failingTB{T: t}
	rapid.Check(tb, func(rt *rapid.T) {
		harness.RunRapid(rt, harness.RapidConfig{Policy: impl.PolicyGMLake, NoFaults: true, Serve: true,
			MemoryLimit: limit, Device: open})
	})
	if !tb.failed {
		t.Fatal("the phantom handle was not flagged: the property did not fail, so nothing was cut short")
	}
	if closes == 0 || heldAtClose != 0 {
		t.Errorf("of %d devices closed after failing cases, %d still held the engine's memory at Close", closes, heldAtClose)
	}
}
