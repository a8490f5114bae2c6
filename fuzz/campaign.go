package fuzz

// The campaign (`gmlake fuzz`): many goroutines, one per stream, run the one generator's ops (harness/ops:
// ops.Rules, campaignRules of them) on ONE engine behind the serving layer (impl/serve: what libgmlake
// runs, the memory cap and the synchronise-every-stream-and-retry on out of memory included) for a fixed
// time, on the simulated device or a real GPU (harness/gpu.Device: real streams whose work the ops hold back
// and release, a ledger of what this process holds).
//
//   - Every allocation is filled with a byte derived from its id on the device (Memset on the checker's
//     stream) and a sample of it is read back and compared before its free (pattern.go): aliasing,
//     missing mappings or access, and reuse while another stream still writes the block show up as wrong
//     data, on the real GPU too, where no model can look.
//   - record hands a block to another stream, which then uses it (pending work there; on the GPU, behind
//     the held-back unit, a real write of the block on that stream).
//   - Lock-step checks: every CheckEvery the workers are paused between operations (a RWMutex: workers hold
//     it for reading around each operation), the engine's snapshot and the device's state (the simulated
//     device's own, or on a GPU the ledger of what this process holds, harness/gpu.Ledger) are judged by the
//     spec's invariants, and the engine's live set is compared with the workers'.
//   - At the end every worker frees what it holds, all stream work completes, the engine is closed, and
//     the device must hold nothing of ours (the device's leak report, or the ledger; and cuMemGetInfo's
//     free memory back where it started when the GPU is not shared).
//   - Every operation is logged as an ops.Op (a ring of the last LogOps, plus the allocations still live
//     from before it). On the first violation the workers stop, the log is saved as a program of the op
//     language (`gmlake fuzz --replay FILE --minimize` runs and shrinks it), re-run single-threaded in
//     ops.Env on the simulated device through the serving layer, and shrunk (ops.Shrink); the seed, the ops
//     and the replay command are printed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmlake/gmlake/harness/gpu"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/impl/serve"
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
	// Capacity: on "sim" the simulated device's size (0: 16 GiB); on "cuda" the device the judge sees and
	// the serving layer's memory cap (harness/gpu.Config.Capacity; 0: half the GPU's free memory). The
	// workers keep their live bytes under 80% of it, so out-of-memory comes from the allocator's cache and
	// fragmentation (or MemoryLimit), and is legal.
	Capacity uint64
	// MemoryLimit: on "sim" the serving layer's cap on the engine's physical bytes (0: none); on "cuda" the
	// cap is Capacity.
	MemoryLimit uint64
	MaxSize     uint64        // largest request; 0: Capacity/8
	MaxLive     int           // most live allocations per worker; 0: 48
	CheckEvery  time.Duration // lock-step check period; 0: 1s; < 0: never (the end checks still run)
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
	// noValidate runs a configuration Validate refuses (tests of the campaign's own verdict on a campaign
	// in which nothing can be allocated).
	noValidate bool
	_          struct{}

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
	PeakReserved  uint64            `json:"peak_reserved_bytes"` // since the last reset-peak (the query rule's)
	PeakAllocated uint64            `json:"peak_allocated_bytes"`
	DriverCalls   map[string]uint64 `json:"driver_calls"`
	Violations    int               `json:"violations"`
	Leaks         int               `json:"leaks"`
	MemFreeStart  uint64            `json:"mem_free_start"`
	MemFreeEnd    uint64            `json:"mem_free_end"`
	Syncs         uint64            `json:"syncs"`        // the serving layer synchronised every stream (EmptyCache, out of memory)
	SyncRetries   uint64            `json:"sync_retries"` // requests served only after that synchronisation
	Rules         map[string]uint64 `json:"rules"`        // the generator's rules the workers drew, by name
	Forgets       uint64            `json:"forgets"`      // ForgetStream calls (the default stream's refusals included)
	Queries       uint64            `json:"queries"`      // largest, snapshot, reset-peak and reset-acc, each judged with the workers paused
	// Vacuous: the campaign ran its course and no allocation succeeded, so it tested nothing (Failure says
	// why); OK is false.
	Vacuous      bool   `json:"tested_nothing,omitempty"`
	Failure      string `json:"failure,omitempty"`
	Replay       string `json:"replay,omitempty"`          // the one command that reproduces and shrinks the failure
	Trace        string `json:"trace,omitempty"`           // the saved program
	Reproduced   *bool  `json:"reproduced,omitempty"`      // did it fail again single-threaded on the simulated device
	Minimized    string `json:"minimized_trace,omitempty"` // the minimized program
	MinimizedOps int    `json:"minimized_ops,omitempty"`
}

// OK reports whether the campaign found nothing and tested something (not Vacuous).
func (s *Summary) OK() bool { return s.Violations == 0 && s.Leaks == 0 && !s.Vacuous }

