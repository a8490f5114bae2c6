package fuzz

// The campaign (`gmlake fuzz`): many goroutines, one per stream, run random operations on ONE allocator
// for a fixed time, on the simulated device or a real GPU.
//
//   - Every allocation is filled with a byte derived from its id on the device (Memset on its stream) and a
//     sample of it is read back and compared before its free (pattern.go): aliasing, missing mappings or
//     access, and reuse while another stream still writes the block show up as wrong data, on the real
//     GPU too, where no model can look.
//   - RecordStream hands a block to another stream, which then writes it (on the GPU a real memset of the
//     block on that stream; on the simulated device a unit of pending work).
//   - Lock-step checks: every CheckEvery the workers are paused between operations (a RWMutex: workers hold
//     it for reading around each operation), the allocator's snapshot and the device's state (the simulated
//     device's own, or on a GPU the ledger of what this process holds, harness/gpu.Ledger) are judged by the spec's
//     invariants, and the allocator's live set is compared with the workers'.
//   - At the end every worker frees what it holds, all stream work completes, the allocator is closed, and
//     the device must hold nothing of ours (the device's leak report, or the ledger; and cuMemGetInfo's
//     free memory back where it started when the GPU is not shared).
//   - Every operation is logged (a ring of the last LogOps, plus the allocations still live from before
//     it). On the first violation the workers stop, the log is saved as a program file in the extended
//     trace format (ops.go: `gmlake replay` reads it as a trace, `gmlake fuzz --replay` runs it exactly),
//     re-run single-threaded on the simulated device, and minimized (minimize.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmlake/gmlake/harness/gpu"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// CampaignConfig configures a campaign. Zero fields take the defaults noted.
type CampaignConfig struct {
	Device   string        // "sim" (default) or "cuda" (impl/cudavmm, device CUDADevice)
	Policy   string        // one of impl.Policies; "": the default policy
	Duration time.Duration // 0: 10s
	Seed     int64         // 0: from the clock (printed)
	Streams  int           // worker goroutines, one stream each (the first on the default stream); 0: 8
	// Capacity: on "sim" the simulated device's size (0: 16 GiB); on "cuda" the most bytes the workers keep
	// live at once (0: half the GPU's free memory). The workers keep their live bytes under 80% of it, so
	// out-of-memory comes from the allocator's cache and fragmentation, and is legal.
	Capacity   uint64
	MaxSize    uint64        // largest request; 0: Capacity/8
	MaxLive    int           // most live allocations per worker; 0: 48
	CheckEvery time.Duration // lock-step check period; 0: 1s; < 0: never (the end checks still run)
	// Progress receives a progress line every ProgressEvery (0: 5s); nil: none.
	Progress      io.Writer
	ProgressEvery time.Duration
	OutDir        string        // where failing programs are saved; "": the current directory
	MinimizeFor   time.Duration // time budget of the minimizer; 0: 60s; < 0: no minimization
	LogOps        int           // operations kept in the log for the reproducer; 0: 20000
	// MemInfoCheck also requires the device's free memory (cuMemGetInfo) back to its value at the start
	// after Close. Leave it off when other processes share the GPU; the ledger check always runs.
	MemInfoCheck bool
	CUDADevice   int           // device ordinal for "cuda"
	Mutations    impl.Mutation // seeded engine bugs (tests proving the campaign bites)
	// HangAfter: if no operation completes for this long the allocator is deemed hung (a deadlock): the
	// goroutines' stacks and the operation log are saved and OnHang is called (0: 2 minutes).
	HangAfter time.Duration
	// OnHang is called with the summary so far after a hang; the campaign cannot finish then (a worker is
	// stuck inside the allocator), so the caller should report and exit. nil: RunCampaign blocks.
	OnHang func(*Summary)
	// ledgerOnSim runs the simulated device behind the ledger, judged by the ledger's state as on a GPU,
	// and checks at each pause that the ledger agrees with the device (tests of the GPU path).
	ledgerOnSim bool
	_           struct{}

	_ struct{}
}

