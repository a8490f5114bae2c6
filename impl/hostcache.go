package impl

// The engine's side of the C library's host cache (capi/abi.c; impl/doc.go, "The host cache"): which
// allocations the cache may keep when they are freed, and the replay of its log.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// ErrHostLog is a host-cache log entry the engine cannot apply: the C library and the engine disagree about a
// block, which is an internal error of the library (it disables the device's engine), never a caller's.
var ErrHostLog = errors.New("gmlake: the host cache's log does not match the engine")

// HostOp is one entry of the host cache's log, in the order the C library served it: a free (Size 0) of an
// allocation the cache kept instead of handing it to the engine, or a hit (Size > 0): the request of Size
// bytes the cache served with the block at Ptr, freed earlier in the same log on the same stream.
type HostOp struct {
	Ptr  vmm.DevicePtr
	Size uint64
}

// HostClass reports whether the host cache may keep the live allocation at p when it is freed, and for which
// requests it may hand it out again on its stream without asking the engine: every size in [lo, hi] rounds to
// the size p's request rounded to (so a hit is the request the engine would serve with a block of that size).
// hi == 0: the cache must hand p's free to the engine (a stitched block, a private pool's, a block used on
// another stream (RecordStream), a capture underway, gmlake-paper, an unknown pointer).
func (a *Allocator) HostClass(p vmm.DevicePtr) (lo, hi uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, 0
	}
	return a.hostClassLocked(a.liveAtLocked(p))
}

// HostAlloc is what AllocHost did: Replayed entries of the log applied (ReplayErr: why it stopped short), then
// the allocation at Ptr and its class [Lo, Hi] (HostClass).
type HostAlloc struct {
	Replayed  int
	ReplayErr error
	Ptr       vmm.DevicePtr
	Lo, Hi    uint64
}

// AllocHost is Replay(ops), then Alloc(size, s) and HostClass of its block, under one hold of the lock: the
// host cache's miss, in one call. A replay that stops short allocates nothing (the error is ReplayErr).
func (a *Allocator) AllocHost(ops []HostOp, size uint64, s vmm.Stream) (HostAlloc, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var r HostAlloc
	if r.Replayed, r.ReplayErr = a.replayLocked(ops); r.ReplayErr != nil {
		return r, r.ReplayErr
	}
	b, err := a.allocDefaultLocked(size, s)
	if err != nil {
		return r, err
	}
	r.Ptr = b.ptr
	r.Lo, r.Hi = a.hostClassLocked(b)
	return r, nil
}

// hostClassLocked is HostClass of live block b (nil: none).
func (a *Allocator) hostClassLocked(b *block) (lo, hi uint64) {
	if a.p.paper || a.nCapturing > 0 || b == nil || b.p == nil || len(b.uses) > 0 || blockHome(b).mp != nil {
		return 0, 0
	}
	rs := a.p.round(b.requested)
	lo = uint64(rs)
	if rs > 511 && a.p.round(rs-511) == rs { // round is monotone: every size between rounds to rs too
		lo = uint64(rs) - 511
	}
	return lo, uint64(rs)
}

// Replay applies the host cache's log in order under one hold of the lock, as the separate calls would have
// applied it: a free is Free; a hit allocates exactly the block at Ptr (freed earlier in the log, so it lies in
// a free block of its pool), split as an Alloc of Size would split it, and counts in every statistic and peak
// as that Alloc. It returns how many entries it applied; an entry it cannot apply (ErrHostLog, ErrClosed)
// stops it there, with the entries before it applied.
func (a *Allocator) Replay(ops []HostOp) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.replayLocked(ops)
}

func (a *Allocator) replayLocked(ops []HostOp) (int, error) {
	if a.closed {
		return 0, ErrClosed
	}
	for i, op := range ops {
		var err error
		if op.Size == 0 {
			err = a.hostFreeLocked(op.Ptr)
		} else {
			err = a.hostHitLocked(op.Ptr, vmm.Bytes(op.Size))
		}
		if err != nil {
			return i, fmt.Errorf("%w: entry %d of %d: %w", ErrHostLog, i, len(ops), err)
		}
	}
	return len(ops), nil
}

// hostFreeLocked frees a block the host cache kept: one HostClass admitted.
func (a *Allocator) hostFreeLocked(p vmm.DevicePtr) error {
	b := a.liveAtLocked(p)
	if b == nil {
		return a.badPtrLocked(p, a.ptrs.get(p))
	}
	if b.p == nil || len(b.uses) > 0 || blockHome(b).mp != nil || a.nCapturing > 0 {
		return fmt.Errorf("free of %v: not a block the host cache may keep", p)
	}
	return a.freeLocked(b)
}

// hostHitLocked hands out, for a request of size bytes, the block at p that an earlier entry freed.
func (a *Allocator) hostHitLocked(p vmm.DevicePtr, size vmm.Bytes) error {
	if size > a.total {
		return fmt.Errorf("hit of %d bytes at %v: more than the device's %s", size, p, a.total)
	}
	rs := a.p.round(size)
	seg := a.segmentAtLocked(p)
	if seg == nil || seg.ss.mp != nil || a.p.paper || a.nCapturing > 0 {
		return fmt.Errorf("hit of %d bytes at %v: in no segment of a default pool", size, p)
	}
	b := seg.blockAt(vmm.Bytes(p - seg.base))
	if b.state != Free || !b.mapped || vmm.Bytes(b.end()-p) < rs {
		return fmt.Errorf("hit of %d bytes at %v: the block there (%s, %s at %v) is not free or too small",
			size, p, b.state, b.size, b.ptr)
	}
	free := &seg.ss.free[b.pool]
	free.remove(b)
	if b.ptr < p { // keep the part before p free
		a.splitLocked(b, vmm.Bytes(p-b.ptr))
		left := b
		b = b.next
		free.remove(b)
		free.insert(left)
	}
	if a.p.shouldSplit(b, rs) {
		a.splitLocked(b, rs)
	}
	a.markLiveLocked(&b.block, size)
	return nil
}

// segmentAtLocked returns the segment whose reservation holds p, nil if none.
func (a *Allocator) segmentAtLocked(p vmm.DevicePtr) *segment {
	i, found := slices.BinarySearchFunc(a.segs, p, func(s *segment, p vmm.DevicePtr) int { return cmp.Compare(s.base, p) })
	if !found {
		i--
	}
	if i < 0 || i >= len(a.segs) {
		return nil
	}
	if s := a.segs[i]; p >= s.base && p < at(s.base, s.size) {
		return s
	}
	return nil
}