// campaign is the shared state of a running campaign.
type campaign struct {
	cfg CampaignConfig
	dev ops.Device    // the device: its stream clock (launch, complete) and, but for ledgerOnSim, what the judge sees
	sim *sim.Device   // the simulated device; nil on cuda
	gpu *gpu.Device   // the GPU; nil on sim
	led *gpu.Ledger   // ledgerOnSim: the ledger over the simulated device (the engine's driver); else nil
	drv vmm.Driver    // the engine's driver: dev, or led
	e   *serve.Engine // the serving layer over the engine, what libgmlake runs
	a   *impl.Allocator
	// smu guards streams and gone, and orders ForgetStream against the calls on a stream: every alloc,
	// record (with the use after it) and launch holds it for reading, a forget for writing, so a call on a
	// stream comes wholly before its forget or after it, and after it is judged as C-FORGET says.
	smu     sync.RWMutex
	streams []vmm.Stream // index -> device stream (index 0: the default stream on sim; on the GPU a stream of its own); guarded by smu
	// gone[i]: ForgetStream(streams[i]) succeeded; no launch on it after, and Alloc and RecordStream on it
	// must be exactly impl.ErrUnknownStream. Guarded by smu.
	gone []bool
	// spare: the streams that may still be made for workers whose stream was forgotten (each moves to a new
	// one); at 0 a forget of a worker's stream is skipped. Guarded by smu.
	spare   int
	created []vmm.Stream // the simulated device's streams the campaign made (destroyed at its end)
	checker vmm.Stream   // the stream every worker's patterns are written and read on (the engine never sees it)
	limit   uint64       // the serving layer's cap (0: none)
	budget  uint64
	gate    sync.RWMutex // workers hold it for reading around each operation; the checker for writing
	stop    atomic.Bool
	live    atomic.Uint64 // bytes the workers hold live
	nextID  atomic.Uint64
	workers []*worker

	failMu   sync.Mutex
	failures []spec.Violation

	rulesMu sync.Mutex
	rules   map[string]uint64 // rule name -> draws; guarded by rulesMu

	// The statistics' reset model (INV-TORCHSTATS), written by a query op with every worker paused (the
	// gate held for writing), read by the lock-step check: each value's Current at the last reset-acc, and
	// the physical handles held then (zero before any).
	statsBase impl.DeviceStats
	heldBase  int
	queries   atomic.Uint64 // query ops run (largest, snapshot, reset-peak, reset-acc)
	forgets   atomic.Uint64 // ForgetStream calls made (the default stream's refusals included)

	log opLog
	sum Summary
}

// worker runs the generator's ops with its own stream as home. Its fields are owned by its goroutine,
// except live, which the checker reads while the worker is paused (the gate).
type worker struct {
	c                                                      *campaign
	i                                                      int
	home                                                   int        // the index of the worker's stream (a new one after its forget)
	s                                                      vmm.Stream // streams[home]
	rng                                                    *rand.Rand
	src                                                    ops.Source
	gen                                                    *ops.Gen
	rules, freeRule                                        []ops.Rule
	st                                                     *workerState
	live                                                   []*liveAlloc
	byID                                                   map[int]*liveAlloc // the worker's id -> its live allocation
	global                                                 map[int]int        // the worker's id -> the campaign-wide id (the log's)
	buf                                                    []byte
	ops                                                    atomic.Uint64
	allocs, frees, records, empties, ooms, bytes, verified atomic.Uint64
}

// devSync is the serving layer's synchroniser in a campaign: it completes the stream's work on the device
// (the simulated device's clock, or the GPU's gates released and waited for).
type devSync struct{ d ops.Device }

func (s devSync) Synchronize(st vmm.Stream) error {
	s.d.Complete(st)
	return nil
}

// The ranges of a campaign's configuration (Validate), stated once.
const (
	// DefaultSimCapacity is the simulated device's size when Capacity is 0.
	DefaultSimCapacity = 16 * vmm.GiB
	// MinCapacity is the smallest CampaignConfig.Capacity and MemoryLimit: one 2 MiB chunk (below it no
	// request fits).
	MinCapacity = 2 * vmm.MiB
	// MaxCapacity bounds Capacity on the simulated device: 1 PiB, as ops.MaxCapacity.
	MaxCapacity = ops.MaxCapacity
	// MaxSimStreams bounds Streams on the simulated device (a goroutine and a stream each).
	MaxSimStreams = 256
	// MaxCampaignLog bounds LogOps, the operations kept in memory for the reproducer.
	MaxCampaignLog = 10_000_000
)

// ErrBadConfig is the kind (errors.Is) of RunCampaign's configuration errors: nothing ran.
var ErrBadConfig = errors.New("fuzz: invalid campaign configuration")

// configError is one refused value of a campaign's configuration, named by the `gmlake fuzz` flag that sets
// it (the campaign's one user-facing door), with what the flag wants.
type configError struct{ flag, value, want string }

func (e *configError) Error() string        { return fmt.Sprintf("%s %s: %s", e.flag, e.value, e.want) }
func (e *configError) Is(target error) bool { return target == ErrBadConfig }