// Summary is what a campaign did; printed as one JSON line by `gmlake fuzz`.
type Summary struct {
	Policy        string            `json:"policy"`
	Device        string            `json:"device"`
	Seed          int64             `json:"seed"`
	Streams       int               `json:"streams"`
	Seconds       float64           `json:"seconds"`
	Ops           uint64            `json:"ops"`
	OpsPerSec     float64           `json:"ops_per_sec"`
	Allocs        uint64            `json:"allocs"`
	Frees         uint64            `json:"frees"`
	Records       uint64            `json:"record_streams"`
	EmptyCaches   uint64            `json:"empty_caches"`
	OOMs          uint64            `json:"ooms"`
	BytesAlloced  uint64            `json:"bytes_allocated"`
	BytesVerified uint64            `json:"bytes_verified"`
	Checks        uint64            `json:"checks"`
	PeakReserved  uint64            `json:"peak_reserved_bytes"`
	PeakAllocated uint64            `json:"peak_allocated_bytes"`
	DriverCalls   map[string]uint64 `json:"driver_calls"`
	Violations    int               `json:"violations"`
	Leaks         int               `json:"leaks"`
	MemFreeStart  uint64            `json:"mem_free_start"`
	MemFreeEnd    uint64            `json:"mem_free_end"`
	Failure       string            `json:"failure,omitempty"`
	Trace         string            `json:"trace,omitempty"`           // the saved program
	Reproduced    *bool             `json:"reproduced,omitempty"`      // did it fail again single-threaded on the simulated device
	Minimized     string            `json:"minimized_trace,omitempty"` // the minimized program
	MinimizedOps  int               `json:"minimized_ops,omitempty"`
}

// OK reports whether the campaign found nothing.
func (s *Summary) OK() bool { return s.Violations == 0 && s.Leaks == 0 }

// campaign is the shared state of a running campaign.
type campaign struct {
	cfg     CampaignConfig
	drv     vmm.Driver  // what the allocator uses (the ledger on cuda)
	sim     *sim.Device // nil on cuda
	led     *gpu.Ledger // nil on sim
	a       *impl.Allocator
	streams []vmm.Stream
	budget  uint64
	gate    sync.RWMutex // workers hold it for reading around each operation; the checker for writing
	stop    atomic.Bool
	live    atomic.Uint64 // bytes the workers hold live
	nextID  atomic.Uint64
	workers []*worker

	failMu   sync.Mutex
	failures []spec.Violation

	log opLog
	sum Summary
}

// worker runs operations on one stream. Its fields are owned by its goroutine, except live, which the
// checker reads while the worker is paused (the gate).
type worker struct {
	c                                                      *campaign
	i                                                      int
	s                                                      vmm.Stream
	rng                                                    *rand.Rand
	live                                                   []*liveAlloc
	buf                                                    []byte
	ops                                                    atomic.Uint64
	allocs, frees, records, empties, ooms, bytes, verified atomic.Uint64
}

// MinCapacity is the smallest CampaignConfig.Capacity: one 2 MiB chunk (below it no request fits).
const MinCapacity = 2 * vmm.MiB

// ErrBadConfig is the kind (errors.Is) of RunCampaign's configuration errors: nothing ran.
var ErrBadConfig = errors.New("fuzz: invalid campaign configuration")

