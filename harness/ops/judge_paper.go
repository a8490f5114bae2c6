package ops

import (
	"fmt"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgePaperLarge judges INV-TORCH's clauses for gmlake-paper's large pool (spec.CheckPaperSplit: GLake's
// should_split; spec.CheckPaperSegment: realloc_block's segment, reAlloc as the Env configured) for a
// successful Alloc, with the chunk size the Env configured (GLake's 2 MiB kGranularity,
// aligned to the device's granularity, or the knob).
func (e *Env) judgePaperLarge(before, after spec.View, ptr vmm.DevicePtr, size uint64, s vmm.Stream) []spec.Violation {
	if e.Cfg.Policy != impl.PolicyGMLakePaper {
		return nil
	}
	chunk := e.paperChunk()
	return append(spec.CheckPaperSplit(before, after, ptr, size, chunk),
		spec.CheckPaperSegment(before, after, size, chunk, spec.PaperRule{ReAlloc: e.Cfg.Knobs.ReAlloc,
			FragLimit: or64(e.Cfg.Knobs.StitchMin, 512<<20 /* impl: paperStitch */), DefragLevel: e.Cfg.Knobs.DefragLevel}, s)...)
}

// judgePaperReuse judges INV-REUSE's clause for gmlake-paper (spec.CheckPaperReuse: GLake's reuse of a cached
// stitched block within reuseLimit times the request) for a successful Alloc, with the chunk size and the
// ReuseLimit the Env configured (impl: paperReuse, 10, when the knob is 0).
func (e *Env) judgePaperReuse(before, after spec.View, ptr vmm.DevicePtr, size uint64, s vmm.Stream) []spec.Violation {
	if e.Cfg.Policy != impl.PolicyGMLakePaper {
		return nil
	}
	chunk := e.paperChunk()
	limit := e.Cfg.Knobs.ReuseLimit
	if limit == 0 {
		limit = 10 // impl: paperReuse, GLake's reuseLimit
	}
	return spec.CheckPaperReuse(before, after, ptr, size, chunk, limit, s)
}

// paperChunk is gmlake-paper's chunk as the Env configured it: the ChunkSize knob, else GLake's 2 MiB
// kGranularity aligned to the device's granularity (impl: paperPiece).
func (e *Env) paperChunk() uint64 {
	if c := uint64(e.Cfg.Knobs.ChunkSize); c != 0 {
		return c
	}
	return vmm.AlignUp(2<<20, e.Device.Granularity())
}

// judgePaperEvents is INV-PAPEREVENTS for one successful Alloc under gmlake-paper, over the device's call
// counts before and after it: GLake's get_free_block searches with a Block, and every Block creates a CUDA
// event (cudaEventCreateWithFlags) that goes with it, so the call created at least one event and destroyed
// at least one: gmlake-paper's cost is GLake's, event churn included (impl: evTempLocked). Other policies
// make no event for a search: not judged.
func judgePaperEvents(policy string, before, after vmm.CallCounts) []spec.Violation {
	if policy != impl.PolicyGMLakePaper {
		return nil
	}
	created := after[vmm.CallCreateEvent] - before[vmm.CallCreateEvent]
	destroyed := after[vmm.CallDestroyEvent] - before[vmm.CallDestroyEvent]
	if created == 0 || destroyed == 0 {
		return []spec.Violation{{Inv: spec.InvPaperEvents, Msg: fmt.Sprintf(
			"a successful Alloc under gmlake-paper created %d and destroyed %d events: GLake's search key is a Block, whose event is created and destroyed with it (at least one of each)",
			created, destroyed)}}
	}
	return nil
}