// Validate checks every value of cfg against its range, the one statement of them (RunCampaign calls it
// first; `gmlake fuzz` calls it before anything is created): a campaign that cannot run, or in which no
// allocation could succeed, is refused with an ErrBadConfig error naming the flag (--streams, --capacity,
// ...), and nothing runs. Zero values mean the defaults (CampaignConfig).
func (cfg CampaignConfig) Validate() error {
	bad := func(flag string, v any, format string, args ...any) error {
		return &configError{flag: flag, value: fmt.Sprint(v), want: fmt.Sprintf(format, args...)}
	}
	size := func(flag string, n uint64) error {
		if n != 0 && n < MinCapacity {
			return bad(flag, vmm.FormatBytes(n), "want at least %s (one chunk of the device's granularity: below it no request fits)", vmm.FormatBytes(MinCapacity))
		}
		if n > MaxCapacity {
			return bad(flag, vmm.FormatBytes(n), "want at most %s", vmm.FormatBytes(MaxCapacity))
		}
		return nil
	}
	switch {
	case cfg.Device != "" && cfg.Device != "sim" && cfg.Device != "cuda":
		return bad("--device", fmt.Sprintf("%q", cfg.Device), "want sim or cuda")
	case cfg.Policy != "" && !slices.Contains(impl.Policies, cfg.Policy):
		return bad("--policy", fmt.Sprintf("%q", cfg.Policy), "want one of %s, or all", strings.Join(impl.Policies, ", "))
	case cfg.Duration < 0:
		return bad("--duration", cfg.Duration, "want a positive duration, e.g. 30s")
	case cfg.Streams < 0 || cfg.Device != "cuda" && cfg.Streams > MaxSimStreams:
		return bad("--streams", cfg.Streams, "want 1 to %d (one worker per stream)", MaxSimStreams)
	case cfg.Device == "cuda" && cfg.Streams+3 > gpu.Connections:
		return bad("--streams", cfg.Streams, "want 1 to %d on a GPU (each is a hardware queue, and the checker's, the default and the clock's streams take %d of CUDA_DEVICE_MAX_CONNECTIONS=%d)",
			gpu.Connections-3, 3, gpu.Connections)
	case cfg.MaxLive < 0:
		return bad("--max-live", cfg.MaxLive, "want at least 1")
	case cfg.LogOps < 0 || cfg.LogOps > MaxCampaignLog:
		return bad("--log-ops", cfg.LogOps, "want 1 to %d", MaxCampaignLog)
	case cfg.ProgressEvery < 0:
		return bad("--progress-every", cfg.ProgressEvery, "want a positive duration, e.g. 5s")
	case cfg.HangAfter < 0:
		return bad("--hang-after", cfg.HangAfter, "want a positive duration, e.g. 2m")
	case cfg.CUDADevice < 0:
		return bad("--cuda-device", cfg.CUDADevice, "want a device ordinal, 0 or more")
	}
	if err := size("--capacity", cfg.Capacity); err != nil {
		return err
	}
	if err := size("--memory-limit", cfg.MemoryLimit); err != nil {
		return err
	}
	if cfg.MaxSize != 0 && cfg.MaxSize < vmm.KiB {
		return bad("--max-size", vmm.FormatBytes(cfg.MaxSize), "want at least 1KiB")
	}
	capacity := cfg.Capacity
	if capacity == 0 && cfg.Device != "cuda" {
		capacity = DefaultSimCapacity
	}
	if capacity != 0 && cfg.MaxSize > capacity {
		return bad("--max-size", vmm.FormatBytes(cfg.MaxSize), "want at most --capacity (%s): no larger request can succeed", vmm.FormatBytes(capacity))
	}
	return nil
}

// ErrNothingTested is the kind (errors.Is) of a campaign's failure to test anything: it ran its course and
// not one allocation succeeded (a device or cap too small for every request), so passing would say nothing.
var ErrNothingTested = errors.New("fuzz: the campaign tested nothing")

