package impl

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

var graphPool = PoolID{A: 1, B: 1}

func mustPool(t testing.TB, a *Allocator, id PoolID) {
	t.Helper()
	if _, err := a.CreateOrIncrefPool(id); err != nil {
		t.Fatalf("CreateOrIncrefPool(%v): %v", id, err)
	}
}

func mustAllocPool(t testing.TB, a *Allocator, size uint64, s vmm.Stream, id PoolID) vmm.DevicePtr {
	t.Helper()
	p, err := a.AllocPool(size, s, id)
	if err != nil {
		t.Fatalf("AllocPool(%d, %d, %v): %v", size, s, id, err)
	}
	return p
}

// INV-POOL, scene: a private pool's freed block serves its own next request, never the default pool's; a
// default-pool request of the same size gets new memory.
func TestPoolBlocksServeOnlyTheirPool(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyCaching, PolicyExpandable} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 1<<30, true)
			mustPool(t, a, graphPool)
			p := mustAllocPool(t, a, 8*MiB, 0, graphPool)
			mustFree(t, a, p)
			q := mustAlloc(t, a, 8*MiB, 0)
			if q == p {
				t.Fatalf("the default pool got the private pool's freed block %v", p)
			}
			if r := mustAllocPool(t, a, 8*MiB, 0, graphPool); r != p {
				t.Fatalf("the private pool's next 8 MiB is at %v, want its freed block %v", r, p)
			}
			if got := a.PoolLive(graphPool); len(got) != 1 || got[0] != p {
				t.Fatalf("PoolLive = %v, want [%v]", got, p)
			}
			if got := a.PoolLive(PoolID{}); len(got) != 1 || got[0] != q {
				t.Fatalf("PoolLive(default) = %v, want [%v]", got, q)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// INV-POOL, scene: EmptyCache and a default-pool out of memory leave a living pool's free memory mapped;
// releasing the pool returns it, and the default pool can then use the room.
func TestPoolMemoryStaysUntilReleased(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyCaching, PolicyExpandable} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 512*MiB, true)
			mustPool(t, a, graphPool)
			p := mustAllocPool(t, a, 300*MiB, 0, graphPool)
			mustFree(t, a, p)
			held := a.Stats().ReservedBytes
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if r := a.Stats().ReservedBytes; r != held {
				t.Fatalf("EmptyCache released a living pool's memory: reserved %d, was %d", r, held)
			}
			if _, err := a.Alloc(300*MiB, 0); !errors.Is(err, vmm.ErrOutOfMemory) {
				t.Fatalf("default 300 MiB with the pool holding 300 of 512 MiB: %v, want out of memory", err)
			}
			if r := a.Stats().ReservedBytes; r != held {
				t.Fatalf("the out-of-memory release took a living pool's memory: reserved %d, was %d", r, held)
			}
			if n, err := a.ReleasePool(graphPool); err != nil || n != 0 {
				t.Fatalf("ReleasePool = %d, %v", n, err)
			}
			if r := a.Stats().ReservedBytes; r != 0 {
				t.Fatalf("after releasing the pool %d bytes are still reserved", r)
			}
			mustFree(t, a, mustAlloc(t, a, 300*MiB, 0))
			if _, err := a.AllocPool(1, 0, graphPool); !errors.Is(err, ErrUnknownPool) {
				t.Fatalf("AllocPool on a released pool: %v, want ErrUnknownPool", err)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// INV-POOL, scene (gmlake): a default-pool request that stitching could serve from free chunks does not
// stitch a living pool's free chunks; the same request in the pool does.
func TestPoolChunksNotStitchedByOthers(t *testing.T) {
	a, dev := newStitchTest(t, 2<<30, true)
	mustPool(t, a, graphPool)
	var ps []vmm.DevicePtr
	for i := 0; i < 6; i++ { // 6 x 256 MiB, every other one freed: 768 MiB free in 256 MiB holes
		ps = append(ps, mustAllocPool(t, a, 256*MiB, 0, graphPool))
	}
	for i := 0; i < 6; i += 2 {
		mustFree(t, a, ps[i])
	}
	before := a.Stats()
	q := mustAlloc(t, a, 512*MiB, 0)
	if st := a.Stats(); st.NumStitches != before.NumStitches {
		t.Fatalf("a default-pool request stitched (stitches %d -> %d)", before.NumStitches, st.NumStitches)
	}
	mustFree(t, a, q)
	r := mustAllocPool(t, a, 512*MiB, 0, graphPool)
	if st := a.Stats(); st.NumStitches != before.NumStitches+1 {
		t.Fatalf("the pool's own 512 MiB did not stitch its free chunks (stitches %d -> %d)", before.NumStitches, st.NumStitches)
	}
	mustFree(t, a, r)
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// INV-POOL, scene: a pool released while it still has live allocations keeps them valid; their memory
// returns as they are freed; use counts and the unknown-pool errors change nothing.
func TestPoolReleaseWithLiveAllocations(t *testing.T) {
	a, dev := newTest(t, PolicyGMLake, 1<<30, true)
	mustPool(t, a, graphPool)
	if n, _ := a.CreateOrIncrefPool(graphPool); n != 2 || a.PoolUseCount(graphPool) != 2 {
		t.Fatalf("use count after two increfs: %d / %d", n, a.PoolUseCount(graphPool))
	}
	p := mustAllocPool(t, a, 100*MiB, 0, graphPool)
	q := mustAllocPool(t, a, 1000, 0, graphPool)
	snap := sansCalls(a.Snapshot())
	for _, bad := range []func() error{
		func() error { _, err := a.AllocPool(1, 0, PoolID{A: 9}); return err },
		func() error { _, err := a.ReleasePool(PoolID{A: 9}); return err },
		func() error { _, err := a.CreateOrIncrefPool(PoolID{}); return err },
	} {
		if err := bad(); !errors.Is(err, ErrUnknownPool) {
			t.Fatalf("bad pool call: %v, want ErrUnknownPool", err)
		}
	}
	if got := sansCalls(a.Snapshot()); fmt.Sprint(got) != fmt.Sprint(snap) {
		t.Fatalf("a refused pool call changed the state")
	}
	a.ReleasePool(graphPool)
	if n, _ := a.ReleasePool(graphPool); n != 0 || a.PoolUseCount(graphPool) != 0 {
		t.Fatalf("use count after two releases: %d", n)
	}
	if r := a.Stats().ReservedBytes; r == 0 {
		t.Fatal("the live allocations' memory went back before they were freed")
	}
	mustFree(t, a, p)
	mustFree(t, a, q)
	if r := a.Stats().ReservedBytes; r != 0 {
		t.Fatalf("reserved %d after the released pool's last allocation was freed", r)
	}
	if len(a.pools) != 0 {
		t.Fatalf("a released, empty pool is still remembered: %v", a.pools)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// INV-POOL, scene: a released pool's memory freed after its stream was destroyed (ForgetStream) returns
// once that stream's last work completed (the stream's last event, kept by its default-pool state, says so).
func TestPoolMemoryOfForgottenStreamReturns(t *testing.T) {
	a, dev := newTest(t, PolicyGMLake, 1<<30, false)
	s1, _ := dev.CreateStream()
	mustPool(t, a, graphPool)
	p := mustAllocPool(t, a, 64*MiB, s1, graphPool)
	dev.Launch(s1)
	if err := a.ForgetStream(s1); err != nil {
		t.Fatal(err)
	}
	if err := dev.DestroyStream(s1); err != nil {
		t.Fatal(err)
	}
	mustFree(t, a, p) // after the stream is gone: no fence can be recorded on it
	if _, err := a.AllocPool(1, s1, graphPool); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("AllocPool on a forgotten stream: %v, want ErrUnknownStream", err)
	}
	if _, err := a.ReleasePool(graphPool); err != nil {
		t.Fatal(err)
	}
	if r := a.Stats().ReservedBytes; r == 0 {
		t.Fatal("the pool's memory was released while the forgotten stream's work still ran")
	}
	dev.CompleteAll()
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if r := a.Stats().ReservedBytes; r != 0 {
		t.Fatalf("%d bytes still reserved after the forgotten stream's work completed and EmptyCache", r)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// Capture: while a stream captures, the engine records and queries no event (no RecordEvent/QueryEvent
// driver call), a free of a block used on another stream waits (the block stays active, not reusable), and
// when the capture ends its event is recorded and the block comes back once that stream's work completed.
func TestCaptureNoEventsAndDeferredFree(t *testing.T) {
	a, dev := newTest(t, PolicyGMLake, 1<<30, false)
	s1, _ := dev.CreateStream()
	capture, _ := dev.CreateStream()
	mustPool(t, a, graphPool)
	p := mustAlloc(t, a, 4*MiB, 0)
	if err := a.RecordStream(p, s1); err != nil {
		t.Fatal(err)
	}
	dev.Launch(s1)
	dev.Launch(0)
	if err := a.SetCapturing(capture, true); err != nil {
		t.Fatal(err)
	}
	calls := a.Stats().DriverCalls
	mustFree(t, a, p)
	g := mustAllocPool(t, a, 4*MiB, capture, graphPool)
	mustFree(t, a, g)
	g2 := mustAllocPool(t, a, 4*MiB, capture, graphPool)
	if g2 != g {
		t.Fatalf("within the capture the pool's freed block was not reused in stream order: %v then %v", g, g2)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	d := a.Stats().DriverCalls
	for _, k := range []vmm.CallKind{vmm.CallRecordEvent, vmm.CallQueryEvent, vmm.CallStreamQuery} {
		if d[k] != calls[k] {
			t.Fatalf("%d %v calls during capture", d[k]-calls[k], k)
		}
	}
	if st := a.TorchStats(); st.Active[0].Current != 2 {
		t.Fatalf("active blocks during capture: %d, want 2 (the deferred free and the graph's block)", st.Active[0].Current)
	}
	if err := a.SetCapturing(capture, false); err != nil {
		t.Fatal(err)
	}
	if d := a.Stats().DriverCalls; d[vmm.CallRecordEvent] == calls[vmm.CallRecordEvent] {
		t.Fatal("no event recorded for the deferred free after the capture ended")
	}
	dev.CompleteAll()
	mustFree(t, a, mustAlloc(t, a, 1, 0)) // polls the events
	if st := a.TorchStats(); st.Active[0].Current != 1 {
		t.Fatalf("active blocks after the capture and the work completed: %d, want 1", st.Active[0].Current)
	}
	mustFree(t, a, g2)
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// Bad input first (SPEC.md, the calls): an AllocPool into a pool that was never created, or released (holding
// memory still, or not), is ErrUnknownPool under every policy, whatever the size (0, a valid one, beyond the
// device) and the stream (known or not), before any resource or size error, and changes nothing (the
// snapshot, the driver's calls).
func TestAllocIntoNoPoolIsUnknownPoolFirst(t *testing.T) {
	released, held := PoolID{A: 7, B: 1}, PoolID{A: 8, B: 1}
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 64*MiB, true /* sync */)
			ids := []PoolID{{A: 9, B: 1}}
			var keep vmm.DevicePtr
			if pol != PolicyGMLakePaper { // gmlake-paper has no private pools: every pool is unknown
				mustPool(t, a, released)
				mustPool(t, a, held)
				keep = mustAllocPool(t, a, 4*MiB, 0, held)
				for _, id := range []PoolID{released, held} {
					if n, err := a.ReleasePool(id); err != nil || n != 0 {
						t.Fatalf("ReleasePool(%v) = %d, %v", id, n, err)
					}
				}
				ids = append(ids, released, held)
			}
			unknown := vmm.Stream(1 << 40)
			for _, id := range ids {
				for _, size := range []uint64{0, 1, 4 * MiB, 64*MiB + 1, 1 << 40} {
					for _, s := range []vmm.Stream{vmm.DefaultStream, unknown} {
						snap, calls := sansCalls(a.Snapshot()), dev.Counts()
						_, err := a.AllocPool(size, s, id)
						if !errors.Is(err, ErrUnknownPool) {
							t.Fatalf("AllocPool(%d, stream %d, %v): %v, want ErrUnknownPool", size, s, id, err)
						}
						if got := sansCalls(a.Snapshot()); !reflect.DeepEqual(got, snap) {
							t.Fatalf("AllocPool(%d, stream %d, %v) changed the snapshot", size, s, id)
						}
						if got := dev.Counts(); got != calls {
							t.Fatalf("AllocPool(%d, stream %d, %v) made driver calls", size, s, id)
						}
					}
				}
			}
			if keep != 0 {
				mustFree(t, a, keep)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// Deferred frees are PyTorch's: a free made during a capture of a block used on another stream waits for
// the capture's end, and when its event could not be recorded then (a failed cudaEventRecord) the next Alloc
// outside any capture records it (PyTorch's malloc runs process_events whenever no capture is underway, and
// process_events starts with insert_events_deferred_until_no_capture), not only the next SetCapturing,
// EmptyCache or out-of-memory release: once that stream's work completes, the block is reused.
func TestDeferredFreesRetriedByTheNextAllocOutsideCapture(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyCaching, PolicyExpandable} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 1<<30, false /* sync */)
			s1, _ := dev.CreateStream()
			capture, _ := dev.CreateStream()
			p := mustAlloc(t, a, 4*MiB, 0)
			if err := a.RecordStream(p, s1); err != nil {
				t.Fatal(err)
			}
			dev.Launch(s1)
			if err := a.SetCapturing(capture, true); err != nil {
				t.Fatal(err)
			}
			mustFree(t, a, p) // deferred: used on s1, and a stream captures
			dev.FailNth(vmm.CallRecordEvent, 1 /* the next */, vmm.InvalidValue)
			if err := a.SetCapturing(capture, false); err == nil {
				t.Fatal("SetCapturing(off) with a failing event record succeeded")
			}
			dev.ClearFaults()
			records := a.Stats().DriverCalls[vmm.CallRecordEvent]
			q := mustAlloc(t, a, 1000, 0) // the small pool: p's block is not a candidate
			if n := a.Stats().DriverCalls[vmm.CallRecordEvent] - records; n == 0 {
				t.Fatal("the first Alloc after the capture recorded no event for the deferred free")
			}
			dev.Complete(s1)
			if r := mustAlloc(t, a, 4*MiB, 0); r != p {
				t.Fatalf("after s1's work completed the deferred free's block %v was not reused (got %v)", p, r)
			} else {
				mustFree(t, a, r)
			}
			mustFree(t, a, q)
			checkState(t, a, dev)
			dev.CompleteAll()
			closeClean(t, a, dev)
		})
	}
}

// A released pool created again takes back the memory it still held (CreateOrIncrefPool), but an arena of it
// with nothing mapped is nobody's memory: when its address free failed at the release, the next EmptyCache
// returns it although the pool lives again (INV-EMPTIED, found by rapid once INV-EMPTIED judged the memory
// outside living pools instead of skipping every EmptyCache while one lived).
func TestRevivedPoolReturnsItsEmptyArena(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyExpandable} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 1<<30, true /* sync */)
			mustPool(t, a, graphPool)
			mustFree(t, a, mustAllocPool(t, a, 1, 0, graphPool))
			dev.FailNth(vmm.CallFreeAddress, 1 /* the next */, vmm.OutOfMemory)
			if n, err := a.ReleasePool(graphPool); err != nil || n != 0 {
				t.Fatalf("ReleasePool = %d, %v", n, err)
			}
			dev.ClearFaults()
			if n := len(dev.State().Reservations); n != 1 {
				t.Fatalf("after the failed address free the device holds %d reservations, want the arena's 1", n)
			}
			mustPool(t, a, graphPool) // comes back to life with its (empty) arena
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if rs := dev.State().Reservations; len(rs) != 0 {
				t.Fatalf("EmptyCache kept the living pool's arena with nothing mapped: %v", rs)
			}
			mustFree(t, a, mustAllocPool(t, a, 1, 0, graphPool))
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// A refused pool call answers the count 0 and changes nothing: the default pool, a pool never created or
// already released, gmlake-paper's pools, and every pool call after Close.
func TestRefusedPoolCallsAnswerZero(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 64*MiB, true /* sync */)
			live := PoolID{A: 3, B: 1}
			if pol != PolicyGMLakePaper {
				mustPool(t, a, live)
			}
			check := func(what string, n int, err error, kind error) {
				t.Helper()
				if !errors.Is(err, kind) || n != 0 {
					t.Errorf("%s = (%d, %v), want (0, %v)", what, n, err, kind)
				}
			}
			n, err := a.ReleasePool(PoolID{})
			check("ReleasePool(default)", n, err, ErrUnknownPool)
			n, err = a.CreateOrIncrefPool(PoolID{})
			check("CreateOrIncrefPool(default)", n, err, ErrUnknownPool)
			n, err = a.ReleasePool(PoolID{A: 4, B: 1})
			check("ReleasePool(never created)", n, err, ErrUnknownPool)
			if pol == PolicyGMLakePaper {
				n, err = a.CreateOrIncrefPool(live)
				check("CreateOrIncrefPool under gmlake-paper", n, err, ErrBadConfig)
			} else if got := a.PoolUseCount(live); got != 1 {
				t.Errorf("a refused call moved the live pool's count to %d, want 1", got)
			}
			closeClean(t, a, dev)
			n, err = a.ReleasePool(live)
			check("ReleasePool after Close", n, err, ErrClosed)
			n, err = a.CreateOrIncrefPool(live)
			check("CreateOrIncrefPool after Close", n, err, ErrClosed)
		})
	}
}

