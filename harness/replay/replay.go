package replay

// This file is trace replay: a recorded training run (harness/trace) driven through one allocator policy on a
// driver (the simulated H200 by default, or a real GPU), measuring what the issue asks of every policy: peak
// live, allocated and reserved bytes, fragmentation, driver calls by kind and the driver time they cost.
//
// How trace events become engine calls:
//
//	a ID SIZE STREAM  Alloc(SIZE, stream(STREAM)); stream 0 is vmm.DefaultStream, every other trace stream is
//	                  made with Driver.CreateStream when the trace first uses it.
//	r ID              no engine call: the program asked to free the block while another stream may still use
//	                  it, so PyTorch kept it out of its pool until the matching f. Keeping it allocated until f
//	                  reproduces exactly when the memory became reusable (PyTorch's allocated-bytes counter
//	                  drops at r instead; the peaks here count it until f). In every PyTorch snapshot we have,
//	                  r is immediately followed by its f, so the two agree.
//	f ID              Free(ptr).
//
// Blocks still live at the end of the trace are released by Close after the measurements are taken: the
// driver calls counted and the modeled time are those of the trace itself, not of the teardown.
//
// The loop does no per-event allocation: pointers and sizes live in slices indexed by trace ID (IDs are
// renumbered densely first when a trace's IDs are sparse), and statistics are read from the engine only
// every SampleEvery events.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gmlake/gmlake/harness/trace"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

// LiveRounding is the granularity the peak live bytes are counted in: every request rounded up to 512 B, as
// PyTorch rounds the smallest blocks, so that live bytes are the floor no allocator can go below.
const LiveRounding = 512

// Policies is the order policies appear in replay tables: the two PyTorch baselines, the original
// GMLake, then ours.
var Policies = []string{impl.PolicyCaching, impl.PolicyExpandable, impl.PolicyGMLakePaper, impl.PolicyGMLake}

// Options configures one Replay.
type Options struct {
	// Policy is the engine policy; it overrides Config.Policy. Empty means Config.Policy (and then the
	// engine's default).
	Policy string
	// Config is the engine configuration; its Policy field is filled from Policy.
	Config impl.Config
	// Driver is the device to replay on. nil means a fresh simulated H200,
	// sim.NewDevice(sim.DeviceConfig{SyncStreams: true}). A driver passed in is not closed or reset;
	// its counters are read before and after, and the difference is reported.
	Driver vmm.Driver
	// Progress, if set, is called from the replaying goroutine every few thousand events and at the end.
	Progress func(done, total int)
	// SampleEvery > 0 records a timeline Sample every SampleEvery events (and after the last), for plots.
	SampleEvery int
	_           struct{}

	_ struct{}
}

// Sample is the memory state after event Event (0-based index into the trace's events).
type Sample struct {
	Event     int
	Live      uint64 // live bytes, each request rounded to LiveRounding
	Allocated uint64 // the engine's AllocatedBytes
	Reserved  uint64 // the engine's ReservedBytes
}

// Result is what one replay of one trace through one policy measured.
type Result struct {
	Trace  string // the trace's name
	Policy string
	Device string // "sim" for the simulated H200, otherwise a description of the driver
	Events int    // trace events replayed

	PeakLiveBytes      uint64  // peak of the live requests, each rounded up to LiveRounding
	PeakAllocatedBytes uint64  // the engine's PeakAllocatedBytes
	PeakReservedBytes  uint64  // the engine's PeakReservedBytes
	Fragmentation      float64 // 1 - PeakAllocated/PeakReserved (0 when nothing was reserved)
	// LiveFragmentation is 1 - PeakLive/PeakReserved: the waste against what the program really held,
	// the measure of the 3% target.
	LiveFragmentation float64

	DriverCalls vmm.CallCounts // calls the replay made (teardown excluded)
	// ModeledDriverTime is what the cost model charges for DriverCalls; zero when the driver is not the
	// simulated device (see MeasuredDriverTime).
	ModeledDriverTime time.Duration
	// MeasuredDriverTime is the wall time spent inside driver calls, when Driver is a *wrap.Meter.
	MeasuredDriverTime time.Duration
	// ModeledByKind and MeasuredByKind split the two times by call kind.
	ModeledByKind, MeasuredByKind [vmm.NumCallKinds]time.Duration
	ReplaySeconds                 float64 // wall time of the event loop

	Unfreed  int      // allocations still live at the end of the trace (released by Close)
	Timeline []Sample // every SampleEvery events, when asked
	Stats    impl.Stats
}

