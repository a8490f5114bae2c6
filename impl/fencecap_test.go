package impl

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// waitDevice is the simulated device with a wait (vmm.StreamSyncer), as impl/cudavmm has: Synchronize
// completes the stream's work, as cuStreamSynchronize returns once it has.
type waitDevice struct {
	*sim.Device
	waits []vmm.Stream
}

func (d *waitDevice) Synchronize(s vmm.Stream) error {
	d.waits = append(d.waits, s)
	d.Complete(s)
	return nil
}

// newWaitTest makes a gmlake allocator on a device of capacity bytes that can wait, and a second stream.
func newWaitTest(t *testing.T, capacity uint64) (*Allocator, *sim.Device, *waitDevice, vmm.Stream) {
	t.Helper()
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: capacity})
	wd := &waitDevice{Device: dev}
	a, err := New(wd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	return a, dev, wd, s1
}

// allocFree allocates n blocks of size on stream 0 and frees them in order.
func allocFree(t *testing.T, a *Allocator, n int, size uint64) {
	t.Helper()
	var ps []vmm.DevicePtr
	for i := 0; i < n; i++ {
		ps = append(ps, mustAlloc(t, a, size, vmm.DefaultStream))
	}
	for _, p := range ps {
		mustFree(t, a, p)
	}
}

// fenceCapScene is spec/FINDINGS.md F6 for one policy: n frees, each leaving a releasable unit, on idle
// stream 0 (more than maxFences), then work launched on stream 0 and a request on stream 1 that needs
// all of that memory back.
type fenceCapScene struct {
	policy         string
	size, capacity uint64
	n              int
	big            uint64
}

var fenceCapScenes = []fenceCapScene{
	{PolicyGMLake, 2 * MiB, 20 * MiB, 9, 20 * MiB},
	{PolicyCaching, 12 * MiB, 108 * MiB, 9, 108 * MiB},
	{PolicyGMLakePaper, 12 * MiB, 108 * MiB, 9, 108 * MiB},
}

func (sc fenceCapScene) run(t *testing.T, d vmm.Driver, dev *sim.Device) (*Allocator, vmm.Stream, error) {
	t.Helper()
	a, err := New(d, Config{Policy: sc.policy})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	allocFree(t, a, sc.n, sc.size)
	dev.Launch(vmm.DefaultStream) // after every free: the freed memory is not in use
	_, err = a.Alloc(sc.big, s1)
	return a, s1, err
}

// TestFreesPastFenceCapUsableAfterWait (F6, INV-NOSPURIOUSOOM): more frees than maxFences on an idle
// stream, then work launched on it, then a request on another stream that needs all of that memory. The
// frees past the cap were fenced by no event of their own; on a driver that can wait the out-of-memory
// path waits for stream 0 once (Stats.NumSyncs) and serves the request, with no driver call on the hot
// path for it. Without a wait (the simulated device alone) the request is the out of memory F6 records.
func TestFreesPastFenceCapUsableAfterWait(t *testing.T) {
	for _, sc := range fenceCapScenes {
		t.Run(sc.policy, func(t *testing.T) {
			dev := sim.NewDevice(sim.DeviceConfig{Capacity: sc.capacity})
			wd := &waitDevice{Device: dev}
			a, _, err := sc.run(t, wd, dev)
			if err != nil {
				t.Fatalf("%d B on stream 1 with %d frees of %d B done on idle stream 0: %v", sc.big, sc.n, sc.size, err)
			}
			if got := a.Stats().NumSyncs; got != 1 || len(wd.waits) != 1 || wd.waits[0] != vmm.DefaultStream {
				t.Errorf("waits %v (Stats.NumSyncs %d), want stream 0 once", wd.waits, got)
			}
			checkState(t, a, dev)
			dev.CompleteAll()
			closeClean(t, a, dev)

			dev = sim.NewDevice(sim.DeviceConfig{Capacity: sc.capacity})
			a, _, err = sc.run(t, dev, dev)
			if !errors.Is(err, vmm.ErrOutOfMemory) {
				t.Errorf("without a wait: %v, want the out of memory of F6 (a driver that cannot wait has no way to tell)", err)
			}
			if a.Stats().NumSyncs != 0 {
				t.Errorf("without a wait: Stats.NumSyncs %d, want 0", a.Stats().NumSyncs)
			}
			dev.CompleteAll()
			closeClean(t, a, dev)
		})
	}
}