// RunCampaign runs a campaign until its duration passes or ctx is done, and returns its summary. The
// error is for setup problems (no GPU, bad policy, ErrBadConfig); violations are in the summary.
func RunCampaign(ctx context.Context, cfg CampaignConfig) (*Summary, error) {
	switch {
	case cfg.Streams < 0:
		return nil, fmt.Errorf("%w: %d streams", ErrBadConfig, cfg.Streams)
	case cfg.Duration < 0:
		return nil, fmt.Errorf("%w: duration %v", ErrBadConfig, cfg.Duration)
	case cfg.Capacity != 0 && cfg.Capacity < MinCapacity:
		return nil, fmt.Errorf("%w: capacity %d bytes is less than %s", ErrBadConfig, cfg.Capacity, vmm.FormatBytes(MinCapacity))
	}
	if cfg.Device == "" {
		cfg.Device = "sim"
	}
	if cfg.Policy == "" {
		cfg.Policy = impl.PolicyGMLake
	}
	if cfg.Duration == 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano() % 1_000_000_007
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 8
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 48
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	if cfg.MinimizeFor == 0 {
		cfg.MinimizeFor = 60 * time.Second
	}
	if cfg.LogOps <= 0 {
		cfg.LogOps = 20000
	}
	c := &campaign{cfg: cfg}
	c.sum = Summary{Policy: cfg.Policy, Device: cfg.Device, Seed: cfg.Seed, Streams: cfg.Streams}
	switch cfg.Device {
	case "sim":
		if cfg.Capacity == 0 {
			cfg.Capacity = 16 * vmm.GiB
		}
		c.sim = sim.NewDevice(sim.DeviceConfig{Capacity: cfg.Capacity, Seed: cfg.Seed})
		c.drv = c.sim
		if cfg.ledgerOnSim {
			c.led = gpu.NewLedger(c.sim)
			c.drv = c.led
		}
	case "cuda":
		d, err := cudavmm.New(cfg.CUDADevice)
		if err != nil {
			return nil, fmt.Errorf("fuzz: --device cuda: %w", err)
		}
		defer d.Close()
		c.led = gpu.NewLedger(d)
		c.drv = c.led
		if cfg.Capacity == 0 {
			free, _, err := d.MemInfo()
			if err != nil {
				return nil, fmt.Errorf("fuzz: cuMemGetInfo: %w", err)
			}
			cfg.Capacity = free / 2
		}
	default:
		return nil, fmt.Errorf("fuzz: unknown device %q (want sim or cuda)", cfg.Device)
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = max(cfg.Capacity/8, vmm.MiB)
	}
	c.cfg = cfg
	c.budget = cfg.Capacity / 5 * 4
	c.log.init(cfg.LogOps)

	var err error
	if c.sum.MemFreeStart, _, err = c.drv.MemInfo(); err != nil {
		return nil, fmt.Errorf("fuzz: MemInfo: %w", err)
	}
	c.streams = []vmm.Stream{vmm.DefaultStream}
	for len(c.streams) < cfg.Streams {
		s, err := c.drv.CreateStream()
		if err != nil {
			return nil, fmt.Errorf("fuzz: creating stream %d: %w", len(c.streams), err)
		}
		c.streams = append(c.streams, s)
	}
	defer func() {
		for _, s := range c.streams[1:] {
			c.drv.DestroyStream(s)
		}
	}()
	if c.a, err = impl.New(c.drv, impl.Config{Policy: cfg.Policy, TestOnlyMutations: cfg.Mutations}); err != nil {
		return nil, fmt.Errorf("fuzz: policy %q: %w", cfg.Policy, err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for i, s := range c.streams {
		w := &worker{c: c, i: i, s: s, rng: rand.New(rand.NewSource(cfg.Seed*1_000_003 + int64(i)))}
		c.workers = append(c.workers, w)
	}
	if cfg.HangAfter <= 0 {
		cfg.HangAfter = 2 * time.Minute
	}
	watchdogDone := make(chan struct{})
	defer close(watchdogDone)
	go c.watchdog(start, cfg.HangAfter, watchdogDone)
	for _, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					c.fail(spec.Violation{Inv: CheckPanic, Msg: fmt.Sprintf("worker %d: %v", w.i, r)})
				}
			}()
			for !c.stop.Load() {
				c.gate.RLock()
				w.step()
				c.gate.RUnlock()
			}
		}()
	}
	ticker := time.NewTicker(cfg.ProgressEvery)
	defer ticker.Stop()
	var checkC <-chan time.Time
	if cfg.CheckEvery > 0 {
		ct := time.NewTicker(cfg.CheckEvery)
		defer ct.Stop()
		checkC = ct.C
	}
	lastOps, lastT := uint64(0), start
