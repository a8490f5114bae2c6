package gpu

// See doc.go.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Config configures a Device.
type Config struct {
	Ordinal int // the CUDA device
	// Capacity is the memory the judge sees as the device's (the contract's capacity, View.Device.Capacity):
	// the memory cap the engine runs under (serve.Config.MemoryLimit), a few GiB of the 141 GB of an H200.
	Capacity  uint64
	MaxGates  int    // streams with a gate, the default stream included; 0: 16
	WorkBytes uint64 // bytes each launched unit memsets (real work on the stream); 0: 8 MiB

	_ struct{}
}

// Device is the real GPU as the op executor's device (see doc.go): a Ledger over impl/cudavmm for the
// engine, and a stream clock the test controls. Launch, Complete and CompleteAll are safe for concurrent
// use (porcupine's goroutines, one per stream).
type Device struct {
	*Ledger // the engine's driver: what it holds is booked
	cu      *cudavmm.Driver
	cfg     Config
	sig     vmm.Stream    // non-blocking stream that opens gates
	words   vmm.DevicePtr // gate words: 4 bytes per gate, MaxGates of them (cuMemAlloc)
	scratch vmm.DevicePtr // the launched work's target, WorkBytes (cuMemAlloc)

	mu struct {
		sync.Mutex
		gate     map[vmm.Stream]int // stream -> its gate's index. Invariant: distinct indexes < MaxGates.
		launched []uint32           // per gate: units launched. Invariant: released[i] <= launched[i].
		released []uint32           // per gate: the value written to its word (units allowed to run)
		created  []vmm.Stream       // streams made by CreateStream, destroyed by Close
		err      error              // the first driver error of the clock (the test reports it)
	}
}

// ErrNoGates is returned when the driver has no stream memory operations (the clock cannot hold work back).
var ErrNoGates = errors.New("gpu: the driver has no stream memory operations (cuStreamWaitValue32)")

// Connections is the CUDA_DEVICE_MAX_CONNECTIONS the clock needs (CUDA's default is 8; at most 32).
const Connections = 32

// EnsureConnections sets CUDA_DEVICE_MAX_CONNECTIONS to Connections unless the environment sets it, and
// must run before the process creates its CUDA context (the driver reads it then): Open calls it, and so
// must whoever opens the device before Open. The driver multiplexes streams onto that many hardware queues;
// streams sharing one are served in submission order, so work queued behind a held-back unit
// (cuStreamWaitValue32) on another stream of the queue waits too, the gate's release on the signalling
// stream included: on the H200 a fuzz campaign of 18 streams under the default 8 hung for good (every
// worker in a read-back, 2026-12-01), where the checkers' 6 streams never had.
func EnsureConnections() {
	if os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS") == "" {
		_ = os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", strconv.Itoa(Connections))
	}
}

// Open opens the CUDA device and sets up the clock. Without a driver the error matches vmm.ErrDriverNotLoaded.
// Streams with a gate should stay within Connections (EnsureConnections).
func Open(cfg Config) (*Device, error) {
	EnsureConnections()
	if cfg.MaxGates == 0 {
		cfg.MaxGates = 16
	}
	if cfg.WorkBytes == 0 {
		cfg.WorkBytes = 8 * vmm.MiB
	}
	cu, err := cudavmm.New(cfg.Ordinal)
	if err != nil {
		return nil, err
	}
	d := &Device{Ledger: NewLedger(cu), cu: cu, cfg: cfg}
	d.mu.gate = map[vmm.Stream]int{}
	fail := func(err error) (*Device, error) {
		d.release()
		return nil, err
	}
	if d.sig, err = cu.CreateStreamNonBlocking(); err != nil {
		return fail(err)
	}
	if d.words, err = cu.MemAlloc(uint64(4 * cfg.MaxGates)); err != nil {
		return fail(err)
	}
	if d.scratch, err = cu.MemAlloc(cfg.WorkBytes); err != nil {
		return fail(err)
	}
	if err := cu.Memset(d.words, uint64(4*cfg.MaxGates), 0, d.sig); err != nil {
		return fail(err)
	}
	if err := cu.Synchronize(d.sig); err != nil {
		return fail(err)
	}
	// A probe: a gate on sig itself, opened at once.
	if err := cu.WaitValue32(d.sig, d.words, 0); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrNoGates, err))
	}
	if err := d.addGate(vmm.DefaultStream); err != nil {
		return fail(err)
	}
	return d, nil
}