// ErrReplay is wrapped by errors raised while replaying (an engine call failed); the engine's own error is
// wrapped too, so errors.Is(err, vmm.ErrOutOfMemory) works.
var ErrReplay = errors.New("replay failed")

// allocator is the part of *impl.Allocator a replay drives. It is an interface so that the harness can be
// tested on its own; newReplayAllocator builds the real engine.
type replayAllocator interface {
	Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error)
	Free(p vmm.DevicePtr) error
	RecordStream(p vmm.DevicePtr, s vmm.Stream) error
	Stats() impl.Stats
	Close() (impl.CloseReport, error)
}

// Run drives the trace through one policy and measures it. It returns an error wrapping ErrReplay and the
// engine's error when an engine call fails (for example out of memory), naming the trace, the policy and the
// event; ctx cancels a long replay.
func Run(ctx context.Context, t *trace.Trace, opts Options) (*Result, error) {
	cfg := opts.Config
	if opts.Policy != "" {
		cfg.Policy = opts.Policy
	}
	policy := cfg.Policy
	if policy == "" {
		policy = impl.PolicyGMLake
	}
	drv, device := opts.Driver, "sim"
	if drv == nil {
		drv = sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	} else {
		device = describeReplayDriver(drv)
	}
	res := &Result{Trace: t.Name, Policy: policy, Device: device, Events: len(t.Events)}

	ids, slots := replayDenseIDs(t.Events)
	ptrs := make([]vmm.DevicePtr, slots)
	sizes := make([]uint64, slots) // rounded live size; 0 when not live
	streams := make([]vmm.Stream, 0, 4)
	haveStream := make([]bool, 0, 4)

	before := readReplayCounters(drv)
	a, err := newReplayAllocator(drv, cfg)
	if err != nil {
		return nil, fmt.Errorf("replay %s with policy %s: %w", t.Name, policy, err)
	}
	closed := false
	defer func() {
		if !closed {
			a.Close()
		}
	}()

	total := len(t.Events)
	if opts.SampleEvery > 0 {
		res.Timeline = make([]Sample, 0, total/opts.SampleEvery+2)
	}
	const tick = 1 << 14 // events between checks of ctx and progress reports
	var live, peakLive uint64
	start := time.Now()
	for i := range t.Events {
		ev := &t.Events[i]
		if i&(tick-1) == 0 && i > 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("replay %s with policy %s: stopped at event %d of %d: %w", t.Name, policy, i, total, err)
			}
			if opts.Progress != nil {
				opts.Progress(i, total)
			}
		}
		id := ev.ID
		if ids != nil {
			id = ids[i]
		}
		switch ev.Op {
		case trace.OpAlloc:
			for ev.Stream >= len(streams) {
				streams = append(streams, vmm.DefaultStream)
				haveStream = append(haveStream, false)
			}
			if !haveStream[ev.Stream] {
				if ev.Stream != 0 {
					s, err := drv.CreateStream()
					if err != nil {
						return nil, replayErr(t, policy, i, ev, fmt.Errorf("create stream %d: %w", ev.Stream, err))
					}
					streams[ev.Stream] = s
				}
				haveStream[ev.Stream] = true
			}
			p, err := a.Alloc(ev.Size, streams[ev.Stream])
			if err != nil {
				return nil, replayErr(t, policy, i, ev, err)
			}
			ptrs[id] = p
			sz := vmm.AlignUp(ev.Size, LiveRounding)
			sizes[id] = sz
			live += sz
			if live > peakLive {
				peakLive = live
			}
		case trace.OpFreeRequest:
			// Kept allocated until its f: see the file comment.
		case trace.OpFree:
			if sizes[id] == 0 {
				return nil, replayErr(t, policy, i, ev, errors.New("free of an id that is not live (the trace was not checked by trace.Read?)"))
			}
			if err := a.Free(ptrs[id]); err != nil {
				return nil, replayErr(t, policy, i, ev, err)
			}
			live -= sizes[id]
			sizes[id] = 0
		}
		if opts.SampleEvery > 0 && (i+1)%opts.SampleEvery == 0 {
			res.Timeline = append(res.Timeline, takeSample(a, i, live))
		}
	}
	res.ReplaySeconds = time.Since(start).Seconds()
	if opts.SampleEvery > 0 && total%opts.SampleEvery != 0 {
		res.Timeline = append(res.Timeline, takeSample(a, total-1, live))
	}
	if opts.Progress != nil {
		opts.Progress(total, total)
	}

	res.Stats = a.Stats()
	after := readReplayCounters(drv)
	for k := range res.DriverCalls {
		res.DriverCalls[k] = after.calls[k] - before.calls[k]
	}
	res.ModeledDriverTime = after.modeled - before.modeled
	res.MeasuredDriverTime = after.measured - before.measured
	for k := range res.ModeledByKind {
		res.ModeledByKind[k] = after.modeledBy[k] - before.modeledBy[k]
		res.MeasuredByKind[k] = after.measuredBy[k] - before.measuredBy[k]
	}
	res.PeakLiveBytes = peakLive
	res.PeakAllocatedBytes = res.Stats.PeakAllocatedBytes
	res.PeakReservedBytes = res.Stats.PeakReservedBytes
	if res.PeakReservedBytes > 0 {
		r := float64(res.PeakReservedBytes)
		res.Fragmentation = 1 - float64(res.PeakAllocatedBytes)/r
		res.LiveFragmentation = 1 - float64(res.PeakLiveBytes)/r
	}
	for _, s := range sizes {
		if s != 0 {
			res.Unfreed++
		}
	}

	closed = true
	if _, err := a.Close(); err != nil {
		return res, fmt.Errorf("replay %s with policy %s: close: %w: %w", t.Name, policy, ErrReplay, err)
	}
	for s, ok := range haveStream {
		if ok && s != 0 {
			_ = drv.DestroyStream(streams[s]) // best effort: the measurements are taken
		}
	}
	return res, nil
}

