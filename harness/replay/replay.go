package replay

// This file is trace replay: a recorded training run (trace) driven through one allocator policy on a
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
// A replay reads its events one at a time from a Source (RunStream: a trace.Reader streams a file; Run
// walks a Trace in memory) and keeps only the live allocations (a map from trace ID to pointer and size), so
// its memory does not grow with the trace's length: a 20M-event trace replays in the memory of its live set.
// The loop does no per-event allocation in the steady state, and statistics are read from the engine only
// every SampleEvery events.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
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
	// PlotPoints > 0 (and SampleEvery 0) records a timeline of PlotPoints to 2*PlotPoints samples evenly
	// spaced over a trace whose length is not known before it ends (a pipe): every event at first, and each
	// time the timeline reaches 2*PlotPoints every other sample is dropped and the spacing doubles.
	PlotPoints int

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

	// Input names the input the trace was read from (its path as the user gave it): results are keyed by
	// it, since two inputs may have the same Trace name. Set by the caller; "" when it did not.
	Input string
	// Cut is the trace reader's account of a cut input (trace.ErrCut: its writer stopped mid-trace), when the
	// replay covered the complete events before the cut; "" for a whole trace. Set by the caller.
	Cut string
	// NoFit is set when the trace does not fit the device under this policy: the replay stopped at the
	// first request the engine could not serve. The measurements are then those up to that event.
	NoFit *NoFit
}

// NoFit says where a trace stopped fitting the device: the event (1-based) whose allocation the engine
// could not serve, the events of the trace (0 while unknown: the caller fills it once the input has been
// read to its end), the live bytes at that point and the request.
type NoFit struct {
	Event, Of int
	Live      uint64 // live bytes (each request rounded to LiveRounding) when the request came
	Requested uint64
	Err       string // what the engine held then (its out-of-memory error, without advice for training)
}

// String says it in the table's words: "does not fit: event N of M, live X GiB at that point".
func (n *NoFit) String() string {
	of := "?"
	if n.Of > 0 {
		of = fmt.Sprint(n.Of)
	}
	return fmt.Sprintf("does not fit: event %d of %s, live %.2f GiB at that point (a request of %s)",
		n.Event, of, float64(n.Live)/float64(vmm.GiB), vmm.FormatBytes(n.Requested))
}

// ErrReplay is wrapped by errors raised while replaying (an engine call failed); the engine's own error is
// wrapped too, so errors.Is(err, vmm.ErrOutOfMemory) works.
var ErrReplay = errors.New("replay failed")

// ErrDoesNotFit is wrapped (beside ErrReplay and the engine's error) when a trace does not fit the device:
// RunStream then returns the Result up to that event too, with NoFit set, so that it can be a row.
var ErrDoesNotFit = errors.New("the trace does not fit the device")

// allocator is the part of *impl.Allocator a replay drives. It is an interface so that the harness can be
// tested on its own; newReplayAllocator builds the real engine.
type replayAllocator interface {
	Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error)
	Free(p vmm.DevicePtr) error
	RecordStream(p vmm.DevicePtr, s vmm.Stream) error
	Stats() impl.Stats
	Close() (impl.CloseReport, error)
}

// Source yields a trace's events in order; ok is false at the end. *trace.Reader is one (a file streamed
// in constant memory).
type Source interface {
	Next() (ev trace.Event, ok bool, err error)
}

// TraceSource returns a Source of the events of t, a Trace held in memory.
func TraceSource(t *trace.Trace) Source { return &eventSlice{evs: t.Events} }

// eventSlice is the Source of a Trace held in memory.
type eventSlice struct {
	evs []trace.Event
	i   int
}

func (s *eventSlice) Next() (trace.Event, bool, error) {
	if s.i >= len(s.evs) {
		return trace.Event{}, false, nil
	}
	s.i++
	return s.evs[s.i-1], true, nil
}

// Run drives the trace through one policy and measures it. It returns an error wrapping ErrReplay and the
// engine's error when an engine call fails, naming the trace, the policy and the event; when the failure is
// an out of memory the error wraps ErrDoesNotFit too and the Result up to that event comes with it (NoFit
// set). ctx cancels a long replay.
func Run(ctx context.Context, t *trace.Trace, opts Options) (*Result, error) {
	return RunStream(ctx, t.Name, len(t.Events), &eventSlice{evs: t.Events}, opts)
}

// liveAlloc is a live allocation of the trace: its pointer and its size rounded to LiveRounding.
type liveAlloc struct {
	ptr  vmm.DevicePtr
	size uint64
}

