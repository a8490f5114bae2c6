package impl

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// The pointer table holds only blocks that exist (live or cached), so host memory does not grow with the
// number of distinct pointers ever handed out (issue 14 item 2): alloc/free/EmptyCache rounds that each get a
// fresh address leave as many entries as there are blocks, and Snapshot lists exactly the live ones.
func TestPointerTableBoundedByBlocks(t *testing.T) {
	const rounds = 200_000
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 4<<30, true /* sync */)
			keep := mustAlloc(t, a, 3*MiB, vmm.DefaultStream) // one live block throughout
			n := rounds
			if testing.Short() {
				n = rounds / 10
			}
			for i := 0; i < n; i++ {
				p := mustAlloc(t, a, uint64(1+i%4)*MiB, vmm.DefaultStream)
				mustFree(t, a, p)
				if err := a.EmptyCache(); err != nil {
					t.Fatalf("round %d: EmptyCache: %v", i, err)
				}
			}
			blocks := a.countBlocks()
			if got := a.ptrs.len(); got > blocks {
				t.Fatalf("after %d alloc/free/EmptyCache rounds the pointer table has %d entries for %d blocks (1 live)", n, got, blocks)
			}
			if s := a.Snapshot(); len(s.Live) != 1 || s.Live[0].Ptr != keep {
				t.Fatalf("Snapshot lists %d live allocations, want only %v", len(s.Live), keep)
			}
			// A second Free is still a double free while the block exists, and an error of the free kinds
			// once its memory went back to the device.
			p := mustAlloc(t, a, 5*MiB, vmm.DefaultStream)
			mustFree(t, a, p)
			if err := a.Free(p); !errors.Is(err, ErrDoubleFree) {
				t.Fatalf("second Free(%v) = %v, want %v", p, err, ErrDoubleFree)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if err := a.Free(p); !errors.Is(err, ErrDoubleFree) && !errors.Is(err, ErrUnknownPointer) {
				t.Fatalf("Free(%v) after EmptyCache = %v, want %v or %v", p, err, ErrDoubleFree, ErrUnknownPointer)
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// countBlocks counts the block structs in use: every block of every segment (mapped or not) and every sBlock.
func (a *Allocator) countBlocks() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.sblocks)
	for _, seg := range a.segs {
		for b := seg.head; b != nil; b = b.next {
			n++
		}
	}
	return n
}

// busyOnNewStream allocates size bytes on the default stream, records the allocation on a new stream of dev
// and launches work there: the allocation is in use on a stream other than its own, with the work pending.
// newTestWithStream makes an asynchronous engine of policy on a 4 GiB device and one stream beside the default.
func newTestWithStream(t *testing.T, policy string) (*Allocator, *sim.Device, vmm.Stream) {
	t.Helper()
	a, dev := newTest(t, policy, 4<<30, false /* sync */)
	s, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	return a, dev, s
}

func busyOnNewStream(t *testing.T, a *Allocator, dev *sim.Device, size uint64) (vmm.DevicePtr, vmm.Stream) {
	t.Helper()
	s, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	p := mustAlloc(t, a, size, vmm.DefaultStream)
	if err := a.RecordStream(p, s); err != nil {
		t.Fatal(err)
	}
	dev.Launch(s)
	return p, s
}