// RunCampaign runs a campaign until its duration passes or ctx is done, and returns its summary. The
// error is for setup problems (no GPU, bad policy, ErrBadConfig); violations are in the summary.
func RunCampaign(ctx context.Context, cfg CampaignConfig) (*Summary, error) {
	if err := cfg.Validate(); err != nil && !cfg.noValidate {
		return nil, err
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
			cfg.Capacity = DefaultSimCapacity
		}
		c.sim = sim.NewDevice(sim.DeviceConfig{Capacity: cfg.Capacity, Seed: cfg.Seed})
		c.dev, c.drv, c.limit = c.sim, c.sim, cfg.MemoryLimit
		if cfg.ledgerOnSim {
			c.led = gpu.NewLedger(c.sim)
			c.drv = c.led
		}
	case "cuda":
		gpu.EnsureConnections() // before the capacity probe creates the context
		if cfg.Capacity == 0 {
			d, err := cudavmm.New(cfg.CUDADevice)
			if err != nil {
				return nil, fmt.Errorf("fuzz: --device cuda: %w", err)
			}
			free, _, err := d.MemInfo()
			d.Close()
			if err != nil {
				return nil, fmt.Errorf("fuzz: cuMemGetInfo: %w", err)
			}
			cfg.Capacity = free / 2
		}
		// A gate per worker stream, the checker's and the default stream's; with the clock's signalling
		// stream, within gpu.Connections hardware queues (Validate).
		g, err := gpu.Open(gpu.Config{Ordinal: cfg.CUDADevice, Capacity: cfg.Capacity, MaxGates: cfg.Streams + 2 + spareStreams(cfg)})
		if err != nil {
			return nil, fmt.Errorf("fuzz: --device cuda: %w", err)
		}
		defer g.Close()
		c.gpu, c.dev, c.drv, c.limit = g, g, g, cfg.Capacity
	default:
		return nil, fmt.Errorf("fuzz: unknown device %q (want sim or cuda)", cfg.Device)
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = max(cfg.Capacity/8, vmm.MiB)
	}
	c.cfg = cfg
	c.budget = cfg.Capacity / 5 * 4
	if c.limit != 0 {
		c.budget = min(c.budget, c.limit/5*4)
	}
	c.log.init(cfg.LogOps)
	c.rules = map[string]uint64{}

	var err error
	if c.sum.MemFreeStart, err = c.memFree(); err != nil {
		return nil, fmt.Errorf("fuzz: MemInfo: %w", err)
	}
	// On the GPU every worker has a stream of its own, the first too: the pattern's read-back
	// (cuMemcpyDtoH) runs on the legacy default stream, which a held-back unit there would hold back.
	newStream := c.newStream
	defer func() {
		for _, s := range c.created {
			c.sim.DestroyStream(s)
		}
	}()
	if c.sim != nil {
		c.streams = []vmm.Stream{vmm.DefaultStream}
	}
	for len(c.streams) < cfg.Streams {
		s, err := newStream()
		if err != nil {
			return nil, fmt.Errorf("fuzz: creating stream %d: %w", len(c.streams), err)
		}
		c.streams = append(c.streams, s)
	}
	c.gone = make([]bool, len(c.streams))
	c.spare = spareStreams(cfg)
	if c.checker, err = newStream(); err != nil {
		return nil, fmt.Errorf("fuzz: creating the checker's stream: %w", err)
	}
	// What libgmlake runs: the serving layer under the cap, synchronising through the device's clock; the
	// caller's streams are the device's own (as a cudaStream_t is the CUstream).
	if c.e, err = serve.New(c.drv, serve.Config{Engine: impl.Config{Policy: cfg.Policy, TestOnlyMutations: cfg.Mutations},
		MemoryLimit: c.limit, Sync: devSync{c.dev}}); err != nil {
		return nil, fmt.Errorf("fuzz: policy %q: %w", cfg.Policy, err)
	}
	c.a = c.e.Allocator()
	start := time.Now()
	parent := ctx // the caller's: done early means the user stopped the campaign
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for i, s := range c.streams {
		c.workers = append(c.workers, c.newWorker(i, s))
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
	if c.sum.OK() && c.sum.Allocs == 0 && parent.Err() == nil {
		c.sum.Vacuous = true
		c.sum.Failure = fmt.Sprintf("no allocation succeeded in %d operations (%d out of memory): the campaign tested nothing; "+
			"give it more room (--capacity, --memory-limit) or smaller requests (--max-size)", c.sum.Ops, c.sum.OOMs)
	}
	return &c.sum, nil
}

// spareStreams is how many streams a campaign may make for workers whose stream was forgotten: as many as it
// has workers on the simulated device; on a GPU what gpu.Connections leaves (each is a gate and a hardware queue).
func spareStreams(cfg CampaignConfig) int {
	if cfg.Device == "cuda" {
		return max(0, min(cfg.Streams, gpu.Connections-3-cfg.Streams))
	}
	return cfg.Streams
}

// newStream makes a stream on the device (the simulated device's are destroyed at the campaign's end,
// gpu.Device destroys its own at Close).
func (c *campaign) newStream() (vmm.Stream, error) {
	s, err := c.dev.CreateStream()
	if err == nil && c.sim != nil {
		c.created = append(c.created, s)
	}
	return s, err
}

