package impl

import "github.com/gmlake/gmlake/vmm"

// PyTorch's memory statistics (c10::CachingDeviceAllocator::DeviceStats), kept by the engine itself so that
// torch.cuda.memory_stats() and friends report gmlake's real blocks. How gmlake's structures map onto
// PyTorch's meaning:
//
//   - Pools: index 0 is all, 1 PyTorch's small pool, 2 its large pool. A block is small when its request,
//     rounded to 512 B, is at most 1 MiB (kSmallSize), as in PyTorch; gmlake keeps small and large blocks in
//     separate segments (arenas) per stream, so every segment, chunk and block is wholly small or large.
//     Private pools (CUDA graphs, MemPool) count in small/large the same way, as PyTorch's do.
//   - allocation / allocated_bytes / requested_bytes: live allocations, their block bytes (rounded) and the
//     bytes asked for. A stitched block (sBlock) is one allocation of the large pool whose bytes are its
//     size, which equals the physical chunks it views: the pBlocks held under its chunks are not allocations.
//   - active / active_bytes: allocations not yet reusable: live, or freed and waiting for events of other
//     streams (Pending). The parts of a freed sBlock that wait for its stream before another stream may
//     reuse them count as neither active nor inactive (the sBlock itself is cached at once).
//   - inactive_split / inactive_split_bytes: free mapped pBlocks that share their segment with another
//     mapped block (PyTorch's is_split, unmapped stretches of arenas not counted as neighbours). Tracked by
//     the free sets: a block counts from its insertion into a free set until its removal.
//   - segment: a fixed segment, or a contiguous mapped run of an arena (PyTorch reports expandable segments
//     the same way in its snapshots). A cached sBlock's own range is a view, not a segment.
//   - reserved_bytes: physical bytes held (the chunks); views never count again.
//   - num_device_alloc / num_device_free: successful cuMemCreate / cuMemRelease calls.
//   - num_alloc_retries: allocations that released the cache and retried; num_ooms: allocations that
//     failed with out of memory. num_sync_all_streams is the C library's (the engine itself waits only
//     for the streams past a fence cap: Stats.NumSyncs).
//   - oversize_*: always zero, max_split_size -1 (gmlake has no max_split_size: it splits, or stitches).
//
// Invariant (INV-TORCHSTATS, TestTorchStatsMatchLiveSet): every current value equals what the live set and
// the segments give when counted afresh, peak >= current, and allocated - freed == current until
// ResetAccumulatedStats.

// Stat is one statistic: PyTorch's Stat (current, peak, allocated = sum of increases, freed = sum of
// decreases).
type Stat struct {
	Current, Peak, Allocated, Freed int64
}

// StatArray is a Stat per PyTorch StatType: [0] all, [1] small pool, [2] large pool.
type StatArray [3]Stat

// StatAll, StatSmall and StatLarge index a StatArray.
const (
	StatAll   = 0
	StatSmall = 1
	StatLarge = 2
)

// DeviceStats are PyTorch's DeviceStats, with the meaning given at the top of torchstats.go.
type DeviceStats struct {
	Allocation, Segment, Active, InactiveSplit                                     StatArray
	AllocatedBytes, ReservedBytes, ActiveBytes, InactiveSplitBytes, RequestedBytes StatArray

	NumAllocRetries, NumOOMs, NumSyncAllStreams, NumDeviceAlloc, NumDeviceFree int64

	OversizeAllocations, OversizeSegments Stat
	MaxSplitSize                          int64 // -1: none
}

// torchStatNames are PyTorch's names of the arrays, in arrays' order.
var torchStatNames = []string{"allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
	"active_bytes", "inactive_split_bytes", "requested_bytes"}

func (s *DeviceStats) arrays() []*StatArray {
	return []*StatArray{&s.Allocation, &s.Segment, &s.Active, &s.InactiveSplit, &s.AllocatedBytes,
		&s.ReservedBytes, &s.ActiveBytes, &s.InactiveSplitBytes, &s.RequestedBytes}
}

// stat is how the engine keeps a Stat, cheaply on the hot path: a decrease touches only cur; freed is
// derived (acc - (cur - base), base being cur at the last accumulated reset).
type stat struct {
	cur, peak, acc, base int64
}