// A Free after a stream the allocation was recorded on was destroyed behind the allocator's back succeeds
// (issue 14 item 6): the stream can take no more work and CUDA leaves nothing to wait on, so its claim ends
// with it; the stream is then unknown to Alloc and RecordStream.
func TestFreeAfterRecordedStreamDestroyed(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 4<<30, false /* sync */)
			p, s := busyOnNewStream(t, a, dev, 8*MiB)
			if err := dev.DestroyStream(s); err != nil {
				t.Fatal(err)
			}
			for try := 0; try < 2; try++ {
				err := a.Free(p)
				if try == 0 && err != nil {
					t.Fatalf("Free(%v) after its recorded stream %d was destroyed: %v", p, s, err)
				}
				if try == 1 && !errors.Is(err, ErrDoubleFree) {
					t.Fatalf("second Free(%v) = %v, want %v", p, err, ErrDoubleFree)
				}
			}
			if _, err := a.Alloc(MiB, s); !errors.Is(err, ErrUnknownStream) {
				t.Fatalf("Alloc on destroyed stream %d = %v, want %v", s, err, ErrUnknownStream)
			}
			if st := a.Stats(); st.NumLive != 0 {
				t.Fatalf("%d allocations live after the Free", st.NumLive)
			}
			dev.CompleteAll()
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// ForgetStream before destroying a stream fences its work (issue 14 item 6): a block recorded on it and
// freed stays unusable until the destroyed stream's work completed, as CUDA completes it; Alloc and
// RecordStream on the stream are ErrUnknownStream; memory allocated on it is released by EmptyCache once
// its work completed.
func TestForgetStreamFencesItsWork(t *testing.T) {
	a, dev := newTest(t, PolicyCaching, 4<<30, false /* sync */)
	s, err := dev.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	p := mustAlloc(t, a, 8*MiB, vmm.DefaultStream)
	q := mustAlloc(t, a, 16*MiB, s)
	if err := a.RecordStream(p, s); err != nil {
		t.Fatal(err)
	}
	dev.Launch(s)
	if err := a.ForgetStream(s); err != nil {
		t.Fatal(err)
	}
	if err := dev.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(MiB, s); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("Alloc on forgotten stream = %v, want %v", err, ErrUnknownStream)
	}
	if err := a.RecordStream(p, s); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("RecordStream on forgotten stream = %v, want %v", err, ErrUnknownStream)
	}
	if err := a.ForgetStream(vmm.DefaultStream); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("ForgetStream(default) = %v, want %v", err, ErrUnknownStream)
	}
	mustFree(t, a, p)
	mustFree(t, a, q)
	if r := mustAlloc(t, a, 8*MiB, vmm.DefaultStream); r == p {
		t.Fatalf("Alloc reused %v while the destroyed stream's work on it is pending", p)
	} else {
		mustFree(t, a, r)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().ReservedBytes; got < 8*MiB+16*MiB {
		t.Fatalf("EmptyCache released memory the destroyed stream may still use: %s reserved", vmm.FormatBytes(got))
	}
	dev.CompleteAll()
	if r := mustAlloc(t, a, 8*MiB, vmm.DefaultStream); r != p {
		t.Fatalf("after the destroyed stream's work completed, Alloc = %v, want %v reused (best fit)", r, p)
	} else {
		mustFree(t, a, r)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().ReservedBytes; got != 0 {
		t.Fatalf("EmptyCache left %s reserved with nothing live", vmm.FormatBytes(got))
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// ForgetStream after the caller synchronized and destroyed the stream (the wrong order) succeeds with
// nothing left to wait on: the driver refuses the last event's record, StreamQuery confirms the stream is
// gone, and the memory used on it is released by the next EmptyCache; the event the forget took returns to
// the pool, held once (CheckInvariants), and Close destroys every event exactly once.
func TestForgetStreamAfterItsDestructionWaitsOnNothing(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev, s := newTestWithStream(t, pol)
			q := mustAlloc(t, a, 16*MiB, s)
			mustFree(t, a, q)
			dev.Launch(s)
			dev.Complete(s)
			if err := dev.DestroyStream(s); err != nil {
				t.Fatal(err)
			}
			if err := a.ForgetStream(s); err != nil {
				t.Fatalf("ForgetStream(%d) after its destruction = %v, want nil (nothing left to wait on)", s, err)
			}
			checkState(t, a, dev)
			if _, err := a.Alloc(MiB, s); !errors.Is(err, ErrUnknownStream) {
				t.Fatalf("Alloc on the forgotten stream = %v, want %v", err, ErrUnknownStream)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if got := a.Stats().ReservedBytes; got != 0 {
				t.Fatalf("EmptyCache left %s reserved: the destroyed stream's memory waits on an event that cannot complete", vmm.FormatBytes(got))
			}
			checkState(t, a, dev)
			closeClean(t, a, dev)
		})
	}
}

// A stitch looks at every known stream; it must not sort them each time (issue 14 item 9: a fuzz campaign
// with 100k streams, one worker each, was quadratic: 10k streams took 15 s for a 1 s campaign). The engine
// keeps its streams in id order as they arrive, in any order, and listing them costs nothing.
func TestStreamsKeptInOrderWithoutSorting(t *testing.T) {
	a, dev := newTest(t, PolicyGMLake, 4<<30, true /* sync */)
	var made []vmm.Stream
	for i := 0; i < 200; i++ {
		s, err := dev.CreateStream()
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, s)
	}
	rng := rand.New(rand.NewSource(1))
	rng.Shuffle(len(made), func(i, j int) { made[i], made[j] = made[j], made[i] })
	for _, s := range made {
		mustFree(t, a, mustAlloc(t, a, 3*MiB, s))
	}
	got := underLock(a, a.sortedStreamsLocked)
	if len(got) != len(made) || !slices.IsSortedFunc(got, func(x, y *streamState) int { return cmp.Compare(x.s, y.s) }) {
		t.Fatalf("streams not kept in id order: %d listed for %d used", len(got), len(made))
	}
	for _, ss := range got {
		if a.streams[ss.s] != ss {
			t.Fatalf("stream %d listed but not in the map", ss.s)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = underLock(a, a.sortedStreamsLocked) }); n != 0 {
		t.Fatalf("listing the streams allocates %.0f times", n)
	}
	checkState(t, a, dev)
	closeClean(t, a, dev)
}

