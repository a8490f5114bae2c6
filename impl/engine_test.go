package impl

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

const MiB = vmm.MiB

func newTest(t testing.TB, policy string, capacity uint64, sync bool) (*Allocator, *sim.Device) {
	t.Helper()
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: capacity, SyncStreams: sync})
	a, err := New(dev, Config{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return a, dev
}

// newStitchTest makes a gmlake allocator whose growths are single chunks (ChunkSize 256 MiB), so that the
// stitching scenes below control exactly which chunks are free.
func newStitchTest(t testing.TB, capacity uint64, sync bool) (*Allocator, *sim.Device) {
	t.Helper()
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: capacity, SyncStreams: sync})
	a, err := New(dev, Config{ChunkSize: 256 * MiB})
	if err != nil {
		t.Fatal(err)
	}
	return a, dev
}

func mustAlloc(t testing.TB, a *Allocator, size uint64, s vmm.Stream) vmm.DevicePtr {
	t.Helper()
	p, err := a.Alloc(size, s)
	if err != nil {
		t.Fatalf("Alloc(%d, %d): %v", size, s, err)
	}
	return p
}

func mustFree(t testing.TB, a *Allocator, p vmm.DevicePtr) {
	t.Helper()
	if err := a.Free(p); err != nil {
		t.Fatalf("Free(%v): %v", p, err)
	}
}

// checkState checks the engine's snapshot against itself and the device: live allocations do not overlap
// and are mapped through accessible mappings; no chunk backs two live allocations; chunk refs equal the
// mappings of the handle on the device; reserved bytes equal the device's used bytes and the chunk sizes;
// allocated bytes equal the live block sizes; the engine's mappings and reservations are the device's.
func checkState(t testing.TB, a *Allocator, dev *sim.Device) {
	t.Helper()
	s := a.Snapshot()
	ds := dev.State()
	if err := verifySnapshot(s, ds); err != nil {
		t.Fatalf("policy %s: %v", s.Policy, err)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatalf("policy %s: %v", s.Policy, err)
	}
	if err := dev.HazardError(); err != nil {
		t.Fatalf("policy %s: %v", s.Policy, err)
	}
}

func verifySnapshot(s Snapshot, ds sim.DeviceState) error {
	blocks := map[uint64]BlockInfo{}
	for _, b := range s.Blocks {
		blocks[b.ID] = b
	}
	// Live: non-overlapping, accessible, no physical byte shared.
	devMaps := map[vmm.DevicePtr]sim.DeviceMapping{}
	for _, m := range ds.Mappings {
		devMaps[m.VA.Base] = m
	}
	var allocated uint64
	usedChunk := map[vmm.Handle]vmm.DevicePtr{}
	for i, l := range s.Live {
		if i > 0 && s.Live[i-1].Ptr.Add(s.Live[i-1].Size) > l.Ptr {
			return fmt.Errorf("live %v and %v overlap", s.Live[i-1].Ptr, l.Ptr)
		}
		b, ok := blocks[l.Block]
		if !ok {
			return fmt.Errorf("live %v: block %d not in snapshot", l.Ptr, l.Block)
		}
		if b.State != Live || b.Range.Base != l.Ptr || b.Range.Size != l.Size {
			return fmt.Errorf("live %v: block %+v disagrees", l.Ptr, b)
		}
		allocated += l.Size
		// Coverage by accessible device mappings.
		var covered uint64
		for _, m := range b.Backing {
			dm, ok := devMaps[m.VA.Base]
			if !ok || dm.Handle != m.Handle || dm.VA.Size != m.VA.Size {
				return fmt.Errorf("live %v: backing %+v not on the device", l.Ptr, m)
			}
			if !dm.Accessible {
				return fmt.Errorf("live %v: backing %+v has no access", l.Ptr, m)
			}
			lo, hi := max(m.VA.Base, b.Range.Base), min(m.VA.Limit(), b.Range.Limit())
			if hi > lo {
				covered += uint64(hi - lo)
			}
		}
		if covered != b.Range.Size {
			return fmt.Errorf("live %v: %d of %d bytes mapped", l.Ptr, covered, b.Range.Size)
		}
		// Physical exclusivity, for blocks that cover whole chunks (sBlocks) and chunk-granular claims.
		if b.Kind == Stitched {
			for _, m := range b.Backing {
				if other, ok := usedChunk[m.Handle]; ok {
					return fmt.Errorf("chunk %d backs live %v and %v", m.Handle, other, l.Ptr)
				}
				usedChunk[m.Handle] = l.Ptr
			}
		}
	}
	for _, b := range s.Blocks {
		if b.Kind == Primitive && b.State == Live && b.HeldBy == 0 {
			for _, m := range b.Backing {
				if other, ok := usedChunk[m.Handle]; ok {
					return fmt.Errorf("chunk %d backs live %v (stitched) and pBlock %v", m.Handle, other, b.Range)
				}
			}
		}
	}
	if allocated != s.Stats.AllocatedBytes {
		return fmt.Errorf("allocated %d, live blocks sum %d", s.Stats.AllocatedBytes, allocated)
	}
	// Chunks: refs equal device mappings; reserved equals the sum and the device's use.
	devHandles := map[vmm.Handle]sim.HandleInfo{}
	for _, h := range ds.Handles {
		devHandles[h.Handle] = h
	}
	var reserved uint64
	for _, c := range s.Chunks {
		h, ok := devHandles[c.Handle]
		if !ok || h.Released {
			return fmt.Errorf("chunk %d not held on the device", c.Handle)
		}
		if h.Mappings != c.Refs {
			return fmt.Errorf("chunk %d: refs %d, device mappings %d", c.Handle, c.Refs, h.Mappings)
		}
		reserved += c.Size
	}
	if reserved != s.Stats.ReservedBytes || reserved != ds.Used {
		return fmt.Errorf("reserved %d, chunks %d, device used %d", s.Stats.ReservedBytes, reserved, ds.Used)
	}
	if len(s.Mappings) != len(ds.Mappings) {
		return fmt.Errorf("engine has %d mappings, device %d", len(s.Mappings), len(ds.Mappings))
	}
	for i, m := range s.Mappings {
		if m.VA != ds.Mappings[i].VA || m.Handle != ds.Mappings[i].Handle {
			return fmt.Errorf("mapping %d: engine %+v, device %+v", i, m, ds.Mappings[i])
		}
	}
	if !reflect.DeepEqual(append([]vmm.Range{}, s.Reservations...), append([]vmm.Range{}, ds.Reservations...)) {
		return fmt.Errorf("reservations differ: engine %v, device %v", s.Reservations, ds.Reservations)
	}
	return nil
}