// statArr is a stat per pool: [1] small, [2] large. [0] (all) keeps only its peak: its current, accumulated
// and base values are the sums of the pools' (get).
type statArr [3]stat

func (s *statArr) inc(p poolKind, n int64) {
	x := &s[1+int(p&1)]
	x.cur += n
	x.acc += n
	x.peak = max(x.peak, x.cur)
	s[0].peak = max(s[0].peak, s[1].cur+s[2].cur)
}

func (s *statArr) dec(p poolKind, n int64) { s[1+int(p&1)].cur -= n }

// get returns entry i with the sums filled in for all (i == 0).
func (s *statArr) get(i int) stat {
	if i != 0 {
		return s[i]
	}
	return stat{cur: s[1].cur + s[2].cur, peak: s[0].peak, acc: s[1].acc + s[2].acc, base: s[1].base + s[2].base}
}

func (s *statArr) out() StatArray {
	var o StatArray
	for i := range s {
		x := s.get(i)
		o[i] = Stat{Current: x.cur, Peak: x.peak, Allocated: x.acc, Freed: x.acc - (x.cur - x.base)}
	}
	return o
}

func (s *statArr) resetPeak() {
	s[1].peak, s[2].peak = s[1].cur, s[2].cur
	s[0].peak = s[1].cur + s[2].cur
}

func (s *statArr) resetAccumulated() {
	for i := 1; i < 3; i++ {
		s[i].acc, s[i].base = 0, s[i].cur
	}
}

// torchStats is the engine's record of DeviceStats. Active is not kept apart: an active allocation is live
// (allocation) or pending (a freed block waiting for events, counted in pending until it is reusable), and
// active only grows when an allocation does, so only its peak (while something is pending: otherwise the
// live peak covers it) and its accumulated-reset base need keeping.
type torchStats struct {
	allocation, segment, inactiveSplit                           statArr
	allocatedBytes, reservedBytes, inactiveSplitBytes, requested statArr
	pending, pendingBytes                                        [3]int64 // freed, not yet reusable
	activePeak, activeBytesPeak                                  [3]int64
	activeBase, activeBytesBase                                  [3]int64 // active current at the last accumulated reset
}

func (t *torchStats) all() []*statArr {
	return []*statArr{&t.allocation, &t.segment, &t.inactiveSplit, &t.allocatedBytes, &t.reservedBytes,
		&t.inactiveSplitBytes, &t.requested}
}

// activeOut derives active (count or bytes) from the live and pending values.
func activeOut(live *statArr, pending, peak, base *[3]int64) StatArray {
	var o StatArray
	for i := range o {
		l := live.get(i)
		cur := l.cur + pending[i]
		// Active rises only with allocations: while nothing is pending it equals the live value, whose
		// peak covers it; activePeak follows it while something is pending (noteLiveLocked).
		o[i] = Stat{Current: cur, Peak: max(peak[i], l.peak, cur), Allocated: l.acc, Freed: l.acc - (cur - base[i])}
	}
	return o
}

// torchBase holds the counters' values at the last ResetAccumulatedStats (the engine's own counters keep
// counting; DeviceStats reports them minus these).
type torchBase struct {
	retries, ooms, created, released uint64
}

// TorchStats returns PyTorch's statistics of the engine.
func (a *Allocator) TorchStats() DeviceStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.torchStatsLocked()
}

func (a *Allocator) torchStatsLocked() DeviceStats {
	t := &a.ts
	s := DeviceStats{
		Allocation: t.allocation.out(), Segment: t.segment.out(), InactiveSplit: t.inactiveSplit.out(),
		AllocatedBytes: t.allocatedBytes.out(), ReservedBytes: t.reservedBytes.out(),
		InactiveSplitBytes: t.inactiveSplitBytes.out(), RequestedBytes: t.requested.out(),
		Active:      activeOut(&t.allocation, &t.pending, &t.activePeak, &t.activeBase),
		ActiveBytes: activeOut(&t.allocatedBytes, &t.pendingBytes, &t.activeBytesPeak, &t.activeBytesBase),
	}
	s.NumAllocRetries = int64(a.st.NumCacheFlushes - a.tsBase.retries)
	s.NumOOMs = int64(a.st.NumOOMs - a.tsBase.ooms)
	s.NumDeviceAlloc = int64(a.d.Succeeded(vmm.CallCreate) - a.tsBase.created)
	s.NumDeviceFree = int64(a.d.Succeeded(vmm.CallRelease) - a.tsBase.released)
	s.MaxSplitSize = -1
	return s
}

