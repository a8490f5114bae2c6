package serve

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// clock synchronises the simulated device's streams (completes their work) and counts which it synchronised.
type clock struct {
	d      *sim.Device
	synced map[vmm.Stream]int
}

func (c *clock) Synchronize(s vmm.Stream) error {
	if s != vmm.DefaultStream {
		if _, err := c.d.StreamQuery(s); err != nil {
			return err // a destroyed stream, as cuStreamSynchronize says
		}
	}
	c.d.Complete(s)
	c.synced[s]++
	return nil
}

func newSim(t *testing.T, capacity uint64, cfg Config) (*Engine, *sim.Device, *clock, []vmm.Stream) {
	t.Helper()
	d := sim.NewDevice(sim.DeviceConfig{Capacity: capacity})
	c := &clock{d: d, synced: map[vmm.Stream]int{}}
	if cfg.Sync == nil {
		cfg.Sync = c
	}
	e, err := New(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ss []vmm.Stream
	for i := 0; i < 2; i++ {
		s, err := d.CreateStream()
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	t.Cleanup(func() {
		d.CompleteAll()
		if _, err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e, d, c, ss
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pendingOn fills most of the device with one allocation on stream a, used on stream b too when b != a,
// with work pending on b, then frees it: the memory waits for b's work.
func pendingOn(t *testing.T, e *Engine, d *sim.Device, a, b vmm.Stream) {
	t.Helper()
	p, err := e.Alloc(56*vmm.MiB, a)
	must(t, err)
	if b != a {
		must(t, e.RecordStream(p, b))
	}
	d.Launch(b)
	must(t, e.Free(p))
}

// TestOOMSyncsTheStreamsAndRetries: memory freed on one stream and waiting for its work cannot serve another
// stream, so the bare engine runs out of memory; the layer synchronises the streams and the retry succeeds
// (PyTorch's out-of-memory path).
func TestOOMSyncsTheStreamsAndRetries(t *testing.T) {
	e, d, c, ss := newSim(t, 64*vmm.MiB, Config{})
	pendingOn(t, e, d, ss[0], ss[0])
	if _, err := e.Allocator().Alloc(56*vmm.MiB, ss[1]); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("the bare engine served 56 MiB on another stream while the memory waits for stream work: %v", err)
	}
	if _, err := e.Alloc(56*vmm.MiB, ss[1]); err != nil {
		t.Fatalf("through the layer: %v; want success after synchronising the streams", err)
	}
	if got := e.Counters(); got.Syncs != 1 || got.SyncRetries != 1 || got.OOMs != 0 || got.SyncErrors != 0 {
		t.Fatalf("counters %+v, want 1 sync, 1 retry, 0 OOMs, 0 sync errors", got)
	}
	if c.synced[ss[0]] != 1 || c.synced[vmm.DefaultStream] != 1 {
		t.Fatalf("synchronised %v, want the default stream and stream %d once each", c.synced, ss[0])
	}
}

// TestOOMSyncsStreamsOnlyRecordedOn: a stream the engine never allocated on but that a block was recorded on
// holds that block's memory too; the synchronisation must wait for it (the device synchronisation PyTorch
// does), or the retry fails.
func TestOOMSyncsStreamsOnlyRecordedOn(t *testing.T) {
	e, d, c, ss := newSim(t, 64*vmm.MiB, Config{})
	pendingOn(t, e, d, ss[0], ss[1])
	if _, err := e.Alloc(56*vmm.MiB, ss[0]); err != nil {
		t.Fatalf("%v; want success after synchronising stream %d (recorded on, never allocated on); synchronised %v", err, ss[1], c.synced)
	}
	// Every stream met, once each: the one allocated on and the one only recorded on.
	if c.synced[ss[0]] != 1 || c.synced[ss[1]] != 1 || c.synced[vmm.DefaultStream] != 1 {
		t.Fatalf("synchronised %v, want the default stream, %d and %d once each", c.synced, ss[0], ss[1])
	}
}

// TestOOMWithoutSynchroniserIsReturned: with no synchroniser there is nothing to wait for: the out of memory
// reaches the caller, counted once.
func TestOOMWithoutSynchroniserIsReturned(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB})
	e, err := New(d, Config{})
	must(t, err)
	s, err := d.CreateStream()
	must(t, err)
	pendingOn(t, e, d, vmm.DefaultStream, vmm.DefaultStream)
	if _, err := e.Alloc(56*vmm.MiB, s); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("Alloc: %v, want out of memory", err)
	}
	if got := e.Counters(); got.SyncRetries != 0 || got.OOMs != 1 {
		t.Fatalf("counters %+v, want no retry and 1 OOM", got)
	}
	d.CompleteAll()
	_, err = e.Close()
	must(t, err)
}

// TestMemoryLimitCapsPhysicalBytes: with a cap, a request beyond it runs out of memory although the device
// has room, and lifting the cap serves it.
func TestMemoryLimitCapsPhysicalBytes(t *testing.T) {
	e, _, _, _ := newSim(t, 256*vmm.MiB, Config{MemoryLimit: 32 * vmm.MiB})
	if _, err := e.Alloc(40*vmm.MiB, vmm.DefaultStream); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("40 MiB under a 32 MiB cap: %v, want out of memory", err)
	}
	if free, _, err := e.Driver().MemInfo(); err != nil || free > 32*vmm.MiB {
		t.Fatalf("MemInfo under the cap: free %d, %v; want at most the cap", free, err)
	}
	e.SetMemoryLimit(0)
	if _, err := e.Alloc(40*vmm.MiB, vmm.DefaultStream); err != nil {
		t.Fatalf("after lifting the cap: %v", err)
	}
}