func closeClean(t testing.TB, a *Allocator, dev *sim.Device) CloseReport {
	t.Helper()
	rep, err := a.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l := dev.Leaks(); !l.Empty() {
		t.Fatalf("leaks after Close: %v", l)
	}
	return rep
}

func sansCalls(s Snapshot) Snapshot {
	s.Stats.DriverCalls = vmm.CallCounts{}
	return s
}

// Bad input gets the documented error and changes nothing.
func TestBadInputChangesNothing(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 256*MiB, true /* sync */)
			p := mustAlloc(t, a, 3*MiB, 0)
			q := mustAlloc(t, a, 4096, 0)
			mustFree(t, a, q)
			before := sansCalls(a.Snapshot())
			cases := []struct {
				name string
				err  error
				f    func() error
			}{
				{"size0", ErrInvalidSize, func() error { _, err := a.Alloc(0, 0); return err }},
				{"too-big", ErrInvalidSize, func() error { _, err := a.Alloc(dev.Capacity()+1, 0); return err }},
				{"unknown-stream", ErrUnknownStream, func() error { _, err := a.Alloc(512, 12345); return err }},
				{"unknown-ptr", ErrUnknownPointer, func() error { return a.Free(0xdead0000) }},
				{"interior", ErrInteriorPtr, func() error { return a.Free(p + 512) }},
				{"double", ErrDoubleFree, func() error { return a.Free(q) }},
				{"record-unknown-stream", ErrUnknownStream, func() error { return a.RecordStream(p, 999) }},
				{"record-freed", ErrDoubleFree, func() error { return a.RecordStream(q, 0) }},
			}
			for _, c := range cases {
				if err := c.f(); !errors.Is(err, c.err) {
					t.Errorf("%s: got %v, want %v", c.name, err, c.err)
				}
				if after := sansCalls(a.Snapshot()); !reflect.DeepEqual(before, after) {
					t.Errorf("%s changed the state", c.name)
				}
			}
			checkState(t, a, dev)
			rep := closeClean(t, a, dev)
			if len(rep.Live) != 1 || rep.Live[0].Ptr != p {
				t.Errorf("close report live = %+v, want the one at %v", rep.Live, p)
			}
			for _, f := range []func() error{
				func() error { _, err := a.Alloc(1, 0); return err },
				func() error { return a.Free(p) },
				func() error { return a.RecordStream(p, 0) },
				a.EmptyCache,
				func() error { _, err := a.Close(); return err },
			} {
				if err := f(); !errors.Is(err, ErrClosed) {
					t.Errorf("after Close: %v, want ErrClosed", err)
				}
			}
		})
	}
}