// RunStream is Run over the events of src, a trace named name of total events (total < 0: unknown;
// Progress then gets -1 as the total). Only the live allocations are kept in memory. A src error ends the
// replay with that error.
func RunStream(ctx context.Context, name string, total int, src Source, opts Options) (*Result, error) {
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
	res := &Result{Trace: name, Policy: policy, Device: device}

	live := make(map[uint64]liveAlloc, 1024) // by trace ID
	streams := make([]vmm.Stream, 0, 4)
	haveStream := make([]bool, 0, 4)

	before := readReplayCounters(drv)
	a, err := newReplayAllocator(drv, cfg)
	if err != nil {
		return nil, fmt.Errorf("replay %s with policy %s: %w", name, policy, err)
	}
	closed := false
	defer func() {
		if !closed {
			a.Close()
		}
	}()

	every := opts.SampleEvery // events between samples; 0: none
	if every > 0 && total > 0 {
		res.Timeline = make([]Sample, 0, total/every+2)
	}
	adaptive := every <= 0 && opts.PlotPoints > 0
	if adaptive {
		every = 1
		res.Timeline = make([]Sample, 0, 2*opts.PlotPoints+1)
	}
	const tick = 1 << 14 // events between checks of ctx and progress reports
	var liveBytes, peakLive uint64
	start := time.Now()
	i := 0
	for ; ; i++ {
		e, ok, err := src.Next()
		if err != nil {
			return nil, fmt.Errorf("replay %s with policy %s: %w", name, policy, err)
		}
		if !ok {
			break
		}
		ev := &e
		if i&(tick-1) == 0 && i > 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("replay %s with policy %s: stopped at event %d of %s: %w", name, policy, i, totalText(total), err)
			}
			if opts.Progress != nil {
				opts.Progress(i, total)
			}
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
						return nil, replayErr(name, total, policy, i, ev, fmt.Errorf("create stream %d: %w", ev.Stream, err))
					}
					streams[ev.Stream] = s
				}
				haveStream[ev.Stream] = true
			}
			if _, dup := live[ev.ID]; dup {
				return nil, replayErr(name, total, policy, i, ev, errors.New("alloc of an id that is live (the trace was not checked by trace.Reader?)"))
			}
			p, err := a.Alloc(ev.Size, streams[ev.Stream])
			if err != nil {
				if errors.Is(err, vmm.ErrOutOfMemory) {
					res.NoFit = &NoFit{Event: i + 1, Live: liveBytes, Requested: ev.Size, Err: oomText(err)}
					if total > 0 {
						res.NoFit.Of = total
					}
					res.Events = i
					finish(res, a, drv, before, start, peakLive, len(live))
					return res, fmt.Errorf("%w: %w", ErrDoesNotFit, replayErr(name, total, policy, i, ev, err))
				}
				return nil, replayErr(name, total, policy, i, ev, err)
			}
			sz := vmm.AlignUp(ev.Size, LiveRounding)
			live[ev.ID] = liveAlloc{ptr: p, size: sz}
			liveBytes += sz
			if liveBytes > peakLive {
				peakLive = liveBytes
			}
		case trace.OpFreeRequest:
			// Kept allocated until its f: see the file comment.
		case trace.OpFree:
			l, ok := live[ev.ID]
			if !ok {
				return nil, replayErr(name, total, policy, i, ev, errors.New("free of an id that is not live (the trace was not checked by trace.Reader?)"))
			}
			if err := a.Free(l.ptr); err != nil {
				return nil, replayErr(name, total, policy, i, ev, err)
			}
			liveBytes -= l.size
			delete(live, ev.ID)
		}
		if every > 0 && (i+1)%every == 0 {
			res.Timeline = append(res.Timeline, takeSample(a, i, liveBytes))
			if adaptive && len(res.Timeline) >= 2*opts.PlotPoints {
				res.Timeline, every = halve(res.Timeline), 2*every
			}
		}
	}
	res.Events = i
	if every > 0 && i > 0 && i%every != 0 {
		res.Timeline = append(res.Timeline, takeSample(a, i-1, liveBytes))
	}
	if opts.Progress != nil {
		opts.Progress(i, max(total, i))
	}
	finish(res, a, drv, before, start, peakLive, len(live))

	closed = true
	if _, err := a.Close(); err != nil {
		return res, fmt.Errorf("replay %s with policy %s: close: %w: %w", name, policy, ErrReplay, err)
	}
	for s, ok := range haveStream {
		if ok && s != 0 {
			_ = drv.DestroyStream(streams[s]) // best effort: the measurements are taken
		}
	}
	return res, nil
}

// halve keeps every other sample of tl (the odd ones: each is the last of a doubled spacing), in place.
func halve(tl []Sample) []Sample {
	n := 0
	for i := 1; i < len(tl); i += 2 {
		tl[n] = tl[i]
		n++
	}
	return tl[:n]
}

// finish takes the measurements of a replay that has stopped (at the end of its trace, or at the request
// that did not fit): the engine's statistics, the driver calls and their time since before, the peaks.
func finish(res *Result, a replayAllocator, drv vmm.Driver, before replayCounters, start time.Time, peakLive uint64, unfreed int) {
	res.ReplaySeconds = time.Since(start).Seconds()
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
	res.Unfreed = unfreed
}

// oomText says what the engine held when a replayed request did not fit, without the engine's advice to a
// training job (free tensors, lower the batch size), which means nothing to a replay.
func oomText(err error) string {
	var oom *impl.OOMError
	if !errors.As(err, &oom) {
		return err.Error()
	}
	return fmt.Sprintf("out of memory: requested %s (rounded %s); the allocator held %s (%s live, %s cached); the device had %s free",
		vmm.FormatBytes(oom.Requested), vmm.FormatBytes(oom.Rounded), vmm.FormatBytes(oom.Reserved),
		vmm.FormatBytes(oom.Live), vmm.FormatBytes(oom.Cached), vmm.FormatBytes(oom.DeviceFree))
}

func replayErr(name string, total int, policy string, i int, ev *trace.Event, err error) error {
	return fmt.Errorf("replay %s with policy %s: event %d of %s (%v): %w: %w", name, policy, i+1, totalText(total), *ev, ErrReplay, err)
}

func totalText(total int) string {
	if total < 0 {
		return "?"
	}
	return fmt.Sprint(total)
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