loop:
	for !c.stop.Load() {
		select {
		case <-ctx.Done():
			break loop
		case <-checkC:
			c.lockstepCheck()
		case now := <-ticker.C:
			ops := c.ops()
			c.progress(now.Sub(start), ops, float64(ops-lastOps)/now.Sub(lastT).Seconds())
			lastOps, lastT = ops, now
		case <-time.After(50 * time.Millisecond): // notice c.stop promptly
		}
	}
	c.stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	if len(c.failures) == 0 {
		c.lockstepCheck()
	}
	failed := len(c.failures) > 0
	if failed {
		c.saveFailure()
	}
	c.finish(failed)
	if !failed && len(c.failures) > 0 {
		c.saveFailure() // a leak or a failure found while freeing at the end
	}
	c.summarize(elapsed, true)
	return &c.sum, nil
}

func (c *campaign) ops() uint64 {
	var n uint64
	for _, w := range c.workers {
		n += w.ops.Load()
	}
	return n
}

func (c *campaign) fail(v spec.Violation) {
	c.failMu.Lock()
	c.failures = append(c.failures, v)
	c.failMu.Unlock()
	c.stop.Store(true)
}

func (c *campaign) progress(el time.Duration, ops uint64, rate float64) {
	if c.cfg.Progress == nil {
		return
	}
	st := c.a.Stats()
	var ooms uint64
	for _, w := range c.workers {
		ooms += w.ooms.Load()
	}
	fmt.Fprintf(c.cfg.Progress, "fuzz %s/%s %5.0fs: %d ops (%.0f ops/s), %d live (%s), reserved %s, %d OOMs, %d checks, %d violations\n",
		c.cfg.Policy, c.cfg.Device, el.Seconds(), ops, rate, st.NumLive, vmm.FormatBytes(st.AllocatedBytes),
		vmm.FormatBytes(st.ReservedBytes), ooms, c.sum.Checks, len(c.failures))
}

// state returns the device's account of memory: the simulated device's own, or the ledger's.
func (c *campaign) state() sim.DeviceState {
	if c.led != nil {
		return c.led.State()
	}
	return c.sim.State()
}

// watchdog declares a hang when no operation completes for hangAfter while the workers should run.
func (c *campaign) watchdog(start time.Time, hangAfter time.Duration, done <-chan struct{}) {
	last, lastT := c.ops(), time.Now()
	t := time.NewTicker(hangAfter / 8)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			if n := c.ops(); n != last || c.stop.Load() {
				last, lastT = n, now
				continue
			}
			if now.Sub(lastT) < hangAfter {
				continue
			}
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			c.say("fuzz: HANG: no operation completed for %v; goroutines:\n%s\n", hangAfter, buf)
			c.fail(spec.Violation{Inv: CheckHang, Msg: fmt.Sprintf("no operation completed for %v after %d ops (a deadlock in the allocator?)", hangAfter, last)})
			c.saveFailureLog()
			c.summarize(time.Since(start), false)
			if c.cfg.OnHang != nil {
				c.cfg.OnHang(&c.sum)
			}
			return
		}
	}
}

// lockstepCheck pauses the workers between operations and judges the state.
func (c *campaign) lockstepCheck() {
	c.gate.Lock()
	defer c.gate.Unlock()
	var live []*liveAlloc
	for _, w := range c.workers {
		live = append(live, w.live...)
	}
	sort.Slice(live, func(i, j int) bool { return live[i].ptr < live[j].ptr })
	c.sum.Checks++
	if c.led != nil && c.sim != nil {
		if l, d := c.led.State(), c.sim.State(); !reflect.DeepEqual(l, d) {
			c.fail(spec.Violation{Inv: CheckLedger, Msg: fmt.Sprintf("the ledger's account differs from the device's:\nledger %+v\ndevice %+v", l, d)})
		}
	}
	if v := checkState(c.a.Snapshot(), c.state(), live); len(v) > 0 {
		for _, x := range v {
			c.fail(x)
		}
	}
	c.checkHazards()
}

// checkHazards fails the campaign on any rule-9 hazard the simulated device saw (an unmap racing pending
// work through the mapping), then forgets them so each is reported once.
func (c *campaign) checkHazards() {
	if c.sim == nil {
		return
	}
	if err := c.sim.HazardError(); err != nil {
		c.fail(spec.Violation{Inv: CheckHazard, Msg: err.Error()})
		c.sim.ClearHazards()
	}
}