// TestWaitOnlyForStreamsPastTheCap: the out-of-memory path waits for no stream whose frees the fences
// recorded at the frees cover (at most maxFences of them), nor while a stream captures (no stream may be
// synchronised then); once a free is past the cap, the next out of memory outside a capture waits for
// its stream once.
func TestWaitOnlyForStreamsPastTheCap(t *testing.T) {
	t.Run("fenced", func(t *testing.T) {
		a, dev, wd, s1 := newWaitTest(t, 20*MiB)
		live := mustAlloc(t, a, 2*MiB, vmm.DefaultStream)
		allocFree(t, a, maxFences, 2*MiB)
		dev.Launch(vmm.DefaultStream)
		if _, err := a.Alloc(20*MiB, s1); !errors.Is(err, vmm.ErrOutOfMemory) {
			t.Fatalf("20 MiB with 2 MiB live: %v, want out of memory", err)
		}
		if len(wd.waits) != 0 || a.Stats().NumSyncs != 0 {
			t.Errorf("waited for %v with every free fenced at its time, want none", wd.waits)
		}
		if got := a.Stats().ReservedBytes; got != 2*MiB {
			t.Errorf("reserved %d B after the out of memory, want the live 2 MiB (the fenced frees released)", got)
		}
		mustFree(t, a, live)
		dev.CompleteAll()
		closeClean(t, a, dev)
	})
	t.Run("capturing", func(t *testing.T) {
		a, dev, wd, s1 := newWaitTest(t, 20*MiB)
		allocFree(t, a, maxFences+1, 2*MiB) // the last free past the cap
		dev.Launch(vmm.DefaultStream)
		if err := a.SetCapturing(s1, true); err != nil {
			t.Fatal(err)
		}
		if p, err := a.Alloc(20*MiB, s1); err == nil {
			t.Errorf("20 MiB on capturing stream %d = %v: stream 0's frees cannot all be known safe during a capture", s1, p)
		}
		if len(wd.waits) != 0 {
			t.Errorf("waited for %v while stream %d captures, want none", wd.waits, s1)
		}
		if err := a.SetCapturing(s1, false); err != nil {
			t.Fatal(err)
		}
		servedAfterOneWait(t, a, dev, wd, 20*MiB, s1)
	})
}

// TestFreeWhoseFenceFailsIsWaitedFor (F19, INV-NOSPURIOUSOOM): a free whose fence cannot be recorded (its
// event's creation refused) is covered by no fence of its time, as a free past the cap; after work
// launched on its stream, the out-of-memory path waits for the stream once and takes the chunk.
func TestFreeWhoseFenceFailsIsWaitedFor(t *testing.T) {
	a, dev, wd, s1 := newWaitTest(t, 8*MiB)
	p := mustAlloc(t, a, 2*MiB, vmm.DefaultStream)
	q := mustAlloc(t, a, 2*MiB, vmm.DefaultStream)
	mustAlloc(t, a, 4*MiB, s1) // the rest of the device
	mustFree(t, a, p)          // records a fence
	dev.FailNth(vmm.CallCreateEvent, 1, vmm.OutOfMemory)
	mustFree(t, a, q) // its fence's event cannot be created
	dev.ClearFaults()
	dev.Launch(vmm.DefaultStream) // after both frees
	servedAfterOneWait(t, a, dev, wd, 4*MiB, s1)
}

// servedAfterOneWait asks size bytes on s1, which everything freed on stream 0 before its work must serve,
// and wants the engine to have waited for stream 0 once; then checks the state and closes the engine.
func servedAfterOneWait(t *testing.T, a *Allocator, dev *sim.Device, wd *waitDevice, size uint64, s1 vmm.Stream) {
	t.Helper()
	if _, err := a.Alloc(size, s1); err != nil {
		t.Fatalf("%d B on stream %d, the memory freed on stream 0 before its work: %v", size, s1, err)
	}
	if len(wd.waits) != 1 || wd.waits[0] != vmm.DefaultStream {
		t.Errorf("waits %v, want stream 0 once", wd.waits)
	}
	checkState(t, a, dev)
	dev.CompleteAll()
	closeClean(t, a, dev)
}

// TestFreeAtTheCapRecordsNoFence (F6's bound): with maxFences fences outstanding on stream 0, the free of a
// block recorded on another stream records that stream's event and no fence of its own (at most maxFences
// are recorded at frees), and notes the stream instead (capped), so the out-of-memory path knows to wait.
func TestFreeAtTheCapRecordsNoFence(t *testing.T) {
	a, dev, _, s1 := newWaitTest(t, 64*MiB)
	for i := 0; i < maxFences; i++ {
		mustFree(t, a, mustAlloc(t, a, 2*MiB, vmm.DefaultStream)) // each free records a fence
	}
	ss := a.streams[vmm.DefaultStream]
	if len(ss.fences) != maxFences {
		t.Fatalf("%d fences after %d releasable frees on an idle stream, want %d", len(ss.fences), maxFences, maxFences)
	}
	p := mustAlloc(t, a, 2*MiB, vmm.DefaultStream)
	if err := a.RecordStream(p, s1); err != nil {
		t.Fatal(err)
	}
	before := dev.Counts()[vmm.CallRecordEvent]
	mustFree(t, a, p)
	if n := dev.Counts()[vmm.CallRecordEvent] - before; n != 1 {
		t.Errorf("the free at the cap recorded %d events, want 1 (stream %d's, no fence)", n, s1)
	}
	if len(ss.fences) != maxFences || ss.capped != a.freeSeq {
		t.Errorf("after the free at the cap: %d fences, capped at %d of %d frees; want %d fences, capped at the free",
			len(ss.fences), ss.capped, a.freeSeq, maxFences)
	}
	dev.CompleteAll()
	closeClean(t, a, dev)
}
