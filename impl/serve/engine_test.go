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
	if got := e.Counters(); got.Syncs != 1 || got.SyncRetries != 1 || got.OOMs != 0 {
		t.Fatalf("counters %+v, want 1 sync, 1 retry, 0 OOMs", got)
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
	_, err := e.Alloc(65*vmm.MiB, vmm.DefaultStream)
	var oom *impl.OOMError
	if !errors.As(err, &oom) || oom.Requested != 65*vmm.MiB {
		t.Fatalf("Alloc(65 MiB) on a 64 MiB device: %v, want an *impl.OOMError for 65 MiB", err)
	}
	if e.Counters().OOMs != 1 {
		t.Fatalf("counters %+v, want 1 OOM", e.Counters())
	}
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
	if _, err := e.Alloc(65*vmm.MiB, vmm.DefaultStream); !errors.Is(err, impl.ErrClosed) {
		t.Fatalf("Alloc(65 MiB) after Close: %v, want %v", err, impl.ErrClosed)
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
	if e.Counters().OOMs != 0 {
		t.Fatalf("counters %+v, want no OOM", e.Counters())
	}
}
