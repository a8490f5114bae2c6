package sim

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// Hazards: rule 9 of the vmm package doc. Unmap and Release do not wait for in-flight GPU work; the real
// driver returns success and the GPU faults or corrupts memory later. The device cannot see which memory a
// Launch touches, but it knows the memory each Memset writes: unmapping or releasing a handle while a Memset
// that wrote it is still pending on its stream is recorded as a Hazard. The call still succeeds, as on CUDA
// (so the device stays conformant); checkers read Hazards() and fail on any.

// Hazard is a driver call that raced pending GPU work on the memory it unmapped or released.
type Hazard struct {
	Call    vmm.CallKind // CallUnmap or CallRelease
	Handle  vmm.Handle   // the handle whose memory was still in use
	Stream  vmm.Stream   // the stream with the pending write
	Pending uint64       // the position of that write on the stream (completed was below it)
}

// String says what raced what.
func (h Hazard) String() string {
	return fmt.Sprintf("%v of handle %d while a memset on stream %d (unit %d) was still pending (rule 9)",
		h.Call, h.Handle, h.Stream, h.Pending)
}

// use is the last pending write to a handle from one stream.
type use struct {
	st  *stream
	pos uint64
}

// noteUseLocked records that the unit at st.submitted writes hd.
func noteUseLocked(hd *handle, st *stream) {
	for i := range hd.uses {
		if hd.uses[i].st == st {
			hd.uses[i].pos = st.submitted
			return
		}
	}
	hd.uses = append(hd.uses, use{st, st.submitted})
}

// checkHazardLocked prunes hd's completed uses and records a Hazard for each still pending.
func (d *Device) checkHazardLocked(k vmm.CallKind, hd *handle) {
	kept := hd.uses[:0]
	for _, u := range hd.uses {
		if u.st.completed < u.pos {
			kept = append(kept, u)
			if len(d.mu.hazards) < maxHazards {
				d.mu.hazards = append(d.mu.hazards, Hazard{Call: k, Handle: hd.id, Stream: u.st.id, Pending: u.pos})
			}
		}
	}
	hd.uses = kept
	if len(hd.uses) == 0 {
		hd.uses = nil
	}
}

// maxHazards bounds the hazards kept (the first ones are the interesting ones).
const maxHazards = 1000

// Hazards returns the rule-9 hazards seen since creation or ClearHazards, oldest first (at most 1000).
func (d *Device) Hazards() []Hazard {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Hazard(nil), d.mu.hazards...)
}

// ClearHazards forgets the hazards seen so far.
func (d *Device) ClearHazards() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.hazards = nil
}