// --- the workers ---

func (w *worker) step() {
	c := w.c
	r := w.rng.Intn(1000)
	switch {
	case len(w.live) == 0 || (r < 430 && len(w.live) < c.cfg.MaxLive):
		w.alloc()
	case r < 800 || len(w.live) >= c.cfg.MaxLive:
		w.free(w.rng.Intn(len(w.live)))
	case r < 860:
		w.record()
	case r < 930:
		w.launch()
	case r < 995:
		if c.sim != nil {
			j := w.rng.Intn(len(c.streams))
			c.log.add(ops.Op{Kind: ops.OpComplete, Stream: j}, nil)
			c.sim.Complete(c.streams[j])
		} else {
			w.launch()
		}
	default:
		c.log.add(ops.Op{Kind: ops.OpEmptyCache}, nil)
		w.empties.Add(1)
		if err := c.a.EmptyCache(); err != nil {
			c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("EmptyCache: %v", err)})
		}
	}
	w.ops.Add(1)
}

// logUniform maps m (0..65535) to [lo, hi) log-uniformly.
func logUniform(lo, hi uint64, m uint16) uint64 {
	f := float64(m) / 65536
	v := uint64(float64(lo) * math.Pow(float64(hi)/float64(lo), f))
	return min(max(v, lo), hi-1)
}

// campaignSize draws a request size: mostly small and medium, with a tail up to max.
func campaignSize(r *rand.Rand, maxSize uint64) uint64 {
	var s uint64
	m := uint16(r.Intn(1 << 16))
	switch x := r.Intn(100); {
	case x < 25:
		s = logUniform(1, 64*vmm.KiB, m)
	case x < 50:
		s = logUniform(64*vmm.KiB, 2*vmm.MiB, m)
	case x < 72:
		s = logUniform(2*vmm.MiB, 32*vmm.MiB, m)
	case x < 87:
		s = logUniform(32*vmm.MiB, 256*vmm.MiB, m)
	case x < 93:
		s = logUniform(256*vmm.MiB, 4*vmm.GiB, m)
	case x < 97:
		s = (1 + uint64(r.Intn(256))) * 2 * vmm.MiB
	default:
		s = commonSizes[r.Intn(len(commonSizes))]
	}
	return max(1, min(s, maxSize))
}

func (w *worker) alloc() {
	c := w.c
	size := campaignSize(w.rng, c.cfg.MaxSize)
	if c.live.Load()+size > c.budget {
		if len(w.live) > 0 {
			w.free(w.rng.Intn(len(w.live)))
			return
		}
		size = max(1, min(size, c.budget/uint64(4*len(c.workers))))
	}
	id := c.nextID.Add(1)
	op := ops.Op{Kind: ops.OpAlloc, ID: int(id), Size: size, Stream: w.i}
	ptr, err := c.a.Alloc(size, w.s)
	if err != nil {
		// Logged as an allocation freed at once: in a replay it may succeed.
		c.log.add(op, nil)
		c.log.add(ops.Op{Kind: ops.OpFree, ID: int(id)}, nil)
		if errors.Is(err, vmm.ErrOutOfMemory) {
			w.ooms.Add(1)
			if len(w.live) > 0 {
				w.free(w.rng.Intn(len(w.live)))
			}
			return
		}
		c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("Alloc(%d) on stream %d: %v", size, w.s, err)})
		return
	}
	l := &liveAlloc{id: id, ptr: ptr, size: size, stream: w.s, val: ops.PatternByte(id)}
	c.log.add(op, &op)
	w.live = append(w.live, l)
	c.live.Add(size)
	w.allocs.Add(1)
	w.bytes.Add(size)
	if err := ops.Fill(c.drv, ptr, size, l.val, w.s); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d (worker %d): %v", id, w.i, err)})
	}
}

