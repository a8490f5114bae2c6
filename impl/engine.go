package impl

// The Allocator: a thin lock over a single-threaded, deterministic core. See doc.go for the design.

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

// streamState is one stream's pools. Guarded by Allocator.mu.
type streamState struct {
	s  vmm.Stream
	mp *mempool // the private pool whose blocks these are (pool.go); nil: the default pool
	// free holds the free, mapped pBlocks of s's segments by pool (freeSet states its invariant).
	free [2]freeSet
	// arenas (arena policies): the stream's growing segments per pool, in address order. Usually one; a
	// request that no arena can place (its unmapped tail too short) opens another, as PyTorch's
	// find_expandable_block does. Invariant: exactly the arenas among Allocator.segs whose ss is this state,
	// each in the slot of its pool.
	arenas [2][]*segment

	// Fences: events recorded on s to learn when the work submitted before a set of frees finished, oldest
	// first, each with the free counter when it was recorded.
	// Invariant: every block freed on s with freeSeq <= safeSeq has no outstanding work on s.
	// stuck, stuckRec (in the default pool's state of s): the poll (opMutex.poll) in which an event recorded
	// on s answered incomplete, and the earliest such record (Allocator.recs): in that poll no event recorded
	// on s at or after it is asked (its stream's work completes in order).
	stuck, stuckRec uint64
	// doneRec (in the default pool's state of s): the latest record (Allocator.recs) on s known complete (a
	// query answered so, or a wait for s): every event recorded on s no later has completed, unasked.
	doneRec uint64
	// A fence is recorded at a free that leaves a releasable unit (a whole free segment or chunk) unless the
	// newest outstanding fence already covers it or maxFences are outstanding, so memory freed while s was
	// idle is known safe even if s gets busy later; otherwise safe() records one when it needs to know.
	// Nothing consumes fences on the hot path, so the steady state records nothing.
	// Invariant: their seqs strictly increase (a fence is recorded only past the newest one) and never pass
	// Allocator.freeSeq, nor does safeSeq. Frees record at most maxFences; safe() may add one past them.
	fences  []fence
	safeSeq uint64
	// capped: the free counter at the latest free that no fence recorded at its time covers (0: none): made
	// while maxFences were outstanding (F6), or whose fence could not be recorded (F19). Invariant: capped <= Allocator.freeSeq. capped >
	// safeSeq means a lazy fence for it would also wait for work launched after it: the out-of-memory path
	// synchronises the stream instead, when the driver can (syncCappedLocked).
	capped uint64

	// gone: the caller said s is (about to be) destroyed (ForgetStream). Alloc and RecordStream on s are
	// ErrUnknownStream from then on; s's cached memory is released or stitched once lastEv completed.
	// lastEv is the event ForgetStream recorded on s, covering all the work s will ever run (0: none, or
	// retired). Invariant: !gone implies lastEv == 0; a gone stream is never Allocator.last.
	gone   bool
	lastEv vmm.Event
	// lastRec: lastEv's place among the engine's records (Allocator.recs).
	lastRec uint64
	// recheck: a driver call on s answered that s does not exist (destroyed without ForgetStream): the next
	// Alloc or RecordStream on s asks StreamQuery again. Invariant: a recheck stream is never Allocator.last.
	recheck bool
}

// pendingEv is an outstanding event and the blocks waiting on it. ev == 0 means "wait until the stream
// st's fence covers seq" (cross-stream sBlock parts), or with last set "wait until st's last event (a gone
// stream, ForgetStream) completed".
type pendingEv struct {
	ev   vmm.Event    // the recorded event (RecordStream's streams), or 0
	st   *streamState // ev == 0: the stream whose fence (or, with last, whose last event) is waited for
	seq  uint64       // ev == 0 && !last: the free stamp st's fences must cover
	last bool
	on   vmm.Stream // ev != 0: the stream ev was recorded on, and its place among the engine's records
	rec  uint64
	// blocks wait on this entry, each counting it in its events. ev != 0 or last: the one block freed
	// (pBlock or sBlock); ev == 0 && !last: the parts (pBlocks, xwait == st, xseq == seq) of one freed
	// sBlock, except parts taken back or recycled since (processEventsOnceLocked skips those).
	blocks []*block
}

// opMutex is Allocator.mu. Each acquisition is one op and starts one poll of the device's events (poll,
// read under the lock; a wait for a stream on the out-of-memory path starts another): within a poll an event
// that answered incomplete is not asked again, nor an event recorded after it on its stream, since nothing
// can have completed that a second cuEventQuery would learn (PyTorch's process_events asks each stream's
// events once, oldest first, and stops at the first incomplete one). INV-BUDGET judges it.
type opMutex struct {
	sync.Mutex
	poll uint64
}

// Lock takes the lock and starts a poll.
func (m *opMutex) Lock() {
	m.Mutex.Lock()
	m.poll++
}