// TestLargerThanDeviceIsOutOfMemory: as in PyTorch, a request larger than the device is an out of memory
// (counted), not an invalid size.
func TestLargerThanDeviceIsOutOfMemory(t *testing.T) {
	e, _, _, _ := newSim(t, 64*vmm.MiB, Config{})
	// Something live and something cached, so that the error's figures are told apart.
	live, err := e.Alloc(4*vmm.MiB, vmm.DefaultStream)
	must(t, err)
	cached, err := e.Alloc(8*vmm.MiB, vmm.DefaultStream)
	must(t, err)
	must(t, e.Free(cached))
	st := e.Allocator().Stats()
	p, err := e.Alloc(65*vmm.MiB, vmm.DefaultStream)
	var oom *impl.OOMError
	if !errors.As(err, &oom) || oom.Requested != 65*vmm.MiB || p != 0 {
		t.Fatalf("Alloc(65 MiB) on a 64 MiB device: %#x, %v, want 0 and an *impl.OOMError for 65 MiB", p, err)
	}
	if oom.Reserved != st.ReservedBytes || oom.Live != st.AllocatedBytes || oom.Cached != st.ReservedBytes-st.AllocatedBytes {
		t.Fatalf("the error says reserved %d, live %d, cached %d; the engine holds %d reserved, %d allocated", oom.Reserved, oom.Live, oom.Cached, st.ReservedBytes, st.AllocatedBytes)
	}
	if e.Counters().OOMs != 1 {
		t.Fatalf("counters %+v, want 1 OOM", e.Counters())
	}
	// As large as the device is not larger than it: the engine's own answer (out of memory here, the
	// device being partly used), and counted once more.
	if _, err := e.Alloc(64*vmm.MiB, vmm.DefaultStream); !errors.Is(err, vmm.ErrOutOfMemory) || errors.Is(err, impl.ErrInvalidSize) {
		t.Fatalf("Alloc(64 MiB) on a 64 MiB device: %v, want the engine's out of memory", err)
	}
	must(t, e.Free(live))
}

// TestMapStreamsGivesEachCallerStreamItsOwn: with MapStreams, caller value 0 is the default stream, every
// other value gets a distinct stream of the driver's, the same one each time, and CallerStream inverts it.
func TestMapStreamsGivesEachCallerStreamItsOwn(t *testing.T) {
	e, _, _, ss := newSim(t, 64*vmm.MiB, Config{MapStreams: true})
	if s, err := e.Stream(0); err != nil || s != vmm.DefaultStream {
		t.Fatalf("Stream(0) = %d, %v; want the default stream", s, err)
	}
	got := map[vmm.Stream]vmm.Stream{}
	for _, c := range []vmm.Stream{0x7f00, 0x7f08, 0x10} {
		s, err := e.Stream(c)
		must(t, err)
		for o, v := range got {
			if v == s {
				t.Fatalf("caller streams %#x and %#x both map to %d", o, c, s)
			}
		}
		for _, own := range ss {
			if s == own {
				t.Fatalf("caller stream %#x maps to stream %d, created by the test, not by the layer", c, s)
			}
		}
		got[c] = s
		if again, _ := e.Stream(c); again != s {
			t.Fatalf("Stream(%#x) = %d then %d", c, s, again)
		}
		if back := e.CallerStream(s); back != c {
			t.Fatalf("CallerStream(%d) = %#x, want %#x", s, back, c)
		}
	}
	p, err := e.Alloc(vmm.MiB, 0x7f00)
	must(t, err)
	snap := e.Allocator().Snapshot()
	if len(snap.Live) != 1 || snap.Live[0].Stream != got[0x7f00] {
		t.Fatalf("allocation on caller stream 0x7f00 lives on %+v, want driver stream %d", snap.Live, got[0x7f00])
	}
	must(t, e.Free(p))
}