// streamCount is how many streams the campaign has made for its workers (forgotten ones included): the
// replay's stream count.
func (c *campaign) streamCount() int {
	c.smu.RLock()
	defer c.smu.RUnlock()
	return len(c.streams)
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

// state returns the device's account of memory: the simulated device's own, or the ledger's (on the GPU,
// and over the simulated device with ledgerOnSim).
func (c *campaign) state() sim.DeviceState {
	if c.led != nil {
		return c.led.State()
	}
	return c.dev.State()
}

// memFree is the device's free memory: the simulated device's, or the GPU's own (cuMemGetInfo, not the
// judge's capacity).
func (c *campaign) memFree() (uint64, error) {
	if c.gpu != nil {
		free, _, err := c.gpu.CUDA().MemInfo()
		return free, err
	}
	free, _, err := c.drv.MemInfo()
	return free, err
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
	live := c.liveLocked()
	c.sum.Checks++
	if c.led != nil && c.sim != nil {
		if l, d := c.led.State(), c.sim.State(); !reflect.DeepEqual(l, d) {
			c.fail(spec.Violation{Inv: CheckLedger, Msg: fmt.Sprintf("the ledger's account differs from the device's:\nledger %+v\ndevice %+v", l, d)})
		}
	}
	snap := c.a.Snapshot()
	if v := checkState(snap, c.state(), live); len(v) > 0 {
		for _, x := range v {
			c.fail(x)
		}
	}
	for _, v := range checkStatsPaused(c.a.TorchStats(), c.statsBase, c.heldBase, len(snap.Chunks), live) {
		c.fail(v)
	}
	c.checkHazards()
}

// liveLocked is what every worker holds live, in address order (the gate held for writing: every worker paused).
func (c *campaign) liveLocked() []*liveAlloc {
	var live []*liveAlloc
	for _, w := range c.workers {
		live = append(live, w.live...)
	}
	sort.Slice(live, func(i, j int) bool { return live[i].ptr < live[j].ptr })
	return live
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

// campaignRules are the rules of the one generator (ops.Rules) the workers draw from, at the generator's
// weights; alloc first (a worker's fallback). forget forgets the worker's own stream (C-FORGET judged; the
// worker moves to a new stream, worker.forget) and query runs its op with every worker paused, judged by
// ops.Env's own judges (worker.query). Left out, because a concurrent run cannot judge them: pools
// (pool ids and the capture flag are the whole engine's, not a stream's), double-free (the freed pointer may
// be another worker's live allocation by then), bad-stream (under the serving layer any stream value is a
// stream), close, and faults (a fault armed for the N-th next call hits whichever worker makes it). rapid,
// the explorer and the fuzz targets run those single-threaded.
var campaignRules = []string{"alloc", "alloc-threshold", "free", "free-interior", "record", "launch", "complete",
	"completeall", "emptycache", "pending-pair", "forget", "query"}

// workerState is a worker's view of its run for the generator (ops.State), in the worker's own ids: the
// generator's templates number their allocations x, x+1, ... from NextID, so each worker numbers its own,
// and the campaign gives each allocation a campaign-wide id as it runs (worker.global) for the log.
type workerState struct {
	live []int // the worker's ids of its live allocations
	next int   // an id the worker has not used
}

func (s *workerState) LiveIDs() []int  { return append([]int(nil), s.live...) }
func (s *workerState) FreedIDs() []int { return nil } // no double-free in a campaign (campaignRules)
func (s *workerState) NextID() int     { return s.next }

// newWorker sets up worker i on stream s: its seeded choices, its generator (allocations, launches and
// completes on its own stream; sizes up to MaxSize) and, for every worker but the first, each optional rule
// switched off with probability 1/2 (the swarm's swarm-actions, per worker: workers go deep in different
// directions, one never frees across streams, another never empties the cache).
func (c *campaign) newWorker(i int, s vmm.Stream) *worker {
	rng := rand.New(rand.NewSource(c.cfg.Seed*1_000_003 + int64(i)))
	w := &worker{c: c, i: i, home: i, s: s, rng: rng, src: ops.RandSource(rng),
		st: &workerState{next: 1}, byID: map[int]*liveAlloc{}, global: map[int]int{}}
	sw := ops.Swarm{Streams: len(c.streams), Off: map[string]bool{}}
	if i > 0 {
		for _, r := range campaignRules[1:] {
			if r != "free" && rng.Intn(2) == 0 {
				sw.Off[r] = true
			}
		}
	}
	w.gen = ops.NewGen(sw, c.cfg.Policy, c.cfg.MaxSize, c.drv.Granularity())
	w.gen.Home, w.gen.Traces = i, commonSizes
	w.rules = w.gen.On(campaignRules...)
	w.freeRule = w.gen.On("free")
	return w
}

// step draws one rule of the generator and runs its ops (a worker holding MaxLive allocations draws free).
func (w *worker) step() {
	rules := w.rules
	if len(w.live) >= w.c.cfg.MaxLive {
		rules = w.freeRule
	}
	var name string
	var seq []ops.Op
	for try := 0; seq == nil && try < 8; try++ {
		name, seq = w.gen.Next(rules, w.st, w.src)
	}
	if seq == nil { // nothing live to free or record: allocate
		name, seq = w.rules[0].Name, w.gen.Make(w.rules[0], w.st, w.src)
	}
	w.c.countRule(name)
	for _, o := range seq {
		if w.c.stop.Load() {
			break
		}
		w.run(o)
		w.ops.Add(1)
	}
}

// run runs one op of the generator's on the serving layer and the device, and logs it (with the
// allocation's campaign-wide id). An op about an allocation the worker does not hold (its alloc failed or
// was skipped for the live budget) is skipped, and so is a free-interior whose offset is not inside the
// allocation (the pointer could be another worker's block).
func (w *worker) run(o ops.Op) {
	c := w.c
	if o.Kind == ops.OpAlloc {
		w.st.next = max(w.st.next, o.ID+1) // the generator numbers from NextID; skipped or not, the id is used
	}
	switch o.Kind {
	case ops.OpAlloc:
		w.alloc(o)
	case ops.OpFree:
		if l := w.byID[o.ID]; l != nil {
			w.free(l)
		}
	case ops.OpFreeInterior:
		l := w.byID[o.ID]
		if l == nil || o.Offset >= l.size {
			return
		}
		c.log.add(ops.Op{Kind: ops.OpFreeInterior, ID: int(l.id), Offset: o.Offset}, nil)
		if err := c.e.Free(l.ptr.Add(o.Offset)); !errors.Is(err, impl.ErrInteriorPtr) {
			c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("Free(%v), %d B into allocation %d at %v (worker %d): got %v, want %v",
				l.ptr.Add(o.Offset), o.Offset, l.id, l.ptr, w.i, err, impl.ErrInteriorPtr)})
		}
	case ops.OpRecord:
		if l := w.byID[o.ID]; l != nil {
			w.record(l, o.Stream)
		}
	case ops.OpLaunch:
		c.smu.RLock()
		if !c.gone[o.Stream] { // a forgotten stream is destroyed: no work is submitted to it any more
			c.log.add(o, nil)
			c.dev.Launch(c.streams[o.Stream])
		}
		c.smu.RUnlock()
	case ops.OpComplete:
		c.smu.RLock()
		s := c.streams[o.Stream]
		c.smu.RUnlock()
		c.log.add(o, nil)
		c.dev.Complete(s)
	case ops.OpCompleteAll:
		c.log.add(o, nil)
		c.dev.CompleteAll()
	case ops.OpEmptyCache:
		c.log.add(o, nil)
		w.empties.Add(1)
		if err := c.e.EmptyCache(); err != nil {
			c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("EmptyCache: %v", err)})
		}
	case ops.OpForget:
		w.forget(o.Stream)
	case ops.OpLargest, ops.OpSnapshot, ops.OpResetPeak, ops.OpResetAcc:
		w.query(o)
	}
}