// caching: a 3 MiB request takes a 20 MiB segment, split; a second one the next bytes; freeing both merges
// the segment back into one free block; an exact fit reuses the address.
func TestCachingSplitMergeExactFit(t *testing.T) {
	a, dev := newTest(t, PolicyCaching, 0 /* capacity: an H200 */, true /* sync */)
	p1 := mustAlloc(t, a, 3*MiB, 0)
	p2 := mustAlloc(t, a, 3*MiB, 0)
	if p2 != p1.Add(3*MiB) {
		t.Fatalf("second block at %v, want %v (split of the same segment)", p2, p1.Add(3*MiB))
	}
	if st := a.Stats(); st.ReservedBytes != 20*MiB {
		t.Fatalf("reserved %d, want one 20 MiB segment", st.ReservedBytes)
	}
	checkState(t, a, dev)
	mustFree(t, a, p1)
	mustFree(t, a, p2)
	s := a.Snapshot()
	if len(s.Blocks) != 1 || s.Blocks[0].Range.Size != 20*MiB || s.Blocks[0].State != Free {
		t.Fatalf("after frees: blocks %+v, want one free 20 MiB block (merged)", s.Blocks)
	}
	if p := mustAlloc(t, a, 3*MiB, 0); p != p1 {
		t.Fatalf("exact best fit at %v, want %v", p, p1)
	}
	// Large requests round to 2 MiB segments; remainders <= 1 MiB are not split.
	big := mustAlloc(t, a, 21*MiB+4096, 0)
	s = a.Snapshot()
	for _, b := range s.Blocks {
		if b.Range.Base == big && b.Range.Size != 22*MiB {
			t.Fatalf("block of 21 MiB+4 KiB request is %d bytes, want 22 MiB (no split of a remainder < 1 MiB)", b.Range.Size)
		}
	}
	// The small pool: 512 B rounding, 2 MiB segments.
	sp := mustAlloc(t, a, 1, 0)
	sp2 := mustAlloc(t, a, 513, 0)
	if sp2 != sp+512 {
		t.Fatalf("small blocks at %v, %v: want 512 B apart", sp, sp2)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// Without merging (MutNoMerge) the segment stays split: the mutation is observable.
func TestMutationNoMergeObservable(t *testing.T) {
	skipUnlessSeeded(t)
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, _ := New(dev, Config{Policy: PolicyCaching, TestOnlyMutations: MutNoMerge})
	p1 := mustAlloc(t, a, 3*MiB, 0)
	p2 := mustAlloc(t, a, 3*MiB, 0)
	mustFree(t, a, p1)
	mustFree(t, a, p2)
	if n := len(a.Snapshot().Blocks); n == 1 {
		t.Fatalf("MutNoMerge merged anyway")
	}
	closeClean(t, a, dev)
}

// stitchScene leaves two free 128 MiB chunks (allocators of newStitchTest: one chunk per growth) separated by live blocks on stream s.
func stitchScene(t *testing.T, a *Allocator, s vmm.Stream) (live []vmm.DevicePtr) {
	x1 := mustAlloc(t, a, 128*MiB, s)
	y1 := mustAlloc(t, a, 16*MiB, s)
	x2 := mustAlloc(t, a, 128*MiB, s)
	y2 := mustAlloc(t, a, 16*MiB, s)
	mustFree(t, a, x1)
	mustFree(t, a, x2)
	return []vmm.DevicePtr{y1, y2}
}

// gmlake: a request no free block holds, covered by free chunks, is stitched instead of growing; the sBlock
// is cached at free and reused without driver calls; StitchFree tears it down.
func TestStitchReuseStitchFree(t *testing.T) {
	a, dev := newStitchTest(t, 0 /* capacity: an H200 */, true /* sync */)
	stitchScene(t, a, 0)
	res := a.Stats().ReservedBytes
	p := mustAlloc(t, a, 256*MiB, 0)
	st := a.Stats()
	if st.NumStitches != 1 || st.ReservedBytes != res {
		t.Fatalf("stitches %d reserved %d->%d: want a stitch and no growth", st.NumStitches, res, st.ReservedBytes)
	}
	s := a.Snapshot()
	var sb *BlockInfo
	for i := range s.Blocks {
		if s.Blocks[i].Kind == Stitched {
			sb = &s.Blocks[i]
		}
	}
	if sb == nil || sb.Range.Base != p || len(sb.Parts) != 2 || sb.State != Live {
		t.Fatalf("sBlock %+v: want a live sBlock at %v over 2 parts", sb, p)
	}
	for _, c := range s.Chunks {
		if c.Size == 128*MiB && c.Refs != 2 {
			t.Fatalf("chunk %d refs %d, want 2 (pBlock mapping + sBlock view)", c.Handle, c.Refs)
		}
	}
	checkState(t, a, dev)
	// The parts are held: a 64 MiB request must not land on them.
	q := mustAlloc(t, a, 64*MiB, 0)
	if q >= p && q < p.Add(256*MiB) {
		t.Fatal("allocated inside the sBlock")
	}
	checkState(t, a, dev)
	mustFree(t, a, q)
	mustFree(t, a, p)
	calls := a.Stats().DriverCalls
	p2 := mustAlloc(t, a, 256*MiB, 0)
	if p2 != p || a.Stats().NumStitchReuses != 1 || a.Stats().DriverCalls != calls {
		t.Fatalf("reuse: got %v (want %v), reuses %d, driver calls changed %v", p2, p, a.Stats().NumStitchReuses,
			a.Stats().DriverCalls != calls)
	}
	// Partial reuse: a somewhat smaller request takes the cached sBlock too.
	mustFree(t, a, p2)
	p3 := mustAlloc(t, a, 240*MiB, 0)
	if p3 != p {
		t.Fatalf("partial reuse at %v, want the cached sBlock %v", p3, p)
	}
	mustFree(t, a, p3)
	checkState(t, a, dev)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	st = a.Stats()
	if st.NumStitchFrees != 1 || st.ReservedBytes != 32*MiB {
		t.Fatalf("after EmptyCache: stitch frees %d reserved %d, want 1 and 32 MiB", st.NumStitchFrees, st.ReservedBytes)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// The LRU StitchFree: with a cache of one sBlock, caching a second tears down the older one.
func TestStitchFreeLRU(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, _ := New(dev, Config{SBlockCache: 1, ChunkSize: 256 * MiB})
	stitchScene(t, a, 0)
	p := mustAlloc(t, a, 256*MiB, 0)
	stitchScene(t, a, 0)
	q := mustAlloc(t, a, 256*MiB, 0) // the second pair of chunks (the first is held)
	if a.Stats().NumStitches != 2 {
		t.Fatalf("stitches %d, want 2", a.Stats().NumStitches)
	}
	mustFree(t, a, p)
	mustFree(t, a, q)
	if st := a.Stats(); st.NumStitchFrees != 1 {
		t.Fatalf("stitch frees %d, want 1 (cache of one)", st.NumStitchFrees)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// gmlake-paper stitches only requests of at least 512 MiB.
func TestPaperStitchThreshold(t *testing.T) {
	a, dev := newTest(t, PolicyGMLakePaper, 0 /* capacity: an H200 */, true /* sync */)
	stitchScene(t, a, 0)
	mustAlloc(t, a, 256*MiB, 0)
	if n := a.Stats().NumStitches; n != 0 {
		t.Fatalf("paper stitched a 128 MiB request")
	}
	var big []vmm.DevicePtr
	for i := 0; i < 2; i++ {
		big = append(big, mustAlloc(t, a, 300*MiB, 0), mustAlloc(t, a, 2*MiB, 0))
	}
	mustFree(t, a, big[0])
	mustFree(t, a, big[2])
	mustAlloc(t, a, 600*MiB, 0)
	if n := a.Stats().NumStitches; n != 1 {
		t.Fatalf("paper: %d stitches for a 600 MiB request over two free 300 MiB blocks, want 1", n)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// Cross-stream stitching waits for the freeing stream's work submitted before the frees; work submitted
// after them does not matter (the fence recorded at the free says when the earlier work finished).
func TestCrossStreamFenceAtFree(t *testing.T) {
	a, dev := newStitchTest(t, 0 /* capacity: an H200 */, false /* sync */)
	s1, _ := dev.CreateStream()
	stitchScene(t, a, s1) // s1 idle at the frees
	dev.Launch(s1)        // later work on s1 does not touch the freed chunks
	mustAlloc(t, a, 256*MiB, 0)
	if a.Stats().NumStitches != 1 {
		t.Fatal("did not stitch chunks freed while their stream was idle")
	}
	checkState(t, a, dev)
	dev.CompleteAll()
	closeClean(t, a, dev)
}

// Cross-stream stitching waits for the freeing stream's work.
func TestCrossStreamStitchWaitsForEvent(t *testing.T) {
	a, dev := newStitchTest(t, 0 /* capacity: an H200 */, false /* sync */)
	s1, _ := dev.CreateStream()
	dev.Launch(s1) // work on s1, submitted before the frees, may still use the freed chunks
	stitchScene(t, a, s1)
	p := mustAlloc(t, a, 256*MiB, 0)
	if a.Stats().NumStitches != 0 {
		t.Fatal("stitched chunks of a stream whose work is pending")
	}
	mustFree(t, a, p)
	dev.Complete(s1)
	mustAlloc(t, a, 512*MiB, 0)
	s := a.Snapshot()
	if a.Stats().NumStitches != 1 {
		t.Fatalf("stitches %d after the work completed, want 1", a.Stats().NumStitches)
	}
	foreign := 0
	for _, b := range s.Blocks {
		if b.Kind == Primitive && b.HeldBy != 0 && b.Stream == s1 {
			foreign++
		}
	}
	if foreign != 2 {
		t.Fatalf("%d parts of stream %d held, want 2", foreign, s1)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// MutEarlyCrossStreamReuse stitches without waiting: observable.
func TestMutationEarlyCrossStreamObservable(t *testing.T) {
	skipUnlessSeeded(t)
	dev := sim.NewDevice(sim.DeviceConfig{})
	a, _ := New(dev, Config{TestOnlyMutations: MutEarlyCrossStreamReuse, ChunkSize: 256 * MiB})
	s1, _ := dev.CreateStream()
	dev.Launch(s1)
	stitchScene(t, a, s1)
	mustAlloc(t, a, 256*MiB, 0)
	if a.Stats().NumStitches != 1 {
		t.Fatal("mutation did not reuse early")
	}
}

// RecordStream: the block waits for the recorded stream's event before it is reused, even on its own stream.
func TestRecordStreamPending(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 0 /* capacity: an H200 */, false /* sync */)
			s1, _ := dev.CreateStream()
			p := mustAlloc(t, a, 8*MiB, 0)
			if err := a.RecordStream(p, s1); err != nil {
				t.Fatal(err)
			}
			dev.Launch(s1)
			mustFree(t, a, p)
			pending := 0
			for _, b := range a.Snapshot().Blocks {
				if b.State == Pending {
					pending++
				}
			}
			if pending != 1 {
				t.Fatalf("%d pending blocks, want 1", pending)
			}
			q := mustAlloc(t, a, 8*MiB, 0)
			if q == p {
				t.Fatal("reused a block whose recorded stream is still working")
			}
			mustFree(t, a, q)
			dev.Complete(s1)
			if r := mustAlloc(t, a, 8*MiB, 0); r != p {
				t.Fatalf("after the event: got %v, want the block %v back", r, p)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// On out of memory every policy releases its cache and retries; only then does it fail, with an OOMError.
func TestOOMReleaseAndRetry(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 64*MiB, true /* sync */)
			s1, _ := dev.CreateStream()
			p := mustAlloc(t, a, 40*MiB, s1)
			mustFree(t, a, p)
			q := mustAlloc(t, a, 50*MiB, 0) // needs the 40 MiB cached on s1 back (or stitched, gmlake)
			if st := a.Stats(); st.NumCacheFlushes != 1 && st.NumStitches == 0 {
				t.Fatalf("cache flushes %d stitches %d, want a flush or a stitch", st.NumCacheFlushes, st.NumStitches)
			}
			checkState(t, a, dev)
			_, err := a.Alloc(30*MiB, 0)
			var oom *OOMError
			if !errors.Is(err, vmm.ErrOutOfMemory) || !errors.As(err, &oom) {
				t.Fatalf("got %v, want an OOMError", err)
			}
			if oom.Requested != 30*MiB || oom.Live < 50*MiB || oom.DeviceFree > 14*MiB || oom.Reserved < 50*MiB {
				t.Fatalf("OOM error fields: %+v", oom)
			}
			if a.Stats().NumOOMs != 1 {
				t.Fatal("NumOOMs not counted")
			}
			checkState(t, a, dev)
			mustFree(t, a, q)
			closeClean(t, a, dev)
		})
	}
}

// No spurious OOM: after random traffic, once everything is freed, a request of the whole device succeeds;
// and the spurious-OOM mutation fails it.
func TestNoSpuriousOOM(t *testing.T) {
	const capacity = 256 * MiB
	for _, pol := range Policies {
		for _, mut := range []Mutation{0, MutSpuriousOOM} {
			t.Run(fmt.Sprintf("%s/mut=%v", pol, mut != 0), func(t *testing.T) {
				if mut != 0 {
					skipUnlessSeeded(t)
				}
				dev := sim.NewDevice(sim.DeviceConfig{Capacity: capacity, SyncStreams: true})
				a, _ := New(dev, Config{Policy: pol, TestOnlyMutations: mut})
				rng := rand.New(rand.NewSource(7))
				var live []vmm.DevicePtr
				for i := 0; i < 300; i++ {
					if len(live) > 0 && rng.Intn(2) == 0 {
						j := rng.Intn(len(live))
						mustFree(t, a, live[j])
						live = append(live[:j], live[j+1:]...)
						continue
					}
					p, err := a.Alloc(uint64(rng.Intn(24<<20)+1), 0)
					if err == nil {
						live = append(live, p)
					}
				}
				for _, p := range live {
					mustFree(t, a, p)
				}
				p, err := a.Alloc(capacity, 0)
				if mut == 0 && err != nil {
					t.Fatalf("spurious OOM: %v", err)
				}
				if mut != 0 && err == nil && a.Stats().NumCacheFlushes == 0 {
					// the mutation may go unnoticed only if nothing was cached
					t.Logf("mutation unobservable here")
				}
				if err == nil {
					mustFree(t, a, p)
				}
				closeClean(t, a, dev)
			})
		}
	}
}

// Driver failures at every call of a stitch leave the allocator consistent and leak nothing.
func TestFaultMidStitchNoLeak(t *testing.T) {
	kinds := []vmm.CallKind{vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess}
	for _, k := range kinds {
		for n := 1; n <= 2; n++ {
			t.Run(fmt.Sprintf("%v#%d", k.Short(), n), func(t *testing.T) {
				a, dev := newStitchTest(t, 0 /* capacity: an H200 */, true /* sync */)
				stitchScene(t, a, 0)
				dev.FailNth(k, n, vmm.InvalidValue)
				p, err := a.Alloc(256*MiB, 0)
				checkState(t, a, dev)
				if err == nil {
					mustFree(t, a, p)
				} else if a.Stats().NumStitches != 0 {
					t.Fatal("failed stitch counted")
				}
				dev.ClearFaults()
				p = mustAlloc(t, a, 256*MiB, 0)
				checkState(t, a, dev)
				mustFree(t, a, p)
				closeClean(t, a, dev)
			})
		}
	}
}

// MutLeakOnStitchFailure leaks the half-built stitch: observable as a leak after Close.
func TestMutationLeakOnStitchFailureObservable(t *testing.T) {
	skipUnlessSeeded(t)
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, _ := New(dev, Config{TestOnlyMutations: MutLeakOnStitchFailure, ChunkSize: 256 * MiB})
	stitchScene(t, a, 0)
	dev.FailNth(vmm.CallSetAccess, 1, vmm.InvalidValue)
	if _, err := a.Alloc(256*MiB, 0); err == nil {
		t.Fatal("no failure injected")
	}
	a.Close()
	if dev.Leaks().Empty() {
		t.Fatal("mutation leaked nothing")
	}
}

// Driver failures on every call kind during growth and release: consistent, no leak (all policies).
func TestFaultsEverywhereNoLeak(t *testing.T) {
	kinds := []vmm.CallKind{vmm.CallCreate, vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess, vmm.CallUnmap,
		vmm.CallRelease, vmm.CallFreeAddress, vmm.CallRecordEvent, vmm.CallQueryEvent, vmm.CallCreateEvent}
	for _, pol := range Policies {
		for _, k := range kinds {
			t.Run(pol+"/"+k.Short(), func(t *testing.T) {
				a, dev := newTest(t, pol, 512*MiB, true /* sync */)
				s1, _ := dev.CreateStream()
				rng := rand.New(rand.NewSource(int64(k)))
				var live []vmm.DevicePtr
				for i := 0; i < 200; i++ {
					if i%7 == 0 {
						dev.FailNth(k, 1+rng.Intn(3), vmm.InvalidValue)
					}
					switch r := rng.Intn(10); {
					case r < 5:
						s := vmm.Stream(0)
						if rng.Intn(3) == 0 {
							s = s1
						}
						if p, err := a.Alloc(uint64(rng.Intn(100<<20)+1), s); err == nil {
							live = append(live, p)
							if rng.Intn(4) == 0 {
								a.RecordStream(p, s1)
							}
						}
					case r < 9 && len(live) > 0:
						j := rng.Intn(len(live))
						if err := a.Free(live[j]); err == nil {
							live = append(live[:j], live[j+1:]...)
						}
					default:
						a.EmptyCache()
					}
					checkState(t, a, dev)
				}
				dev.ClearFaults()
				closeClean(t, a, dev)
			})
		}
	}
}

// Random traffic on several streams, with events pending and completing, invariants after every step.
func TestRandomOpsInvariants(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 2<<30, false /* sync */)
			streams := []vmm.Stream{0}
			for i := 0; i < 2; i++ {
				s, _ := dev.CreateStream()
				streams = append(streams, s)
			}
			rng := rand.New(rand.NewSource(42))
			sizes := []uint64{1, 511, 4096, 1 << 20, 3 << 20, 9 << 20, 21 << 20, 64 << 20, 130 << 20, 300 << 20}
			var live []vmm.DevicePtr
			for i := 0; i < 1500; i++ {
				s := streams[rng.Intn(len(streams))]
				switch r := rng.Intn(20); {
				case r < 9:
					if p, err := a.Alloc(sizes[rng.Intn(len(sizes))]+uint64(rng.Intn(4096)), s); err == nil {
						live = append(live, p)
					} else if !errors.Is(err, vmm.ErrOutOfMemory) {
						t.Fatal(err)
					}
				case r < 17 && len(live) > 0:
					j := rng.Intn(len(live))
					mustFree(t, a, live[j])
					live = append(live[:j], live[j+1:]...)
				case r == 17 && len(live) > 0:
					if err := a.RecordStream(live[rng.Intn(len(live))], s); err != nil {
						t.Fatal(err)
					}
				case r == 18:
					dev.Launch(s)
				default:
					if rng.Intn(2) == 0 {
						dev.Complete(s)
					} else if rng.Intn(8) == 0 {
						a.EmptyCache()
					}
				}
				checkState(t, a, dev)
			}
			dev.CompleteAll()
			for _, p := range live {
				mustFree(t, a, p)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			checkState(t, a, dev)
			if st := a.Stats(); st.ReservedBytes != 0 {
				for _, pe := range a.pend {
					t.Logf("pend ev=%d seq=%d blocks=%d", pe.ev, pe.seq, len(pe.blocks))
				}
				for _, ss := range underLock(a, a.sortedStreamsLocked) {
					t.Logf("stream %d safe %d fences %v freeSeq %d", ss.s, ss.safeSeq, ss.fences, a.freeSeq)
				}
				t.Fatalf("reserved %d after freeing everything and EmptyCache", st.ReservedBytes)
			}
			closeClean(t, a, dev)
		})
	}
}

// Concurrency: goroutines on distinct streams (run with -race).
func TestConcurrentStreams(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 4<<30, true /* sync */)
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				s, _ := dev.CreateStream()
				wg.Add(1)
				go func(s vmm.Stream, seed int64) {
					defer wg.Done()
					rng := rand.New(rand.NewSource(seed))
					var live []vmm.DevicePtr
					for i := 0; i < 400; i++ {
						if len(live) > 0 && rng.Intn(2) == 0 {
							j := rng.Intn(len(live))
							if err := a.Free(live[j]); err != nil {
								t.Error(err)
								return
							}
							live = append(live[:j], live[j+1:]...)
							continue
						}
						p, err := a.Alloc(uint64(rng.Intn(64<<20)+1), s)
						if err != nil {
							t.Error(err)
							return
						}
						live = append(live, p)
						if i%50 == 0 {
							a.Snapshot()
							a.Stats()
						}
					}
					for _, p := range live {
						a.Free(p)
					}
				}(s, int64(g))
			}
			wg.Wait()
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// The allocator is deterministic: the same requests give the same pointers and the same driver calls.
func TestDeterministic(t *testing.T) {
	run := func() ([]vmm.DevicePtr, vmm.CallCounts) {
		a, dev := newTest(t, PolicyGMLake, 0 /* capacity: an H200 */, true /* sync */)
		rng := rand.New(rand.NewSource(3))
		var out []vmm.DevicePtr
		var live []vmm.DevicePtr
		for i := 0; i < 500; i++ {
			if len(live) > 0 && rng.Intn(2) == 0 {
				j := rng.Intn(len(live))
				mustFree(t, a, live[j])
				live = append(live[:j], live[j+1:]...)
				continue
			}
			p := mustAlloc(t, a, uint64(rng.Intn(200<<20)+1), 0)
			live = append(live, p)
			out = append(out, p)
		}
		c := a.Stats().DriverCalls
		closeClean(t, a, dev)
		return out, c
	}
	p1, c1 := run()
	p2, c2 := run()
	if !reflect.DeepEqual(p1, p2) || c1 != c2 {
		t.Fatal("two identical runs differ")
	}
}

func TestBestFitAndMutation(t *testing.T) {
	for _, mut := range []Mutation{0, MutWrongBestFit} {
		if mut != 0 && !SeededBugs {
			continue // the seeded bug needs -tags gmlake_mutants
		}
		dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
		a, _ := New(dev, Config{Policy: PolicyCaching, TestOnlyMutations: mut})
		big := mustAlloc(t, a, 64*MiB, 0)
		sep := mustAlloc(t, a, 12*MiB, 0)
		small := mustAlloc(t, a, 32*MiB, 0)
		mustFree(t, a, big)
		mustFree(t, a, small)
		got := mustAlloc(t, a, 30*MiB, 0)
		if (got == small) != (mut == 0) {
			t.Errorf("mutation %v: best fit chose %v (small %v, big %v)", mut, got, small, big)
		}
		_ = sep
	}
}

func TestPoliciesAndConfig(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{})
	for _, pol := range append([]string{""}, Policies...) {
		a, err := New(dev, Config{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		want := pol
		if pol == "" {
			want = PolicyGMLake
		}
		if a.Policy() != want {
			t.Errorf("policy %q", a.Policy())
		}
		a.Close()
	}
	if _, err := New(dev, Config{Policy: "nope"}); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := New(dev, Config{ChunkSize: 3 * MiB}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("bad chunk size: %v", err)
	}
	names := map[string]bool{}
	for _, m := range AllMutations() {
		names[m.String()] = true
	}
	if len(names) != NumMutations {
		t.Error("mutation names not distinct")
	}
	_ = sort.Ints
}

// Property: New refuses every knob just outside its documented range with ErrBadConfig (and no allocator), and
// takes the values at its edges: gmlake-paper's DefragLevel is one of 0-3 (GLake's fragmentation levels), its
// ReuseLimit at least 0.
func TestNewRefusesKnobsJustOutsideTheirRange(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: vmm.GiB, SyncStreams: true})
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Policy: PolicyGMLakePaper, DefragLevel: 3}, true},
		{Config{Policy: PolicyGMLakePaper, DefragLevel: 4}, false},
		{Config{Policy: PolicyGMLakePaper, DefragLevel: -1}, false},
		{Config{Policy: PolicyGMLakePaper, ReuseLimit: 0.5}, true},
		{Config{Policy: PolicyGMLakePaper, ReuseLimit: -0.5}, false},
		{Config{Policy: PolicyGMLake, StitchMin: 512}, true},
		{Config{Policy: PolicyGMLake, StitchMin: 513}, false},
	} {
		a, err := New(dev, c.cfg)
		switch {
		case c.ok && err != nil:
			t.Errorf("New(%+v) = %v; want an allocator", c.cfg, err)
		case !c.ok && (!errors.Is(err, ErrBadConfig) || a != nil):
			t.Errorf("New(%+v) = %v, %v; want no allocator and %v", c.cfg, a, err, ErrBadConfig)
		}
		if a != nil {
			a.Close()
		}
	}
}