// TestNoSyncDuringCapture: synchronising a capturing stream is illegal, so during a graph capture the out of
// memory is returned without a synchronisation.
func TestNoSyncDuringCapture(t *testing.T) {
	e, d, c, ss := newSim(t, 64*vmm.MiB, Config{})
	pendingOn(t, e, d, ss[0], ss[0])
	must(t, e.SetCapturing(ss[1], true))
	if _, err := e.Alloc(56*vmm.MiB, ss[1]); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("during a capture: %v, want out of memory", err)
	}
	if len(c.synced) != 0 || e.Counters().Syncs != 0 {
		t.Fatalf("synchronised %v (counters %+v) during a capture", c.synced, e.Counters())
	}
	must(t, e.SetCapturing(ss[1], false))
}

// TestClosedBeatsOversize: after Close every call says the engine is closed, a request larger than the
// device too (found by rapid through the serving layer: it said out of memory).
func TestClosedBeatsOversize(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB})
	e, err := New(d, Config{})
	must(t, err)
	_, err = e.Close()
	must(t, err)
	for _, size := range []uint64{vmm.MiB, 65 * vmm.MiB} {
		if _, err := e.Alloc(size, vmm.DefaultStream); !errors.Is(err, impl.ErrClosed) {
			t.Fatalf("Alloc(%d) after Close: %v, want %v", size, err, impl.ErrClosed)
		}
	}
	if got := e.Counters(); got.OOMs != 0 || got.Syncs != 0 {
		t.Fatalf("counters %+v after refusals of a closed engine, want no OOM and no synchronisation", got)
	}
}

// TestNoPoolBeatsOversize: a request into a pool that does not exist is refused as such through the layer
// too, a request larger than the device included (the layer turns the engine's oversize refusal into out of
// memory, which would hide the bad pool).
func TestNoPoolBeatsOversize(t *testing.T) {
	e, _, _, _ := newSim(t, 64*vmm.MiB, Config{})
	for _, size := range []uint64{1, 65 * vmm.MiB} {
		if _, err := e.AllocPool(size, vmm.DefaultStream, impl.PoolID{A: 3, B: 1}); !errors.Is(err, impl.ErrUnknownPool) {
			t.Fatalf("AllocPool(%d) into no pool: %v, want %v", size, err, impl.ErrUnknownPool)
		}
	}
	// Neither an OOM nor a reason to synchronise: only an out of memory is retried.
	if got := e.Counters(); got.OOMs != 0 || got.Syncs != 0 {
		t.Fatalf("counters %+v, want no OOM and no synchronisation", got)
	}
	if _, err := e.Alloc(0, vmm.DefaultStream); !errors.Is(err, impl.ErrInvalidSize) {
		t.Fatalf("Alloc(0): %v, want %v (an invalid size no larger than the device stays one)", err, impl.ErrInvalidSize)
	}
}

// syncDevice is a simulated device with a synchroniser of its own, as the real driver has (vmm.StreamSyncer).
type syncDevice struct {
	*sim.Device
	synced int
}

func (d *syncDevice) Synchronize(s vmm.Stream) error {
	d.Complete(s)
	d.synced++
	return nil
}

// TestDriversOwnSynchroniserIsUsed: without Config.Sync the layer synchronises with the driver's own
// (cuStreamSynchronize on the GPU), so the out-of-memory retry works there too.
func TestDriversOwnSynchroniserIsUsed(t *testing.T) {
	d := &syncDevice{Device: sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB})}
	e, err := New(d, Config{})
	must(t, err)
	var ss []vmm.Stream
	for i := 0; i < 2; i++ {
		s, err := d.CreateStream()
		must(t, err)
		ss = append(ss, s)
	}
	pendingOn(t, e, d.Device, ss[0], ss[0])
	p, err := e.Alloc(56*vmm.MiB, ss[1])
	if err != nil || d.synced == 0 {
		t.Fatalf("Alloc after memory pending on another stream: %v (the driver's synchroniser ran %d times); want success after synchronising", err, d.synced)
	}
	must(t, e.Free(p))
	d.CompleteAll()
	_, err = e.Close()
	must(t, err)
}