func (w *worker) free(i int) {
	c := w.c
	l := w.live[i]
	probes := 16
	if c.sim == nil {
		probes = 4
	}
	if err := ops.Verify(c.drv, l.ptr, l.size, l.val, w.s, c.drv.Granularity(), probes, w.buf); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d (worker %d) before its free: %v", l.id, w.i, err)})
		return
	}
	w.verified.Add(min(l.size, 64*vmm.KiB))
	w.live[i] = w.live[len(w.live)-1]
	w.live = w.live[:len(w.live)-1]
	c.log.add(ops.Op{Kind: ops.OpFree, ID: int(l.id)}, nil) // before the free: a reuse is logged after it
	if err := c.a.Free(l.ptr); err != nil {
		c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("Free(%v) of allocation %d (worker %d): %v", l.ptr, l.id, w.i, err)})
	}
	c.live.Add(-l.size)
	w.frees.Add(1)
}

// record hands one of the worker's blocks to another stream, which then writes it.
func (w *worker) record() {
	c := w.c
	if len(c.streams) < 2 {
		w.launch()
		return
	}
	l := w.live[w.rng.Intn(len(w.live))]
	j := w.rng.Intn(len(c.streams) - 1)
	if j >= w.i {
		j++
	}
	s := c.streams[j]
	c.log.add(ops.Op{Kind: ops.OpRecord, ID: int(l.id), Stream: j}, nil)
	if err := c.a.RecordStream(l.ptr, s); err != nil {
		c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("RecordStream(%v, stream %d) of allocation %d: %v", l.ptr, s, l.id, err)})
		return
	}
	w.records.Add(1)
	if c.sim != nil {
		c.log.add(ops.Op{Kind: ops.OpLaunch, Stream: j}, nil) // the other stream's use of the block
		c.sim.Launch(s)
		return
	}
	// On the GPU the other stream really writes the block (the same pattern: a correct allocator keeps the
	// block from anyone else until this work is done).
	if err := ops.Fill(c.drv, l.ptr, l.size, l.val, s); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d used on stream %d: %v", l.id, s, err)})
	}
}

// launch submits work on the worker's stream: a unit of pending work on the simulated device; on the GPU
// a rewrite of one of the worker's blocks with its own pattern.
func (w *worker) launch() {
	s := w.s
	c := w.c
	if c.sim != nil {
		c.log.add(ops.Op{Kind: ops.OpLaunch, Stream: w.i}, nil)
		c.sim.Launch(s)
		return
	}
	l := w.live[w.rng.Intn(len(w.live))]
	if err := ops.Fill(c.drv, l.ptr, l.size, l.val, s); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d rewritten on stream %d: %v", l.id, s, err)})
	}
}

// --- the end ---

// finish frees what the workers hold (verifying it), completes all work, closes the allocator and checks
// for leaks. After a failure it still closes (best effort) but judges nothing more.
func (c *campaign) finish(failed bool) {
	defer func() {
		if r := recover(); r != nil {
			c.fail(spec.Violation{Inv: CheckPanic, Msg: fmt.Sprintf("at the end (free all, Close): %v", r)})
		}
	}()
	for _, w := range c.workers {
		for len(w.live) > 0 && !failed {
			w.free(len(w.live) - 1)
			failed = len(c.failures) > 0
		}
	}
	c.syncAll()
	if !failed {
		c.lockstepCheck()
		failed = len(c.failures) > 0
	}
	if _, err := c.a.Close(); err != nil && !failed {
		c.fail(spec.Violation{Inv: CheckError, Msg: "Close: " + err.Error()})
	}
	if !failed {
		c.checkHazards()
		failed = len(c.failures) > 0
	}
	if failed {
		return
	}
	if c.sim != nil {
		if lk := c.sim.Leaks(); !lk.Empty() {
			c.sum.Leaks++
			c.fail(spec.Violation{Inv: CheckLeak, Msg: lk.String()})
		}
	}
	if c.led != nil {
		if ok, what := c.led.Empty(); !ok {
			c.sum.Leaks++
			c.fail(spec.Violation{Inv: CheckLeak, Msg: "the ledger: " + what})
		}
	}
	c.sum.MemFreeEnd, _, _ = c.drv.MemInfo()
	if (c.sim != nil || c.cfg.MemInfoCheck) && c.sum.MemFreeEnd < c.sum.MemFreeStart {
		c.sum.Leaks++
		c.fail(spec.Violation{Inv: CheckLeak, Msg: fmt.Sprintf("device free memory %d B after Close, %d B at the start",
			c.sum.MemFreeEnd, c.sum.MemFreeStart)})
	}
}

