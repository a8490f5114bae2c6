package impl

// Private memory pools (PyTorch's MempoolId_t: CUDA graph pools, torch.cuda.MemPool) and stream capture.
//
// A pool has its own (stream, pool) states (streamState with mp set): its own free sets, arenas or
// segments, fences and cached stitched blocks. Invariant (INV-POOL, spec/SPEC.md): while a pool lives
// (use count > 0), its blocks serve only its own requests, no other pool's request stitches its chunks,
// and nothing releases its memory (EmptyCache, the out-of-memory release, the stitched-block cache limit):
// a CUDA graph replays at the addresses it captured, so they must stay mapped and unshared. Releasing the
// pool (use count 0) returns its free memory to the device at once, and the memory of its remaining
// allocations as they are freed; from then on nothing is allocated from it.
//
// Replays and the release: a graph's replays use its pool's memory on whatever stream they are launched
// on, blocks freed during the capture included, and the engine is told of none of it. So no fence of the
// pool's own streams covers them, and a replay still running when the graph is destroyed would touch
// memory the release unmapped (found on the GPU: PyTorch's test_repeat_graph_capture_cublas_workspace_memory
// hit an illegal address when other work delayed the replay; docs/results/cxx-s27.md). A released pool's
// memory therefore goes back only after a wait for the whole device that began after the release
// (waitDeviceLocked, once per release: mempool.drained), as PyTorch's cudaFree of a freed graph pool waits.
// While a stream captures no wait is allowed: the memory stays until the next call that may wait (a free
// of the pool's blocks, EmptyCache, the out-of-memory release, the end of the capture).
//
// Capture: while any stream captures (SetCapturing), the engine records and queries no event (illegal
// during capture) and synchronises nothing; the free of a block used on other streams (RecordStream) is
// deferred until no stream captures, as PyTorch's insert_events_deferred_until_no_capture.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// PoolID names a memory pool: PyTorch's MempoolId_t {id0, id1}. The zero value is the default pool.
type PoolID struct {
	A, B uint64
}

func (id PoolID) String() string { return fmt.Sprintf("(%d, %d)", id.A, id.B) }

// ErrUnknownPool is returned for a pool that was never created or is already released.
var ErrUnknownPool = errors.New("gmlake: unknown memory pool")

// mempool is a private pool. Guarded by Allocator.mu.
type mempool struct {
	id PoolID
	// uses is the use count (CreateOrIncrefPool minus ReleasePool). Invariant: uses > 0 iff !dead.
	uses int
	// dead: released; nothing is allocated from it, and its memory goes back to the device as it frees.
	// A dead pool is forgotten once it holds no memory.
	dead bool
	// drained: a wait for the whole device returned after the pool was released, so no replay of its graphs
	// still runs and its memory may go back under its own streams' fences alone. Invariant: drained implies
	// dead (a pool created again is not drained).
	drained bool
	streams map[vmm.Stream]*streamState
	order   []*streamState // streams in id order (deterministic stitching)
}

// defaultPool reports whether ss belongs to the default pool.
func (ss *streamState) defaultPool() bool { return ss != nil && ss.mp == nil }

// keepsMemory reports whether ss's memory must stay: it belongs to a private pool that lives, or to a
// released one whose graphs' replays may still run (not drained).
func (ss *streamState) keepsMemory() bool { return ss != nil && ss.mp != nil && !ss.mp.drained }

// samePool reports whether x and y are states of the same pool.
func samePool(x, y *streamState) bool { return x.mp == y.mp }

// CreateOrIncrefPool creates the private pool id with use count 1, or increments its use count, and
// returns the new count. A released pool whose memory is still held comes back to life with it. The default
// pool (the zero id) is not counted: ErrUnknownPool. With an error the count is 0 and nothing changed.
func (a *Allocator) CreateOrIncrefPool(id PoolID) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, ErrClosed
	}
	if id == (PoolID{}) {
		return 0, fmt.Errorf("%w %v: the default pool has no use count", ErrUnknownPool, id)
	}
	if a.p.name == PolicyGMLakePaper {
		return 0, fmt.Errorf("%w: policy %s does not support private pools (use gmlake, caching or expandable)",
			ErrBadConfig, a.p.name)
	}
	mp := a.pools[id]
	if mp == nil {
		if a.pools == nil {
			a.pools = map[PoolID]*mempool{}
		}
		mp = &mempool{id: id, streams: map[vmm.Stream]*streamState{}}
		a.pools[id] = mp
	}
	mp.uses++
	if mp.dead {
		mp.dead, mp.drained = false, false
		a.forgetEmptyPoolsLocked() // recounts deadPools: this one holds memory again as a living pool's
	}
	return mp.uses, nil
}

