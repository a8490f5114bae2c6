package ops

import (
	"fmt"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Device is the Env's device: the driver the engine runs on, the stream clock the ops launch, complete and
// completeall drive, and what the judge sees of it. A fresh simulated device (sim.Device, with fault
// injection) is the default; harness/gpu's Device is the real GPU (impl/cudavmm under a ledger, with a
// stream clock the test holds back and releases on real streams).
type Device interface {
	vmm.Driver
	Launch(s vmm.Stream)    // submit one unit of work to s
	Complete(s vmm.Stream)  // complete all work submitted to s so far (returns once it has)
	CompleteAll()           // complete all work on every stream
	Capacity() uint64       // the physical bytes the judge counts as the device's
	State() sim.DeviceState // the judge's picture of the device
	Leaks() sim.LeakReport  // what is still held after Close (INV-NOLEAK)
}

var _ Device = (*sim.Device)(nil)

// deviceWait is the engine's wait for the whole device in an Env (vmm.DeviceSyncer, serve.Config.DeviceSync:
// a released pool's memory waits for its graphs' replays): it completes the work of every stream of the Env
// and notes each (Env.synced, so the contract and the history learn it), counted apart from the serving
// layer's synchronisations (Env.devWaited: INV-SERVE judges the layer's own). An armed fail-sync does not
// fail it: fail-sync counts the layer's synchronisations and the bare engine's out-of-memory wait.
type deviceWait struct{ e *Env }

func (w deviceWait) SynchronizeDevice() error {
	e := w.e
	e.devSyncs++
	for _, s := range e.Streams {
		if !e.syncTellsOnly {
			e.Device.Complete(s)
		}
		e.synced = append(e.synced, s)
		e.devWaited++
		if e.calls != nil {
			e.calls.events = append(e.calls.events, eventCall{kind: callSynchronize, stream: s, done: !e.syncTellsOnly})
		}
	}
	return nil
}

// clockSync is the serving layer's synchroniser in an Env (serve.Config.Sync): it completes the stream's
// work on the Env's device and notes the stream, so the Env tells the contract and the history that the
// work completed (a synchronisation moves the stream clock) before it judges the call that synchronised.
type clockSync struct{ e *Env }

// A fail-sync armed (Env.syncFail) fails the synchronisation it counts down to: the stream's work stays
// pending, and the Env notes the stream (syncFailed) for INV-SERVE.
func (c clockSync) Synchronize(s vmm.Stream) error {
	c.e.syncs++
	if c.e.syncFail > 0 {
		if c.e.syncFail--; c.e.syncFail == 0 {
			c.e.syncFailed = append(c.e.syncFailed, s)
			return fmt.Errorf("ops: synchronising stream %d: %w (an injected fail-sync)", s, vmm.UnknownCUDAError)
		}
	}
	if !c.e.syncTellsOnly {
		c.e.Device.Complete(s)
	}
	c.e.synced = append(c.e.synced, s)
	if c.e.calls != nil { // the layer's waits and the engine's, in call order with the event calls (INV-BUDGET)
		c.e.calls.events = append(c.e.calls.events, eventCall{kind: callSynchronize, stream: s, done: !c.e.syncTellsOnly})
	}
	if c.e.calls != nil && c.e.S == nil { // the bare engine's own wait (F6), in call order with its event calls
		c.e.calls.syncs = append(c.e.calls.syncs, streamCall{callSynchronize, s})
	}
	return nil
}