// BenchmarkStitchAttemptManyStreams times an allocation that tries to stitch while many streams are known:
// the cross-stream candidate scan must stay cheap (no sort per attempt).
func BenchmarkStitchAttemptManyStreams(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			a, dev := newTest(b, PolicyGMLake, 64<<30, true /* sync */)
			for i := 0; i < n; i++ {
				s, err := dev.CreateStream()
				if err != nil {
					b.Fatal(err)
				}
				mustFree(b, a, mustAlloc(b, a, 512, s))
			}
			small := mustAlloc(b, a, 8*MiB, vmm.DefaultStream)
			hold := mustAlloc(b, a, 8*MiB, vmm.DefaultStream)
			mustFree(b, a, small) // a free chunk that does not fit: every large request tries to stitch
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				mustFree(b, a, mustAlloc(b, a, 64*MiB, vmm.DefaultStream))
			}
			b.StopTimer()
			mustFree(b, a, hold)
		})
	}
}

// The engine never unmaps memory with GPU work pending through it (rule 9, checked exactly per address
// range by the simulated device, issue 14 item 8): a block written on its stream and freed, or written on a
// second stream and recorded, stays mapped through EmptyCache until the work completed. The control (an
// unmap of the same mapping behind the engine's back) shows the device's check bites.
func TestEmptyCacheNeverRacesPendingWrites(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev, s := newTestWithStream(t, pol)
			p := mustAlloc(t, a, 8*MiB, s)
			q := mustAlloc(t, a, 64*MiB, vmm.DefaultStream)
			if err := dev.Memset(p, 8*MiB, 1, s); err != nil {
				t.Fatal(err)
			}
			if err := dev.Memset(q, MiB, 2, s); err != nil { // q used on s too
				t.Fatal(err)
			}
			if err := a.RecordStream(q, s); err != nil {
				t.Fatal(err)
			}
			mustFree(t, a, p)
			mustFree(t, a, q)
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			checkState(t, a, dev) // fails on any hazard
			dev.CompleteAll()
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			checkState(t, a, dev)
			if got := a.Stats().ReservedBytes; got != 0 {
				t.Fatalf("%s still reserved after the work completed", vmm.FormatBytes(got))
			}
			closeClean(t, a, dev)

			// Control: the same write, then the memory unmapped behind the engine's back.
			a, dev, s = newTestWithStream(t, pol)
			p = mustAlloc(t, a, 8*MiB, s)
			if err := dev.Memset(p, 8*MiB, 1, s); err != nil {
				t.Fatal(err)
			}
			snap := a.Snapshot()
			m := snap.Mappings[0]
			if err := dev.Unmap(m.VA.Base, m.VA.Size); err != nil {
				t.Fatal(err)
			}
			if err := dev.HazardError(); !errors.Is(err, sim.ErrHazard) {
				t.Fatalf("unmapping %v under a pending write: HazardError() = %v, want %v", m.VA, err, sim.ErrHazard)
			}
		})
	}
}