// Snapshot is a deep copy: changing it, or the allocator afterwards, leaves the other alone.
func TestSnapshotDeepCopy(t *testing.T) {
	a, dev := newStitchTest(t, 0 /* capacity: an H200 */, true /* sync */)
	stitchScene(t, a, 0)
	p := mustAlloc(t, a, 256*MiB, 0)
	if err := a.RecordStream(p, 0); err != nil {
		t.Fatal(err)
	}
	s1 := a.Snapshot()
	keep := sansCalls(a.Snapshot())
	for i := range s1.Blocks {
		s1.Blocks[i].Parts = append(s1.Blocks[i].Parts[:0], 999)
		s1.Blocks[i].Backing = nil
	}
	s1.Live[0].Uses = append(s1.Live[0].Uses, 7)
	if again := sansCalls(a.Snapshot()); !reflect.DeepEqual(again, keep) {
		t.Fatal("changing a snapshot changed the allocator's")
	}
	mustFree(t, a, p)
	if len(keep.Live) != 3 {
		t.Fatalf("old snapshot changed after Free: %d live", len(keep.Live))
	}
	closeClean(t, a, dev)
}

// A stitched block recorded on another stream stays Pending, holding its parts, until the event completes.
func TestRecordStreamOnStitchedBlock(t *testing.T) {
	a, dev := newStitchTest(t, 0 /* capacity: an H200 */, false /* sync */)
	s1, _ := dev.CreateStream()
	stitchScene(t, a, 0)
	p := mustAlloc(t, a, 256*MiB, 0)
	if a.Stats().NumStitches != 1 {
		t.Fatal("no stitch")
	}
	if err := a.RecordStream(p, s1); err != nil {
		t.Fatal(err)
	}
	dev.Launch(s1)
	mustFree(t, a, p)
	held := 0
	for _, b := range a.Snapshot().Blocks {
		if b.HeldBy != 0 {
			held++
		}
	}
	if held != 2 {
		t.Fatalf("%d parts held while the sBlock is pending, want 2", held)
	}
	q := mustAlloc(t, a, 256*MiB, 0)
	if q == p {
		t.Fatal("pending sBlock reused")
	}
	checkState(t, a, dev)
	dev.Complete(s1)
	mustFree(t, a, q)
	r := mustAlloc(t, a, 256*MiB, 0)
	if r != p && r != q {
		t.Fatalf("after the event: %v, want a cached block back", r)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// A whole free chunk of another stream serves a request through a view once its stream's work completed:
// cross-stream reuse without new memory.
func TestCrossStreamSingleChunkReuse(t *testing.T) {
	a, dev := newStitchTest(t, 0 /* capacity: an H200 */, true /* sync */)
	s1, _ := dev.CreateStream()
	p := mustAlloc(t, a, 256*MiB, s1)
	mustFree(t, a, p)
	res := a.Stats().ReservedBytes
	q := mustAlloc(t, a, 256*MiB, 0)
	if st := a.Stats(); st.NumStitches != 1 || st.ReservedBytes != res {
		t.Fatalf("stitches %d reserved %d -> %d: want the free chunk of stream %d reused", st.NumStitches, res, st.ReservedBytes, s1)
	}
	checkState(t, a, dev)
	mustFree(t, a, q)
	closeClean(t, a, dev)
}

// An arena policy places a request that no arena of its (stream, pool) can hold (the unmapped tail too
// short) in a new arena, as PyTorch's find_expandable_block does, instead of failing while the device has
// room (spec/FINDINGS.md F3).
func TestArenaTooShortOpensNewArena(t *testing.T) {
	for _, pol := range []string{PolicyExpandable, PolicyGMLake} {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 4096*MiB, true /* sync */)
			p0 := mustAlloc(t, a, 1024*MiB, 0)
			mustAlloc(t, a, 100*MiB, 0) // the arena's unmapped tail is now shorter than 3.5 GiB
			mustFree(t, a, p0)
			mustAlloc(t, a, 3584*MiB, 0) // 1 GiB of free pages to release plus 2.9 GiB of device
			if n := len(a.Snapshot().Reservations); pol == PolicyExpandable && n != 2 {
				t.Fatalf("%d reservations, want 2 arenas: %v", n, a.Snapshot().Reservations)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// Freeing a stitched block is one free: its parts are stamped with the sBlock's free, so the fence recorded
// then covers them all, and work launched on the stream afterwards does not keep them from other streams or
// from release (spec/FINDINGS.md F5: each part counted as a free of its own used up the stream's fences).
func TestStitchedFreeFencedAtFree(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{Capacity: 512 * MiB})
	a, err := New(dev, Config{}) // 2 MiB chunks on this device: the sBlock below has 63 parts
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := dev.CreateStream()
	s2, _ := dev.CreateStream()
	mustFree(t, a, mustAlloc(t, a, 12763136, 0))
	p := mustAlloc(t, a, 131072000, s1) // stitches stream 0's 14 MiB with 112 MiB of new chunks
	if a.Stats().NumStitches != 1 {
		t.Fatalf("stitches %d, want 1", a.Stats().NumStitches)
	}
	mustFree(t, a, p)
	dev.Launch(s1) // after the free: cannot touch the parts
	mustAlloc(t, a, 4, s1)
	if _, err := a.Alloc(506506341, s2); err != nil {
		t.Fatalf("484 MiB on stream %d with 384 MiB of device and 126 MiB of idle free chunks: %v", s2, err)
	}
	checkState(t, a, dev)
	dev.CompleteAll()
	closeClean(t, a, dev)
}

// skipUnlessSeeded skips a test of a seeded bug in a build without them (they need -tags gmlake_mutants;
// make test runs those tests with the tag).
func skipUnlessSeeded(t *testing.T) {
	t.Helper()
	if !SeededBugs {
		t.Skip("seeded bugs need -tags gmlake_mutants")
	}
}

// An engine built without the seeded bugs refuses a Config that asks for one (ErrBadConfig, no allocator)
// rather than run a test that believes the bug is on; with the tag (make test runs both builds) it is made.
func TestNewRefusesSeededBugsItLacks(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, err := New(dev, Config{TestOnlyMutations: MutNoMerge})
	if SeededBugs {
		if err != nil || a == nil {
			t.Fatalf("New with a seeded bug, built with it: %v, %v", a, err)
		}
		closeClean(t, a, dev)
		return
	}
	if !errors.Is(err, ErrBadConfig) || a != nil {
		t.Fatalf("New with a seeded bug, built without it = %v, %v; want no allocator and %v", a, err, ErrBadConfig)
	}
}