// syncAll waits for all stream work.
func (c *campaign) syncAll() {
	if c.sim != nil {
		c.sim.CompleteAll()
		return
	}
	for _, s := range c.streams {
		if d, ok := c.led.Driver.(vmm.StreamSyncer); ok {
			d.Synchronize(s)
		}
	}
}

// summarize fills the summary; withStats also asks the allocator (not after a hang: it may be stuck).
func (c *campaign) summarize(el time.Duration, withStats bool) {
	s := &c.sum
	s.Seconds = el.Seconds()
	for _, w := range c.workers {
		s.Ops += w.ops.Load()
		s.Allocs += w.allocs.Load()
		s.Frees += w.frees.Load()
		s.Records += w.records.Load()
		s.EmptyCaches += w.empties.Load()
		s.OOMs += w.ooms.Load()
		s.BytesAlloced += w.bytes.Load()
		s.BytesVerified += w.verified.Load()
	}
	if s.Seconds > 0 {
		s.OpsPerSec = float64(s.Ops) / s.Seconds
	}
	if withStats {
		st := c.a.Stats()
		s.PeakReserved, s.PeakAllocated = st.PeakReservedBytes, st.PeakAllocatedBytes
		s.DriverCalls = st.DriverCalls.Map()
	}
	c.failMu.Lock()
	s.Violations = len(c.failures) - s.Leaks
	if len(c.failures) > 0 && s.Failure == "" {
		s.Failure = c.failures[0].String()
	}
	c.failMu.Unlock()
}

// --- failure: save, reproduce, minimize ---

// replayConfig is the setup a saved campaign program replays under: the simulated device of the
// campaign's capacity (on a GPU Capacity is the live budget), one stream per worker, the pattern check on.
func (c *campaign) replayConfig() ops.Config {
	capacity := c.cfg.Capacity
	if capacity == 0 {
		capacity = sim.H200Capacity
	}
	return ops.Config{Policy: c.cfg.Policy, Capacity: capacity, Streams: len(c.streams), Seed: c.cfg.Seed,
		Mutations: c.cfg.Mutations, Patterns: true}
}

// saveFailureLog saves the operation log as a program file and returns it and the file's base name
// (nil if it could not be written).
func (c *campaign) saveFailureLog() (*ops.Program, string) {
	c.failMu.Lock()
	first := c.failures[0]
	c.failMu.Unlock()
	p := &ops.Program{Cfg: c.replayConfig(), Ops: c.log.program()}
	dir := c.cfg.OutDir
	if dir == "" {
		dir = "."
	}
	os.MkdirAll(dir, 0o755)
	base := filepath.Join(dir, fmt.Sprintf("gmlake-fuzz-%s-%s-seed%d-%d", c.cfg.Policy, c.cfg.Device, c.cfg.Seed, time.Now().Unix()))
	path := base + ".ops"
	c.sum.Failure = first.String()
	header := []string{
		fmt.Sprintf("gmlake fuzz campaign failure: policy %s, device %s, seed %d, %d streams", c.cfg.Policy, c.cfg.Device, c.cfg.Seed, len(c.streams)),
		"violation: " + oneLine(first.String()),
		"the last operations before the failure, interleaved from all workers (allocations still live from before come first)",
		"reproduce and shrink: gmlake fuzz --replay " + path + " --minimize   (or: GMLAKE_OPS=" + path + " GMLAKE_SHRINK=1 go test ./harness -run TestOpsFile)",
	}
	if err := p.WriteFile(path, header...); err != nil {
		c.say("fuzz: could not save the failing sequence: %v\n", err)
		return nil, ""
	}
	c.sum.Trace = path
	c.say("fuzz: FAILURE %s\nfuzz: saved %d operations to %s\n", oneLine(first.String()), len(p.Ops), path)
	return p, base
}