// Allocator is the engine. Every exported method takes mu; the core below it is single-threaded and its
// decisions depend only on the requests, the driver's answers and event completion.
type Allocator struct {
	mu opMutex

	// Everything below is guarded by mu.
	d meteredDriver // the driver, counting every call the engine makes (Stats.DriverCalls); safe without mu
	// sync: the driver's own wait (vmm.StreamSyncer, impl/cudavmm), nil if it has none. Only the
	// out-of-memory path calls it (syncCappedLocked), never the hot path.
	sync vmm.StreamSyncer
	// devSync: the driver's wait for the whole device (vmm.DeviceSyncer, impl/cudavmm), nil if it has none.
	// Only a released pool's memory waits for it (waitDeviceLocked), once per release.
	devSync vmm.DeviceSyncer
	// capq: the driver's stream check that is legal during a capture (vmm.CaptureQuerier), nil if none.
	capq   vmm.CaptureQuerier
	p      params
	mut    Mutation
	gran   vmm.Bytes // the driver's granularity: a power of two, a multiple of 512 B; fixed at New
	total  vmm.Bytes // device capacity (MemInfo total at New)
	closed bool

	streams map[vmm.Stream]*streamState
	// order lists the values of streams sorted by stream id (deterministic iteration without sorting on
	// the allocation path: a stitch looks at every stream). Invariant: the same set as streams.
	order []*streamState
	// last is the last stream used (hot path cache). Invariant: nil or one of streams, neither gone nor
	// recheck.
	last *streamState
	// ptrs maps the start of every block that was handed out and still exists (live, pending or cached) to
	// that block. The allocation at p is live iff b := ptrs[p] is handedOut (Live, not held by an sBlock); any
	// other entry means p was freed (a second Free is a double free). A pointer whose block merged into a
	// neighbour or was released has no entry (a Free of it is ErrUnknownPointer or ErrInteriorPtr).
	// Invariant: ptrs[p] == b implies b.ptr == p and b is not recycled, so len(ptrs) <= the blocks in use:
	// host memory is bounded by the live and cached blocks, not by the pointers ever handed out.
	ptrs ptrTable
	segs []*segment // every segment, sorted by base, disjoint
	// sblocks lists every sBlock, live, pending or cached. Invariant: sblocks[i].sIndex == i.
	sblocks []*sBlock
	pend    []pendingEv
	evFree  []vmm.Event // pooled events: created, not recorded anywhere that is still waited on
	spare   []*pBlock   // recycled pBlock structs (recycleLocked). Invariant: none is in use (zero but p).
	ready   []*block    // scratch: blocks whose waits all completed (processEventsOnceLocked); empty between calls
	// staleWaits: pend may hold a cross-stream entry no part waits on any more (a part taken back by its own
	// stream, or recycled) since the last pass of processEventsOnceLocked, which drops every such entry.
	// Invariant: false implies each cross-stream entry of pend (ev == 0, !last) lists a part that waitsOn it
	// (check: the entries must not pile up, one per Free of an sBlock its stream takes back at once).
	staleWaits bool
	// spareParts recycles the blocks slices of dropped cross-stream entries of pend (freeSBlockLocked takes
	// one per Free of an sBlock over another stream's memory). Invariant: each is empty, its array cleared.
	spareParts [][]*block
	scratch    []*pBlock // scratch: free blocks of an arena to trim (trimArenaLocked); empty between calls
	cands      []*chunk  // scratch: stitch candidates (stitchableLocked); empty between calls, nil to its capacity
	growths    []growth  // scratch: an arena run's prepared mappings (arenaAllocLocked); empty between calls, zero to its capacity

	ts     torchStats // PyTorch's statistics (torchstats.go)
	tsBase torchBase
	// Segment events (torchsnap.go): recorded while segEvOn; segEvPending (read without the lock) says
	// segEv is not empty.
	segEvOn      bool
	segEv        []SegmentEvent
	segEvPending atomic.Bool

	// Private pools and capture (pool.go).
	pools      map[PoolID]*mempool
	deadPools  bool                // some released pool still holds memory (and is in pools: CheckInvariants)
	capturing  map[vmm.Stream]bool // streams capturing a CUDA graph
	nCapturing int                 // Invariant: len(capturing)
	// deferred are the frees of blocks used on other streams, waiting for the captures to end (or, their
	// event's recording having failed then, for the next processEventsLocked). Invariant: each is Pending
	// with events == 0 (no event recorded yet).
	deferred []*block

	// nextID numbers segments and blocks. Invariant: above every id in use.
	nextID uint64
	// freeSeq counts frees; stamps blocks (freeSeq) for the fences. Invariant: no block, chunk or fence
	// carries a later stamp.
	freeSeq uint64
	clock   uint64    // LRU clock for sBlocks. Invariant: no sBlock's lastUse is later.
	fused   vmm.Bytes // gmlake-paper: bytes stitched and not collected since (GMLake's total_fuse_size, autoGC)
	evSeq   uint64    // gmlake-paper: block events recorded so far (GMLake's event_id); no ev.id is later
	// recs counts the fences, RecordStream and last events recorded (their place: fence.rec, pendingEv.rec,
	// streamState.lastRec).
	// Invariant: no fence or pending event carries a later place.
	recs uint64
	st   Stats

	// Undo steps that failed even after retries: kept so that a later release of the cache and Close try
	// again, and so that Snapshot and the statistics tell the truth.
	// orphanMaps: mappings a failed step could not unmap (undoMapLocked). Invariant: each is counted in
	// MappedBytes and in its handle's references (Snapshot's ChunkInfo.Refs) while it stands (F17).
	orphanMaps []Mapping
	orphanResv []vmm.Range
	// heldOrphans are handles the engine gave up whose memory the device still holds: cached chunks, already
	// unmapped, whose release failed past the retries while the cache was given back (EmptyCache, the
	// out-of-memory path; spec/FINDINGS.md F11), and new handles of a failed step whose release failed or
	// that an orphan mapping still maps (undoReleaseLocked, F17). Invariant: each is counted in ReservedBytes
	// and its pool's reserved_bytes (the device still holds it: INV-STATS; PyTorch's unmap_block and
	// release_block lower reserved_bytes only after the release) until a later release of the cache or Close
	// releases it.
	heldOrphans []heldOrphan
}

// heldOrphan is one handle of Allocator.heldOrphans: its size and the pool whose reserved bytes count it.
type heldOrphan struct {
	h    vmm.Handle
	size vmm.Bytes
	pool poolKind
}

// assertLocked panics unless mu is held. A sync.Mutex does not know its holder, so this catches a method
// that forgot to lock, not one called from another goroutine's critical section. The core's entry points
// (the ...Locked methods the exported ones call) start with it; on a held mutex TryLock is one load.
func (a *Allocator) assertLocked() {
	if a.mu.TryLock() {
		a.mu.Unlock()
		panicf("Allocator.mu must be held: a ...Locked method was called without the lock")
	}
}

// New makes an allocator on driver d with the policy and knobs of cfg. It asks the driver for the
// granularity and the device's capacity.
func New(d vmm.Driver, cfg Config) (*Allocator, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrBadConfig)
	}
	if err := checkSeeded(cfg.TestOnlyMutations); err != nil {
		return nil, err
	}
	a := &Allocator{d: meteredDriver{wrap.NewCounter(d)}, mut: cfg.TestOnlyMutations}
	a.sync, _ = d.(vmm.StreamSyncer)
	a.devSync, _ = vmm.Find[vmm.DeviceSyncer](d)
	a.capq, _ = vmm.Find[vmm.CaptureQuerier](d)
	a.gran = a.d.Granularity()
	if a.gran == 0 || a.gran&(a.gran-1) != 0 || a.gran%minBlockSize != 0 {
		return nil, fmt.Errorf("%w: driver granularity %d is not a power of two multiple of 512", ErrBadConfig, a.gran)
	}
	_, total, err := a.d.MemInfo()
	if err != nil {
		return nil, fmt.Errorf("gmlake: asking the device its size: %w", err)
	}
	a.total = total
	p, err := resolve(cfg, a.gran, total)
	if err != nil {
		return nil, err
	}
	a.p = p
	a.streams = make(map[vmm.Stream]*streamState, 8)
	return a, nil
}

// Policy returns the policy's name.
func (a *Allocator) Policy() string { return a.p.name }

// Granularity returns the driver's granularity.
func (a *Allocator) Granularity() uint64 { return uint64(a.gran) }

