package sim

// Streams and events: the controllable clock.
//
// Each stream counts the units of work submitted to it and how many have completed; work completes in order.
// A unit is a Launch (a "kernel"), a Memset, or the wait of a StreamWaitEvent on a not yet completed event.
// Nothing completes by itself (unless DeviceConfig.SyncStreams): the test advances the clock with Complete,
// Advance or CompleteAll.
//
// An event records a stream and a position (the stream's submitted count at RecordEvent); it has completed
// when the stream's completed count reaches the position. A never recorded event counts as completed.
//
// StreamWaitEvent(s, e) on a pending e submits a wait unit to s that depends on e's stream reaching e's
// position. Completing s past that unit first completes e's stream up to e (the chosen semantics: the clock
// runs what must run, so Complete never refuses). Dependencies always point back in time, so there are no
// cycles.

import (
	"fmt"
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

type stream struct {
	id        vmm.Stream
	submitted uint64 // units of work submitted, ever
	completed uint64 // Invariant: completed <= submitted
	// waits: the wait units still pending, sorted by at. Invariant: every at > completed.
	waits     []wait
	destroyed bool
}

// wait is a wait unit at position at of its stream that completes only after on.completed >= pos.
type wait struct {
	at  uint64
	on  *stream
	pos uint64
}

type event struct {
	id       vmm.Event
	recorded bool
	on       *stream
	pos      uint64
}

func (e *event) done() bool { return !e.recorded || e.on.completed >= e.pos }

// lookupStreamLocked returns the live stream s or an InvalidHandle error.
func (d *Device) lookupStreamLocked(k vmm.CallKind, s vmm.Stream) (*stream, error) {
	if st := d.mu.streams[s]; st != nil {
		return st, nil
	}
	return nil, d.failLocked(k, vmm.InvalidHandle, "stream %d does not exist (never created or destroyed)", s)
}

// lookupEventLocked returns the live event e or an InvalidHandle error.
func (d *Device) lookupEventLocked(k vmm.CallKind, e vmm.Event) (*event, error) {
	if ev := d.mu.events[e]; ev != nil {
		return ev, nil
	}
	return nil, d.failLocked(k, vmm.InvalidHandle, "event %d "+noSuchEvent, e)
}

// noSuchEvent ends the detail of the error for an event that does not exist (NoSuchEvent).
const noSuchEvent = "does not exist (never created or destroyed)"

// submitLocked submits one unit of work to st, a wait unit when dep is non-nil.
func (d *Device) submitLocked(st *stream, dep *event) {
	st.submitted++
	if dep != nil {
		st.waits = append(st.waits, wait{at: st.submitted, on: dep.on, pos: dep.pos})
	}
	if d.sync {
		d.completeLocked(st, st.submitted)
	}
}

// completeLocked completes st's work up to position pos, first completing what its wait units wait on.
func (d *Device) completeLocked(st *stream, pos uint64) {
	pos = min(pos, st.submitted)
	if st.completed >= pos {
		return
	}
	n := 0
	for _, w := range st.waits {
		if w.at > pos {
			break
		}
		d.completeLocked(w.on, w.pos)
		n++
	}
	st.waits = st.waits[n:]
	if len(st.waits) == 0 {
		st.waits = nil
	}
	st.completed = pos
}

// Launch submits one unit of pending work (a "kernel") to s. It is not a driver call: not counted, no cost.
// It panics if s does not exist (a bug in the test driving the device).
func (d *Device) Launch(s vmm.Stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.mu.streams[s]
	if st == nil {
		panic(fmt.Sprintf("model: Launch on stream %d, which does not exist", s))
	}
	d.submitLocked(st, nil)
}

// Complete completes all work submitted to s so far (and what it waits on). Unknown streams are ignored.
func (d *Device) Complete(s vmm.Stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.mu.streams[s]; st != nil {
		d.completeLocked(st, st.submitted)
	}
}

// Advance completes the next n units of work on s (fewer if fewer are pending). Unknown streams are ignored.
func (d *Device) Advance(s vmm.Stream, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.mu.streams[s]; st != nil && n > 0 {
		d.completeLocked(st, st.completed+uint64(n))
	}
}

// CompleteAll completes all work submitted to every stream, destroyed ones included.
func (d *Device) CompleteAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, st := range d.mu.streams {
		d.completeLocked(st, st.submitted)
	}
	for _, st := range d.mu.zombies {
		d.completeLocked(st, st.submitted)
	}
	d.mu.zombies = nil
}