// ReleasePool decrements pool id's use count and returns the new count. At 0 the pool is released: if it
// holds memory, the engine waits for the whole device (its graphs' replays may still run: see above), then
// its free memory goes back to the device (what in-flight work still uses, once it completed: at the next
// EmptyCache or out-of-memory release), the memory of its live allocations as they are freed. With an error
// the count is 0 and nothing changed.
func (a *Allocator) ReleasePool(id PoolID) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, ErrClosed
	}
	mp := a.pools[id]
	if mp == nil || mp.dead {
		return 0, fmt.Errorf("%w %v: not created, or already released", ErrUnknownPool, id)
	}
	mp.uses--
	if mp.uses == 0 {
		mp.dead = true
		a.deadPools = true
		a.releaseDeadLocked()
	}
	return mp.uses, nil
}

// PoolUseCount returns pool id's use count (0: no such pool, or released).
func (a *Allocator) PoolUseCount(id PoolID) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if mp := a.pools[id]; mp != nil && !mp.dead {
		return mp.uses
	}
	return 0
}

// PoolLive returns the live allocations of pool id (the default pool for the zero id), in address order.
func (a *Allocator) PoolLive(id PoolID) []vmm.DevicePtr {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []vmm.DevicePtr
	for p, b := range a.liveLocked() {
		if blockHome(b).poolID() == id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// blockHome is the (stream, pool) state a block belongs to.
func blockHome(b *block) *streamState {
	if b.s != nil {
		return b.s.home
	}
	return b.p.seg.ss
}

// AllocPool is Alloc from pool id (the zero id: the default pool). The pool must have been created
// (CreateOrIncrefPool) and not released: ErrUnknownPool otherwise, and nothing changes. The pool is checked
// first, before the size and the stream: a request into no pool is refused as such whatever its size, so a
// size beyond the device (which the serving layer reports as out of memory, as PyTorch does) never hides it.
func (a *Allocator) AllocPool(size uint64, s vmm.Stream, id PoolID) (vmm.DevicePtr, error) {
	if id == (PoolID{}) {
		return a.Alloc(size, s)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, ErrClosed
	}
	mp := a.pools[id]
	if mp == nil || mp.dead {
		why := "it was not created, or was released and its memory returned"
		if mp != nil {
			why = "it was released (ReleasePool brought its use count to 0)"
		} else if a.p.paper {
			why = "policy gmlake-paper has no private pools"
		}
		return 0, fmt.Errorf("%w %v: %s; create it first (CreateOrIncrefPool)", ErrUnknownPool, id, why)
	}
	if size == 0 || vmm.Bytes(size) > a.total {
		return 0, a.sizeErr(size)
	}
	ss, err := a.poolStreamLocked(mp, s)
	if err != nil {
		return 0, err
	}
	b, err := a.allocLocked(vmm.Bytes(size), ss)
	if err != nil {
		return 0, err
	}
	return b.ptr, nil
}

// poolStreamLocked returns the state of stream s in pool mp, checking s the first time (not while s captures:
// SetCapturing made it known).
func (a *Allocator) poolStreamLocked(mp *mempool, s vmm.Stream) (*streamState, error) {
	a.assertLocked()
	if d := a.streams[s]; d != nil && d.gone {
		return nil, fmt.Errorf("%w %d: it was destroyed (ForgetStream)", ErrUnknownStream, s)
	}
	if ss := mp.streams[s]; ss != nil {
		return ss, nil
	}
	if !a.capturing[s] {
		if _, err := a.streamLocked(s); err != nil {
			return nil, err
		}
	}
	ss := a.newStreamStateLocked(s)
	ss.mp = mp
	mp.streams[s] = ss
	i, _ := slices.BinarySearchFunc(mp.order, s, func(x *streamState, s vmm.Stream) int { return cmp.Compare(x.s, s) })
	mp.order = slices.Insert(mp.order, i, ss)
	return ss, nil
}

// poolStreamsLocked lists the states of ss's pool in stream order (for cross-stream stitching).
func (a *Allocator) poolStreamsLocked(ss *streamState) []*streamState {
	if ss.mp == nil {
		return a.sortedStreamsLocked()
	}
	return ss.mp.order
}

// releaseDeadLocked returns the free memory of released pools (what is safe now) and forgets the released
// pools that hold nothing more.
func (a *Allocator) releaseDeadLocked() {
	a.assertLocked()
	if !a.deadPools {
		return
	}
	a.drainDeadLocked()
	for i := 0; i < len(a.sblocks); {
		sb := a.sblocks[i]
		if sb.state == Free && sb.home.mp != nil && sb.home.mp.drained && a.safeLocked(sb.home, sb.freeSeq) && a.stitchFreeLocked(sb) == nil {
			continue // stitchFreeLocked moved the last sBlock to i
		}
		i++
	}
	for _, seg := range slices.Clone(a.segs) {
		if seg.ss.mp == nil || !seg.ss.mp.drained {
			continue
		}
		if seg.arena {
			_ = a.trimArenaLocked(seg) // a failure leaves memory held: the next call tries again
		} else {
			_ = a.releaseSegmentIfFreeLocked(seg)
		}
	}
	a.forgetEmptyPoolsLocked()
}

// drainDeadLocked waits for the whole device (waitDeviceLocked) if a released pool that holds memory is not
// drained yet, and then marks every released pool drained: none of their graphs' replays still runs. A wait
// that cannot be made now (a stream captures, or it failed) leaves them as they are, their memory held.
func (a *Allocator) drainDeadLocked() {
	need := false
	var held map[*mempool]bool
	for _, mp := range a.pools {
		if mp.dead && !mp.drained {
			if held == nil {
				held = a.poolsHoldingLocked() // only when a released pool still waits (not on every free)
			}
			need = need || held[mp]
		}
	}
	if !need || !a.waitDeviceLocked() {
		return
	}
	for _, mp := range a.pools {
		if mp.dead {
			mp.drained = true
		}
	}
}

// poolsHoldingLocked returns the pools that hold a segment or a stitched block (nil: the default pool).
func (a *Allocator) poolsHoldingLocked() map[*mempool]bool {
	held := map[*mempool]bool{}
	for _, seg := range a.segs {
		held[seg.ss.mp] = true
	}
	for _, sb := range a.sblocks {
		held[sb.home.mp] = true
	}
	return held
}

// forgetEmptyPoolsLocked drops released pools that hold no segment and no stitched block.
func (a *Allocator) forgetEmptyPoolsLocked() {
	held := a.poolsHoldingLocked()
	a.deadPools = false
	for id, mp := range a.pools {
		if !mp.dead {
			continue
		}
		if held[mp] {
			a.deadPools = true
			continue
		}
		// The pool's (stream, pool) states go with it: their fences' events go back to the pool of free
		// events (a pending one may be recorded again or destroyed: Close destroys evFree), else they leak
		// (found by rapid: a pool's block freed on a stream with work pending, the pool released, the cache
		// emptied, Close; spec/FINDINGS.md F16).
		for _, ss := range mp.order {
			for _, f := range ss.fences {
				a.evFree = append(a.evFree, f.ev)
			}
			ss.fences = nil
		}
		delete(a.pools, id)
	}
}

// SetCapturing says that stream s begins (on) or ends (off) a CUDA graph capture. While any stream
// captures, the engine records and queries no event and the frees of blocks used on other streams wait;
// when the last capture ends, those frees proceed. s is not checked (querying a capturing stream is illegal):
// it becomes known as is. Errors: ErrClosed; driver errors recording the deferred frees' events (the frees
// stay deferred and are tried again by the next Alloc outside a capture, as PyTorch's malloc does, or the
// next SetCapturing or EmptyCache).
func (a *Allocator) SetCapturing(s vmm.Stream, on bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if on {
		if a.capturing == nil {
			a.capturing = map[vmm.Stream]bool{}
		}
		if !a.capturing[s] {
			a.capturing[s] = true
			a.nCapturing++
		}
		if a.streams[s] == nil {
			a.addStreamLocked(a.newStreamStateLocked(s))
		}
		return nil
	}
	if a.capturing[s] {
		delete(a.capturing, s)
		a.nCapturing--
	}
	err := a.flushDeferredLocked()
	if a.nCapturing == 0 {
		a.releaseDeadLocked() // a pool released during the capture could not wait for the device then
	}
	return err
}

// Capturing reports whether any stream captures.
func (a *Allocator) Capturing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nCapturing > 0
}

// flushDeferredLocked, once no stream captures, records the events of the frees deferred during capture.
func (a *Allocator) flushDeferredLocked() error {
	a.assertLocked()
	if a.nCapturing > 0 || len(a.deferred) == 0 {
		return nil
	}
	var first error
	keep := a.deferred[:0]
	for _, b := range a.deferred {
		b.state = Live // recordUsesLocked frees it as if now
		if err := a.recordUsesLocked(b); err != nil {
			b.state = Pending
			keep = append(keep, b)
			if first == nil {
				first = err
			}
			continue
		}
		if b.state != Pending { // every stream it was used on is gone: nothing to wait for
			a.freeBlockLocked(b)
		}
	}
	clear(a.deferred[len(keep):])
	a.deferred = keep
	return first
}

// goneDefaultLocked returns, for a private pool's state ss whose stream was forgotten (ForgetStream), the
// default pool's state of that stream, which holds the stream's last event; nil otherwise.
func (a *Allocator) goneDefaultLocked(ss *streamState) *streamState {
	if ss.mp == nil {
		return nil
	}
	if d := a.streams[ss.s]; d != nil && d.gone {
		return d
	}
	return nil
}
