package impl

// PyTorch's view of the engine's memory: segments and blocks as torch.cuda.memory_snapshot() describes them,
// and segment events (map, unmap) for its memory history.

import (
	"cmp"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// TorchBlockState is a block's state in PyTorch's snapshot terms.
type TorchBlockState uint8

const (
	TorchInactive        TorchBlockState = iota // free (cached)
	TorchActiveAllocated                        // live
	TorchActivePending                          // freed, waiting for events of other streams
)

func (s TorchBlockState) String() string {
	switch s {
	case TorchActiveAllocated:
		return "active_allocated"
	case TorchActivePending:
		return "active_pending_free"
	}
	return "inactive"
}

// TorchBlock is one block of a TorchSegment.
type TorchBlock struct {
	Addr      vmm.DevicePtr
	Size      uint64
	Requested uint64 // live blocks; 0 for a block held by a stitched block (the request is on that block)
	State     TorchBlockState
	// StitchedInto is the address of the stitched block viewing this block's chunk while it is live or
	// pending (0: none). The block's state is then the stitched block's.
	StitchedInto vmm.DevicePtr
}

// TorchSegment is a fixed segment, or a contiguous mapped run of an arena (as PyTorch reports expandable
// segments), with its blocks in address order.
type TorchSegment struct {
	Addr       vmm.DevicePtr
	Size       uint64
	Stream     vmm.Stream
	Pool       PoolID
	Large      bool // PyTorch's large pool (requests above 1 MiB)
	Expandable bool // a run of an arena (expandable, gmlake), not a fixed segment
	Stitched   bool // some of its blocks are viewed by a stitched block
	// Created orders segments by creation (ids only increase; a segment's runs share its id): PyTorch's
	// SegmentInfo.registration_counter, by which ProcessGroupNCCL registers a pool's segments in the same order
	// on every rank.
	Created uint64
	Blocks  []TorchBlock
}

// TorchStitched is a stitched block (sBlock): its own virtual range viewing chunks of segments.
type TorchStitched struct {
	Addr      vmm.DevicePtr
	Size      uint64
	Requested uint64
	Stream    vmm.Stream
	Pool      PoolID
	State     TorchBlockState
	Parts     []vmm.DevicePtr // addresses of the chunks it views, in the order of its view
}

// TorchSnapshot is the memory as PyTorch's snapshot shows it. Bytes are counted once: a stitched block's
// bytes are the blocks under its chunks, which its segments list with StitchedInto set.
type TorchSnapshot struct {
	Segments []TorchSegment  // by address
	Stitched []TorchStitched // by address
}

func torchState(b *block) TorchBlockState {
	if b.p != nil && b.p.heldBy != nil {
		return torchState(&b.p.heldBy.block)
	}
	switch {
	case b.state == Live:
		return TorchActiveAllocated
	case b.state == Pending && (b.p == nil || b.p.xwait == nil):
		return TorchActivePending
	}
	return TorchInactive // free, or a part of a freed stitched block waiting before other streams reuse it
}

func (ss *streamState) poolID() PoolID {
	if ss == nil || ss.mp == nil {
		return PoolID{}
	}
	return ss.mp.id
}

// TorchSnapshot returns the segments and blocks, PyTorch's way.
func (a *Allocator) TorchSnapshot() TorchSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out TorchSnapshot
	for _, seg := range a.segs {
		var cur *TorchSegment
		for b := seg.head; b != nil; b = b.next {
			if !b.mapped {
				cur = nil
				continue
			}
			if cur == nil {
				out.Segments = append(out.Segments, TorchSegment{Addr: b.ptr, Stream: seg.ss.s, Pool: seg.ss.poolID(),
					Large: seg.pool == largePool, Expandable: seg.arena, Created: seg.id})
				cur = &out.Segments[len(out.Segments)-1]
			}
			tb := TorchBlock{Addr: b.ptr, Size: uint64(b.size), State: torchState(&b.block)}
			if b.heldBy != nil {
				tb.StitchedInto = b.heldBy.ptr
				cur.Stitched = true
			} else if b.state == Live {
				tb.Requested = uint64(b.requested)
			}
			cur.Size += uint64(b.size)
			cur.Blocks = append(cur.Blocks, tb)
		}
	}
	for _, sb := range a.sblocks {
		ts := TorchStitched{Addr: sb.ptr, Size: uint64(sb.size), Stream: sb.stream, Pool: sb.home.poolID(), State: torchState(&sb.block)}
		if sb.state == Live {
			ts.Requested = uint64(sb.requested)
		}
		for _, c := range sb.chunks {
			ts.Parts = append(ts.Parts, at(c.seg.base, c.off))
		}
		out.Stitched = append(out.Stitched, ts)
	}
	slices.SortFunc(out.Segments, func(x, y TorchSegment) int { return cmp.Compare(x.Addr, y.Addr) })
	slices.SortFunc(out.Stitched, func(x, y TorchStitched) int { return cmp.Compare(x.Addr, y.Addr) })
	return out
}

// SegmentAction is what a SegmentEvent says happened.
type SegmentAction uint8

const (
	SegmentMap   SegmentAction = iota // physical memory created and mapped at [Addr, Addr+Size)
	SegmentUnmap                      // unmapped and released
)

// SegmentEvent is one change of the memory held, for PyTorch's memory history.
type SegmentEvent struct {
	Action SegmentAction
	Addr   vmm.DevicePtr
	Size   uint64
	Stream vmm.Stream
	Pool   PoolID
}

// RecordSegmentEvents switches the recording of segment events on or off (off drops what is recorded).
// Recorded events are taken with TakeSegmentEvents, outside the engine's lock.
func (a *Allocator) RecordSegmentEvents(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.segEvOn = on
	if !on {
		a.segEv = nil
		a.segEvPending.Store(false)
	}
}

// SegmentEventsPending reports, without locking, whether events wait for TakeSegmentEvents.
func (a *Allocator) SegmentEventsPending() bool { return a.segEvPending.Load() }

// TakeSegmentEvents returns the events recorded since the last call, oldest first.
func (a *Allocator) TakeSegmentEvents() []SegmentEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	ev := a.segEv
	a.segEv = nil
	a.segEvPending.Store(false)
	return ev
}

// noteSegmentEventLocked records an event if recording is on.
func (a *Allocator) noteSegmentEventLocked(act SegmentAction, seg *segment, p vmm.DevicePtr, size vmm.Bytes) {
	if !a.segEvOn {
		return
	}
	a.segEv = append(a.segEv, SegmentEvent{Action: act, Addr: p, Size: uint64(size), Stream: seg.ss.s, Pool: seg.ss.poolID()})
	a.segEvPending.Store(true)
}