// Alloc returns a pointer to at least size bytes usable on stream s. Size 0 and sizes beyond the device's
// capacity are ErrInvalidSize; an unknown stream is ErrUnknownStream; when memory runs out even after
// stitching and releasing the cache the error is an *OOMError (errors.Is(err, vmm.ErrOutOfMemory)). A
// failed Alloc hands nothing out.
func (a *Allocator) Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, err := a.allocDefaultLocked(size, s)
	if err != nil {
		return 0, err
	}
	return b.ptr, nil
}

// allocDefaultLocked is Alloc under the caller's hold of the lock.
func (a *Allocator) allocDefaultLocked(size uint64, s vmm.Stream) (*block, error) {
	if a.closed {
		return nil, ErrClosed
	}
	if size == 0 || vmm.Bytes(size) > a.total {
		return nil, a.sizeErr(size)
	}
	ss := a.last
	if ss == nil || ss.s != s {
		var err error
		if ss, err = a.streamLocked(s); err != nil {
			return nil, err
		}
	}
	return a.allocLocked(vmm.Bytes(size), ss)
}

func (a *Allocator) sizeErr(size uint64) error {
	if size == 0 {
		return fmt.Errorf("%w: 0 bytes (ask for at least 1 byte)", ErrInvalidSize)
	}
	return fmt.Errorf("%w: %d bytes is more than the device's %s", ErrInvalidSize, size, a.total)
}

// Free returns the allocation at p. The memory is reusable at once on the allocation stream (stream order),
// and on other streams recorded with RecordStream once their events complete. Errors (nothing changes):
// ErrUnknownPointer, ErrInteriorPtr, ErrDoubleFree, ErrClosed, or a driver error recording an event.
func (a *Allocator) Free(p vmm.DevicePtr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	b := a.liveAtLocked(p)
	if b == nil {
		return a.badPtrLocked(p, a.ptrs.get(p))
	}
	return a.freeLocked(b)
}

// RecordStream notes that the allocation at p is also used on stream s: after Free, the block is reused only
// once the work submitted to s before the Free has completed.
func (a *Allocator) RecordStream(p vmm.DevicePtr, s vmm.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	b := a.liveAtLocked(p)
	if b == nil {
		return a.badPtrLocked(p, a.ptrs.get(p))
	}
	if _, err := a.streamLocked(s); err != nil {
		return err
	}
	if s == b.stream || slices.Contains(b.uses, s) {
		return nil
	}
	b.uses = append(b.uses, s)
	return nil
}

// EmptyCache returns every free cached byte it can to the device: cached sBlocks are torn down, free
// segments released, free chunks of arenas unmapped. Memory still used by in-flight work (events not
// completed) stays. It returns the first driver error met; the allocator stays consistent.
func (a *Allocator) EmptyCache() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if a.p.paper {
		return a.paperEmptyCacheLocked()
	}
	return a.releaseCachedLocked()
}

// Stats returns the counters.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.st
	s.DriverCalls = a.d.Counts()
	return s
}

// streamLocked returns the state of stream s, validating s with StreamQuery the first time it is seen (and
// again after a driver call said s does not exist). A stream forgotten with ForgetStream is ErrUnknownStream.
func (a *Allocator) streamLocked(s vmm.Stream) (*streamState, error) {
	a.assertLocked()
	if ss := a.streams[s]; ss != nil {
		if ss.gone {
			return nil, fmt.Errorf("%w %d: it was destroyed (ForgetStream)", ErrUnknownStream, s)
		}
		if ss.recheck {
			if err := a.checkStreamLocked(s); err != nil {
				return nil, streamErr(s, err)
			}
			ss.recheck = false
		}
		a.last = ss
		return ss, nil
	}
	if err := a.checkStreamLocked(s); err != nil {
		return nil, streamErr(s, err)
	}
	ss := a.newStreamStateLocked(s)
	a.addStreamLocked(ss)
	a.last = ss
	return ss, nil
}

// checkStreamLocked asks the driver whether stream s exists: StreamQuery, or, while a stream captures, the
// driver's capture-safe check (vmm.CaptureQuerier) where it has one. A stream that joined a capture (it
// waited on a capturing stream's event, as PyTorch's side streams inside torch.cuda.graph do) is not known to
// capture (SetCapturing names only the capture's origin), and querying it would invalidate the capture
// (found on the GPU: PyTorch's test_graph_record_stream, record_stream on a new side stream during capture).
func (a *Allocator) checkStreamLocked(s vmm.Stream) error {
	if a.nCapturing > 0 && a.capq != nil {
		_, err := a.capq.StreamCapturing(s)
		return err
	}
	_, err := a.d.StreamQuery(s)
	return err
}

func streamErr(s vmm.Stream, err error) error {
	if errors.Is(err, vmm.ErrInvalidHandle) {
		return fmt.Errorf("%w %d: it does not exist: create it first, and do not use it after destroying it (%v)", ErrUnknownStream, s, err)
	}
	return fmt.Errorf("gmlake: checking stream %d: %w", s, err)
}

// ForgetStream tells the allocator that stream s is about to be destroyed; call it before cuStreamDestroy.
// It records a last event on s covering all the work s will ever run: blocks used on s (allocated there,
// or recorded with RecordStream) are reused elsewhere, stitched or released only once that work completed,
// as CUDA completes a destroyed stream's pending work, or once a fence recorded on s before it, at or after
// their free, completed (a block freed before later work was launched on s does not wait for that work). From then on Alloc and RecordStream on s are
// ErrUnknownStream; Free of blocks used on s works as before. The default stream cannot be forgotten
// (ErrUnknownStream). A stream destroyed without ForgetStream is noticed at the first driver call on it
// that fails; its claims end with it (the caller must have synchronized it), since nothing is left to wait
// on. A stream that captures a CUDA graph (SetCapturing) cannot be forgotten until its capture ends
// (ErrStreamCapturing): no event may be recorded on it, and destroying it would invalidate the capture.
// A failed call changes nothing.
func (a *Allocator) ForgetStream(s vmm.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if s == vmm.DefaultStream {
		return fmt.Errorf("%w %d: the default stream cannot be destroyed", ErrUnknownStream, s)
	}
	ss := a.streams[s]
	if ss != nil && ss.gone {
		return fmt.Errorf("%w %d: already forgotten", ErrUnknownStream, s)
	}
	if a.capturing[s] {
		return fmt.Errorf("%w: ForgetStream(%d): end the capture before destroying the stream", ErrStreamCapturing, s)
	}
	if ss == nil { // never used here: nothing to fence
		ss = a.newStreamStateLocked(s)
		ss.gone = true
		a.addStreamLocked(ss)
		return nil
	}
	e, err := a.getEventLocked()
	if err != nil {
		return fmt.Errorf("gmlake: forgetting stream %d: %w", s, err)
	}
	if err := a.d.RecordEvent(e, s); err != nil {
		a.evFree = append(a.evFree, e)
		if !errors.Is(err, vmm.ErrInvalidHandle) || !a.confirmDestroyedLocked(ss) {
			return fmt.Errorf("gmlake: forgetting stream %d: recording its last event: %w", s, err)
		}
		e = 0 // destroyed already: nothing left to wait on
	}
	if e != 0 {
		a.recs++
		ss.lastRec = a.recs
	}
	ss.gone, ss.lastEv, ss.recheck = true, e, false
	if a.last == ss {
		a.last = nil
	}
	return nil
}