// forget runs ForgetStream on stream j (what a caller does before cuStreamDestroy), judged by C-FORGET: the
// default stream or one already forgotten is refused with exactly impl.ErrUnknownStream, any other succeeds
// (a campaign injects no fault). The generator forgets a worker's own stream (Gen.Home); the worker then
// moves to a new stream, or, with no spare stream left, the forget is skipped (on the GPU the first worker's
// stream too: a replay on the simulated device has the default stream there, which it cannot forget). The
// memory the stream freed or was recorded on waits for its work (INV-STREAM: the patterns, the hazards).
func (w *worker) forget(j int) {
	c := w.c
	if j != w.home || (c.gpu != nil && j == 0) {
		return
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	s, refused := c.streams[j], c.streams[j] == vmm.DefaultStream || c.gone[j]
	if !refused && c.spare == 0 {
		return
	}
	var next vmm.Stream
	if !refused {
		var err error
		if next, err = c.newStream(); err != nil {
			c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("creating a stream for worker %d after its stream's forget: %v", w.i, err)})
			return
		}
	}
	c.log.add(ops.Op{Kind: ops.OpForget, Stream: j}, nil)
	c.forgets.Add(1)
	err := c.a.ForgetStream(s)
	switch {
	case refused && !errors.Is(err, impl.ErrUnknownStream):
		c.fail(spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("C-FORGET: ForgetStream(stream %d, the default or forgotten) of worker %d: got %v, want %v", s, w.i, err, impl.ErrUnknownStream)})
	case !refused && err != nil:
		c.fail(spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("C-FORGET: ForgetStream(stream %d) of worker %d: %v", s, w.i, err)})
	case !refused:
		c.gone[j] = true
		c.spare--
		c.streams = append(c.streams, next)
		c.gone = append(c.gone, false)
		w.home, w.s, w.gen.Home = len(c.streams)-1, next, len(c.streams)-1
	}
}

// query runs a query op (largest, snapshot, reset-peak, reset-acc) with every worker paused (the gate held
// for writing, as the lock-step check), judged by ops.Env's own judges of it: INV-LARGEST (the answer against
// the View of the same state), INV-SNAPSHOT (the spec's invariants and the live set on it, and that it is a
// query and a deep copy), INV-TORCHSTATS's reset model (after reset-peak every peak is its current, after
// reset-acc every total and num_* counter is zero; the lock-step checks then count from there).
func (w *worker) query(o ops.Op) {
	c := w.c
	c.gate.RUnlock()
	c.gate.Lock()
	defer func() {
		c.gate.Unlock()
		c.gate.RLock()
	}()
	if c.stop.Load() {
		return
	}
	c.log.add(ops.Op{Kind: o.Kind}, nil)
	c.queries.Add(1)
	var vs []spec.Violation
	switch o.Kind {
	case ops.OpLargest:
		got := c.a.LargestCachedBlock()
		vs = ops.JudgeLargest(ops.ViewOf(c.a.Snapshot(), c.state()), got, false /* pooled: no pool ops in a campaign */)
	case ops.OpSnapshot:
		snap := c.a.Snapshot()
		vs = checkState(snap, c.state(), c.liveLocked())
		vs = append(vs, ops.JudgeSnapshotQuery(c.a, snap)...)
	case ops.OpResetPeak, ops.OpResetAcc:
		if o.Kind == ops.OpResetPeak {
			c.a.ResetPeakStats()
		} else {
			c.a.ResetAccumulatedStats()
		}
		got := c.a.TorchStats()
		v := ops.ViewOf(c.a.Snapshot(), c.state())
		vs = ops.JudgeReset(o.Kind, got, v)
		if o.Kind == ops.OpResetAcc {
			c.statsBase, c.heldBase = got, len(v.Chunks)
		}
	}
	for _, v := range vs {
		c.fail(v)
	}
}