// describeRun says where a run of seq failed and how.
func describeRun(seq []ops.Op, i int, vs []spec.Violation) string {
	op := "the end (clearfaults, completeall, close, leak check)"
	if i < len(seq) {
		op = seq[i].String()
	}
	return fmt.Sprintf("step %d (%s): %v", i, op, vs[0])
}

func (c *campaign) saveFailure() {
	p, base := c.saveFailureLog()
	if p == nil {
		return
	}
	path := c.sum.Trace
	i, vs, _, err := ops.Run(p.Cfg, p.Ops)
	rep := err == nil && i >= 0
	c.sum.Reproduced = &rep
	if !rep {
		c.say("fuzz: the saved sequence does not fail single-threaded on the simulated device (a concurrency- or GPU-only failure); not minimized\n")
		return
	}
	c.say("fuzz: reproduced single-threaded: %s\n", oneLine(describeRun(p.Ops, i, vs)))
	if c.cfg.MinimizeFor < 0 {
		return
	}
	c.say("fuzz: minimizing (up to %v)...\n", c.cfg.MinimizeFor)
	small, svs := ops.Shrink(p.Cfg, p.Ops, c.cfg.MinimizeFor)
	m := &ops.Program{Cfg: p.Cfg, Ops: small}
	what := "(the minimized sequence no longer fails: the failure is not deterministic)"
	if len(svs) > 0 {
		what = oneLine(svs[0].String())
	}
	mpath := base + ".min.ops"
	mheader := []string{
		fmt.Sprintf("minimized from %s (%d -> %d operations)", path, len(p.Ops), len(m.Ops)),
		"violation: " + what,
		"reproduce: gmlake fuzz --replay " + mpath + "   (or: GMLAKE_OPS=" + mpath + " go test ./harness -run TestOpsFile)",
	}
	if err := m.WriteFile(mpath, mheader...); err != nil {
		c.say("fuzz: could not save the minimized sequence: %v\n", err)
		return
	}
	c.sum.Minimized, c.sum.MinimizedOps = mpath, len(m.Ops)
	c.say("fuzz: minimized to %d operations: %s\n", len(m.Ops), mpath)
}

func (c *campaign) say(format string, args ...any) {
	w := c.cfg.Progress
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, format, args...)
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// --- the operation log ---

// opLog is a ring of the last operations, in the order they were logged, and the allocations evicted
// from it while still live (so the saved program allocates everything it later frees or uses).
type opLog struct {
	mu      sync.Mutex
	ring    []ops.Op
	n       int // ops logged, ever
	live    map[int]bool
	carried map[int]ops.Op
}

func (l *opLog) init(size int) {
	l.ring = make([]ops.Op, size)
	l.live = make(map[int]bool)
	l.carried = make(map[int]ops.Op)
}

// add logs o; alloc is non-nil for a successful allocation (which stays live until its free is logged).
func (l *opLog) add(o ops.Op, alloc *ops.Op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slot := l.n % len(l.ring)
	if l.n >= len(l.ring) {
		switch old := l.ring[slot]; old.Kind {
		case ops.OpAlloc:
			if l.live[old.ID] {
				l.carried[old.ID] = old
			}
		case ops.OpFree:
			delete(l.carried, old.ID)
		}
	}
	l.ring[slot] = o
	l.n++
	switch {
	case alloc != nil:
		l.live[o.ID] = true
	case o.Kind == ops.OpFree:
		delete(l.live, o.ID)
	}
}

// program returns the carried allocations (by id) followed by the ring's operations in order.
func (l *opLog) program() []ops.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ops.Op
	ids := make([]int, 0, len(l.carried))
	for id := range l.carried {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		out = append(out, l.carried[id])
	}
	first := max(0, l.n-len(l.ring))
	for i := first; i < l.n; i++ {
		out = append(out, l.ring[i%len(l.ring)])
	}
	return out
}