// confirmDestroyedLocked asks StreamQuery whether ss still exists after a call on it said it does not; if it
// does not, the next use of ss checks again (recheck). It reports whether ss is destroyed.
func (a *Allocator) confirmDestroyedLocked(ss *streamState) bool {
	a.assertLocked()
	if _, err := a.d.StreamQuery(ss.s); !errors.Is(err, vmm.ErrInvalidHandle) {
		return false
	}
	ss.recheck = true
	if a.last == ss {
		a.last = nil
	}
	return true
}

// lastDoneLocked reports whether the last event of gone stream st completed (retiring it when it has).
func (a *Allocator) lastDoneLocked(st *streamState) bool {
	if st.lastEv == 0 {
		return true
	}
	if a.stuckLocked(st.s, st.lastRec) {
		return false // it, or an event recorded on st.s before it, answered incomplete in this poll already
	}
	if !a.knownDoneLocked(st.s, st.lastRec) {
		done, err := a.d.QueryEvent(st.lastEv)
		if err != nil || !done {
			a.markStuckLocked(st.s, st.lastRec)
			return false
		}
		a.markDoneLocked(st.s, st.lastRec)
	}
	a.evFree = append(a.evFree, st.lastEv)
	st.lastEv = 0
	return true
}

// addStreamLocked registers a new stream state in streams and order.
func (a *Allocator) addStreamLocked(ss *streamState) {
	a.assertLocked()
	a.streams[ss.s] = ss
	i := len(a.order) // streams usually come in increasing id order: append
	if i > 0 && a.order[i-1].s > ss.s {
		i, _ = slices.BinarySearchFunc(a.order, ss.s, func(x *streamState, s vmm.Stream) int { return cmp.Compare(x.s, s) })
	}
	a.order = slices.Insert(a.order, i, ss)
}

// sortedStreamsLocked lists the known streams in id order (deterministic iteration). The caller must not
// change the slice.
func (a *Allocator) sortedStreamsLocked() []*streamState {
	a.assertLocked()
	return a.order
}

// badPtrLocked explains why p cannot be freed: b is ptrs[p] (nil: never handed out; else freed since).
func (a *Allocator) badPtrLocked(p vmm.DevicePtr, b *block) error {
	a.assertLocked()
	if b != nil {
		return fmt.Errorf("%w: %v", ErrDoubleFree, p)
	}
	if lb := a.liveContainingLocked(p); lb != nil {
		return fmt.Errorf("%w: %v is %d bytes into the allocation at %v", ErrInteriorPtr, p, uint64(p-lb.ptr), lb.ptr)
	}
	return fmt.Errorf("%w: %v", ErrUnknownPointer, p)
}

// liveContainingLocked returns the live allocation whose range holds p, or nil. Slow path (errors only).
func (a *Allocator) liveContainingLocked(p vmm.DevicePtr) *block {
	a.assertLocked()
	for _, sb := range a.sblocks {
		if sb.state == Live && p >= sb.ptr && p < sb.end() {
			return &sb.block
		}
	}
	i, _ := slices.BinarySearchFunc(a.segs, p, func(s *segment, p vmm.DevicePtr) int {
		if at(s.base, s.size) <= p {
			return -1
		}
		if s.base > p {
			return 1
		}
		return 0
	})
	if i >= len(a.segs) || p < a.segs[i].base || p >= at(a.segs[i].base, a.segs[i].size) {
		return nil
	}
	for b := a.segs[i].head; b != nil; b = b.next {
		if p >= b.ptr && p < b.end() {
			if b.handedOut() {
				return &b.block
			}
			return nil
		}
	}
	return nil
}

// newPBlockLocked takes a pBlock struct from the spare list, with a fresh id; the caller sets the rest.
func (a *Allocator) newPBlockLocked() *pBlock {
	var b *pBlock
	if n := len(a.spare); n > 0 {
		b = a.spare[n-1]
		a.spare = a.spare[:n-1]
	} else {
		b = new(pBlock)
		b.p = b
	}
	a.nextID++
	b.id = a.nextID
	return b
}

// newSBlockLocked makes an sBlock struct with a fresh id, Free (the zero state); the caller sets the rest.
// sBlocks are few and made with driver calls: not recycled.
func (a *Allocator) newSBlockLocked() *sBlock {
	sb := new(sBlock)
	sb.s = sb
	a.nextID++
	sb.id = a.nextID
	return sb
}

// recycleLocked returns a pBlock struct to the spare list, dropping its pointer-table entry. The caller has
// unlinked it from everything.
func (a *Allocator) recycleLocked(b *pBlock) {
	a.forgetBlockLocked(&b.block)
	b.block = block{uses: b.uses[:0], p: b}
	b.mapped, b.seg, b.prev, b.next, b.heldBy = false, nil, nil, nil, nil
	if b.xwait != nil {
		a.staleWaits = true // its entry in pend waits for nothing now
	}
	b.xwait, b.xseq = nil, 0
	b.node = fsNode{}
	a.spare = append(a.spare, b)
}

// forgetBlockLocked drops b's pointer-table entry and its block event (gmlake-paper): b leaves the engine.
func (a *Allocator) forgetBlockLocked(b *block) {
	if a.ptrs.get(b.ptr) == b {
		a.ptrs.del(b.ptr)
	}
	if b.ev != nil {
		a.evDropLocked(b.ev)
		b.ev = nil
	}
}

// getEventLocked takes a pooled event or creates one.
func (a *Allocator) getEventLocked() (vmm.Event, error) {
	a.assertLocked()
	if n := len(a.evFree); n > 0 {
		e := a.evFree[n-1]
		a.evFree = a.evFree[:n-1]
		return e, nil
	}
	return a.d.CreateEvent()
}

