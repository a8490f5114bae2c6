package replay

import (
	"context"
	"errors"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
	"github.com/gmlake/gmlake/vmm"
)

// Property: a trace whose length is not known in advance (total -1, a pipe) gets a timeline of PlotPoints
// to 2*PlotPoints samples, evenly spaced, ending at its last event, whatever its length.
func TestPlotPointsTimelineStaysWithinBoundsOfAnUnknownLength(t *testing.T) {
	for _, n := range []int{1, 7, 100, 4097, 50_000} {
		res, err := RunStream(context.Background(), "gen", -1, &genSource{n: n}, Options{Policy: impl.PolicyCaching, PlotPoints: 64})
		if err != nil {
			t.Fatal(err)
		}
		tl := res.Timeline
		if len(tl) == 0 || len(tl) > 2*64+1 || n >= 64 && len(tl) < 64 {
			t.Errorf("%d events: %d samples, want 64 to 128", n, len(tl))
			continue
		}
		if tl[len(tl)-1].Event != n-1 {
			t.Errorf("%d events: the last sample is of event %d", n, tl[len(tl)-1].Event)
		}
		for i := 1; i < len(tl)-1; i++ {
			if d, d0 := tl[i].Event-tl[i-1].Event, tl[1].Event-tl[0].Event; d != d0 {
				t.Errorf("%d events: samples %d apart at %d, %d at the start", n, d, i, d0)
				break
			}
		}
	}
}

// Property: a trace that does not fit the device ends its replay with ErrDoesNotFit (and the engine's out
// of memory) and a Result up to that event, NoFit saying the event, the live bytes then and the request.
func TestReplayThatDoesNotFitReturnsWhereItStopped(t *testing.T) {
	d := sim.NewDevice(sim.DeviceConfig{Capacity: 64 * vmm.MiB, SyncStreams: true})
	res, err := RunStream(context.Background(), "grow", -1, &growSource{n: 100}, Options{Policy: impl.PolicyCaching, Driver: d})
	if !errors.Is(err, ErrDoesNotFit) || !errors.Is(err, vmm.ErrOutOfMemory) || res == nil || res.NoFit == nil {
		t.Fatalf("res %+v, err %v: want a Result with NoFit and ErrDoesNotFit", res, err)
	}
	n := res.NoFit
	if n.Event < 2 || n.Event != res.Events+1 || n.Live != uint64(n.Event-1)*8*vmm.MiB || n.Requested != 8*vmm.MiB || res.PeakLiveBytes != n.Live {
		t.Errorf("NoFit %+v, events %d, peak live %d", *n, res.Events, res.PeakLiveBytes)
	}
	if n.Of != 0 || n.String() == "" {
		t.Errorf("an unknown length: Of %d, %q", n.Of, n)
	}
}

// growSource is n allocations of 8 MiB that are never freed.
type growSource struct{ n, i int }

func (g *growSource) Next() (trace.Event, bool, error) {
	if g.i >= g.n {
		return trace.Event{}, false, nil
	}
	g.i++
	return trace.Event{Op: trace.OpAlloc, ID: uint64(g.i), Size: 8 * vmm.MiB}, true, nil
}