// ResetPeakStats sets every peak to its current value (torch.cuda.reset_peak_memory_stats). The engine's
// own peaks (Stats) are reset too.
func (a *Allocator) ResetPeakStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &a.ts
	for _, s := range t.all() {
		s.resetPeak()
	}
	for i := range t.activePeak {
		t.activePeak[i] = t.allocation.get(i).cur + t.pending[i]
		t.activeBytesPeak[i] = t.allocatedBytes.get(i).cur + t.pendingBytes[i]
	}
	a.st.PeakAllocatedBytes, a.st.PeakRequestedBytes = a.st.AllocatedBytes, a.st.RequestedBytes
	a.st.PeakReservedBytes = a.st.ReservedBytes
}

// ResetAccumulatedStats zeroes every allocated and freed total and the num_* counters
// (torch.cuda.reset_accumulated_memory_stats). The engine's own counters (Stats) keep counting.
func (a *Allocator) ResetAccumulatedStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &a.ts
	for _, s := range t.all() {
		s.resetAccumulated()
	}
	for i := range t.activeBase {
		t.activeBase[i] = t.allocation.get(i).cur + t.pending[i]
		t.activeBytesBase[i] = t.allocatedBytes.get(i).cur + t.pendingBytes[i]
	}
	a.tsBase = torchBase{retries: a.st.NumCacheFlushes, ooms: a.st.NumOOMs, created: a.d.Succeeded(vmm.CallCreate),
		released: a.d.Succeeded(vmm.CallRelease)}
}

// newStreamStateLocked makes the state of stream s (in the default pool), its free sets counting inactive split
// blocks into a.ts.
func (a *Allocator) newStreamStateLocked(s vmm.Stream) *streamState {
	a.assertLocked()
	ss := &streamState{s: s}
	for i := range ss.free {
		ss.free[i].ts, ss.free[i].pool = &a.ts, poolKind(i)
	}
	return ss
}

// hasMappedNeighbour reports whether pBlock b shares its segment with another mapped block (PyTorch's
// is_split for a free block).
func hasMappedNeighbour(b *pBlock) bool {
	return (b.prev != nil && b.prev.mapped) || (b.next != nil && b.next.mapped)
}

// noteInserted and noteRemoved count inactive split blocks as they enter and leave a free set.
func (s *freeSet) noteInserted(b *pBlock) {
	if s.ts != nil && hasMappedNeighbour(b) {
		b.node.splitCounted = true
		s.ts.inactiveSplit.inc(s.pool, 1)
		s.ts.inactiveSplitBytes.inc(s.pool, int64(b.size))
	}
}

func (s *freeSet) noteRemoved(b *pBlock) {
	if b.node.splitCounted {
		b.node.splitCounted = false
		s.ts.inactiveSplit.dec(s.pool, 1)
		s.ts.inactiveSplitBytes.dec(s.pool, int64(b.size))
	}
}

// noteLiveLocked counts block b handed out for size bytes.
func (a *Allocator) noteLiveLocked(b *block, size vmm.Bytes) {
	t := &a.ts
	n := int64(b.size)
	t.allocation.inc(b.pool, 1)
	t.allocatedBytes.inc(b.pool, n)
	t.requested.inc(b.pool, int64(size))
	if t.pending[0] == 0 {
		return // active == live now: its peak is covered by max(activePeak, allocation's peak) (activeOut)
	}
	i := 1 + int(b.pool&1)
	al, ab := &t.allocation, &t.allocatedBytes
	t.activePeak[0] = max(t.activePeak[0], al[1].cur+al[2].cur+t.pending[0])
	t.activePeak[i] = max(t.activePeak[i], al[i].cur+t.pending[i])
	t.activeBytesPeak[0] = max(t.activeBytesPeak[0], ab[1].cur+ab[2].cur+t.pendingBytes[0])
	t.activeBytesPeak[i] = max(t.activeBytesPeak[i], ab[i].cur+t.pendingBytes[i])
}

