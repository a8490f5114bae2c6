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
