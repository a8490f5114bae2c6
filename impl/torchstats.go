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
//     failed with out of memory. num_sync_all_streams is the C library's (the engine synchronises nothing).
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

func (s *Stat) inc(n int64) {
	s.Current += n
	s.Allocated += n
	if s.Current > s.Peak {
		s.Peak = s.Current
	}
}

func (s *Stat) dec(n int64) {
	s.Current -= n
	s.Freed += n
}

// StatArray is a Stat per PyTorch StatType: [0] all, [1] small pool, [2] large pool.
type StatArray [3]Stat

// StatAll, StatSmall and StatLarge index a StatArray.
const (
	StatAll   = 0
	StatSmall = 1
	StatLarge = 2
)

func (s *StatArray) inc(p poolKind, n int64) {
	s[0].inc(n)
	s[1+p].inc(n)
}

func (s *StatArray) dec(p poolKind, n int64) {
	s[0].dec(n)
	s[1+p].dec(n)
}

// DeviceStats are PyTorch's DeviceStats, with the meaning given at the top of torchstats.go.
type DeviceStats struct {
	Allocation, Segment, Active, InactiveSplit                                     StatArray
	AllocatedBytes, ReservedBytes, ActiveBytes, InactiveSplitBytes, RequestedBytes StatArray

	NumAllocRetries, NumOOMs, NumSyncAllStreams, NumDeviceAlloc, NumDeviceFree int64

	OversizeAllocations, OversizeSegments Stat
	MaxSplitSize                          int64 // -1: none
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
	s := a.ts
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
	for _, arr := range a.ts.arrays() {
		for i := range arr {
			arr[i].Peak = arr[i].Current
		}
	}
	a.st.PeakAllocatedBytes, a.st.PeakRequestedBytes = a.st.AllocatedBytes, a.st.RequestedBytes
	a.st.PeakReservedBytes = a.st.ReservedBytes
}

// ResetAccumulatedStats zeroes every allocated and freed total and the num_* counters
// (torch.cuda.reset_accumulated_memory_stats). The engine's own counters (Stats) keep counting.
func (a *Allocator) ResetAccumulatedStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, arr := range a.ts.arrays() {
		for i := range arr {
			arr[i].Allocated, arr[i].Freed = 0, 0
		}
	}
	a.tsBase = torchBase{retries: a.st.NumCacheFlushes, ooms: a.st.NumOOMs, created: a.d.Succeeded(vmm.CallCreate),
		released: a.d.Succeeded(vmm.CallRelease)}
}

func (s *DeviceStats) arrays() []*StatArray {
	return []*StatArray{&s.Allocation, &s.Segment, &s.Active, &s.InactiveSplit, &s.AllocatedBytes,
		&s.ReservedBytes, &s.ActiveBytes, &s.InactiveSplitBytes, &s.RequestedBytes}
}

// newStreamState makes the state of stream s in pool mp (nil: the default pool), its free sets counting
// inactive split blocks into a.ts.
func (a *Allocator) newStreamState(s vmm.Stream) *streamState {
	ss := &streamState{s: s}
	for i := range ss.free {
		ss.free[i].ts, ss.free[i].pool = &a.ts, poolKind(i)
	}
	return ss
}

// hasMappedNeighbour reports whether pBlock b shares its segment with another mapped block (PyTorch's
// is_split for a free block).
func hasMappedNeighbour(b *block) bool {
	return (b.prev != nil && b.prev.mapped) || (b.next != nil && b.next.mapped)
}

// noteInserted and noteRemoved count inactive split blocks as they enter and leave a free set.
func (s *freeSet) noteInserted(b *block) {
	if s.ts != nil && hasMappedNeighbour(b) {
		b.splitCounted = true
		s.ts.InactiveSplit.inc(s.pool, 1)
		s.ts.InactiveSplitBytes.inc(s.pool, int64(b.size))
	}
}

func (s *freeSet) noteRemoved(b *block) {
	if b.splitCounted {
		b.splitCounted = false
		s.ts.InactiveSplit.dec(s.pool, 1)
		s.ts.InactiveSplitBytes.dec(s.pool, int64(b.size))
	}
}

// noteLive counts block b handed out for size bytes.
func (a *Allocator) noteLive(b *block, size uint64) {
	ts := &a.ts
	n := int64(b.size)
	ts.Allocation.inc(b.pool, 1)
	ts.AllocatedBytes.inc(b.pool, n)
	ts.RequestedBytes.inc(b.pool, int64(size))
	ts.Active.inc(b.pool, 1)
	ts.ActiveBytes.inc(b.pool, n)
	b.active = true
}

// noteFreed counts the free of live block b (it stays active until reusable: noteReusable).
func (a *Allocator) noteFreed(b *block) {
	ts := &a.ts
	ts.Allocation.dec(b.pool, 1)
	ts.AllocatedBytes.dec(b.pool, int64(b.size))
	ts.RequestedBytes.dec(b.pool, int64(b.requested))
}

// noteReusable counts the end of block b's activity, if it was an active allocation.
func (a *Allocator) noteReusable(b *block) {
	if b.active {
		b.active = false
		a.ts.Active.dec(b.pool, 1)
		a.ts.ActiveBytes.dec(b.pool, int64(b.size))
	}
}

// noteReserved counts n physical bytes of pool p gained (n > 0) or given back (n < 0).
func (a *Allocator) noteReserved(p poolKind, n int64) {
	if n >= 0 {
		a.ts.ReservedBytes.inc(p, n)
	} else {
		a.ts.ReservedBytes.dec(p, -n)
	}
}

// noteSegments counts segments of pool p gained (n > 0) or lost (n < 0).
func (a *Allocator) noteSegments(p poolKind, n int64) {
	if n > 0 {
		a.ts.Segment.inc(p, n)
	} else if n < 0 {
		a.ts.Segment.dec(p, -n)
	}
}

// mappedRunDelta is how the number of mapped runs of b's arena changes when b (just mapped, or about to be
// unmapped) joins or leaves them: +1 for b, -1 for each mapped neighbour it joins.
func mappedRunDelta(b *block) int64 {
	d := int64(1)
	if b.prev != nil && b.prev.mapped {
		d--
	}
	if b.next != nil && b.next.mapped {
		d--
	}
	return d
}

// torchStatsCounted recounts the current values of DeviceStats from the live set and the segments, for
// the invariant check (TestTorchStatsMatchLiveSet). Caller holds mu.
func (a *Allocator) torchStatsCounted() DeviceStats {
	var s DeviceStats
	add := func(arr *StatArray, p poolKind, n int64) {
		arr[0].Current += n
		arr[1+p].Current += n
	}
	for p, b := range a.ptrs {
		if b.ptr != p || !b.handedOut() {
			continue
		}
		add(&s.Allocation, b.pool, 1)
		add(&s.AllocatedBytes, b.pool, int64(b.size))
		add(&s.RequestedBytes, b.pool, int64(b.requested))
	}
	active := func(b *block) {
		if b.heldBy == nil && (b.state == Live || (b.state == Pending && b.xwait == nil)) {
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
			active(b)
			if b.state == Free && hasMappedNeighbour(b) {
				add(&s.InactiveSplit, b.pool, 1)
				add(&s.InactiveSplitBytes, b.pool, int64(b.size))
			}
		}
	}
	for _, sb := range a.sblocks {
		active(sb)
	}
	return s
}