// CUDA returns the real driver under the ledger.
func (d *Device) CUDA() *cudavmm.Driver { return d.cu }

// Capacity is the memory the judge sees as the device's (Config.Capacity).
func (d *Device) Capacity() uint64 { return d.cfg.Capacity }

func (d *Device) addGate(s vmm.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.mu.launched) >= d.cfg.MaxGates {
		return fmt.Errorf("gpu: more than %d streams with a gate", d.cfg.MaxGates)
	}
	d.mu.gate[s] = len(d.mu.launched)
	d.mu.launched = append(d.mu.launched, 0)
	d.mu.released = append(d.mu.released, 0)
	return nil
}

// CreateStream creates a non-blocking stream with a gate (the environment's streams, and any the engine
// asks for), destroyed by Close.
func (d *Device) CreateStream() (vmm.Stream, error) {
	s, err := d.cu.CreateStreamNonBlocking()
	if err != nil {
		return 0, err
	}
	if err := d.addGate(s); err != nil {
		_ = d.cu.DestroyStream(s)
		return 0, err
	}
	d.mu.Lock()
	d.mu.created = append(d.mu.created, s)
	d.mu.Unlock()
	return s, nil
}

func (d *Device) word(i int) vmm.DevicePtr { return d.words.Add(uint64(4 * i)) }

func (d *Device) noteLocked(err error) {
	if err != nil && d.mu.err == nil {
		d.mu.err = err
	}
}

// Err returns the first driver error the clock met (nil: none).
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.err
}

// Launch submits one unit of work to s: held back until Complete(s), then a real memset on s. A stream
// without a gate is ignored (the environment launches only on its own streams). A unit launched while an
// earlier one of s is still held back joins it and submits nothing: whatever is queued on s after it waits
// behind that unit's gate already, and Complete(s) releases both at once, so the engine sees the same
// stream. Submitting a wait and a memset for each filled the stream's queue: a campaign on the H200 hung
// after 8,346 ops with cuMemsetD8Async blocked inside Launch, holding the lock Complete needs (session 14).
func (d *Device) Launch(s vmm.Stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i, ok := d.mu.gate[s]
	if !ok {
		return
	}
	held := d.mu.launched[i] > d.mu.released[i]
	d.mu.launched[i]++
	if held {
		return
	}
	d.noteLocked(d.cu.WaitValue32(s, d.word(i), d.mu.launched[i]))
	d.noteLocked(d.cu.Memset(d.scratch, d.cfg.WorkBytes, byte(d.mu.launched[i]), s))
}

// Complete releases the work submitted to s so far and waits until it (and whatever was queued on s
// before: the engine's events) has completed. It waits on an event recorded at the release, not on the
// stream: a unit launched on s after the release (another goroutine's) stays held back, and waiting for
// the whole stream would wait for it forever (seen on the H200: cuStreamSynchronize includes work queued
// while it waits).
func (d *Device) Complete(s vmm.Stream) {
	d.mu.Lock()
	i, ok := d.mu.gate[s]
	if !ok {
		d.mu.Unlock()
		return
	}
	if d.mu.released[i] < d.mu.launched[i] {
		d.mu.released[i] = d.mu.launched[i]
		d.noteLocked(d.cu.WriteValue32(d.sig, d.word(i), d.mu.released[i]))
	}
	ev, err := d.cu.CreateEvent()
	if err == nil {
		err = d.cu.RecordEvent(ev, s)
	}
	d.noteLocked(err)
	d.mu.Unlock()
	if err != nil {
		return
	}
	for {
		done, err := d.cu.QueryEvent(ev)
		if err != nil || done {
			d.mu.Lock()
			d.noteLocked(err)
			d.noteLocked(d.cu.DestroyEvent(ev))
			d.mu.Unlock()
			return
		}
		runtime.Gosched()
	}
}

// Synchronize is Complete as a vmm.StreamSyncer (the serving layer's synchronisation on out of memory).
func (d *Device) Synchronize(s vmm.Stream) error {
	d.Complete(s)
	return nil
}