// safeLocked reports whether work that used a block freed on st at seq has completed, recording a fence event on
// st when needed. Costs at most a RecordEvent and a QueryEvent; nothing on the hot path calls it.
func (a *Allocator) safeLocked(st *streamState, seq uint64) bool {
	if a.seeded(MutEarlyCrossStreamReuse) {
		return true
	}
	if a.nCapturing > 0 { // no event may be recorded or queried: only what is known already
		// A fence already retired covers the free, whether or not the stream is gone (F15's rule: an event
		// outlives its stream).
		return seq <= st.safeSeq
	}
	if st.gone {
		// Its fences stay good after the stream is destroyed (an event outlives its stream): a block freed
		// before the stream's last work was launched need not wait for that work.
		a.retireFencesLocked(st, seq)
		return seq <= st.safeSeq || a.lastDoneLocked(st)
	}
	if g := a.goneDefaultLocked(st); g != nil { // a private pool's state of a forgotten stream
		a.retireFencesLocked(st, seq) // its fences stay good too (F15)
		return seq <= st.safeSeq || a.lastDoneLocked(g)
	}
	if st.recheck { // a call said st does not exist: if it still does not, its claims ended with it
		_, err := a.d.StreamQuery(st.s)
		if errors.Is(err, vmm.ErrInvalidHandle) {
			return true
		}
		if err != nil {
			return false
		}
		st.recheck = false
	}
	for round := 0; round < 2; round++ {
		a.retireFencesLocked(st, seq)
		if seq <= st.safeSeq {
			return true
		}
		if n := len(st.fences); n > 0 && st.fences[n-1].seq >= seq {
			return false // a fence covering seq is outstanding: wait for it
		}
		if round > 0 || !a.recordFenceLocked(st) {
			return false
		}
	}
	return false
}

// retireFencesLocked retires st's completed fences, oldest first, until one covers seq (safeSeq reaches it) or
// one has not completed.
func (a *Allocator) retireFencesLocked(st *streamState, seq uint64) {
	for len(st.fences) > 0 && seq > st.safeSeq {
		f := st.fences[0]
		if a.stuckLocked(st.s, f.rec) {
			return // it, or an event recorded on st.s before it, answered incomplete in this poll already
		}
		if !a.knownDoneLocked(st.s, f.rec) {
			done, err := a.d.QueryEvent(f.ev)
			if err != nil || !done {
				a.markStuckLocked(st.s, f.rec)
				return
			}
			a.markDoneLocked(st.s, f.rec)
		}
		st.safeSeq = max(st.safeSeq, f.seq)
		a.evFree = append(a.evFree, f.ev)
		st.fences = append(st.fences[:0], st.fences[1:]...)
	}
}

// processEventsLocked retires completed events and frees the blocks that were waiting only on them. Freeing a
// block may queue new waits (the foreign parts of an sBlock); those are looked at in the same call. Like
// PyTorch's process_events it first records the events of the frees deferred during a capture whose
// recording failed when the capture ended (insert_events_deferred_until_no_capture); a failure leaves them
// deferred for the next call.
//
// An Allocation on stream ss passes ss as by: the parts of the sBlocks freed on ss's stream (in any pool),
// which wait only for that stream's work, are left waiting. ss may take them back at once (stream order: reuseSBlockLocked, stitchableLocked), and
// resolving them would record and query a fence on ss in every Alloc of a stream that reuses an sBlock over
// another stream's memory (INV-BUDGET rule 3); another stream's Alloc, or a release, resolves them. nil
// resolves every wait.
func (a *Allocator) processEventsLocked(by *streamState) {
	if a.nCapturing > 0 {
		return // no event may be recorded or queried while a stream captures
	}
	if len(a.deferred) > 0 {
		_ = a.flushDeferredLocked() // what failed stays deferred: the next Alloc, SetCapturing or EmptyCache tries again
	}
	for pass := 0; pass < 4 && len(a.pend) > 0; pass++ {
		if !a.processEventsOnceLocked(by) {
			return
		}
	}
}

// processEventsOnceLocked is one pass over the pending events, leaving by's own parts' waits (processEventsLocked);
// it reports whether it queued new waits.
func (a *Allocator) processEventsOnceLocked(by *streamState) bool {
	ready := a.ready[:0]
	j := 0
	for _, pe := range a.pend {
		var done bool
		switch {
		case pe.ev != 0:
			// pend holds each stream's events in record order: past the first incomplete one of a stream,
			// the later ones cannot have completed.
			if a.stuckLocked(pe.on, pe.rec) {
				break
			}
			if a.knownDoneLocked(pe.on, pe.rec) {
				done = true
				break
			}
			d, err := a.d.QueryEvent(pe.ev)
			done = err == nil && d
			if !done {
				a.markStuckLocked(pe.on, pe.rec)
			} else {
				a.markDoneLocked(pe.on, pe.rec)
			}
		case pe.last:
			done = a.lastDoneLocked(pe.st)
		case !pe.partWaits():
			// Parts taken back by their own stream, or recycled, wait no more: an entry no part waits on is
			// dropped without asking the device (INV-BUDGET: nothing waits for the answer). by's own entries
			// too: kept, they would pile up, one per Free of an sBlock its stream takes back at once.
			done = true
		case by != nil && pe.st.s == by.s:
			// by's stream may take these parts back at once (a private pool's state of the same stream cannot
			// use them at all): no fence is owed for them now.
		default:
			done = a.safeLocked(pe.st, pe.seq)
		}
		if !done {
			a.pend[j] = pe
			j++
			continue
		}
		if pe.ev != 0 {
			a.evFree = append(a.evFree, pe.ev)
		}
		for _, b := range pe.blocks {
			if pe.ev == 0 && !pe.last {
				pb := b.p // a part of another stream's sBlock
				if !waitsOn(pb, pe) {
					continue // taken back by its own stream meanwhile (holdPartsLocked), or recycled since
				}
				// Never used on its own stream, so safe there at once.
				pb.freeSeq, pb.stamped = 0, true
				pb.xwait = nil
			}
			b.events--
			if b.events == 0 {
				ready = append(ready, b)
			}
		}
		if pe.ev == 0 && !pe.last {
			clear(pe.blocks)
			a.spareParts = append(a.spareParts, pe.blocks[:0])
		}
	}
	clear(a.pend[j:])
	a.pend = a.pend[:j]
	a.staleWaits = false
	for i, b := range ready {
		ready[i] = nil
		a.freeBlockLocked(b)
	}
	a.ready = ready[:0]
	return len(a.pend) > j
}

// stuckLocked reports whether an event recorded on stream s at place rec (Allocator.recs) cannot have
// completed: in this poll an event recorded on s no later answered incomplete.
func (a *Allocator) stuckLocked(s vmm.Stream, rec uint64) bool {
	d := a.streams[s]
	return d != nil && d.stuck == a.mu.poll && rec >= d.stuckRec
}

