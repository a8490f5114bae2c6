package ops

import (
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgePaperSplit judges INV-TORCH's clause for gmlake-paper's large pool (spec.CheckPaperSplit: GLake's
// should_split) for a successful Alloc, with the chunk size the Env configured (GLake's 2 MiB kGranularity,
// aligned to the device's granularity, or the knob).
func (e *Env) judgePaperSplit(before, after spec.View, ptr vmm.DevicePtr, size uint64) []spec.Violation {
	if e.Cfg.Policy != impl.PolicyGMLakePaper {
		return nil
	}
	chunk := uint64(e.Cfg.Knobs.ChunkSize)
	if chunk == 0 {
		chunk = vmm.AlignUp(2<<20, e.Device.Granularity()) // impl: paperPiece
	}
	return spec.CheckPaperSplit(before, after, ptr, size, chunk)
}