// TestNewRefusesABadConfig: a bad engine configuration is the engine's error, and no engine.
func TestNewRefusesABadConfig(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB})
	e, err := New(d, Config{Engine: impl.Config{Policy: "no-such-policy"}})
	if !errors.Is(err, impl.ErrUnknownPolicy) || e != nil {
		t.Fatalf("New with an unknown policy: %v, %v; want no engine and %v", e, err, impl.ErrUnknownPolicy)
	}
}

// failingSync fails every synchronisation.
type failingSync struct{ calls int }

func (f *failingSync) Synchronize(vmm.Stream) error { f.calls++; return vmm.ErrInvalidHandle }

// TestSyncErrorsAreCounted: each failed stream synchronisation is counted (the C library's sync_errors),
// and the out of memory the retry could not avoid is returned and counted once.
func TestSyncErrorsAreCounted(t *testing.T) {
	f := &failingSync{}
	e, d, _, ss := newSim(t, 64*vmm.MiB, Config{Sync: f})
	pendingOn(t, e, d, ss[0], ss[1]) // ss[0] allocated on, ss[1] recorded on: two streams besides the default
	p, err := e.Alloc(56*vmm.MiB, ss[0])
	if !errors.Is(err, vmm.ErrOutOfMemory) || p != 0 {
		t.Fatalf("Alloc with the work still pending: %#x, %v; want 0 and out of memory", p, err)
	}
	if got := e.Counters(); got.SyncErrors != 3 || got.Syncs != 1 || got.OOMs != 1 || got.SyncRetries != 0 || f.calls != 3 {
		t.Fatalf("counters %+v after %d failed synchronisations, want 3 sync errors (default, %d, %d), 1 sync, 1 OOM, no retry", got, f.calls, ss[0], ss[1])
	}
}

// TestEmptyCacheSynchronisesFirst: memory freed with work pending is returned by EmptyCache, since the layer
// waits for the streams first (torch.cuda.empty_cache synchronises the device).
func TestEmptyCacheSynchronisesFirst(t *testing.T) {
	e, d, c, ss := newSim(t, 64*vmm.MiB, Config{})
	pendingOn(t, e, d, ss[0], ss[1])
	must(t, e.EmptyCache())
	if st := e.Allocator().Stats(); st.ReservedBytes != 0 || c.synced[ss[1]] != 1 || e.Counters().Syncs != 1 {
		t.Fatalf("after EmptyCache: %d bytes reserved, synchronised %v, counters %+v; want nothing reserved after one synchronisation of every stream", st.ReservedBytes, c.synced, e.Counters())
	}
}

// TestStreamCreationFailureIsReturned: under MapStreams a new caller stream needs a stream of the driver's;
// when creating it fails, Alloc, RecordStream, SetCapturing and ForgetStream return the driver's error (a null pointer
// from Alloc) and map nothing, so the next call, the fault gone, gets a stream.
func TestStreamCreationFailureIsReturned(t *testing.T) {
	e, d, _, _ := newSim(t, 64*vmm.MiB, Config{MapStreams: true})
	held, err := e.Alloc(vmm.MiB, 0)
	must(t, err)
	calls := []struct {
		name string
		do   func() error
	}{
		{"Alloc", func() error {
			p, err := e.Alloc(vmm.MiB, 0x7f00)
			if err != nil && p != 0 {
				t.Errorf("Alloc failed (%v) but returned %#x", err, p)
			}
			return err
		}},
		{"RecordStream", func() error { return e.RecordStream(held, 0x7f00) }},
		{"SetCapturing", func() error { return e.SetCapturing(0x7f00, true) }},
		{"ForgetStream", func() error { return e.ForgetStream(0x7f00) }},
	}
	for _, c := range calls {
		d.FailNth(vmm.CallCreateStream, 1, vmm.OutOfMemory)
		if err := c.do(); err == nil {
			t.Fatalf("%s on a new caller stream with stream creation failing: no error", c.name)
		}
		d.ClearFaults()
	}
	if err := e.RecordStream(held+1, 0); !errors.Is(err, impl.ErrUnknownPointer) && !errors.Is(err, impl.ErrInteriorPtr) {
		t.Fatalf("RecordStream of a pointer inside an allocation: %v, want the engine's refusal", err)
	}
	s, err := e.Stream(0x7f00)
	must(t, err)
	p, err := e.Alloc(vmm.MiB, 0x7f00)
	must(t, err)
	if snap := e.Allocator().Snapshot(); len(snap.Live) != 2 || snap.Live[1].Stream != s && snap.Live[0].Stream != s {
		t.Fatalf("after the faults: live %+v, want the new allocation on stream %d", snap.Live, s)
	}
	must(t, e.Free(p))
	must(t, e.Free(held))
}