// markStuckLocked notes that the event recorded on s at place rec answered incomplete in this poll.
func (a *Allocator) markStuckLocked(s vmm.Stream, rec uint64) {
	if d := a.streams[s]; d != nil && (d.stuck != a.mu.poll || rec < d.stuckRec) {
		d.stuck, d.stuckRec = a.mu.poll, rec
	}
}

// knownDoneLocked reports whether the event recorded on s at place rec is known complete: an event recorded
// on s no earlier answered complete, or a wait for s came after it.
func (a *Allocator) knownDoneLocked(s vmm.Stream, rec uint64) bool {
	d := a.streams[s]
	return d != nil && rec <= d.doneRec
}

// markDoneLocked notes that the event recorded on s at place rec completed.
func (a *Allocator) markDoneLocked(s vmm.Stream, rec uint64) {
	if d := a.streams[s]; d != nil && rec > d.doneRec {
		d.doneRec = rec
	}
}

// waitsOn reports whether pBlock pb, a part of another stream's freed sBlock, still waits on the fence entry pe.
// partWaits reports whether a part listed by cross-stream entry pe still waits on it.
func (pe pendingEv) partWaits() bool {
	return slices.ContainsFunc(pe.blocks, func(b *block) bool { return waitsOn(b.p, pe) })
}

func waitsOn(pb *pBlock, pe pendingEv) bool {
	return pb.xwait == pe.st && pb.xseq == pe.seq && pb.state == Pending
}

// freeLocked frees live block b (the caller checked it).
func (a *Allocator) freeLocked(b *block) error {
	a.assertLocked()
	if len(b.uses) > 0 {
		if a.nCapturing > 0 {
			b.state = Pending // no event may be recorded now: recordUsesLocked when the capture ends (pool.go)
			a.deferred = append(a.deferred, b)
		} else if err := a.recordUsesLocked(b); err != nil {
			return err
		}
	}
	a.st.RequestedBytes -= uint64(b.requested)
	a.st.AllocatedBytes -= a.allocCount(b)
	a.noteFreedLocked(b)
	a.st.NumLive--
	a.st.NumFrees++
	if a.p.paper && a.nCapturing == 0 {
		// GMLake's insert_free_event_into_alloc_stream, for a block waiting for other streams' events too:
		// its event is the last use on its own stream, which those events do not cover, and the
		// collection of cached sBlocks (paperDoneLocked) asks it alone.
		a.evRecordFreeLocked(b)
	}
	if b.state == Pending {
		return nil
	}
	dead := a.deadPools && blockHome(b).mp != nil && blockHome(b).mp.dead
	a.freeBlockLocked(b)
	if dead {
		a.releaseDeadLocked() // a released pool's memory returns as it frees
	}
	return nil
}

// recordUsesLocked records an event on each stream live block b was used on (RecordStream) and makes b Pending
// until they complete; b stays Live if no stream needs waiting for. On a driver error nothing changed.
func (a *Allocator) recordUsesLocked(b *block) error {
	start := len(a.pend)
	for _, s := range b.uses {
		st := a.streams[s] // RecordStream met s, so it is known
		if st.gone {
			if !a.lastDoneLocked(st) {
				a.pend = append(a.pend, pendingEv{st: st, last: true, blocks: []*block{b}})
			}
			continue
		}
		e, err := a.getEventLocked()
		if err == nil {
			if err = a.d.RecordEvent(e, s); err != nil {
				a.evFree = append(a.evFree, e)
			} else {
				a.recs++
			}
		}
		if err != nil && errors.Is(err, vmm.ErrInvalidHandle) && a.confirmDestroyedLocked(st) {
			continue // destroyed without ForgetStream: no work of it is left to wait on
		}
		if err != nil {
			for _, pe := range a.pend[start:] {
				if pe.ev != 0 {
					a.evFree = append(a.evFree, pe.ev)
				}
			}
			clear(a.pend[start:])
			a.pend = a.pend[:start]
			return fmt.Errorf("gmlake: free %v: recording an event on stream %d: %w", b.ptr, s, err)
		}
		a.pend = append(a.pend, pendingEv{ev: e, on: s, rec: a.recs, blocks: []*block{b}})
	}
	if n := len(a.pend) - start; n > 0 {
		b.events = n
		b.state = Pending
		// The allocation stream's last use came before this call: stamp the free now, so that a fence on
		// that stream recorded from here on covers it, whenever the recorded streams finish.
		b.freeSeq, b.stamped = a.nextFreeStampLocked(), true
		if ss := a.streams[b.stream]; ss != nil {
			a.noteFreeLocked(ss)
		}
	}
	return nil
}

// liveAtLocked returns the block of the live allocation that starts at p, as Alloc handed it out; nil when p is no
// such start (unknown, interior, freed, or a pBlock held by a live sBlock).
func (a *Allocator) liveAtLocked(p vmm.DevicePtr) *block {
	a.assertLocked()
	if b := a.ptrs.get(p); b != nil && b.ptr == p && b.handedOut() {
		return b
	}
	return nil
}

// nextFreeStampLocked counts one more free and returns its stamp (block.freeSeq): the fences compare stamps.
func (a *Allocator) nextFreeStampLocked() uint64 {
	a.freeSeq++
	return a.freeSeq
}

// liveLocked yields every live allocation, its start and its block, in no order: the entries of ptrs whose
// block is handed out (a freed or held block keeps its entry until it merges or is recycled).
func (a *Allocator) liveLocked() iter.Seq2[vmm.DevicePtr, *block] {
	return func(yield func(vmm.DevicePtr, *block) bool) {
		for p, b := range a.ptrs.all {
			if b.ptr == p && b.handedOut() && !yield(p, b) {
				return
			}
		}
	}
}

// handedOut reports whether b is a live allocation as Alloc returned it: Live, and not a pBlock held by a
// live sBlock.
func (b *block) handedOut() bool { return b.state == Live && (b.p == nil || b.p.heldBy == nil) }

// stampFreeLocked gives b, whose last use completed, the next free stamp, unless Free already stamped it (a
// Pending block: the allocation stream's last use came before Free, so the stamp of that moment holds).
func (a *Allocator) stampFreeLocked(b *block) {
	if !b.stamped {
		b.freeSeq = a.nextFreeStampLocked()
	}
	b.stamped = false
}

func (a *Allocator) allocCount(b *block) uint64 {
	if b.s != nil && a.seeded(MutStatsDoubleCount) {
		return 2 * uint64(b.size)
	}
	return uint64(b.size)
}

