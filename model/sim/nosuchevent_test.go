package sim

import (
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// Property: NoSuchEvent is true exactly for an event call on an event that does not exist (destroyed), not for
// a record on a destroyed stream, nor for an injected fault on an event call.
func TestNoSuchEventNamesOnlyAMissingEvent(t *testing.T) {
	d := NewDevice(DeviceConfig{Capacity: 16 * vmm.MiB, Granularity: 2 * vmm.MiB})
	ev, err := d.CreateEvent()
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordEvent(ev, s); err == nil || NoSuchEvent(err) {
		t.Fatalf("a record on a destroyed stream: %v, NoSuchEvent %v", err, NoSuchEvent(err))
	}
	d.FailNth(vmm.CallQueryEvent, 1, vmm.InvalidHandle)
	if _, err := d.QueryEvent(ev); err == nil || NoSuchEvent(err) {
		t.Fatalf("an injected fault on a query: %v, NoSuchEvent %v", err, NoSuchEvent(err))
	}
	if err := d.DestroyEvent(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := d.QueryEvent(ev); !NoSuchEvent(err) {
		t.Fatalf("a query of a destroyed event: %v, want NoSuchEvent", err)
	}
}