// alloc runs an alloc op: a request for the op's size (above MaxSize: folded into 1..MaxSize) on the op's
// stream, unless it would take the workers' live bytes past the budget (then the worker frees one of its
// allocations instead). A request of 0 bytes must fail with impl.ErrInvalidSize.
func (w *worker) alloc(o ops.Op) {
	c := w.c
	size := o.Size
	if size > c.cfg.MaxSize {
		size = 1 + (size-1)%c.cfg.MaxSize
	}
	if c.live.Load()+size > c.budget {
		if len(w.live) > 0 {
			w.free(w.live[w.rng.Intn(len(w.live))])
		}
		return
	}
	id := c.nextID.Add(1)
	w.global[o.ID] = int(id)
	op := ops.Op{Kind: ops.OpAlloc, ID: int(id), Size: size, Stream: o.Stream}
	c.smu.RLock()
	s, gone := c.streams[o.Stream], c.gone[o.Stream]
	ptr, err := c.e.Alloc(size, s)
	c.smu.RUnlock()
	if gone && size != 0 {
		// C-FORGET: an allocation on a forgotten stream is refused, exactly so, with no pointer.
		c.log.add(op, nil)
		c.log.add(ops.Op{Kind: ops.OpFree, ID: int(id)}, nil)
		if !errors.Is(err, impl.ErrUnknownStream) || ptr != 0 {
			c.fail(spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("C-FORGET: Alloc(%d) on forgotten stream %d: got %v, %v; want 0, %v", size, s, ptr, err, impl.ErrUnknownStream)})
		}
		return
	}
	if size == 0 {
		c.log.add(op, nil)
		if !errors.Is(err, impl.ErrInvalidSize) {
			c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("Alloc(0) on stream %d: got %v (pointer %v), want %v", s, err, ptr, impl.ErrInvalidSize)})
		}
		return
	}
	if err != nil {
		// Logged as an allocation freed at once: in a replay it may succeed.
		c.log.add(op, nil)
		c.log.add(ops.Op{Kind: ops.OpFree, ID: int(id)}, nil)
		if errors.Is(err, vmm.ErrOutOfMemory) {
			w.ooms.Add(1)
			if len(w.live) > 0 {
				w.free(w.live[w.rng.Intn(len(w.live))])
			}
			return
		}
		c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("Alloc(%d) on stream %d: %v", size, s, err)})
		return
	}
	l := &liveAlloc{id: id, ptr: ptr, size: size, stream: s, val: ops.PatternByte(id), local: o.ID}
	c.log.add(op, &op)
	w.live = append(w.live, l)
	w.byID[o.ID] = l
	w.st.live = append(w.st.live, o.ID)
	c.live.Add(size)
	w.allocs.Add(1)
	w.bytes.Add(size)
	// The pattern is written on the checker's stream, which the engine never sees (as ops.Env's): on the
	// GPU the allocation's own stream may be held back by the clock.
	if err := ops.Fill(c.drv, ptr, size, l.val, c.checker); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d (worker %d): %v", id, w.i, err)})
	}
}

// free reads an allocation's pattern back (on the checker stream) and frees it.
func (w *worker) free(l *liveAlloc) {
	c := w.c
	probes := 16
	if c.sim == nil {
		probes = 4
	}
	if err := ops.Verify(c.drv, l.ptr, l.size, l.val, c.checker, c.drv.Granularity(), probes, w.buf); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d (worker %d) before its free: %v", l.id, w.i, err)})
		return
	}
	w.verified.Add(min(l.size, 64*vmm.KiB))
	for i, x := range w.live {
		if x == l {
			w.live = append(w.live[:i], w.live[i+1:]...)
			break
		}
	}
	for i, id := range w.st.live {
		if id == l.local {
			w.st.live = append(w.st.live[:i], w.st.live[i+1:]...)
			break
		}
	}
	delete(w.byID, l.local)
	c.log.add(ops.Op{Kind: ops.OpFree, ID: int(l.id)}, nil) // before the free: a reuse is logged after it
	if err := c.e.Free(l.ptr); err != nil {
		c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("Free(%v) of allocation %d (worker %d): %v", l.ptr, l.id, w.i, err)})
	}
	c.live.Add(-l.size)
	w.frees.Add(1)
}

// record hands an allocation to stream j too (RecordStream), which then uses it: on the simulated device a
// unit of pending work on j; on the GPU a unit held back by the clock and, behind it, a real write of the
// block's own pattern on j, so a block reused before j's work completed gets the old pattern written over
// the new owner's, and the new owner's read-back sees it. (On the block's own stream the write is left out:
// there the engine may reuse the block at once, in stream order, which the checker stream's write does not
// follow.) The log says `launch sj` for the other stream's use (the replay's pending work).
func (w *worker) record(l *liveAlloc, j int) {
	c := w.c
	c.smu.RLock()
	defer c.smu.RUnlock()
	s := c.streams[j]
	c.log.add(ops.Op{Kind: ops.OpRecord, ID: int(l.id), Stream: j}, nil)
	if c.gone[j] {
		// C-FORGET: a forgotten stream is refused, exactly so; nothing is used on it.
		if err := c.e.RecordStream(l.ptr, s); !errors.Is(err, impl.ErrUnknownStream) {
			c.fail(spec.Violation{Inv: spec.InvContract, Msg: fmt.Sprintf("C-FORGET: RecordStream(%v, forgotten stream %d) of allocation %d: got %v, want %v", l.ptr, s, l.id, err, impl.ErrUnknownStream)})
		}
		return
	}
	if err := c.e.RecordStream(l.ptr, s); err != nil {
		c.fail(spec.Violation{Inv: CheckError, Msg: fmt.Sprintf("RecordStream(%v, stream %d) of allocation %d: %v", l.ptr, s, l.id, err)})
		return
	}
	w.records.Add(1)
	if s == l.stream {
		return
	}
	c.log.add(ops.Op{Kind: ops.OpLaunch, Stream: j}, nil)
	c.dev.Launch(s)
	if c.sim != nil {
		return
	}
	if err := ops.Fill(c.drv, l.ptr, l.size, l.val, s); err != nil {
		c.fail(spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("allocation %d used on stream %d: %v", l.id, s, err)})
	}
}