// A forgotten stream's retired fence covers a free made before its later work, during a capture too (F15's
// rule in safeLocked's capture branch, which may query no event): a block freed on s1 before work was
// launched there, s1 forgotten with that work pending, is safe once its fence retired, capture or not; and
// so is a private pool's block of a forgotten stream (its state's fences count as the default state's).
func TestGoneStreamRetiredFenceCountsDuringCapture(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		t.Run(fmt.Sprintf("pooled=%v", pooled), func(t *testing.T) {
			a, dev := newTest(t, PolicyGMLake, 256*MiB, false /* async */)
			s1, err := dev.CreateStream()
			if err != nil {
				t.Fatal(err)
			}
			var p vmm.DevicePtr
			if pooled {
				mustPool(t, a, graphPool)
				p = mustAllocPool(t, a, 4*MiB, s1, graphPool)
			} else {
				p = mustAlloc(t, a, 4*MiB, s1)
			}
			a.mu.Lock()
			b := a.ptrs.get(p)
			st := blockHome(b)
			a.mu.Unlock()
			mustFree(t, a, p) // nothing pending on s1: the free's fence completes at once
			dev.Launch(s1)    // work after the free
			if err := a.ForgetStream(s1); err != nil {
				t.Fatal(err)
			}
			a.mu.Lock()
			seq := b.freeSeq
			if !a.safeLocked(st, seq) {
				t.Errorf("the free before s1's last work is not safe")
			}
			a.nCapturing++ // as SetCapturing does: no event may be queried now
			if !a.safeLocked(st, seq) {
				t.Errorf("during a capture, the free covered by a retired fence is not safe")
			}
			a.nCapturing--
			a.mu.Unlock()
			dev.CompleteAll()
			if pooled {
				if _, err := a.ReleasePool(graphPool); err != nil {
					t.Fatal(err)
				}
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// deviceWaiter is the simulated device with a wait for the whole device (vmm.DeviceSyncer): it completes
// every stream's work, and logs each wait and each unmap in call order.
type deviceWaiter struct {
	*sim.Device
	log []string
	// pendingAtUnmap: stream work that was still pending at some Unmap (a replay the unmap raced).
	pendingAtUnmap bool
	replay         vmm.Stream
}

func (d *deviceWaiter) SynchronizeDevice() error {
	d.log = append(d.log, "wait")
	d.Device.CompleteAll()
	return nil
}

func (d *deviceWaiter) Unmap(p vmm.DevicePtr, size uint64) error {
	d.log = append(d.log, "unmap")
	d.pendingAtUnmap = d.pendingAtUnmap || d.Device.Pending(d.replay) > 0
	return d.Device.Unmap(p, size)
}

// INV-RELEASESAFE for a graph's replays, scene: a graph pool's block freed during the capture is used by a
// replay launched on a stream the engine never met; releasing the pool waits for the whole device once
// before any of its memory is unmapped (the real GPU's illegal address in PyTorch's
// test_repeat_graph_capture_cublas_workspace_memory). While a stream captures no wait is allowed: the
// memory stays, and goes back (after the wait) when the capture ends.
func TestReleasedPoolWaitsForItsGraphsReplays(t *testing.T) {
	for _, pol := range []string{PolicyGMLake, PolicyCaching, PolicyExpandable} {
		for _, duringCapture := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/capturing=%v", pol, duringCapture), func(t *testing.T) {
				dev := &deviceWaiter{Device: sim.NewDevice(sim.DeviceConfig{Capacity: 1 << 30})}
				a, err := New(dev, Config{Policy: pol})
				if err != nil {
					t.Fatal(err)
				}
				capture, _ := dev.CreateStream()
				dev.replay, _ = dev.CreateStream() // the replays' stream: the engine is never told of it
				mustPool(t, a, graphPool)
				if err := a.SetCapturing(capture, true); err != nil {
					t.Fatal(err)
				}
				mustFree(t, a, mustAllocPool(t, a, 8*MiB, capture, graphPool)) // the graph's temporary
				if err := a.SetCapturing(capture, false); err != nil {
					t.Fatal(err)
				}
				dev.Launch(dev.replay) // torch_graph.replay() on the current stream
				other, _ := dev.CreateStream()
				if duringCapture {
					if err := a.SetCapturing(other, true); err != nil {
						t.Fatal(err)
					}
				}
				if n, err := a.ReleasePool(graphPool); n != 0 || err != nil {
					t.Fatalf("ReleasePool = %d, %v", n, err)
				}
				if duringCapture {
					if len(dev.log) != 0 || a.Stats().ReservedBytes == 0 {
						t.Fatalf("pool released while a stream captures: driver calls %v, reserved %d; want no wait, no unmap, the memory kept",
							dev.log, a.Stats().ReservedBytes)
					}
					if err := a.SetCapturing(other, false); err != nil {
						t.Fatal(err)
					}
				}
				if len(dev.log) < 2 || dev.log[0] != "wait" || dev.pendingAtUnmap {
					t.Fatalf("releasing the pool: calls %v (replay pending at an unmap: %v); want one device wait, then the unmaps",
						dev.log, dev.pendingAtUnmap)
				}
				if n := len(slices.DeleteFunc(slices.Clone(dev.log), func(s string) bool { return s != "wait" })); n != 1 {
					t.Fatalf("%d device waits for one pool release, want 1: %v", n, dev.log)
				}
				if r := a.Stats().ReservedBytes; r != 0 {
					t.Fatalf("reserved %d after the released pool's memory was waited for, want 0", r)
				}
				checkState(t, a, dev.Device)
				closeClean(t, a, dev.Device)
			})
		}
	}
}

// captureChecker is the simulated device with a capture-safe stream check (vmm.CaptureQuerier), and a
// StreamQuery that notes being called while the test says a capture runs (it would invalidate it).
type captureChecker struct {
	*sim.Device
	capturing   bool
	queried     []vmm.Stream // StreamQuery calls during the capture
	checkedSafe []vmm.Stream
}

func (d *captureChecker) StreamQuery(s vmm.Stream) (bool, error) {
	if d.capturing {
		d.queried = append(d.queried, s)
	}
	return d.Device.StreamQuery(s)
}

func (d *captureChecker) StreamCapturing(s vmm.Stream) (bool, error) {
	d.checkedSafe = append(d.checkedSafe, s)
	_, err := d.Device.StreamQuery(s) // the simulated device's validation, standing in for cuStreamIsCapturing's
	return false, err
}

// Property: while a stream captures, a stream the engine meets for the first time (a side stream that joined
// the capture: PyTorch's test_graph_record_stream records b on it) is checked with the capture-safe check,
// never StreamQuery, through the bare engine and through the capped driver of the serving layer (vmm.Find);
// a stream that does not exist is still refused as unknown, and outside captures StreamQuery checks as before.
func TestNewStreamDuringCaptureIsNotQueried(t *testing.T) {
	dev := &captureChecker{Device: sim.NewDevice(sim.DeviceConfig{Capacity: 1 << 30, SyncStreams: true})}
	for _, d := range []vmm.Driver{dev, wrap.NewLimit(dev, 0)} {
		dev.queried, dev.checkedSafe = nil, nil
		a, err := New(d, Config{})
		if err != nil {
			t.Fatal(err)
		}
		origin, _ := dev.CreateStream()
		side, _ := dev.CreateStream()
		mustPool(t, a, graphPool)
		if err := a.SetCapturing(origin, true); err != nil {
			t.Fatal(err)
		}
		dev.capturing = true
		b := mustAllocPool(t, a, 4096, origin, graphPool)
		if err := a.RecordStream(b, side); err != nil {
			t.Fatalf("RecordStream on a side stream during the capture: %v", err)
		}
		mustAllocPool(t, a, 4096, side, graphPool)
		if err := a.RecordStream(b, vmm.Stream(0xdead)); !errors.Is(err, ErrUnknownStream) {
			t.Fatalf("RecordStream on a stream that does not exist, during a capture: %v, want ErrUnknownStream", err)
		}
		dev.capturing = false
		if len(dev.queried) > 0 || !slices.Contains(dev.checkedSafe, side) {
			t.Fatalf("%T: during the capture StreamQuery asked %v (it invalidates a capture), the capture-safe check %v; want none, and the side stream checked safely",
				d, dev.queried, dev.checkedSafe)
		}
		if err := a.SetCapturing(origin, false); err != nil {
			t.Fatal(err)
		}
		mustFree(t, a, b)
		if _, err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