// ForgetStream of a stream that captures a CUDA graph is refused (ErrStreamCapturing) and changes nothing:
// no event is recorded on the capturing stream (it would become a node of the graph), the stream stays
// known, the free deferred by the capture still waits for it; once the capture ended the stream can be
// forgotten, and the deferred free then waits for its last event.
func TestForgetStreamRefusedWhileItCaptures(t *testing.T) {
	for _, policy := range []string{PolicyCaching, PolicyGMLake} {
		t.Run(policy, func(t *testing.T) {
			a, dev := newTest(t, policy, 1<<30, false /* sync */)
			p, s := busyOnNewStream(t, a, dev, 8*MiB)
			if err := a.SetCapturing(s, true); err != nil {
				t.Fatal(err)
			}
			mustFree(t, a, p) // deferred: no event may be recorded during the capture
			before, records := a.Snapshot(), dev.Counts()[vmm.CallRecordEvent]
			if err := a.ForgetStream(s); !errors.Is(err, ErrStreamCapturing) {
				t.Fatalf("ForgetStream of a capturing stream = %v, want %v", err, ErrStreamCapturing)
			}
			if got := dev.Counts()[vmm.CallRecordEvent]; got != records {
				t.Fatalf("the refused ForgetStream recorded %d events on the capturing stream", got-records)
			}
			if after := a.Snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("the refused ForgetStream changed the allocator:\nbefore %+v\nafter  %+v", before, after)
			}
			q := mustAlloc(t, a, MiB, s) // still known
			mustFree(t, a, q)
			if err := a.SetCapturing(s, false); err != nil {
				t.Fatal(err)
			}
			if err := a.ForgetStream(s); err != nil {
				t.Fatalf("ForgetStream after the capture ended: %v", err)
			}
			if r := mustAlloc(t, a, 8*MiB, vmm.DefaultStream); r == p {
				t.Fatalf("Alloc reused %v while the forgotten stream's work on it is pending", p)
			} else {
				mustFree(t, a, r)
			}
			dev.CompleteAll()
			if err := dev.DestroyStream(s); err != nil {
				t.Fatal(err)
			}
			closeClean(t, a, dev)
		})
	}
}

// CheckInvariants holds every driver event to one holder: an event both pooled and waited on (a pending
// wait), or both a stream's fence and pooled, is reported, so a bookkeeping slip that would record over an
// event still waited on, or destroy one twice at Close, shows at the step that made it.
func TestCheckInvariantsFindsAnEventHeldTwice(t *testing.T) {
	a, dev := newTest(t, PolicyGMLake, 4<<30, false /* sync */)
	p, _ := busyOnNewStream(t, a, dev, 8*MiB)
	mustFree(t, a, p) // a pending wait on the event recorded on the other stream
	if len(a.pend) == 0 || a.pend[0].ev == 0 {
		t.Fatalf("the free of a block recorded on a busy stream left no pending event wait: %+v", a.pend)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	a.evFree = append(a.evFree, a.pend[0].ev)
	err := a.CheckInvariants()
	if err == nil || !strings.Contains(err.Error(), "held twice") {
		t.Fatalf("CheckInvariants with event %d both pooled and waited on = %v, want an event held twice", a.pend[0].ev, err)
	}
	a.evFree = a.evFree[:len(a.evFree)-1]
	dev.CompleteAll()
	checkState(t, a, dev)
	closeClean(t, a, dev)
}