// CompleteAll completes the work of every stream with a gate.
func (d *Device) CompleteAll() {
	d.mu.Lock()
	ss := make([]vmm.Stream, 0, len(d.mu.gate))
	for s := range d.mu.gate {
		ss = append(ss, s)
	}
	d.mu.Unlock()
	for _, s := range ss {
		d.Complete(s)
	}
}

// Pending returns the units launched on s and not yet released.
func (d *Device) Pending(s vmm.Stream) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i, ok := d.mu.gate[s]; ok {
		return uint64(d.mu.launched[i] - d.mu.released[i])
	}
	return 0
}

// Create creates a handle of size bytes on the GPU, refusing with out of memory one that would take the
// Ledger's account past Capacity, as the simulated device of that capacity does: MemInfo reports a device of
// Capacity bytes, and without the refusal an engine with no serving layer's cap above it (FuzzOpsOnGPU's
// bare programs) kept growing on the 141 GB H200, past what the judge believes exists (5.8 GiB on a 1 GiB
// device, 15 s for one 235-op program: past the fuzzer's 10 s limit, session 8).
func (d *Device) Create(size uint64) (vmm.Handle, error) {
	if used := d.Ledger.Used(); d.cfg.Capacity > 0 && (size > d.cfg.Capacity || used > d.cfg.Capacity-size) {
		return 0, &vmm.CallError{Call: vmm.CallCreate, Result: vmm.OutOfMemory,
			Detail: fmt.Sprintf("%s asked with %s of the judge's %s device held", vmm.FormatBytes(size), vmm.FormatBytes(used), vmm.FormatBytes(d.cfg.Capacity))}
	}
	return d.Ledger.Create(size)
}

// MemInfo reports a device of Capacity bytes (the judge's): free is what the Ledger's account leaves of it
// (at most the GPU's real free memory), total is Capacity. The engine and the serving layer then size
// themselves as on a GPU of that size, as on the simulated device: a request above Capacity is refused at
// once, and does not send the engine down its out-of-memory path (flush the cache, synchronise every
// stream) as it would under a mere cap on a 141 GB device, where the sequences' deep states were lost
// (the first H200 run missed two seeded bugs that way).
func (d *Device) MemInfo() (free, total uint64, err error) {
	free, _, err = d.Ledger.MemInfo()
	if err != nil {
		return 0, 0, err
	}
	used := d.Ledger.State().Used
	left := uint64(0)
	if used < d.cfg.Capacity {
		left = d.cfg.Capacity - used
	}
	return min(free, left), d.cfg.Capacity, nil
}

// State returns what this process holds (the Ledger), with the judge's capacity.
func (d *Device) State() sim.DeviceState {
	st := d.Ledger.State()
	st.Capacity = d.cfg.Capacity
	return st
}

// Leaks returns what the engine still holds on the device (the Ledger's account).
func (d *Device) Leaks() sim.LeakReport {
	st := d.Ledger.State()
	return sim.LeakReport{Reservations: st.Reservations, Mappings: st.Mappings, Handles: st.Handles, Used: st.Used}
}

// release frees the clock's own resources.
func (d *Device) release() error {
	var errs []error
	d.mu.Lock()
	created := d.mu.created
	d.mu.created = nil
	d.mu.Unlock()
	for _, s := range created {
		errs = append(errs, d.cu.DestroyStream(s))
	}
	if d.sig != 0 {
		errs = append(errs, d.cu.DestroyStream(d.sig))
	}
	if d.words != 0 {
		errs = append(errs, d.cu.MemFree(d.words))
	}
	if d.scratch != 0 {
		errs = append(errs, d.cu.MemFree(d.scratch))
	}
	errs = append(errs, d.cu.Close())
	return errors.Join(errs...)
}

// Close releases every gate, waits for all work, gives back what an engine left booked in the Ledger
// (Ledger.Reclaim: a run cut short before its engine closed), and closes the device. The engine should be
// closed first: what it leaked is judged before this (INV-NOLEAK, Env.Finish); Close only keeps it from
// filling the GPU for the rest of the process. Its error is the driver's, not the leak.
func (d *Device) Close() error {
	d.CompleteAll()
	_, err := d.Ledger.Reclaim()
	return errors.Join(d.Err(), err, d.release())
}