func (c *campaign) countRule(name string) {
	c.rulesMu.Lock()
	c.rules[name]++
	c.rulesMu.Unlock()
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
			w.free(w.live[len(w.live)-1])
			failed = len(c.failures) > 0
		}
	}
	c.dev.CompleteAll()
	if !failed {
		c.lockstepCheck()
		failed = len(c.failures) > 0
	}
	if _, err := c.e.Close(); err != nil && !failed {
		c.fail(spec.Violation{Inv: CheckError, Msg: "Close: " + err.Error()})
	}
	if !failed {
		c.checkHazards()
		failed = len(c.failures) > 0
	}
	if failed {
		return
	}
	if lk := c.dev.Leaks(); !lk.Empty() {
		c.sum.Leaks++
		what := lk.String()
		if c.gpu != nil {
			what = "the ledger: " + what
		}
		c.fail(spec.Violation{Inv: CheckLeak, Msg: what})
	}
	if c.led != nil {
		if ok, what := c.led.Empty(); !ok {
			c.sum.Leaks++
			c.fail(spec.Violation{Inv: CheckLeak, Msg: "the ledger: " + what})
		}
	}
	c.sum.MemFreeEnd, _ = c.memFree()
	if (c.sim != nil || c.cfg.MemInfoCheck) && c.sum.MemFreeEnd < c.sum.MemFreeStart {
		c.sum.Leaks++
		c.fail(spec.Violation{Inv: CheckLeak, Msg: fmt.Sprintf("device free memory %d B after Close, %d B at the start",
			c.sum.MemFreeEnd, c.sum.MemFreeStart)})
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
		k := c.e.Counters()
		s.Syncs, s.SyncRetries = k.Syncs, k.SyncRetries
	}
	s.Forgets, s.Queries = c.forgets.Load(), c.queries.Load()
	c.rulesMu.Lock()
	s.Rules = maps.Clone(c.rules)
	c.rulesMu.Unlock()
	c.failMu.Lock()
	s.Violations = len(c.failures) - s.Leaks
	if len(c.failures) > 0 && s.Failure == "" {
		s.Failure = c.failures[0].String()
	}
	c.failMu.Unlock()
}

// --- failure: save, reproduce, minimize ---

// replayConfig is the setup a saved campaign program replays under: the simulated device of the
// campaign's capacity (on a GPU the judge's), one stream per worker, the serving layer under the campaign's
// cap (none where the cap is the whole device), the pattern check on.
func (c *campaign) replayConfig() ops.Config {
	capacity := c.cfg.Capacity
	if capacity == 0 {
		capacity = sim.H200Capacity
	}
	limit := c.limit
	if limit >= capacity {
		limit = 0
	}
	return ops.Config{Policy: c.cfg.Policy, Capacity: capacity, Streams: c.streamCount(), Seed: c.cfg.Seed,
		Mutations: c.cfg.Mutations, Patterns: true, Serve: true, MemoryLimit: limit}
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
	replay := "gmlake fuzz --replay " + path + " --minimize"
	header := []string{
		fmt.Sprintf("gmlake fuzz campaign failure: policy %s, device %s, seed %d, %d streams", c.cfg.Policy, c.cfg.Device, c.cfg.Seed, c.streamCount()),
		"violation: " + oneLine(first.String()),
		"the last operations before the failure, interleaved from all workers (allocations still live from before come first)",
		"reproduce and shrink: " + replay,
	}
	if err := p.WriteFile(path, header...); err != nil {
		c.say("fuzz: could not save the failing sequence: %v\n", err)
		return nil, ""
	}
	c.sum.Trace, c.sum.Replay = path, replay
	c.say("fuzz: FAILURE %s\nfuzz: policy %s, device %s, seed %d; the last %d ops:\n%s\nfuzz: saved %d operations to %s\nfuzz: reproduce and shrink: %s\n",
		oneLine(first.String()), c.cfg.Policy, c.cfg.Device, c.cfg.Seed, min(len(p.Ops), tailOps), opsTail(p.Ops, tailOps), len(p.Ops), path, replay)
	return p, base
}

// tailOps is how many of the log's last ops a failure prints (the saved file has them all).
const tailOps = 40

// opsTail prints the last n ops, one a line.
func opsTail(seq []ops.Op, n int) string {
	var b strings.Builder
	for _, o := range seq[max(0, len(seq)-n):] {
		b.WriteString("  " + o.String() + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
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
	c.say("fuzz: minimized to %d operations (%s):\n%s\nfuzz: replay: gmlake fuzz --replay %s\n", len(m.Ops), what, opsTail(m.Ops, len(m.Ops)), mpath)
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