// noteFreedLocked counts the free of live block b; if it goes Pending (events to wait for), it stays active
// until reusable (noteReusableLocked).
func (a *Allocator) noteFreedLocked(b *block) {
	t := &a.ts
	t.allocation.dec(b.pool, 1)
	t.allocatedBytes.dec(b.pool, int64(b.size))
	t.requested.dec(b.pool, int64(b.requested))
	if b.state == Pending {
		b.active = true
		i := 1 + int(b.pool&1)
		t.pending[0]++
		t.pending[i]++
		t.pendingBytes[0] += int64(b.size)
		t.pendingBytes[i] += int64(b.size)
	}
}

// noteReusableLocked counts the end of block b's activity, if it was a pending free.
func (a *Allocator) noteReusableLocked(b *block) {
	if b.active {
		b.active = false
		t := &a.ts
		i := 1 + int(b.pool&1)
		t.pending[0]--
		t.pending[i]--
		t.pendingBytes[0] -= int64(b.size)
		t.pendingBytes[i] -= int64(b.size)
	}
}

// noteReservedLocked counts n physical bytes of pool p gained (n > 0) or given back (n < 0).
func (a *Allocator) noteReservedLocked(p poolKind, n int64) {
	if n >= 0 {
		a.ts.reservedBytes.inc(p, n)
	} else {
		a.ts.reservedBytes.dec(p, -n)
	}
}

// noteSegmentsLocked counts segments of pool p gained (n > 0) or lost (n < 0).
func (a *Allocator) noteSegmentsLocked(p poolKind, n int64) {
	if n > 0 {
		a.ts.segment.inc(p, n)
	} else if n < 0 {
		a.ts.segment.dec(p, -n)
	}
}

// mappedRunDelta is how the number of mapped runs of b's arena changes when b (just mapped, or about to be
// unmapped) joins or leaves them: +1 for b, -1 for each mapped neighbour it joins.
func mappedRunDelta(b *pBlock) int64 {
	d := int64(1)
	if b.prev != nil && b.prev.mapped {
		d--
	}
	if b.next != nil && b.next.mapped {
		d--
	}
	return d
}

// torchStatsCountedLocked recounts the current values of DeviceStats from the live set and the segments, for
// the invariant checks (CheckInvariants, TestTorchStatsMatchLiveSet). Caller holds mu.
func (a *Allocator) torchStatsCountedLocked() DeviceStats {
	var s DeviceStats
	add := func(arr *StatArray, p poolKind, n int64) {
		arr[0].Current += n
		arr[1+p].Current += n
	}
	for _, b := range a.liveLocked() {
		add(&s.Allocation, b.pool, 1)
		add(&s.AllocatedBytes, b.pool, int64(b.size))
		add(&s.RequestedBytes, b.pool, int64(b.requested))
	}
	active := func(b *block) {
		if b.handedOut() || (b.state == Pending && (b.p == nil || b.p.xwait == nil)) {
			add(&s.Active, b.pool, 1)
			add(&s.ActiveBytes, b.pool, int64(b.size))
		}
	}
	for _, seg := range a.segs {
		add(&s.ReservedBytes, seg.pool, int64(seg.mapped))
		for b := seg.head; b != nil; b = b.next {
			if !b.mapped {
				continue
			}
			if b.prev == nil || !b.prev.mapped {
				add(&s.Segment, seg.pool, 1)
			}
			active(&b.block)
			if b.state == Free && hasMappedNeighbour(b) {
				add(&s.InactiveSplit, b.pool, 1)
				add(&s.InactiveSplitBytes, b.pool, int64(b.size))
			}
		}
	}
	for _, sb := range a.sblocks {
		active(&sb.block)
	}
	for _, o := range a.heldOrphans { // unmapped, their release failed: still reserved (releaseCachedChunkLocked)
		add(&s.ReservedBytes, o.pool, int64(o.size))
	}
	return s
}