// TestForgetStreamUnmapsTheCallerValue: under MapStreams, ForgetStream forgets the driver stream in the
// engine and unmaps the caller's value: a stream the caller makes later with the same value (CUDA reuses
// a destroyed stream's address) gets a new stream of the driver's, where it used to keep the forgotten one
// and be refused. The forgotten stream's pending work still holds its memory and is still synchronised by
// the out-of-memory retry (the layer made that stream; nobody destroys it).
func TestForgetStreamUnmapsTheCallerValue(t *testing.T) {
	e, d, c, _ := newSim(t, 64*vmm.MiB, Config{MapStreams: true})
	const caller = vmm.Stream(0x7f00)
	old, err := e.Stream(caller)
	must(t, err)
	q, err := e.Alloc(56*vmm.MiB, caller)
	must(t, err)
	d.Launch(old) // work on the driver's stream for the caller's
	must(t, e.Free(q))
	must(t, e.ForgetStream(caller))
	s, err := e.Stream(caller)
	must(t, err)
	if s == old {
		t.Fatalf("caller stream %#x still maps to the forgotten stream %d", caller, old)
	}
	if back := e.CallerStream(old); back != old {
		t.Fatalf("CallerStream(forgotten %d) = %#x, want itself (no caller value maps to it)", old, back)
	}
	// The memory freed on the forgotten stream waits for its work; the retry synchronises it.
	p, err := e.Alloc(56*vmm.MiB, caller)
	if err != nil {
		t.Fatalf("Alloc on the reused caller value: %v; want success on a new stream after synchronising the forgotten one (synchronised %v)", err, c.synced)
	}
	if c.synced[old] != 1 {
		t.Fatalf("synchronised %v, want the forgotten stream %d once", c.synced, old)
	}
	snap := e.Allocator().Snapshot()
	if len(snap.Live) != 1 || snap.Live[0].Stream != s {
		t.Fatalf("live %+v, want one allocation on the new stream %d", snap.Live, s)
	}
	must(t, e.Free(p))
	// Caller value 0 is the default stream: never forgotten, still mapped.
	if err := e.ForgetStream(0); !errors.Is(err, impl.ErrUnknownStream) {
		t.Fatalf("ForgetStream(0): %v, want %v", err, impl.ErrUnknownStream)
	}
	if s, err := e.Stream(0); err != nil || s != vmm.DefaultStream {
		t.Fatalf("Stream(0) after ForgetStream(0) = %d, %v; want the default stream", s, err)
	}
}

// TestForgetStreamStopsSyncingTheCallersOwnStream: without MapStreams the stream is the caller's, destroyed
// right after ForgetStream: the layer must not synchronise it any more (an error on a destroyed stream,
// and on CUDA a use after free); its blocks wait for the last event the engine recorded on it.
func TestForgetStreamStopsSyncingTheCallersOwnStream(t *testing.T) {
	e, d, c, ss := newSim(t, 64*vmm.MiB, Config{})
	pendingOn(t, e, d, ss[0], ss[0])
	must(t, e.ForgetStream(ss[0]))
	must(t, d.DestroyStream(ss[0]))
	// A misuse of the destroyed stream is refused and leaves the layer nothing to synchronise.
	if _, err := e.Alloc(vmm.MiB, ss[0]); !errors.Is(err, impl.ErrUnknownStream) {
		t.Fatalf("Alloc on the forgotten stream: %v, want %v", err, impl.ErrUnknownStream)
	}
	if _, err := e.Alloc(56*vmm.MiB, ss[1]); !errors.Is(err, vmm.ErrOutOfMemory) {
		t.Fatalf("Alloc while the destroyed stream's work is pending: %v, want out of memory", err)
	}
	if got := e.Counters(); got.SyncErrors != 0 || c.synced[ss[0]] != 0 || got.Syncs != 1 {
		t.Fatalf("counters %+v, synchronised %v: the forgotten stream %d was synchronised after it was destroyed", got, c.synced, ss[0])
	}
	d.CompleteAll() // its work completes, as a destroyed stream's does
	p, err := e.Alloc(56*vmm.MiB, ss[1])
	must(t, err)
	must(t, e.Free(p))
	if err := e.ForgetStream(ss[0]); !errors.Is(err, impl.ErrUnknownStream) {
		t.Fatalf("ForgetStream twice: %v, want %v", err, impl.ErrUnknownStream)
	}
}