// freeBlockLocked makes a block whose last use completed reusable: a pBlock merges with free neighbours and
// joins its pool; an sBlock is cached and gives its parts back.
func (a *Allocator) freeBlockLocked(x *block) {
	a.noteReusableLocked(x)
	if x.s != nil {
		a.freeSBlockLocked(x.s)
		return
	}
	b := x.p
	b.state = Free
	b.heldBy = nil
	b.uses = b.uses[:0]
	b.events = 0
	a.stampFreeLocked(&b.block)
	if b.seg.arena {
		seg, lo := b.seg, b.segOff()
		// One pass (the hot path): the chunks from the first past lo while they start before b's end.
		for i := seg.chunkIndex(lo); i < seg.numChunks() && seg.chunks[i].off < lo+b.size; i++ {
			seg.chunks[i].freeSeq = max(seg.chunks[i].freeSeq, b.freeSeq)
		}
	}
	if !a.seeded(MutNoMerge) {
		b = a.mergeFreeLocked(b)
	}
	ss := b.seg.ss
	ss.free[b.pool].insert(b)
	if len(ss.fences) < maxFences {
		if a.releasableLocked(b) || onlyPendingBesides(b) {
			a.noteFreeLocked(ss)
		}
	} else {
		ss.capped = a.freeSeq // one store: the hot path stays free of driver calls (F6)
	}
}

// onlyPendingBesides reports whether b's fixed segment (in an arena: one of the chunks under b) holds no live
// block, only free and pending ones: it becomes releasable once those events complete, and a fence recorded
// only then would also wait for the stream's later work (a spurious out-of-memory found by the swarm checker:
// a block freed beside a pending neighbour stayed unreleasable while its stream kept working). In an arena
// each chunk under b counts alone: b may end in a chunk that only pending and free blocks share while the
// chunk it starts in holds a live block (found by the generator's fence template: the chunk b ends in,
// wholly free once its neighbour's event completed, waited for work launched after b's free).
func onlyPendingBesides(b *pBlock) bool {
	seg := b.seg
	if !seg.arena {
		return !liveWithin(seg, 0, seg.size)
	}
	// In an arena the unit is a chunk: look at the blocks that share each of b's chunks.
	for j := seg.chunkIndex(b.segOff()); j < seg.numChunks() && seg.chunks[j].off < b.segOff()+b.size; j++ {
		if !liveWithin(seg, seg.chunks[j].off, seg.chunks[j].off+seg.chunks[j].size) {
			return true
		}
	}
	return false
}

// liveWithin reports whether a live block of seg overlaps its bytes [lo, hi).
func liveWithin(seg *segment, lo, hi vmm.Bytes) bool {
	for x := seg.head; x != nil; x = x.next {
		if x.state == Live && x.segOff() < hi && x.segOff()+x.size > lo {
			return true
		}
	}
	return false
}

// releasableLocked reports whether free block b holds a unit that could be released or stitched: a whole fixed
// segment, or a whole chunk of an arena.
func (a *Allocator) releasableLocked(b *pBlock) bool {
	seg := b.seg
	if !seg.arena {
		return b.prev == nil && b.next == nil
	}
	lo := b.segOff()
	i := seg.chunkIndex(lo)
	if i < seg.numChunks() && seg.chunks[i].off < lo {
		i++
	}
	return i < seg.numChunks() && seg.chunks[i].off+seg.chunks[i].size <= lo+b.size
}

// maxFences bounds the outstanding fences of one stream.
const maxFences = 8

type fence struct {
	ev  vmm.Event
	seq uint64
	rec uint64 // its place among the engine's records (Allocator.recs)
}

// noteFreeLocked records a fence on ss after a free that left a releasable unit, if no outstanding fence covers it.
func (a *Allocator) noteFreeLocked(ss *streamState) {
	if n := len(ss.fences); n >= maxFences {
		ss.capped = a.freeSeq
		return
	} else if (n > 0 && ss.fences[n-1].seq == a.freeSeq) || ss.safeSeq == a.freeSeq {
		return
	}
	if !a.recordFenceLocked(ss) {
		// No fence of its time covers this free either (an event's creation or record failed, or a stream
		// captures): the out-of-memory path waits for the stream, as past the cap (F19).
		ss.capped = a.freeSeq
	}
}

// syncCappedLocked waits, with the driver's own wait (Allocator.sync), for each stream that has a free past
// its fence cap not yet known safe (streamState.capped), and so makes every free on it so far safe: its
// fences retire (their events back to the pool) and safeSeq reaches freeSeq in each of the stream's states
// (the default pools and every private pool's). Without it, the frees past the cap on a stream that was idle
// when they were made would wait for a lazy fence that also waits for the work launched after them: a
// spurious out of memory (spec/FINDINGS.md F6). PyTorch's release_cached_blocks waits too
// (synchronize_and_free_events); here only the streams that need it. Nothing happens while a stream
// captures (no stream may be synchronised then), on a driver without a wait, or for a gone stream (its last
// event covers it). A failed wait leaves the stream as it was. It reports whether any stream was waited for,
// and then retires what completed (processEventsLocked).
func (a *Allocator) syncCappedLocked() bool {
	if a.sync == nil || a.nCapturing > 0 {
		return false
	}
	needs := func(ss *streamState) bool {
		return ss != nil && ss.capped > ss.safeSeq && !ss.gone && a.goneDefaultLocked(ss) == nil
	}
	synced := false
	// a.order is every stream in id order, and every private pool's state is of one of them (CheckInvariants):
	// the waits come in stream order, whatever the pools map's.
	for _, d := range a.order {
		s, need := d.s, needs(d)
		for _, mp := range a.pools {
			need = need || needs(mp.streams[s])
		}
		if !need {
			continue
		}
		if err := a.sync.Synchronize(s); err != nil {
			continue // a failed wait proves nothing: its frees stay as they were
		}
		synced = true
		a.st.NumSyncs++
		a.settleStreamLocked(d)
	}
	if synced {
		a.processEventsLocked(nil)
	}
	return synced
}

// settleStreamLocked records that a wait for stream d.s just returned: every free on it so far is safe. Its
// fences retire (their events back to the pool) and safeSeq reaches freeSeq in each of the stream's states
// (the default pool's and every private pool's).
func (a *Allocator) settleStreamLocked(d *streamState) {
	a.mu.poll++ // the wait made the streams progress: their events may be asked again
	a.markDoneLocked(d.s, a.recs)
	settle := func(ss *streamState) {
		if ss == nil {
			return
		}
		for _, f := range ss.fences {
			a.evFree = append(a.evFree, f.ev)
		}
		ss.fences = ss.fences[:0]
		ss.safeSeq = a.freeSeq
	}
	settle(d)
	for _, mp := range a.pools {
		settle(mp.streams[d.s])
	}
}

