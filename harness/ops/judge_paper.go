package ops

import (
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
