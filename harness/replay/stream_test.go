package replay

import (
	"context"
	"runtime"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/trace"
)

// genSource makes a trace as it goes: n events, allocations of 1-8 MiB with at most 64 live, IDs in order.
type genSource struct {
	n, i, next int
	live       []uint64
}

func (g *genSource) Next() (trace.Event, bool, error) {
	if g.i >= g.n {
		return trace.Event{}, false, nil
	}
	g.i++
	if len(g.live) >= 64 || (len(g.live) > 0 && g.i%2 == 0) {
		id := g.live[0]
		g.live = append(g.live[:0], g.live[1:]...)
		return trace.Event{Op: trace.OpFree, ID: id}, true, nil
	}
	id := uint64(g.next)
	g.next++
	g.live = append(g.live, id)
	return trace.Event{Op: trace.OpAlloc, ID: id, Size: uint64(1+g.i%8) << 20, Stream: g.i % 2}, true, nil
}

// A streamed replay's memory does not grow with the trace's length (issue 14 item 11): replaying two
// million events allocates about as much as replaying a hundred thousand, far less than holding the events
// (32 B each) would.
func TestReplayStreamMemoryIndependentOfLength(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: replays 2.1M events")
	}
	allocated := func(n int) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res, err := RunStream(context.Background(), "gen", n, &genSource{n: n}, Options{Policy: impl.PolicyCaching})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if res.Events != n {
			t.Fatalf("replayed %d of %d events", res.Events, n)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	short, long := allocated(100_000), allocated(2_000_000)
	t.Logf("bytes allocated: %d for 100k events, %d for 2M events", short, long)
	if long > short+1<<20 {
		t.Fatalf("replaying 2M events allocated %d bytes, 100k events %d: memory grows with the trace", long, short)
	}
}
