package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/vmm"
)

// Hazards: rule 9 of the vmm package doc. Unmap does not wait for in-flight GPU work; the real driver
// returns success and the GPU faults or corrupts memory later. The device cannot see which memory a Launch
// touches, but it knows the addresses each Memset writes: unmapping a mapping while a Memset that wrote
// through it is still pending on its stream is recorded as a Hazard. It is exact per address range: work
// through another mapping of the same handle (a stitched view, the primary mapping) is not raced, since the
// memory stays mapped there; and Release never races, since a handle's memory lives until its last mapping
// goes (rule 7), and that unmap is where the race is seen. The call still succeeds, as on CUDA (so the
// device stays conformant); checkers call HazardError (or read Hazards) and fail on any.

// ErrHazard is the kind (errors.Is) of HazardError's error.
var ErrHazard = errors.New("sim: driver call raced pending GPU work (rule 9)")

// Hazard is an Unmap that raced pending GPU work through the mapping it removed.
type Hazard struct {
	Call    vmm.CallKind // CallUnmap
	Handle  vmm.Handle   // the mapped handle
	VA      vmm.Range    // the mapping removed
	Stream  vmm.Stream   // the stream with the pending write through it
	Pending uint64       // the position of that write on the stream (completed was below it)
}

// String says what raced what.
func (h Hazard) String() string {
	return fmt.Sprintf("%v of %v (handle %d) while a memset through it on stream %d (unit %d) was still pending (rule 9)",
		h.Call, h.VA, h.Handle, h.Stream, h.Pending)
}

// use is the last pending write through a mapping from one stream.
type use struct {
	st  *stream
	pos uint64
}

// noteUseLocked records that the unit at st.submitted writes through m.
func noteUseLocked(m *mapping, st *stream) {
	for i := range m.uses {
		if m.uses[i].st == st {
			m.uses[i].pos = st.submitted
			return
		}
	}
	m.uses = append(m.uses, use{st, st.submitted})
}

// checkHazardLocked records a Hazard for each write through m still pending (m is being unmapped).
func (d *Device) checkHazardLocked(k vmm.CallKind, m *mapping) {
	for _, u := range m.uses {
		if u.st.completed < u.pos && len(d.mu.hazards) < maxHazards {
			d.mu.hazards = append(d.mu.hazards, Hazard{Call: k, Handle: m.h.id, VA: vmm.Range{Base: m.base, Size: m.size},
				Stream: u.st.id, Pending: u.pos})
		}
	}
	m.uses = nil
}

// HazardError returns nil when no hazard was seen since creation or ClearHazards, else an error wrapping
// ErrHazard that lists the first ones. Checkers call it after (or during) a run.
func (d *Device) HazardError() error {
	hz := d.Hazards()
	if len(hz) == 0 {
		return nil
	}
	var b strings.Builder
	for i, h := range hz[:min(len(hz), 5)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(h.String())
	}
	more := ""
	if len(hz) > 5 {
		more = fmt.Sprintf(" (and %d more)", len(hz)-5)
	}
	return fmt.Errorf("%w: %d hazards: %s%s", ErrHazard, len(hz), b.String(), more)
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
