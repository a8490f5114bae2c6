package ops

import (
	"errors"
	"fmt"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeOOMError is INV-CONTRACT's clause C-OOMERROR (SPEC.md) on what an out-of-memory error tells
// (PyTorch's message, which users read to size their jobs): an *impl.OOMError for an Alloc of size bytes on
// device stream s says the bytes asked for, a rounding no smaller than them, the stream, what the engine
// holds after the call (its Stats: reserved, live, cached), and, when deviceFree is known (no fault armed,
// the bare engine: under the serving layer's cap the driver reports less), the device's free bytes after
// the call.
func judgeOOMError(err error, size uint64, s vmm.Stream, st impl.Stats, deviceFree uint64, known bool) []spec.Violation {
	var oe *impl.OOMError
	if !errors.As(err, &oe) {
		return nil
	}
	var bad []string
	if oe.Requested != size || oe.Rounded < size || oe.Stream != s {
		bad = append(bad, fmt.Sprintf("requested %d (rounded %d) on stream %d, want %d on stream %d", oe.Requested, oe.Rounded, oe.Stream, size, s))
	}
	if !oomHoldingsAre(oe, st) {
		bad = append(bad, fmt.Sprintf("the engine holds %d reserved, %d live, %d cached; its Stats say %d reserved, %d allocated",
			oe.Reserved, oe.Live, oe.Cached, st.ReservedBytes, st.AllocatedBytes))
	}
	if known && oe.DeviceFree != deviceFree {
		bad = append(bad, fmt.Sprintf("the device has %d bytes free; the device has %d", oe.DeviceFree, deviceFree))
	}
	var out []spec.Violation
	for _, b := range bad {
		out = append(out, spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("Alloc(%d) on stream %d: its out-of-memory error says %s", size, s, b)})
	}
	return out
}

// oomHoldingsAre reports whether out-of-memory error oe tells what the engine holds as its Stats st say:
// reserved, live (allocated) and cached (reserved less allocated) bytes.
func oomHoldingsAre(oe *impl.OOMError, st impl.Stats) bool {
	return oe.Reserved == st.ReservedBytes && oe.Live == st.AllocatedBytes &&
		oe.Cached == st.ReservedBytes-min(st.ReservedBytes, st.AllocatedBytes)
}
