package ops

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// judgeDriverRules judges INV-DRIVERRULES over the memory calls that failed during one step (failed, in call
// order): the engine never makes a driver call that breaks a rule of docs/cuda-vmm.md (a size or an address
// off the granularity, a map over a mapping or outside a reservation, access set over a hole, an unmap that
// splits a mapping, a reservation freed while mapped, a released handle used again). The simulated device
// refuses such a call with the error CUDA gives (CUDA_ERROR_INVALID_VALUE, _NOT_SUPPORTED,
// _INVALID_HANDLE, _ILLEGAL_ADDRESS), and an engine that treats the refusal as a driver error and undoes its
// step would otherwise pass every judge that reads only the outcome. The calls that may fail are those a
// fault op made fail (Injected) and out of memory (the device's own answer, which the engine handles). The
// event calls are judged for one rule: they never name an event that does not exist (failLog.noteEvent).
func judgeDriverRules(failed []spec.FailedCall) []spec.Violation {
	var errs []string
	for _, f := range failed {
		if f.Injected || errors.Is(f.Err, vmm.ErrOutOfMemory) {
			continue
		}
		errs = append(errs, fmt.Sprintf("%v of %s: %v", f.Call, vmm.FormatBytes(f.Size), f.Err))
	}
	if len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvDriverRules, Msg: "the engine made driver calls the driver refuses for a broken rule: " + strings.Join(errs, "; ")}}
}
