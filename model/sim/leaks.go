package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gmlake/gmlake/vmm"
)

// LeakReport is what a device still holds: reserved ranges, mappings, and handles whose memory has not
// returned (unreleased, or released but still mapped). Events and Streams list the events and created
// streams not destroyed; they are reported but do not count for Empty.
type LeakReport struct {
	Reservations []vmm.Range
	Mappings     []DeviceMapping
	Handles      []HandleInfo
	Events       []vmm.Event
	Streams      []vmm.Stream
	Used         uint64 // physical bytes not returned
}

// Empty reports whether no memory is held: nothing reserved, mapped or created-and-not-freed.
func (r LeakReport) Empty() bool {
	return len(r.Reservations) == 0 && len(r.Mappings) == 0 && len(r.Handles) == 0
}

// String lists the leaks, one per line, or "no leaks".
func (r LeakReport) String() string {
	if r.Empty() && len(r.Events) == 0 && len(r.Streams) == 0 {
		return "no leaks"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaks: %d reservations, %d mappings, %d handles (%s not returned), %d events, %d streams",
		len(r.Reservations), len(r.Mappings), len(r.Handles), vmm.FormatBytes(r.Used), len(r.Events), len(r.Streams))
	for _, x := range r.Reservations {
		fmt.Fprintf(&b, "\n  reserved %v (%s)", x, vmm.FormatBytes(x.Size))
	}
	for _, m := range r.Mappings {
		acc := "no access"
		if m.Accessible {
			acc = "accessible"
		}
		fmt.Fprintf(&b, "\n  mapped   %v (%s) -> handle %d, %s", m.VA, vmm.FormatBytes(m.VA.Size), m.Handle, acc)
	}
	for _, h := range r.Handles {
		st := "not released"
		if h.Released {
			st = "released"
		}
		fmt.Fprintf(&b, "\n  handle   %d (%s), %s, %d mappings", h.Handle, vmm.FormatBytes(h.Size), st, h.Mappings)
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(&b, "\n  events   %v", r.Events)
	}
	if len(r.Streams) > 0 {
		fmt.Fprintf(&b, "\n  streams  %v", r.Streams)
	}
	return b.String()
}

// Leaks reports what the device still holds.
func (d *Device) Leaks() LeakReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r LeakReport
	r.Reservations, r.Mappings, r.Handles = d.snapshotLocked()
	r.Events = d.liveEventsLocked()
	r.Streams = d.liveStreamsLocked()
	r.Used = d.mu.used
	return r
}

func sortHandles(hs []HandleInfo) {
	sort.Slice(hs, func(i, j int) bool { return hs[i].Handle < hs[j].Handle })
}