func replayErr(t *trace.Trace, policy string, i int, ev *trace.Event, err error) error {
	return fmt.Errorf("replay %s with policy %s: event %d of %d (%v): %w: %w", t.Name, policy, i+1, len(t.Events), *ev, ErrReplay, err)
}

func takeSample(a replayAllocator, i int, live uint64) Sample {
	st := a.Stats()
	return Sample{Event: i, Live: live, Allocated: st.AllocatedBytes, Reserved: st.ReservedBytes}
}

type replayCounters struct {
	calls                 vmm.CallCounts
	modeled, measured     time.Duration
	modeledBy, measuredBy [vmm.NumCallKinds]time.Duration
}

// readReplayCounters reads what the driver counts: a *wrap.Meter counts calls (and, timed, wall time) (and passes the
// modeled time through from the driver it wraps); the simulated device counts calls and modeled time.
func readReplayCounters(d vmm.Driver) replayCounters {
	var c replayCounters
	if td, ok := d.(*wrap.Meter); ok {
		c.calls, c.measured, c.measuredBy = td.Counts(), td.Measured(), td.MeasuredByKind()
		if inner, ok := td.Inner().(vmm.CallCounter); ok {
			c.modeled, c.modeledBy = inner.ModeledTime(), inner.ModeledByKind()
		}
		return c
	}
	if m, ok := d.(vmm.CallCounter); ok {
		c.calls, c.modeled, c.modeledBy = m.Counts(), m.ModeledTime(), m.ModeledByKind()
	}
	return c
}

func describeReplayDriver(d vmm.Driver) string {
	if td, ok := d.(*wrap.Meter); ok {
		d = td.Inner()
	}
	if _, ok := d.(*sim.Device); ok {
		return "sim"
	}
	if s, ok := d.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", d)
}

// denseIDs returns, when the trace's IDs are sparse, a dense renumbering (ids[i] is event i's new ID) and
// the number of slots; when the IDs are already small (the bundled traces number them 0, 1, 2, ...) it
// returns nil and max ID + 1, and events are indexed by their own ID.
func replayDenseIDs(evs []trace.Event) (ids []uint64, slots int) {
	var maxID uint64
	for i := range evs {
		if evs[i].ID > maxID {
			maxID = evs[i].ID
		}
	}
	if len(evs) == 0 {
		return nil, 0
	}
	if maxID < uint64(2*len(evs)+1024) {
		return nil, int(maxID) + 1
	}
	ids = make([]uint64, len(evs))
	m := make(map[uint64]uint64, len(evs)/2+1)
	for i := range evs {
		n, ok := m[evs[i].ID]
		if !ok {
			n = uint64(len(m))
			m[evs[i].ID] = n
		}
		ids[i] = n
	}
	return ids, len(m)
}