// Pending returns the units of work submitted to s and not yet completed (0 for unknown streams).
func (d *Device) Pending(s vmm.Stream) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.mu.streams[s]; st != nil {
		return st.submitted - st.completed
	}
	return 0
}

// CreateStream makes a new stream.
func (d *Device) CreateStream() (vmm.Stream, error) {
	const k = vmm.CallCreateStream
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return 0, err
	}
	st := &stream{id: d.mu.nextStream}
	d.mu.nextStream++
	d.mu.streams[st.id] = st
	d.chargeLocked(k, 0)
	return st.id, nil
}

// DestroyStream destroys a created stream. Its pending work still completes (with CompleteAll, or when
// other work waits on it), as on CUDA.
func (d *Device) DestroyStream(s vmm.Stream) error {
	const k = vmm.CallDestroyStream
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	if s == vmm.DefaultStream {
		return d.failLocked(k, vmm.InvalidHandle, "the default stream cannot be destroyed")
	}
	st, err := d.lookupStreamLocked(k, s)
	if err != nil {
		return err
	}
	st.destroyed = true
	delete(d.mu.streams, s)
	if st.completed < st.submitted {
		d.mu.zombies = append(d.mu.zombies, st)
	}
	d.chargeLocked(k, 0)
	return nil
}

// StreamQuery reports whether all work submitted to s has completed.
func (d *Device) StreamQuery(s vmm.Stream) (bool, error) {
	const k = vmm.CallStreamQuery
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return false, err
	}
	st, err := d.lookupStreamLocked(k, s)
	if err != nil {
		return false, err
	}
	d.chargeLocked(k, 0)
	return st.completed >= st.submitted, nil
}

// CreateEvent makes an event; never recorded, it counts as completed.
func (d *Device) CreateEvent() (vmm.Event, error) {
	const k = vmm.CallCreateEvent
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return 0, err
	}
	ev := &event{id: d.mu.nextEvent}
	d.mu.nextEvent++
	d.mu.events[ev.id] = ev
	d.chargeLocked(k, 0)
	return ev.id, nil
}

// RecordEvent captures in e the work submitted to s so far.
func (d *Device) RecordEvent(e vmm.Event, s vmm.Stream) error {
	const k = vmm.CallRecordEvent
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	ev, err := d.lookupEventLocked(k, e)
	if err != nil {
		return err
	}
	st, err := d.lookupStreamLocked(k, s)
	if err != nil {
		return err
	}
	ev.recorded, ev.on, ev.pos = true, st, st.submitted
	d.chargeLocked(k, 0)
	return nil
}

// QueryEvent reports whether e has completed.
func (d *Device) QueryEvent(e vmm.Event) (bool, error) {
	const k = vmm.CallQueryEvent
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return false, err
	}
	ev, err := d.lookupEventLocked(k, e)
	if err != nil {
		return false, err
	}
	d.chargeLocked(k, 0)
	return ev.done(), nil
}

// StreamWaitEvent makes later work on s wait for e (a wait unit on s; nothing if e has completed).
func (d *Device) StreamWaitEvent(s vmm.Stream, e vmm.Event) error {
	const k = vmm.CallStreamWaitEvent
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	st, err := d.lookupStreamLocked(k, s)
	if err != nil {
		return err
	}
	ev, err := d.lookupEventLocked(k, e)
	if err != nil {
		return err
	}
	if !ev.done() && ev.on != st {
		d.submitLocked(st, ev)
	}
	d.chargeLocked(k, 0)
	return nil
}

// DestroyEvent destroys e.
func (d *Device) DestroyEvent(e vmm.Event) error {
	const k = vmm.CallDestroyEvent
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	if _, err := d.lookupEventLocked(k, e); err != nil {
		return err
	}
	delete(d.mu.events, e)
	d.chargeLocked(k, 0)
	return nil
}

// liveEventsLocked returns the ids of the events not destroyed, sorted.
func (d *Device) liveEventsLocked() []vmm.Event {
	es := make([]vmm.Event, 0, len(d.mu.events))
	for id := range d.mu.events {
		es = append(es, id)
	}
	sort.Slice(es, func(i, j int) bool { return es[i] < es[j] })
	return es
}

// liveStreamsLocked returns the ids of the created streams not destroyed (DefaultStream excluded), sorted.
func (d *Device) liveStreamsLocked() []vmm.Stream {
	ss := make([]vmm.Stream, 0, len(d.mu.streams))
	for id := range d.mu.streams {
		if id != vmm.DefaultStream {
			ss = append(ss, id)
		}
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
	return ss
}
