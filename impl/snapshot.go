package impl

import (
	"cmp"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// Snapshot returns a deep copy of the allocator's full state for the checkers: live allocations, every
// mapped pBlock and every sBlock with its backing, the chunks with their reference counts, reservations,
// mappings and statistics. Unmapped stretches of arenas are not blocks and are not listed.
func (a *Allocator) Snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Snapshot{Policy: a.p.name, Granularity: uint64(a.gran), Closed: a.closed, Stats: a.st}
	s.Stats.DriverCalls = a.d.Counts()
	s.Live = a.liveInfosLocked()
	for _, seg := range a.segs {
		s.Reservations = append(s.Reservations, span(seg.base, seg.size))
		for _, c := range seg.chunks {
			s.Chunks = append(s.Chunks, ChunkInfo{Handle: c.h, Size: uint64(c.size), Refs: c.refs(), SmallPool: seg.pool == smallPool})
			s.Mappings = append(s.Mappings, Mapping{VA: vmm.Range{Base: at(seg.base, c.off), Size: uint64(c.size)}, Handle: c.h})
		}
		for b := seg.head; b != nil; b = b.next {
			if !b.mapped {
				continue
			}
			bi := BlockInfo{ID: b.id, Kind: Primitive, State: b.state, Range: span(b.ptr, b.size),
				Stream: b.stream, Events: b.events, SmallPool: seg.pool == smallPool}
			if b.handedOut() {
				bi.Requested = uint64(b.requested)
			}
			if b.heldBy != nil {
				bi.HeldBy = b.heldBy.id
			}
			if b.state == Pending && b.xwait != nil && b.events == 1 {
				bi.WaitsOnStream, bi.WaitStream = true, b.xwait.s
			}
			lo, hi := b.segOff(), b.segOff()+b.size
			for _, c := range seg.chunksOver(lo, hi) {
				bi.Backing = append(bi.Backing, Mapping{VA: vmm.Range{Base: at(seg.base, c.off), Size: uint64(c.size)}, Handle: c.h})
			}
			s.Blocks = append(s.Blocks, bi)
		}
	}
	for _, sb := range a.sblocks {
		s.Reservations = append(s.Reservations, sb.resv)
		bi := BlockInfo{ID: sb.id, Kind: Stitched, State: sb.state, Range: span(sb.ptr, sb.size),
			Stream: sb.stream, Events: sb.events, SmallPool: sb.pool == smallPool}
		if sb.state == Live {
			bi.Requested = uint64(sb.requested)
		}
		off := vmm.Bytes(0)
		for _, c := range sb.chunks {
			m := Mapping{VA: vmm.Range{Base: at(sb.ptr, off), Size: uint64(c.size)}, Handle: c.h}
			if off < sb.size { // a partly held sBlock (paperReuseLocked) is backed by its head only
				bi.Backing = append(bi.Backing, m)
			}
			s.Mappings = append(s.Mappings, m)
			off += c.size
		}
		if len(sb.parts) > 0 {
			for _, pb := range sb.parts {
				bi.Parts = append(bi.Parts, pb.id)
			}
		} else {
			for _, c := range sb.chunks {
				bi.Parts = append(bi.Parts, c.seg.blockAt(c.off).id)
			}
		}
		s.Blocks = append(s.Blocks, bi)
	}
	for _, o := range a.heldOrphans { // still reserved: listed with their size (INV-STATS, INV-MIRROR)
		s.Chunks = append(s.Chunks, ChunkInfo{Handle: o.h, Size: uint64(o.size), SmallPool: o.pool == smallPool, Orphan: true})
	}
	for _, m := range a.orphanMaps { // an orphan mapping is a reference to its handle (INV-REFCOUNT)
		if i := slices.IndexFunc(s.Chunks, func(c ChunkInfo) bool { return c.Handle == m.Handle }); i >= 0 {
			s.Chunks[i].Refs++
		}
	}
	s.Mappings = append(s.Mappings, a.orphanMaps...)
	s.Reservations = append(s.Reservations, a.orphanResv...)
	slices.SortFunc(s.Blocks, func(x, y BlockInfo) int {
		if c := cmp.Compare(x.Kind, y.Kind); c != 0 {
			return c
		}
		return cmp.Compare(x.Range.Base, y.Range.Base)
	})
	slices.SortFunc(s.Chunks, func(x, y ChunkInfo) int { return cmp.Compare(x.Handle, y.Handle) })
	slices.SortFunc(s.Reservations, func(x, y vmm.Range) int { return cmp.Compare(x.Base, y.Base) })
	slices.SortFunc(s.Mappings, func(x, y Mapping) int { return cmp.Compare(x.VA.Base, y.VA.Base) })
	return s
}

// liveInfosLocked lists the live allocations sorted by pointer.
func (a *Allocator) liveInfosLocked() []LiveInfo {
	a.assertLocked()
	var out []LiveInfo
	for p, b := range a.liveLocked() {
		out = append(out, LiveInfo{Ptr: p, Requested: uint64(b.requested), Size: uint64(b.size), Stream: b.stream,
			Uses: slices.Clone(b.uses), Block: b.id})
	}
	slices.SortFunc(out, func(x, y LiveInfo) int { return cmp.Compare(x.Ptr, y.Ptr) })
	return out
}