// waitDeviceLocked waits for all work submitted so far on every stream, those the engine never met
// included, and reports whether it did: with the driver's device-wide wait (vmm.DeviceSyncer), else with a
// wait for each stream the engine knows (vmm.StreamSyncer; work on a stream it never met is then not waited
// for), else, on a driver that can wait for nothing (the simulated device: its work completes on the test's
// clock), it waits for nothing and reports true. Not while a stream captures (no stream may be
// synchronised then) and not after a failed wait: false, and nothing changed. Never on the hot path.
func (a *Allocator) waitDeviceLocked() bool {
	a.assertLocked()
	if a.nCapturing > 0 {
		return false
	}
	switch {
	case a.devSync != nil:
		if a.devSync.SynchronizeDevice() != nil {
			return false
		}
	case a.sync != nil:
		for _, d := range a.order {
			if d.gone || a.goneDefaultLocked(d) != nil {
				continue // its last event covers it
			}
			if a.sync.Synchronize(d.s) != nil {
				return false // what was waited for is not recorded: the next wait waits again
			}
		}
	default:
		return true
	}
	for _, d := range a.order {
		if !d.gone {
			a.settleStreamLocked(d)
		}
	}
	a.processEventsLocked(nil)
	return true
}

// recordFenceLocked records a fence on ss now, covering every free so far. Failures are ignored: safe() records
// one when needed. It reports whether it recorded.
func (a *Allocator) recordFenceLocked(ss *streamState) bool {
	if ss.gone || a.nCapturing > 0 || a.goneDefaultLocked(ss) != nil {
		return false
	}
	e, err := a.getEventLocked()
	if err != nil {
		return false
	}
	if err := a.d.RecordEvent(e, ss.s); err != nil {
		a.evFree = append(a.evFree, e)
		return false
	}
	a.recs++
	ss.fences = append(ss.fences, fence{ev: e, seq: a.freeSeq, rec: a.recs})
	return true
}

// mergeFreeLocked merges b (free, not in a set) with its free neighbours of the same mappedness; it returns the
// surviving block, not in a set.
func (a *Allocator) mergeFreeLocked(b *pBlock) *pBlock {
	seg := b.seg
	if p := b.prev; p != nil && p.state == Free && p.mapped == b.mapped {
		if p.node.inSet {
			seg.ss.free[p.pool].remove(p)
		}
		if !p.mapped {
			seg.dropUnmapped(p)
		}
		// b now starts at p.ptr: its old start is no block's; p's entry (if any) passes to b.
		if a.ptrs.get(b.ptr) == &b.block {
			a.ptrs.del(b.ptr)
		}
		b.ptr = p.ptr
		if a.ptrs.get(p.ptr) == &p.block {
			a.ptrs.set(p.ptr, &b.block)
		}
		b.size += p.size
		b.prev = p.prev
		if b.prev != nil {
			b.prev.next = b
		} else {
			seg.head = b
		}
		b.freeSeq = max(b.freeSeq, p.freeSeq)
		evKeepNewer(b, p)
		if seg.hint == p {
			seg.hint = b
		}
		a.recycleLocked(p)
	}
	if n := b.next; n != nil && n.state == Free && n.mapped == b.mapped {
		if n.node.inSet {
			seg.ss.free[n.pool].remove(n)
		}
		if !n.mapped {
			seg.dropUnmapped(n)
		}
		b.size += n.size
		b.next = n.next
		if b.next != nil {
			b.next.prev = b
		}
		b.freeSeq = max(b.freeSeq, n.freeSeq)
		evKeepNewer(b, n)
		if seg.hint == n {
			seg.hint = b
		}
		a.recycleLocked(n)
	}
	if !b.mapped {
		seg.addUnmapped(b)
	}
	return b
}

// splitLocked cuts b (not in a set) to rs bytes; the rest becomes a free block in b's pool.
func (a *Allocator) splitLocked(b *pBlock, rs vmm.Bytes) {
	r := a.newPBlockLocked()
	r.state, r.mapped = Free, true
	r.ptr, r.size = at(b.ptr, rs), b.size-rs
	r.stream, r.pool, r.seg, r.freeSeq = b.stream, b.pool, b.seg, b.freeSeq
	r.ev = evRef(b.ev) // gmlake-paper: both halves share the block's event until one records its own
	r.prev, r.next = b, b.next
	if b.next != nil {
		b.next.prev = r
	}
	b.next = r
	b.size = rs
	b.seg.ss.free[r.pool].insert(r)
}

// markLiveLocked hands b out.
func (a *Allocator) markLiveLocked(b *block, size vmm.Bytes) {
	b.state = Live
	b.requested = size
	b.uses = b.uses[:0]
	a.ptrs.set(b.ptr, b)
	st := &a.st
	st.RequestedBytes += uint64(size)
	st.AllocatedBytes += a.allocCount(b)
	a.noteLiveLocked(b, size)
	st.NumLive++
	st.NumAllocs++
	if st.RequestedBytes > st.PeakRequestedBytes {
		st.PeakRequestedBytes = st.RequestedBytes
	}
	if st.AllocatedBytes > st.PeakAllocatedBytes {
		st.PeakAllocatedBytes = st.AllocatedBytes
	}
}

func (a *Allocator) addReservedLocked(p poolKind, n vmm.Bytes) {
	a.noteReservedLocked(p, int64(n))
	a.st.ReservedBytes += uint64(n)
	if a.st.ReservedBytes > a.st.PeakReservedBytes {
		a.st.PeakReservedBytes = a.st.ReservedBytes
	}
}

// addSegmentLocked registers seg in address order.
func (a *Allocator) addSegmentLocked(seg *segment) {
	i, _ := slices.BinarySearchFunc(a.segs, seg.base, func(s *segment, p vmm.DevicePtr) int { return cmp.Compare(s.base, p) })
	a.segs = slices.Insert(a.segs, i, seg)
}

func (a *Allocator) dropSegmentLocked(seg *segment) {
	i := slices.Index(a.segs, seg)
	if i < 0 {
		panicf("segment %d not registered", seg.id)
	}
	a.segs = slices.Delete(a.segs, i, i+1)
	if seg.arena {
		as := seg.ss.arenas[seg.pool]
		if j := slices.Index(as, seg); j >= 0 {
			seg.ss.arenas[seg.pool] = slices.Delete(as, j, j+1)
		}
	}
}

// panicf reports a broken internal invariant: a bug in the engine, never a user error.
func panicf(format string, args ...any) {
	panic(fmt.Sprintf("gmlake: internal invariant broken: "+format, args...))
}
