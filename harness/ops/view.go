package ops

import (
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
)

// ViewOf builds the spec's View (the judge's picture) from the engine's snapshot and the device's state.
// See spec/SPEC.md for what each part means.
func ViewOf(s impl.Snapshot, d sim.DeviceState) spec.View {
	v := spec.View{
		Policy:      s.Policy,
		Granularity: s.Granularity,
		Closed:      s.Closed,
		Stats: spec.Stats{
			Requested: s.Stats.RequestedBytes, PeakRequested: s.Stats.PeakRequestedBytes,
			Allocated: s.Stats.AllocatedBytes, PeakAllocated: s.Stats.PeakAllocatedBytes,
			Reserved: s.Stats.ReservedBytes, PeakReserved: s.Stats.PeakReservedBytes,
			Mapped: s.Stats.MappedBytes, NumLive: s.Stats.NumLive, AllocRetries: uint64(s.Stats.NumCacheFlushes),
		},
		Reservations: s.Reservations,
	}
	v.Live = make([]spec.Alloc, len(s.Live))
	for i, l := range s.Live {
		v.Live[i] = spec.Alloc{Ptr: l.Ptr, Requested: l.Requested, Size: l.Size, Stream: l.Stream, Uses: l.Uses, Block: l.Block}
	}
	v.Blocks = make([]spec.Block, len(s.Blocks))
	for i, b := range s.Blocks {
		v.Blocks[i] = spec.Block{ID: b.ID, Stitched: b.Kind == impl.Stitched, State: spec.BlockState(b.State),
			Range: b.Range, Stream: b.Stream, Parts: b.Parts, Events: b.Events, HeldBy: b.HeldBy, SmallPool: b.SmallPool,
			WaitsOnStream: b.WaitsOnStream, WaitStream: b.WaitStream}
	}
	v.Chunks = make([]spec.Chunk, len(s.Chunks))
	for i, c := range s.Chunks {
		v.Chunks[i] = spec.Chunk{Handle: c.Handle, Size: c.Size, Refs: c.Refs, SmallPool: c.SmallPool, Orphan: c.Orphan}
	}
	v.Mappings = make([]spec.Mapping, len(s.Mappings))
	for i, m := range s.Mappings {
		v.Mappings[i] = spec.Mapping{VA: m.VA, Handle: m.Handle}
	}
	v.Device = spec.Device{Reservations: d.Reservations, Used: d.Used, Capacity: d.Capacity}
	v.Device.Mappings = make([]spec.DevMapping, len(d.Mappings))
	for i, m := range d.Mappings {
		v.Device.Mappings[i] = spec.DevMapping{VA: m.VA, Handle: m.Handle, Accessible: m.Accessible}
	}
	v.Device.Handles = make([]spec.DevHandle, len(d.Handles))
	for i, h := range d.Handles {
		v.Device.Handles[i] = spec.DevHandle{Handle: h.Handle, Size: h.Size, Released: h.Released, Mappings: h.Mappings}
	}
	return v
}

// Compile-time checks that the spec's block states mirror the engine's.
var _ = [1]struct{}{}[int(impl.Free)-int(spec.BlockFree)]
var _ = [1]struct{}{}[int(impl.Live)-int(spec.BlockLive)]
var _ = [1]struct{}{}[int(impl.Pending)-int(spec.BlockPending)]
