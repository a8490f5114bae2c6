package ops

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/impl/serve"
	"github.com/gmlake/gmlake/model/contract"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// DefaultProbes is the granules Patterns probes per large allocation when Config.Probes is 0.
const DefaultProbes = 512

// Config configures an Env: the device, the engine and the checkers that judge it.
type Config struct {
	Policy string // one of impl.Policies; "" is the default policy (NewEnv sets it and DefaultName)
	// DefaultName: the engine is asked for its policy by the empty name (impl's default, what a Config{} from
	// a Go program or an unset GMLAKE_POLICY asks for), and must run Policy, which must be gmlake. The setup
	// line prints it, so a reproducer found through the default name replays through it.
	DefaultName bool
	Capacity    uint64 // device bytes; 0: 8 GiB
	Granularity uint64 // 0: 2 MiB
	Streams     int    // streams in the environment, the default stream included; 0: 2
	SyncStreams bool   // stream work completes at once (no Launch/Complete needed)
	// Knobs are the engine's knobs beyond the policy (every one prints in Header: TestHeaderCarriesEveryKnob):
	// zero fields take the policy's defaults; Policy and TestOnlyMutations come from the fields here.
	Knobs     impl.Config
	Mutations impl.Mutation // seeded bugs to switch on (TestMutationsCaught only)
	Seed      int64         // the device's seed (FailProb)
	// NoChecks skips the spec predicates after each step (the contract still runs); for throughput runs.
	NoChecks bool
	// Ignore drops violations of these invariants (TestMutationsCaught uses it to set aside what the
	// engine already breaks without any mutation, so that a catch means the mutation was caught).
	Ignore map[string]bool
	// Differential (with Mutations set): a violation counts only if the same ops without the mutations do
	// not show the same invariant broken at the same step, so that a catch is the mutation's doing and not
	// a bug the engine has anyway (TestMutationsCaught).
	Differential bool
	// Device runs the engine on this device instead of a fresh simulated one (harness/gpu: the real GPU);
	// Capacity and Granularity are then the device's, SyncStreams and Seed do not apply, and fault ops are
	// refused (not run, not told to the contract). The Env does not close it. On a real driver no op may
	// name a stream index the environment does not have: the engine would be handed a made-up CUstream.
	Device Device
	// Serve drives the engine through the serving layer, exactly as libgmlake runs it (impl/serve): the cap
	// MemoryLimit, synchronise-every-stream-and-retry on out of memory, and (on the simulated device) the
	// environment's streams given as caller values that the layer maps to the device's own. A
	// synchronisation completes the streams' work on the device, and the contract and the history are told
	// before the call that synchronised is judged: so a retry may succeed where the bare engine runs out of
	// memory, and an out of memory after it is judged with that work completed (C-OOM, INV-NOSPURIOUSOOM).
	Serve       bool
	MemoryLimit uint64 // with Serve: the cap on the engine's physical bytes (0: none); the judge's capacity
	// CLib (it implies Serve) drives the serving layer through the C library's plain-integer surface
	// (impl/clib: what capi, and so PyTorch, calls): pointers and streams as uintptr, the knobs handed over
	// as text (KnobText; the parse must give back Knobs), the synchroniser found on the driver (the layer's
	// vmm.StreamSyncer path), the segment-event hook on; the fraction and stats ops are its own
	// (judge_serve.go). Mutations cannot be set this way (the seeded switches are no knob).
	CLib bool
	// HostCache (it implies CLib) puts a stand-in of libgmlake's host cache (capi/hostcache.c) in front of
	// the C library (hostcache.go): frees and hits it serves reach the engine as a log, replayed by the next
	// call that reaches it (AllocHost on a miss, Replay before any other op).
	HostCache bool
	// Patterns: every allocation is filled with a byte of its id on the device and a sample read back
	// before its free (pattern.go; a violation is INTEGRITY): the data path the models cannot see.
	Patterns bool
	Probes   int // with Patterns: granules probed per large allocation; 0: DefaultProbes
	// Decisions: every step's decision digest is recorded (decision.go), for DecisionHistory.
	Decisions bool

	_ struct{}
}

// CheckIntegrity is the name of the pattern check's violation (Config.Patterns).
const CheckIntegrity = "INTEGRITY"

// Env runs operations (op.go) through the engine on the reference device, step by step, and judges each
// step three ways: the allocator contract (contract.ContractState: was the answer legal?), the state
// invariants of the spec (spec.Check on the View after the step), and the history invariants
// (spec.History: INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM). It is not safe for concurrent use.
type Env struct {
	Cfg      Config
	Dev      *sim.Device // the simulated device; nil when Config.Device is set
	Device   Device      // the device the engine runs on (Dev, or Config.Device)
	A        *impl.Allocator
	S        *serve.Engine // the serving layer over A (Config.Serve); nil without it
	C        *clib.Engine  // the C library over S (Config.CLib); nil without it
	hc       *hostStandIn  // the host cache's stand-in in front of C (Config.HostCache); nil without it
	Streams  []vmm.Stream  // index -> device stream; Streams[0] is the default stream
	Contract contract.ContractState
	Hist     *spec.History
	Rule     spec.OOMRule
	Growth   spec.GrowthRule // INV-GROWTH's rule (gmlake only; the zero value judges nothing)

	// callers[i] is the stream value the engine is called with for stream index i: Streams[i] itself, or
	// with Serve on the simulated device a caller value the layer maps to Streams[i]; callers[len(Streams)]
	// stands for every stream index the environment does not have (a value the engine must refuse, or
	// under the layer's mapping one more stream). synced: streams the layer synchronised during the
	// current call (clockSync), not yet told to the contract and the history.
	callers []vmm.Stream
	other   vmm.Stream // the device stream callers[len(Streams)] maps to (Serve with mapping), else 0
	synced  []vmm.Stream
	// devWaited: how many of synced the engine's device waits (deviceWait) added; devSyncs: the device
	// waits so far.
	devWaited, devSyncs int
	// syncTellsOnly: a synchronisation tells the judges without completing the work (a test that the
	// judges account for the synchronisation: TestServeOOMAfterSyncIsJudgedSpurious).
	syncTellsOnly bool

	ptrs   map[int]vmm.DevicePtr // allocation id -> pointer (live or freed)
	live   map[int]bool
	faulty bool
	armed  []vmm.CallKind // the call kinds of the faults armed since the last clearfaults
	// calls is the engine's driver on the simulated device: Dev, noting the calls that fail during the
	// step (INV-TORCH's fallback); nil on a real driver (no faults are injected there).
	calls *failLog
	// eventFault: a fault on cuEventDestroy was armed at some point: the event it hit stays on the device
	// (the engine documents it: nothing of the allocator's leaks), so INV-NOLEAK then ignores events.
	eventFault bool
	// eventsLost: an engine call ran while a fault on cuEventDestroy was armed (C-CLOSE then does not count
	// events: the one it hit is not the allocator's any more); closeErr: what the first Close returned
	// (INV-NOLEAK is not judged after a Close that reported a failure: C-CLOSE judged it).
	eventsLost bool
	closeErr   error
	closed     bool
	// pools: the use count of each private pool the ops created (0: released); poolOf: the pool each
	// live pointer was asked from; pooled: a pool op ran (INV-POOL is checked from then on).
	pools  map[int]int
	poolOf map[vmm.DevicePtr]int
	// poolVA: the virtual ranges each living private pool handed out (a replay of its graphs may use them
	// all: OpReplay), forgotten when the pool is released.
	poolVA map[int][]vmm.Range
	// handed: every pointer an Alloc returned (C-FREE-KIND: a pointer never handed out is unknown, exactly).
	handed  map[vmm.DevicePtr]bool
	pooled  bool
	poolChk spec.PoolChecker
	// paperStitched: the bytes of the stitched blocks gmlake-paper made so far (INV-PAPERGC is judged while
	// they stay below its autoGC: impl.Config.AutoGC, 1000 GiB by default).
	paperStitched uint64
	// torch judges INV-TORCHSTATS (torchstats.go); it remembers the highest value of each statistic since
	// the last reset-peak and the values at the last reset-acc.
	torch torchStatsJudge
	// retries judges INV-RETRIES (judge_retries.go): num_alloc_retries and num_ooms after the last step.
	retries retriesJudge
	// budget: what the engine was told of each event it recorded (INV-BUDGET, judge_budget.go).
	budget budgetJudge
	// counters: the engine's Stats after the last step (INV-COUNTERS, judge_counters.go).
	counters impl.Stats
	// segev judges INV-SEGEVENTS (judge_segevents.go): the segment events replay to the snapshot's memory.
	segev segEventsJudge
	// largest: LargestCachedBlock's answer in the current step (INV-LARGEST).
	largest uint64
	// capturing: stream indexes capturing a CUDA graph (capture-begin without capture-end).
	capturing map[int]bool
	// gone: stream indexes a forget op forgot (ForgetStream succeeded): the caller destroys them, so no
	// work is launched on them any more (launch is refused); what they had still completes.
	gone map[int]bool
	// serve: INV-SERVE's record (judge_serve.go).
	serve serveJudge
	// limit: the serving layer's cap now (Config.MemoryLimit, then the limit and fraction ops); capped:
	// whether there is one (a fraction of 0 caps at 0 bytes; Invariant: !capped implies limit == 0).
	limit  uint64
	capped bool
	// fraction: the fraction the last cap change set (MemoryFraction returns it exactly); -1: that change
	// was in bytes (Config.MemoryLimit, a limit op).
	fraction float64
	// syncFail: with a fail-sync armed, the layer's synchronisations until the one that fails (0: none
	// armed); syncFailed: the streams whose synchronisation failed during the current call (their work
	// stays pending; judgeServe counts them, tellSynced forgets them).
	syncFail   int
	syncFailed []vmm.Stream
	// streamFaults: the armed faults on cuStreamCreate, each as the stream creations until it fires (the
	// layer creates a stream only for a caller value it has not mapped: after NewEnv, a forgotten one).
	streamFaults []int
	// forgot: the caller values forgotten through the serving layer's mapping (see unmapped).
	forgot  map[vmm.Stream]bool
	checker vmm.Stream     // with Patterns: the device stream the patterns are written and read on
	size    map[int]uint64 // allocation id -> bytes requested (for the pattern check)
	Ops     []Op           // executed, in order: the reproducer
	// outcomes[i] is Outcome of Ops[i] when it ran through Step (History prints them).
	outcomes []string
	// decisions[i] is the decision digest of Ops[i] (Config.Decisions; DecisionHistory prints them);
	// decided, the device's call counts when the last digest was taken; syncs, the synchronisations asked
	// of clockSync so far (by the layer or the engine), decidedSyncs their number at the last digest.
	decisions    []string
	decided      vmm.CallCounts
	syncs        int
	decidedSyncs int
	Steps        int
	last         spec.View // the View after the last checked step, valid while lastOK
	lastOK       bool
}

// viewBefore returns the View now, reusing the one taken after the previous step when nothing can have
// changed since (the previous step was checked and ran through Step).
func (e *Env) viewBefore() spec.View {
	if e.lastOK {
		return e.last
	}
	return e.View()
}

// StepResult is what one op did and what the checkers found.
type StepResult struct {
	Op         Op
	Ptr        vmm.DevicePtr
	Err        error
	Violations []spec.Violation
}

// ContractErrors are the engine's error kinds, for the contract.
var ContractErrors = contract.ContractErrors{
	InvalidSize: impl.ErrInvalidSize, UnknownPointer: impl.ErrUnknownPointer, InteriorPtr: impl.ErrInteriorPtr,
	DoubleFree: impl.ErrDoubleFree, UnknownStream: impl.ErrUnknownStream, Closed: impl.ErrClosed,
}

// PolicyOOMRule returns INV-NOSPURIOUSOOM's rule for a policy (see SPEC.md): gmlake needs its request
// rounded to the granularity; gmlake-paper, like PyTorch's caching allocator, whole segments (and may count
// only chunks of wholly free segments as usable); PyTorch's caching allocator a 2 MiB segment for requests up to
// 1 MiB, a 20 MiB one below 10 MiB, the request rounded to 2 MiB above; expandable segments whole 20 MiB
// pages above 1 MiB.
func PolicyOOMRule(policy string, gran uint64) spec.OOMRule {
	switch policy {
	case impl.PolicyCaching:
		r := spec.SegmentNeed(vmm.MiB, 2*vmm.MiB, 10*vmm.MiB, 20*vmm.MiB, 2*vmm.MiB)
		r.WholeSegments = true // cudaFree semantics: a segment is released whole
		return r
	case impl.PolicyExpandable:
		return spec.SegmentNeed(vmm.MiB, 2*vmm.MiB, vmm.MiB+1, 0, 20*vmm.MiB)
	case impl.PolicyGMLakePaper:
		// The original GMLake grows PyTorch's segments with no smaller fallback (realloc_block), releases
		// whole free segments only, and stitches requests of at least 512 MiB.
		r := spec.SegmentNeed(vmm.MiB, 2*vmm.MiB, 10*vmm.MiB, 20*vmm.MiB, 2*vmm.MiB)
		r.WholeSegments, r.StitchMin, r.GreedyStitch = true, 512*vmm.MiB, true
		return r
	}
	// gmlake stitches rounded requests of at least two granules (impl: stitchMin), but only chunks of its
	// large pool, and a View does not say which pool a chunk serves: so no chunk pending on the request's
	// own stream counts as usable (StitchMin 0), the conservative choice.
	return spec.GranularNeed(gran, 0)
}

// GrowthRule returns INV-GROWTH's rule for gmlake with knobs k on a device of capacity bytes: the engine's
// defaults (impl/policy.go: StitchMin two granules, StitchSave min(128 MiB, 1/1024 of the device)) unless the
// knobs set them. A larger Save than the engine's only loosens the bound.
func GrowthRule(k impl.Config, capacity, gran uint64) spec.GrowthRule {
	r := spec.GrowthRule{StitchMin: k.StitchMin, Save: k.StitchSave, Granularity: gran, Reuse: 5, /* impl: reuseLimit */
		CrossStream: !k.NoCrossStream, Chunk: spec.ChunkSize(k.ChunkSize, capacity, gran)}
	if r.StitchMin == 0 {
		r.StitchMin = 2 * gran
	}
	if r.Save == 0 {
		r.Save = min(128*vmm.MiB, capacity/1024)
	}
	return r
}

// NewEnv makes a device, creates the streams, and opens the engine on it.
func NewEnv(cfg Config) (*Env, error) {
	cfg = cfg.withSetupDefaults()
	if err := ValidateSetup(cfg); err != nil {
		return nil, err // a value the device or the engine cannot take (granularity=3 panicked in the device)
	}
	if cfg.Policy == "" {
		cfg.Policy, cfg.DefaultName = impl.PolicyGMLake, true
	}
	if cfg.DefaultName && cfg.Policy != impl.PolicyGMLake {
		return nil, fmt.Errorf("ops: the default policy name runs %q, not %q: DefaultName wants Policy %q or empty", impl.PolicyGMLake, cfg.Policy, impl.PolicyGMLake)
	}
	asked := cfg.Policy // what the engine is asked for: "" its default, which the Env judges as gmlake
	if cfg.DefaultName {
		asked = ""
	}
	if cfg.HostCache {
		cfg.CLib = true
	}
	if cfg.CLib {
		cfg.Serve = true
		if cfg.Mutations != 0 {
			return nil, fmt.Errorf("ops: the seeded mutations %#x cannot reach the engine through the C library (no knob sets them)", uint32(cfg.Mutations))
		}
	}
	e := &Env{limit: cfg.MemoryLimit, capped: cfg.MemoryLimit != 0, fraction: -1, Cfg: cfg, Hist: spec.NewHistory(), ptrs: map[int]vmm.DevicePtr{}, live: map[int]bool{},
		pools: map[int]int{}, poolOf: map[vmm.DevicePtr]int{}, poolVA: map[int][]vmm.Range{}, handed: map[vmm.DevicePtr]bool{}, capturing: map[int]bool{}, size: map[int]uint64{},
		gone: map[int]bool{}, forgot: map[vmm.Stream]bool{}}
	e.Device = cfg.Device
	if e.Device == nil {
		// RDMAHandles: the H200's rule for GPUDirect-RDMA-capable handles (model/sim), so every checker that
		// drives an Env also checks that the engine never makes the call pattern that breaks them (a Map or
		// SetAccess it then gets is CUDA_ERROR_UNKNOWN, which no judge accepts without an injected fault).
		e.Dev = sim.NewDevice(sim.DeviceConfig{Capacity: cfg.Capacity, Granularity: cfg.Granularity,
			SyncStreams: cfg.SyncStreams, Seed: cfg.Seed, RDMAHandles: true})
		e.Device = e.Dev
		e.calls = &failLog{Device: e.Dev}
	} else {
		e.Cfg.Capacity, e.Cfg.Granularity = e.Device.Capacity(), e.Device.Granularity()
		e.Cfg.SyncStreams = false // the device's clock is the ops' (launch, complete)
		cfg = e.Cfg
	}
	mapped := cfg.Serve && e.Dev != nil // the simulated device knows only streams it created
	var drv vmm.Driver = e.Device       // the engine's driver
	if e.calls != nil {
		drv = e.calls
	}
	e.Streams = []vmm.Stream{vmm.DefaultStream}
	if !mapped {
		for len(e.Streams) < cfg.Streams {
			s, err := e.Device.CreateStream()
			if err != nil {
				return nil, fmt.Errorf("ops: creating stream: %w", err)
			}
			e.Streams = append(e.Streams, s)
		}
		e.callers = append(append([]vmm.Stream(nil), e.Streams...), vmm.Stream(1<<40)) // unknown to the device
	}
	kc := cfg.Knobs
	kc.Policy, kc.TestOnlyMutations = asked, cfg.Mutations
	if cfg.Serve {
		s, err := e.openServe(drv, kc, mapped)
		if err != nil {
			return nil, err
		}
		e.S, e.A = s, s.Allocator()
		if mapped {
			// Caller values as a C library gets them (stream pointers), mapped by the layer; one more
			// for the stream indexes the environment does not have: under the mapping any value is a stream.
			e.Streams = e.Streams[:0]
			for i := 0; i <= cfg.Streams; i++ {
				c := vmm.Stream(0)
				if i > 0 {
					c = vmm.Stream(0x7f00_0000_0000 + uint64(i)*0x100)
				}
				ds, err := s.Stream(c)
				if err != nil {
					return nil, fmt.Errorf("ops: mapping caller stream %#x: %w", uint64(c), err)
				}
				e.callers = append(e.callers, c)
				e.Streams = append(e.Streams, ds)
			}
			e.other = e.Streams[cfg.Streams]
			e.Streams = e.Streams[:cfg.Streams]
		}
	} else {
		// The engine waits for a stream on its out-of-memory path when its driver can (F6): through the
		// Env's clock, so the judges are told the stream's work completed (tellSynced), as under the layer.
		a, err := impl.New(syncDriver{drv, clockSync{e}, deviceWait{e}}, kc)
		if err != nil {
			return nil, fmt.Errorf("ops: opening policy %q: %w", cfg.Policy, err)
		}
		e.A = a
	}
	e.counters = e.A.Stats()
	if !cfg.CLib { // the C library's event hook takes the events (judgeCLibEvents judges those)
		e.A.RecordSegmentEvents(true)
		e.segev.on = true
	}
	if got := e.A.Policy(); got != cfg.Policy {
		_, _ = e.A.Close()
		return nil, fmt.Errorf("ops: asked for policy %q, the engine runs %q (want %q)", asked, got, cfg.Policy)
	}
	e.Rule = PolicyOOMRule(cfg.Policy, cfg.Granularity)
	if cfg.Policy == impl.PolicyGMLakePaper && cfg.Knobs.StitchMin != 0 {
		e.Rule.StitchMin = cfg.Knobs.StitchMin // the engine's own threshold, not the default
	}
	if cfg.Policy == impl.PolicyGMLakePaper {
		// A large request rounds up to the chunk size, and so does its segment (GLake's round_size and
		// realloc_block, kGranularity the chunk: impl.Config.ChunkSize).
		chunk := e.paperChunk()
		small := e.Rule.Need
		e.Rule.Need = func(size uint64) uint64 {
			if spec.TorchRoundSize(size) <= vmm.MiB {
				return small(size)
			}
			return vmm.RoundUp(spec.TorchAllocationSize(vmm.RoundUp(size, chunk)), chunk)
		}
	}
	if cfg.Policy == impl.PolicyGMLakePaper && cfg.Knobs.DefragLevel >= 3 {
		// Every stitch attempt of the miss path skipped (reAlloc's own stitches new memory in): no request
		// is served by stitching the cache alone.
		e.Rule.StitchMin = 0
	}
	if cfg.Policy == impl.PolicyGMLake {
		e.Growth = GrowthRule(cfg.Knobs, e.Device.Capacity(), cfg.Granularity)
	}
	known := append([]vmm.Stream(nil), e.Streams[1:]...)
	if e.other != 0 {
		known = append(known, e.other)
	}
	ccfg := &contract.ContractConfig{Capacity: e.Capacity(), Granularity: cfg.Granularity, Streams: known,
		Errors: ContractErrors, Footprint: e.Rule.Need}
	e.Contract = contract.NewContract(ccfg)
	if cfg.Patterns {
		// The checker's own stream: the engine never sees it, so its reads and writes order nothing.
		var err error
		if e.checker, err = e.Device.CreateStream(); err != nil {
			return nil, fmt.Errorf("ops: creating the pattern checker's stream: %w", err)
		}
		if e.Cfg.Probes == 0 {
			e.Cfg.Probes = DefaultProbes
		}
	}
	return e, nil
}

// openServe opens the serving layer on drv: itself, or under Config.CLib the C library over it (openCLib,
// judge_serve.go).
func (e *Env) openServe(drv vmm.Driver, kc impl.Config, mapped bool) (*serve.Engine, error) {
	if e.Cfg.CLib {
		return e.openCLib(drv, kc, mapped)
	}
	s, err := serve.New(drv, serve.Config{Engine: kc, MemoryLimit: e.Cfg.MemoryLimit, MapStreams: mapped, Sync: clockSync{e}, DeviceSync: deviceWait{e}})
	if err != nil {
		return nil, fmt.Errorf("ops: opening policy %q through the serving layer: %w", e.Cfg.Policy, err)
	}
	return s, nil
}

// Capacity is the physical memory the judge counts: the device's, or the serving layer's cap now if smaller.
func (e *Env) Capacity() uint64 {
	c := e.Device.Capacity()
	if e.Cfg.Serve && e.capped && e.limit < c {
		c = e.limit
	}
	return c
}

// deviceState is the device's state as the judge sees it (the capacity under the serving layer's cap).
func (e *Env) deviceState() sim.DeviceState {
	st := e.Device.State()
	st.Capacity = e.Capacity()
	return st
}

// tellSynced tells the contract and the history that the work of every stream the serving layer
// synchronised during the last call has completed (it has: clockSync completed it on the device).
func (e *Env) tellSynced() {
	for _, s := range e.synced {
		if _, next, why := e.Contract.Explain(contract.ContractInput{Op: contract.COpComplete, Stream: s}, contract.ContractOutput{}); why == "" {
			e.Contract = next
		}
		e.Hist.Completed(s)
	}
	e.synced, e.syncFailed, e.devWaited = e.synced[:0], e.syncFailed[:0], 0
}

// View returns the judge's picture now.
func (e *Env) View() spec.View { return ViewOf(e.A.Snapshot(), e.deviceState()) }

// LiveIDs returns the ids of the live allocations, in pointer order.
func (e *Env) LiveIDs() []int {
	ids := make([]int, 0, len(e.live))
	for id := range e.live {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return e.ptrs[ids[i]] < e.ptrs[ids[j]] })
	return ids
}

// SizeOf returns the bytes the live allocation id asked for (0 if id is not live): ops.Sizer.
func (e *Env) SizeOf(id int) uint64 {
	if !e.live[id] {
		return 0
	}
	return e.size[id]
}

// FreedIDs returns ids that were allocated and are no longer live (for double frees), sorted.
func (e *Env) FreedIDs() []int {
	var ids []int
	for id := range e.ptrs {
		if !e.live[id] {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

// NextID returns an id no op has bound yet.
func (e *Env) NextID() int {
	n := 0
	for id := range e.ptrs {
		n = max(n, id+1)
	}
	for _, o := range e.Ops {
		if o.Kind == OpAlloc {
			n = max(n, o.ID+1)
		}
	}
	return n
}

// ResumeChecks turns the predicates back on after a light replay (Config.NoChecks) and forgets the View
// kept from before, so the next step judges from a fresh one.
func (e *Env) ResumeChecks() {
	e.Cfg.NoChecks = false
	e.lastOK = false
}

// Faulty reports whether an injected driver fault may still be pending.
func (e *Env) Faulty() bool { return e.faulty }

// armedOnly reports whether every fault armed since the last clearfaults is on one of kinds (true with
// none armed; a fail-sync is not a driver fault and is not counted).
func (e *Env) armedOnly(kinds ...vmm.CallKind) bool {
	for _, k := range e.armed {
		if !slices.Contains(kinds, k) {
			return false
		}
	}
	return true
}

// Closed reports whether Close ran.
func (e *Env) Closed() bool { return e.closed }

// Ptr returns the pointer bound to id, or a pointer that was never allocated.
func (e *Env) Ptr(id int) vmm.DevicePtr {
	if p, ok := e.ptrs[id]; ok {
		return p
	}
	return vmm.DevicePtr(0xdead_0000_0000 + uint64(id)*4096)
}

func (e *Env) stream(i int) vmm.Stream {
	if i >= 0 && i < len(e.Streams) {
		return e.Streams[i]
	}
	if e.other != 0 {
		return e.other // under the serving layer's mapping every caller value is a stream
	}
	return vmm.Stream(1 << 40) // unknown to the device: the engine must refuse it
}

// caller returns the stream value the engine is called with for stream index i (see Env.callers).
func (e *Env) caller(i int) vmm.Stream {
	if i >= 0 && i < len(e.Streams) {
		return e.callers[i]
	}
	return e.callers[len(e.Streams)]
}

// The engine's calls, through the serving layer when there is one.
func (e *Env) alloc(size uint64, i int) (vmm.DevicePtr, error) {
	if e.hc != nil {
		return e.hostAlloc(size, i)
	}
	if e.C != nil {
		p, err := e.C.Alloc(size, uintptr(e.caller(i)))
		return vmm.DevicePtr(p), err
	}
	if e.S != nil {
		return e.S.Alloc(size, e.caller(i))
	}
	return e.A.Alloc(size, e.caller(i))
}

func (e *Env) free(p vmm.DevicePtr) error {
	if e.hc != nil && e.hostFree(p) {
		return nil
	}
	if e.C != nil {
		return e.C.Free(uintptr(p))
	}
	if e.S != nil {
		return e.S.Free(p)
	}
	return e.A.Free(p)
}

func (e *Env) recordStream(p vmm.DevicePtr, i int) error {
	if e.hc != nil {
		delete(e.hc.live, p) // its free goes to the engine from now on (gmlake_hc_forget)
	}
	if e.C != nil {
		return e.C.RecordStream(uintptr(p), uintptr(e.caller(i)))
	}
	if e.S != nil {
		return e.S.RecordStream(p, e.caller(i))
	}
	return e.A.RecordStream(p, e.caller(i))
}

func (e *Env) allocPool(size uint64, i, pool int) (vmm.DevicePtr, error) {
	if e.C != nil {
		p, err := e.C.AllocPool(size, uintptr(e.caller(i)), poolID(pool))
		return vmm.DevicePtr(p), err
	}
	if e.S != nil {
		return e.S.AllocPool(size, e.caller(i), poolID(pool))
	}
	return e.A.AllocPool(size, e.caller(i), poolID(pool))
}

func (e *Env) forgetStream(i int) error {
	if e.S != nil {
		return e.S.ForgetStream(e.caller(i))
	}
	return e.A.ForgetStream(e.caller(i))
}

// unmapped reports whether stream index i's caller value was forgotten through the serving layer's mapping
// (serve.Engine.ForgetStream unmaps it): a caller that destroyed the stream has no such value any more, and
// the layer would map it to a new stream, which the judges, whose streams are fixed, do not know. Ops that
// hand the layer that value are refused (serve's own tests check the new mapping).
func (e *Env) unmapped(i int) bool { return e.other != 0 && e.forgot[e.caller(i)] }

func (e *Env) setCapturing(i int, on bool) error {
	if e.C != nil {
		return e.C.SetCapturing(uintptr(e.caller(i)), on)
	}
	if e.S != nil {
		return e.S.SetCapturing(e.caller(i), on)
	}
	return e.A.SetCapturing(e.caller(i), on)
}

// flushHist tells the history that the engine flushed the frees deferred during a capture, where it
// surely did: it flushes at the end of the last capture and at every Alloc and EmptyCache outside one, and
// what fails stays deferred (impl: flushDeferredLocked), so with a fault armed the history waits on.
func (e *Env) flushHist() {
	if len(e.capturing) == 0 && len(e.armed) == 0 {
		e.Hist.Flush()
	}
}

func (e *Env) emptyCache() error {
	if e.C != nil {
		return e.C.EmptyCache()
	}
	if e.S != nil {
		return e.S.EmptyCache()
	}
	return e.A.EmptyCache()
}

// Step runs one op and judges it.
func (e *Env) Step(op Op) (r StepResult) {
	defer func() {
		// A panic of the engine is its own invariant check firing (impl panics only for broken
		// internal invariants): report it as INV-SELFCHECK.
		if p := recover(); p != nil {
			r = StepResult{Op: op, Violations: []spec.Violation{{Inv: spec.InvSelfCheck, Msg: fmt.Sprintf("engine panicked on %v: %v", op, p)}}}
			e.lastOK = false
		}
	}()
	r = e.step(op)
	if e.Cfg.Differential && e.Cfg.Mutations != 0 && len(r.Violations) > 0 {
		r.Violations = e.beyondBaseline(r.Violations, false)
	}
	if len(e.Cfg.Ignore) > 0 && len(r.Violations) > 0 {
		keep := r.Violations[:0]
		for _, v := range r.Violations {
			if !e.Cfg.Ignore[v.Inv] {
				keep = append(keep, v)
			}
		}
		r.Violations = keep
	}
	e.outcomes = append(e.outcomes, Outcome(r))
	if e.Cfg.Decisions {
		e.decisions = append(e.decisions, e.decision(r))
	}
	return r
}

// Outcome is the one-line outcome of a step as a history prints it: "ok", or the error's kind ("out of
// memory", "unknown stream", ... or "driver error" under an injected fault), then any violated invariants.
// It names no address, so a history is the same on every run and every device.
func Outcome(r StepResult) string {
	s := "ok"
	if r.Err != nil {
		s = "error: " + errorKind(r.Err)
	}
	for _, v := range r.Violations {
		s += " | " + v.Inv
	}
	return s
}

func errorKind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{{impl.ErrInvalidSize, "invalid size"}, {impl.ErrUnknownPointer, "unknown pointer"}, {impl.ErrInteriorPtr, "interior pointer"},
		{impl.ErrDoubleFree, "double free"}, {impl.ErrUnknownStream, "unknown stream"}, {impl.ErrClosed, "closed"},
		{impl.ErrUnknownPool, "unknown pool"}, {impl.ErrBadConfig, "bad config"}, {impl.ErrStreamCapturing, "stream capturing"},
		{vmm.ErrOutOfMemory, "out of memory"}} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "driver error"
}

// History prints the run as an op list with each op's outcome (`alloc a0 4194304 s0 // ok`): the header
// and ops replay as they are (Parse drops the comments), and a golden history pins every answer.
func (e *Env) History() string {
	var b strings.Builder
	b.WriteString(e.Cfg.Header() + "\n")
	for i, o := range e.Ops {
		out := ""
		if i < len(e.outcomes) {
			out = e.outcomes[i]
		}
		fmt.Fprintf(&b, "%-40s // %s\n", o.String(), out)
	}
	return b.String()
}

func (e *Env) step(op Op) StepResult {
	e.Steps++
	defer func() { e.lastOK = !e.Cfg.NoChecks }()
	e.lastOK = e.lastOK && !e.Cfg.NoChecks
	e.Ops = append(e.Ops, op)
	if e.calls != nil {
		e.calls.failed, e.calls.syncs, e.calls.access, e.calls.unmaps = e.calls.failed[:0], e.calls.syncs[:0], e.calls.access[:0], e.calls.unmaps[:0]
		e.calls.events = e.calls.events[:0]
	}
	// The host cache's log is handed over before op, in the same crossing (Config.HostCache): its driver
	// calls are the op's, and it must apply.
	var hostErr error
	if e.hc != nil && !e.hostOwnsStep(op) && len(e.hc.log) > 0 {
		hostErr = e.hostFlush()
		e.lastOK = false // the View kept from the last step is from before the replay
	}
	switch op.Kind {
	case OpFail, OpClearFaults, OpLaunch, OpComplete, OpCompleteAll, OpClose: // no engine call before Close
	default:
		e.eventsLost = e.eventsLost || slices.Contains(e.armed, vmm.CallDestroyEvent)
	}
	res := StepResult{Op: op}
	if hostErr != nil { // the engine refused what the cache served: the C library and the engine disagree
		res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvSelfCheck, Msg: fmt.Sprintf("before %v: %v", op, hostErr)})
	}
	var in contract.ContractInput
	var before spec.View
	// refused: the op did not run on this device (a fault without fault injection); unjudged: the
	// contract knows nothing of it (pools, capture, launch on no stream), the Env judges it itself.
	var haveBefore, refused, unjudged bool
	var callsBefore vmm.CallCounts // the device's call counts before an Alloc (INV-PAPEREVENTS)
	var freedPtr vmm.DevicePtr     // the pointer a Free was given (INV-FENCE)
	kind := op.Kind
	if e.unmapped(op.Stream) && (kind == OpAlloc || kind == OpRecord || kind == OpCaptureBegin || kind == OpCaptureEnd || kind == OpForget) {
		// The caller value of a stream forgotten through the serving layer's mapping names no stream any
		// more (unmapped): the op would hand the layer a value it now maps to a new stream. Unless an armed
		// fault fails that stream's creation: then the op runs and must fail, mapping nothing (remapFails).
		if e.remapFails() {
			res.Ptr, res.Err = e.remap(op)
			res.Violations = append(res.Violations, e.judgeRemap(op, res)...)
		}
		refused, kind = true, OpKind(255) // no such kind: the switch below runs nothing
	}
	switch kind {
	case OpAlloc:
		e.flushHist()
		before, haveBefore = e.viewBefore(), true
		if e.Dev != nil {
			callsBefore = e.Dev.Counts()
		}
		in = contract.ContractInput{Op: contract.COpAlloc, Size: op.Size, Stream: e.stream(op.Stream)}
		if op.Pool != 0 {
			res.Ptr, res.Err = e.allocPool(op.Size, op.Stream, op.Pool)
			if e.pools[op.Pool] == 0 && !e.closed {
				// A pool never created or released: nothing is allocated from it (the contract has no
				// pools, so the Env judges the answer): exactly ErrUnknownPool, whatever the size, the
				// stream or an armed fault (bad input is refused before any resource is asked for).
				unjudged = true
				if !errors.Is(res.Err, impl.ErrUnknownPool) {
					res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvContract,
						Msg: fmt.Sprintf("%v -> %v: want exactly ErrUnknownPool (the pool is not alive)", op, res.Err)})
				}
			}
		} else {
			res.Ptr, res.Err = e.alloc(op.Size, op.Stream)
		}
		if res.Err != nil {
			res.Violations = append(res.Violations, judgeFailedAlloc(op, res)...)
		}
		if res.Err == nil {
			e.ptrs[op.ID] = res.Ptr
			e.live[op.ID] = true
			e.size[op.ID] = op.Size
			e.poolOf[res.Ptr] = op.Pool
			if op.Pool != 0 {
				e.poolVA[op.Pool] = append(e.poolVA[op.Pool], vmm.Range{Base: res.Ptr, Size: op.Size})
			}
			e.handed[res.Ptr] = true
			if e.Cfg.Patterns {
				if err := Fill(e.Device, res.Ptr, op.Size, PatternByte(uint64(op.ID)), e.checker); err != nil {
					res.Violations = append(res.Violations, spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("a%d: %v", op.ID, err)})
				}
			}
		}
	case OpFree, OpFreeInterior:
		before, haveBefore = e.viewBefore(), true
		p := e.Ptr(op.ID)
		if op.Kind == OpFreeInterior {
			p = p.Add(op.Offset)
		} else if e.Cfg.Patterns && e.live[op.ID] && !e.closed { // after Close nothing is mapped
			if err := Verify(e.Device, p, e.size[op.ID], PatternByte(uint64(op.ID)), e.checker, e.Device.Granularity(), e.Cfg.Probes, nil); err != nil {
				res.Violations = append(res.Violations, spec.Violation{Inv: CheckIntegrity, Msg: fmt.Sprintf("a%d before its free: %v", op.ID, err)})
			}
		}
		in, freedPtr = contract.ContractInput{Op: contract.COpFree, Ptr: p}, p
		res.Err = e.free(p)
		if errors.Is(res.Err, impl.ErrInteriorPtr) && !interiorOfLive(before, p) {
			// C-FREE-KIND, the half the contract cannot judge (it knows requested sizes, not blocks): an
			// interior-pointer error needs a live block that p is inside of.
			res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvContract,
				Msg: fmt.Sprintf("C-FREE-KIND: Free(%v) failed with %v, but no live allocation's block contains it", p, res.Err)})
		}
		if res.Err != nil && !e.handed[p] && !e.closed && !interiorOfLive(before, p) && !errors.Is(res.Err, impl.ErrUnknownPointer) {
			// C-FREE-KIND's other half: the engine may forget that a pointer was freed (a double free then
			// says unknown), never invent it: a pointer no Alloc returned is unknown, exactly.
			res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvContract,
				Msg: fmt.Sprintf("C-FREE-KIND: Free(%v) failed with %v, but no Alloc returned it and no live allocation contains it: want exactly ErrUnknownPointer", p, res.Err)})
		}
		if res.Err == nil {
			e.Hist.OnFree(before, p)
			for id := range e.live { // every id bound to p (a stale id may name a reused pointer)
				if e.ptrs[id] == p {
					delete(e.live, id)
				}
			}
			delete(e.poolOf, p)
		}
	case OpRecord:
		in = contract.ContractInput{Op: contract.COpRecordStream, Ptr: e.Ptr(op.ID), Stream: e.stream(op.Stream)}
		res.Err = e.recordStream(in.Ptr, op.Stream)
	case OpLaunch:
		in = contract.ContractInput{Op: contract.COpLaunch, Stream: e.stream(op.Stream)}
		if e.gone[op.Stream] {
			refused = true // a forgotten stream is destroyed: no work is submitted to it any more
		} else if op.Stream < 0 || op.Stream >= len(e.Streams) || e.Cfg.SyncStreams {
			unjudged = true // no such stream, or work completes at once: nothing pending
		} else {
			e.Device.Launch(in.Stream)
			e.Hist.Launch(in.Stream)
		}
	case OpComplete:
		in = contract.ContractInput{Op: contract.COpComplete, Stream: e.stream(op.Stream)}
		e.Device.Complete(in.Stream)
		e.Hist.Completed(in.Stream)
	case OpCompleteAll:
		in = contract.ContractInput{Op: contract.COpCompleteAll}
		e.Device.CompleteAll()
		e.Hist.CompletedAll()
	case OpEmptyCache:
		in = contract.ContractInput{Op: contract.COpEmptyCache}
		e.flushHist()
		res.Err = e.emptyCache()
	case OpFail:
		in = contract.ContractInput{Op: contract.COpInjectFault}
		if e.Dev == nil {
			refused = true // no fault injection on this device: nothing armed, nothing told
			break
		}
		e.Dev.FailNth(op.Call, max(op.N, 1), op.Result)
		if op.Call == vmm.CallCreateStream {
			e.streamFaults = append(e.streamFaults, max(op.N, 1))
		}
		e.faulty = true
		e.armed = append(e.armed, op.Call)
		e.eventFault = e.eventFault || op.Call == vmm.CallDestroyEvent
	case OpClearFaults:
		in = contract.ContractInput{Op: contract.COpClearFaults}
		if e.Dev != nil {
			e.Dev.ClearFaults()
		}
		e.faulty, e.armed, e.syncFail, e.streamFaults = false, nil, 0, nil
	case OpClose:
		in = contract.ContractInput{Op: contract.COpClose}
		wasClosed := e.closed
		used := e.Device.State().Used
		var rep closeReport
		rep, res.Err = e.close()
		if !wasClosed {
			e.closeErr = res.Err
			res.Violations = append(res.Violations, judgeClose(op, res.Err, e.Device.Leaks(), e.eventsLost)...)
			res.Violations = append(res.Violations, e.judgeCloseReport(op, rep, used-e.Device.State().Used)...)
		}
		e.closed = true
		if res.Err == nil || !e.faulty {
			e.live = map[int]bool{}
		}
	case OpPoolCreate, OpPoolRelease:
		unjudged, e.pooled = true, true
		var n int
		switch {
		case op.Kind == OpPoolCreate && e.C != nil:
			n, res.Err = e.C.CreateOrIncrefPool(poolID(op.Pool))
		case op.Kind == OpPoolCreate:
			n, res.Err = e.A.CreateOrIncrefPool(poolID(op.Pool))
		case e.C != nil:
			n, res.Err = e.C.ReleasePool(poolID(op.Pool))
		default:
			n, res.Err = e.A.ReleasePool(poolID(op.Pool))
		}
		res.Violations = append(res.Violations, e.judgePoolOp(op, n, res.Err)...)
		if res.Err == nil {
			e.pools[op.Pool] = n
			if n == 0 {
				delete(e.poolVA, op.Pool) // its graphs are destroyed: no replay of them comes any more
			}
		}
	case OpReplay:
		// A graph captured in the pool replays on the stream: work the engine is not told of, which may use
		// everything the pool handed out (blocks freed during the capture included). The contract sees a
		// launch; the history keeps those bytes backed until it completes (INV-RELEASESAFE).
		in = contract.ContractInput{Op: contract.COpLaunch, Stream: e.stream(op.Stream)}
		switch {
		case e.pools[op.Pool] <= 0 || e.closed || e.gone[op.Stream]:
			refused = true // no living pool, so no graph of it; or a destroyed stream runs no more work
		case op.Stream < 0 || op.Stream >= len(e.Streams) || e.Cfg.SyncStreams:
			unjudged = true
		default:
			e.Device.Launch(in.Stream)
			e.Hist.Launch(in.Stream)
			e.Hist.Replay(e.View(), e.poolVA[op.Pool], in.Stream)
		}
	case OpForget:
		// ForgetStream, called by the engine's users before cuStreamDestroy (gmlake.Allocator.DestroyStream),
		// through the serving layer when there is one (it unmaps the caller's value). The contract judges
		// the answer (C-FORGET).
		in = contract.ContractInput{Op: contract.COpForgetStream, Stream: e.stream(op.Stream)}
		res.Err = e.forgetStream(op.Stream)
		if e.capturing[op.Stream] && op.Stream != 0 && !e.gone[op.Stream] { // else C-FORGET's ErrUnknownStream first
			unjudged = true // refused, changing nothing: the contract's state stays as it is
			res.Violations = append(res.Violations, e.judgeForgetCapturing(op, res.Err)...)
		} else if res.Err == nil && op.Stream >= 0 && op.Stream < len(e.Streams) {
			e.gone[op.Stream] = true
		}
		if res.Err == nil && e.other != 0 {
			e.forgot[e.caller(op.Stream)] = true
		}
	case OpLargest:
		unjudged = true // judged after every step (INV-LARGEST, judge_largest.go)
		if e.C != nil {
			e.largest = e.C.CacheInfo()
		} else {
			e.largest = e.A.LargestCachedBlock()
		}
	case OpResetPeak:
		unjudged = true // INV-TORCHSTATS judges the statistics after the reset
		if e.C != nil {
			e.C.ResetPeakStats()
		} else {
			e.A.ResetPeakStats()
		}
	case OpResetAcc:
		unjudged = true
		if e.C != nil {
			e.C.ResetAccumulatedStats()
			e.serve.resetAcc(e)
		} else {
			e.A.ResetAccumulatedStats()
		}
	case OpLimit, OpFraction, OpStats, OpSyncFail:
		// The layers' own ops: the contract knows only the capacity they change (judge_serve.go).
		unjudged = true
		refused, res.Err = e.layerOp(op, &res)
	case OpSnapshot:
		unjudged = true
		snap := e.A.Snapshot()
		res.Violations = append(res.Violations, e.judgeSnapshot(snap)...)
		res.Violations = append(res.Violations, e.judgeSnapshotQuery(snap)...)
	case OpCaptureBegin, OpCaptureEnd:
		unjudged = true
		res.Err = e.setCapturing(op.Stream, op.Kind == OpCaptureBegin)
		if e.closed != errors.Is(res.Err, impl.ErrClosed) || res.Err != nil && !e.closed && !e.faulty {
			res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvContract,
				Msg: fmt.Sprintf("%v: %v (want ErrClosed after Close, else no error without an injected fault)", op, res.Err)})
		}
		if op.Kind == OpCaptureBegin && !e.closed {
			e.capturing[op.Stream] = true
		} else {
			delete(e.capturing, op.Stream)
		}
		e.Hist.SetCapturing(len(e.capturing) > 0)
		e.flushHist()
	}
	// The op's own event calls and driver calls end here: the judges below ask the engine too (INV-BUDGET).
	opEvents, opCounts := e.opCalls()
	// What the serving layer promises (INV-SERVE), judged while e.synced still holds its synchronisations.
	res.Violations = append(res.Violations, e.judgeServe(op, res, refused)...)
	// The serving layer's synchronisations happened before its answer: tell the judges first. A wait that
	// failed (fail-sync) left its stream's work pending, so the engine could not learn that frees on it
	// completed: an out of memory in that step is not the engine's to answer for (C-OOM, INV-NOSPURIOUSOOM).
	waitFailed := len(e.syncFailed) > 0
	e.tellSynced()
	// The contract: was the answer legal? While a stream captures, frees of blocks used on other streams
	// wait (impl: SetCapturing), frees deferred by a capture wait after it for the work launched before its
	// flush (spec.History.LazyWaiting), and a living private pool keeps its memory from every other request,
	// so then an out-of-memory answer is not the contract's to judge (C-OOM; INV-NOSPURIOUSOOM judges it): a
	// refusal changes nothing.
	if !refused && !unjudged {
		ok, next, why := e.Contract.Explain(in, contract.ContractOutput{Ptr: res.Ptr, Err: res.Err})
		switch {
		case ok:
			e.Contract = next
		case (len(e.capturing) > 0 || e.pooled || e.Hist.LazyWaiting() || waitFailed) && op.Kind == OpAlloc && errors.Is(res.Err, vmm.ErrOutOfMemory) && res.Ptr == 0:
		default:
			res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvContract, Msg: why})
		}
	}
	if e.Cfg.NoChecks {
		// Light mode (replays of explored prefixes): keep the history, skip the predicates. INV-BUDGET's
		// record of events is history too: a step judged after a light prefix must know the fences the
		// prefix recorded (its verdicts here are dropped: they passed when the prefix first ran).
		if e.calls != nil {
			_ = e.budget.judge(e.Cfg.Policy, e.Steps, op, res, spec.View{}, spec.View{}, false, e.pooled, len(e.calls.failed) > 0, 0,
				vmm.CallCounts{}, vmm.CallCounts{}, false, opEvents)
		}
		if op.Kind == OpAlloc && res.Err == nil {
			e.Hist.OnAlloc(e.View(), res.Ptr, in.Stream)
		}
		if !e.closed {
			held := 0
			if op.Kind == OpResetAcc {
				held = len(e.View().Chunks)
			}
			stats := e.A.TorchStats()
			e.torch.note(op.Kind, stats, held)
			e.retries.note(stats)
			_ = e.segev.check(e.A, nil) // replayed, not judged
		}
		e.counters = e.A.Stats()
		if e.pooled && !e.closed {
			// INV-POOL remembers what each pool handed out: keep that memory (its verdicts passed when
			// the step first ran), or a replayed prefix would forget the ranges a living pool freed.
			_ = e.poolChk.Step(e.poolStep())
			_ = e.poolChk.Returned(e.View(), e.Hist.Marks(), len(e.capturing) > 0 || e.faulty, e.Rule.WholeSegments) // what is owed
		}
		return res
	}
	snap := e.A.Snapshot()
	after := ViewOf(snap, e.deviceState())
	if e.closeErr == nil {
		// After a Close that reported a failure the device keeps what Close could not release, and the
		// engine, closed, no longer holds it: C-CLOSE judged that Close, no state invariant applies.
		res.Violations = append(res.Violations, spec.Check(after)...)
	}
	res.Violations = append(res.Violations, e.judgeSnapshot(snap)...) // INV-SNAPSHOT
	if op.Kind != OpLargest {
		e.largest = e.A.LargestCachedBlock()
	}
	res.Violations = append(res.Violations, judgeLargest(after, e.largest, e.pooled)...) // INV-LARGEST
	if err := e.A.CheckInvariants(); err != nil {
		// The engine's own field invariants (impl/invariants.go), the ones a View cannot see.
		res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvSelfCheck, Msg: fmt.Sprintf("after %v: %v", op, err)})
	}
	if op.Kind == OpAlloc && res.Err == nil {
		res.Violations = append(res.Violations, e.Hist.OnAlloc(after, res.Ptr, in.Stream)...)
		if op.Pool == 0 && !e.pooled {
			// Best fit and PyTorch's decisions are judged within one pool: with private pools in play a
			// View does not say which pool a free block serves. The engine rounds every request up to
			// 512 B (impl: roundSize).
			res.Violations = append(res.Violations, spec.CheckBestFit(before, after, res.Ptr, in.Stream, vmm.AlignUp(max(op.Size, 512), 512))...)
			if haveBefore {
				res.Violations = append(res.Violations, spec.CheckTorch(e.Cfg.Policy, before, after, res.Ptr, op.Size, e.failedCalls())...)
				res.Violations = append(res.Violations, e.judgePaperLarge(before, after, res.Ptr, op.Size, in.Stream)...)
				res.Violations = append(res.Violations, e.judgePaperReuse(before, after, res.Ptr, op.Size, in.Stream)...)
				res.Violations = append(res.Violations, spec.CheckExtend(before, after, res.Ptr)...)
				if !e.faulty {
					res.Violations = append(res.Violations, spec.CheckGrowth(e.Growth, before, after, op.Size, in.Stream)...)
					res.Violations = append(res.Violations, spec.CheckReuse(e.Growth, before, after, res.Ptr, op.Size, in.Stream)...)
					res.Violations = append(res.Violations, spec.CheckArena(before, after, res.Ptr, op.Size, in.Stream)...)
					res.Violations = append(res.Violations, spec.CheckStitchArena(before, after, res.Ptr, in.Stream)...)
					res.Violations = append(res.Violations, spec.CheckStitch(e.Growth, before, after, res.Ptr, op.Size, in.Stream)...)
				}
			}
		}
	}
	if op.Kind == OpAlloc && haveBefore && res.Err == nil && !e.faulty {
		res.Violations = append(res.Violations, spec.CheckChunks(e.Growth, before, after)...) // INV-CHUNK (gmlake)
	}
	if op.Kind == OpAlloc && haveBefore && res.Err != nil {
		res.Violations = append(res.Violations, judgeFailClean(op, before, after, res.Err)...) // INV-FAILCLEAN
	}
	if op.Kind == OpAlloc && haveBefore && e.Cfg.Policy == impl.PolicyGMLakePaper && op.Pool == 0 && !e.pooled &&
		e.armedOnly(vmm.CallCreate, vmm.CallMemInfo) {
		// INV-PAPERGC: what gmlake-paper may collect during an allocation (failed or not). Judged also
		// with faults armed on cuMemCreate and cuMemGetInfo alone: neither is a call of the stitch whose
		// failure lets GLake collect, and a refused creation is realloc_block's own case, which the rule
		// states (it collects only when cudaMemGetInfo reports more free than the segment: a creation
		// refused while exactly the segment is free must not collect).
		autoGC := e.Cfg.Knobs.AutoGC
		if autoGC == 0 {
			autoGC = 1000 << 30 // impl: GMLake's autoGC default
		}
		var made uint64 // the bytes this call stitched: they count toward autoGC before it collects
		if res.Err == nil {
			for _, b := range after.Blocks {
				if b.Stitched && b.State == spec.BlockLive && b.Range.Base == res.Ptr && !before.Reserved(res.Ptr) {
					made += b.Range.Size
				}
			}
		}
		if e.paperStitched+made <= autoGC {
			res.Violations = append(res.Violations, spec.CheckPaperCollect(before, after, op.Size, e.Cfg.Knobs.ReAlloc)...)
		}
		e.paperStitched += made
	}
	if op.Kind == OpAlloc && haveBefore && errors.Is(res.Err, vmm.ErrOutOfMemory) && !e.faulty && !waitFailed &&
		!errors.Is(res.Err, impl.ErrInvalidSize) && len(e.capturing) == 0 && !e.pooled {
		res.Violations = append(res.Violations, spec.CheckNoSpuriousOOM(before, e.Hist, e.Rule, op.Size, in.Stream)...)
	}
	if op.Kind == OpAlloc && errors.Is(res.Err, vmm.ErrOutOfMemory) && !e.closed {
		res.Violations = append(res.Violations, judgeOOMError(res.Err, op.Size, in.Stream, e.A.Stats(), after.Device.Free(), !e.faulty && e.S == nil)...)
	}
	if kind == OpAlloc && res.Err == nil && e.Dev != nil && !e.faulty { // a refused cuEventCreate makes no Block event to destroy
		res.Violations = append(res.Violations, judgePaperEvents(e.Cfg.Policy, callsBefore, e.Dev.Counts())...)
	}
	if e.calls != nil {
		res.Violations = append(res.Violations, judgeAccess(e.Cfg.Policy, before, after, e.calls.access)...) // INV-ACCESS
		res.Violations = append(res.Violations, judgeDriverRules(e.calls.failed)...)                         // INV-DRIVERRULES
		if (op.Kind == OpFree || op.Kind == OpFreeInterior) && res.Err == nil && haveBefore {
			res.Violations = append(res.Violations, judgeFence(e.Cfg.Policy, before, after, freedPtr, e.calls.syncs)...) // INV-FENCE
		}
		if op.Kind == OpAlloc && haveBefore {
			res.Violations = append(res.Violations, judgeFenceAfterWait(e.Cfg.Policy, op, before, e.calls.syncs)...) // INV-FENCE
		}
		res.Violations = append(res.Violations, e.budget.judge(e.Cfg.Policy, e.Steps, op, res, before, after, haveBefore, e.pooled, len(e.calls.failed) > 0, freedPtr,
			callsBefore, opCounts, op.Kind == OpAlloc && e.Dev != nil, opEvents)...) // INV-BUDGET
	}
	if op.Kind == OpEmptyCache {
		res.Violations = append(res.Violations, judgeEmptyCacheReports(e.Cfg.Policy, res.Err, e.unmapCalls())...)
	}
	if op.Kind == OpEmptyCache && res.Err == nil {
		// INV-EMPTIED: what a successful EmptyCache leaves behind, outside the memory of the living private
		// pools (INV-POOL: theirs, as PoolChecker learned it from the pool each allocation was asked from);
		// while a stream captures no work is known complete.
		res.Violations = append(res.Violations, spec.CheckEmptied(after, e.Hist.Idle() && len(e.capturing) == 0, e.armed, e.poolChk.Kept())...)
	}
	res.Violations = append(res.Violations, e.Hist.CheckRelease(after)...)
	// INV-CAPTURESAFE, INV-FLUSHED
	res.Violations = append(res.Violations, e.judgeCapture(op, res.Err, after)...)
	if haveBefore {
		res.Violations = append(res.Violations, e.judgeSBlockCache(op, res.Err, before, after)...) // INV-SBCACHE
	}
	if e.pooled && !e.closed { // Close releases every pool
		res.Violations = append(res.Violations, e.poolChk.Step(e.poolStep())...)
		// INV-POOLRETURN
		res.Violations = append(res.Violations, e.poolChk.Returned(after, e.Hist.Marks(), len(e.capturing) > 0 || e.faulty, e.Rule.WholeSegments)...)
		res.Violations = append(res.Violations, e.poolQueries()...)
	}
	if !e.closed {
		live, requested := e.liveRequested()
		stats := e.A.TorchStats()
		res.Violations = append(res.Violations, e.torch.reset(op.Kind, stats, after, len(after.Chunks))...)
		snap := e.A.TorchSnapshot()
		res.Violations = append(res.Violations, e.torch.check(stats, snap, after, live, requested, len(after.Chunks))...)
		res.Violations = append(res.Violations, e.segev.check(e.A, &snap)...) // INV-SEGEVENTS
		if e.Cfg.Serve {
			e.retries.note(stats) // one op's Alloc may be several of the engine's (sync-and-retry)
		} else {
			res.Violations = append(res.Violations, e.retries.check(op, res.Err, stats)...) // INV-RETRIES
		}
	}
	now := e.A.Stats()
	if e.C == nil { // the C library's own answers are judged by judge_serve.go's CLib rules
		res.Violations = append(res.Violations, judgeCounters(op, !refused, res.Ptr, res.Err, before, after, haveBefore, e.counters, now)...) // INV-COUNTERS
	}
	e.counters = now
	e.last = after
	return res
}

// liveRequested returns the number of distinct live pointers the ops hold and the bytes they asked for.
func (e *Env) liveRequested() (n int, requested uint64) {
	for _, r := range e.engineHeld() {
		n++
		requested += r
	}
	return n, requested
}

// failedCalls returns the driver calls that failed during the current step (none on a real driver).
func (e *Env) failedCalls() []spec.FailedCall {
	if e.calls == nil {
		return nil
	}
	return e.calls.failed
}

// poolID is the engine's name of pool n (0: the default pool).
func poolID(n int) impl.PoolID {
	if n == 0 {
		return impl.PoolID{}
	}
	return impl.PoolID{A: uint64(n), B: 1}
}

// judgePoolOp checks the answer of pool-create or pool-release (the contract has no pools): after Close
// every call fails with ErrClosed; the default pool and gmlake-paper have no use counts (ErrUnknownPool,
// ErrBadConfig); releasing a pool that is not alive is ErrUnknownPool; otherwise the count moves by one. A
// refused call answers the count 0 (impl: "with an error the count is 0"; capi answers -1 then).
func (e *Env) judgePoolOp(op Op, n int, err error) []spec.Violation {
	bad := func(want string) []spec.Violation {
		return []spec.Violation{{Inv: spec.InvContract, Msg: fmt.Sprintf("%v -> (%d, %v): want %s", op, n, err, want)}}
	}
	uses := e.pools[op.Pool]
	switch {
	case err != nil && n != 0:
		return bad("the count 0 with the error")
	case e.closed:
		if !errors.Is(err, impl.ErrClosed) {
			return bad("ErrClosed after Close")
		}
	case op.Pool == 0:
		if !errors.Is(err, impl.ErrUnknownPool) {
			return bad("ErrUnknownPool: the default pool has no use count")
		}
	case e.Cfg.Policy == impl.PolicyGMLakePaper && op.Kind == OpPoolCreate:
		if !errors.Is(err, impl.ErrBadConfig) {
			return bad("ErrBadConfig: gmlake-paper has no private pools")
		}
	case op.Kind == OpPoolRelease && uses == 0:
		if !errors.Is(err, impl.ErrUnknownPool) {
			return bad("ErrUnknownPool: the pool is not alive")
		}
	case err != nil:
		return bad("no error")
	case op.Kind == OpPoolCreate && n != uses+1, op.Kind == OpPoolRelease && n != uses-1:
		return bad(fmt.Sprintf("the use count to move by one from %d", uses))
	}
	return nil
}

// poolQueries judges what the engine answers about pools (what torch.cuda.graph_pool_handle's users and
// capi's gmlake_pool_live/gmlake_pool_use_count read) against the Env's own record: PoolLive of every pool
// the ops named, the default pool included, lists exactly the live allocations asked from it, and
// PoolUseCount is the count the create and release answers left.
func (e *Env) poolQueries() []spec.Violation {
	want := map[int][]vmm.DevicePtr{0: nil}
	for p := range e.pools {
		want[p] = nil
	}
	for ptr := range e.engineHeld() { // the host cache's kept frees are live in the engine (default pool)
		want[e.poolOf[ptr]] = append(want[e.poolOf[ptr]], ptr)
	}
	var vs []spec.Violation
	for p, w := range want {
		slices.Sort(w)
		if got := e.A.PoolLive(poolID(p)); !slices.Equal(got, w) {
			vs = append(vs, spec.Violation{Inv: spec.InvPool, Msg: fmt.Sprintf("PoolLive(p%d) = %v, the ops hold %v in it", p, got, w)})
		}
		if p == 0 {
			continue
		}
		if got := e.A.PoolUseCount(poolID(p)); got != e.pools[p] {
			vs = append(vs, spec.Violation{Inv: spec.InvPool, Msg: fmt.Sprintf("PoolUseCount(p%d) = %d, the create and release answers left %d", p, got, e.pools[p])})
		}
	}
	return vs
}

// poolStep is what INV-POOL judges now: each live allocation with the pool it was asked from and the
// handles backing its block, the pools alive, the handles held and the ranges mapped.
func (e *Env) poolStep() spec.PoolStep {
	snap := e.A.Snapshot()
	backing := map[uint64][]vmm.Handle{}
	for _, b := range snap.Blocks {
		for _, m := range b.Backing {
			backing[b.ID] = append(backing[b.ID], m.Handle)
		}
	}
	var st spec.PoolStep
	for _, l := range snap.Live {
		id := poolID(e.poolOf[l.Ptr])
		st.Live = append(st.Live, spec.PoolAlloc{Ptr: l.Ptr, Size: l.Size, Pool: spec.PoolID{id.A, id.B}, Handles: backing[l.Block]})
	}
	pools := make([]int, 0, len(e.pools))
	for p, n := range e.pools {
		if n > 0 {
			pools = append(pools, p)
		}
	}
	sort.Ints(pools)
	for _, p := range pools {
		id := poolID(p)
		st.Alive = append(st.Alive, spec.PoolID{id.A, id.B})
	}
	for _, c := range snap.Chunks {
		st.Held = append(st.Held, c.Handle)
	}
	for _, m := range snap.Mappings {
		st.Mapped, st.MappedBy = append(st.Mapped, m.VA), append(st.MappedBy, m.Handle)
	}
	return st
}

// beyondBaseline drops the violations whose invariant the engine without mutations also breaks on the
// same ops (at the last op, or at Finish when finish is set).
func (e *Env) beyondBaseline(vs []spec.Violation, finish bool) []spec.Violation {
	cfg := e.Cfg
	cfg.Mutations, cfg.Differential, cfg.NoChecks = 0, false, false
	base, err := NewEnv(cfg)
	if err != nil {
		return vs
	}
	var last []spec.Violation
	for _, o := range e.Ops {
		last = base.Step(o).Violations
	}
	if finish {
		last = base.Finish()
	}
	seen := map[string]bool{}
	for _, v := range last {
		seen[v.Inv] = true
	}
	keep := vs[:0]
	for _, v := range vs {
		if !seen[v.Inv] {
			keep = append(keep, v)
		}
	}
	return keep
}

// Finish completes all stream work, closes the engine and checks INV-NOLEAK on the view and on the
// device's own leak report.
func (e *Env) Finish() []spec.Violation {
	var out []spec.Violation
	n := len(e.Ops)
	if !e.closed {
		e.Step(Op{Kind: OpClearFaults})
		r := e.Step(Op{Kind: OpCompleteAll})
		out = append(out, r.Violations...)
		r = e.Step(Op{Kind: OpClose})
		out = append(out, r.Violations...)
		if r.Err != nil && !e.Cfg.Ignore[spec.InvNoLeak] {
			out = append(out, spec.Violation{Inv: spec.InvNoLeak, Msg: "Close failed: " + r.Err.Error()})
		}
	}
	if l := e.Device.Leaks(); (!l.Empty() || len(l.Events) > 0 && !e.eventFault) && e.closeErr == nil && !e.Cfg.Ignore[spec.InvNoLeak] {
		// Events count too: every event the engine created (fences, free events, its pool) must be
		// destroyed by Close. The streams are the environment's own, not the engine's.
		out = append(out, spec.Violation{Inv: spec.InvNoLeak, Msg: "device leak report after Close: " + l.String()})
	}
	if e.Cfg.Differential && e.Cfg.Mutations != 0 && len(out) > 0 {
		ops := e.Ops
		e.Ops = e.Ops[:n] // the baseline's Finish adds its own clearfaults, completeall, close
		out = e.beyondBaseline(out, true)
		e.Ops = ops
	}
	return out
}

// Describe returns the ops run so far (the reproducer) and the configuration, for failure reports.
func (e *Env) Describe() string { return e.Program().String() }

// Program returns the ops run so far under the Env's configuration: the reproducer.
func (e *Env) Program() *Program {
	return &Program{Cfg: e.Cfg, Ops: append([]Op(nil), e.Ops...)}
}

// Run runs ops in a fresh Env and returns the first step with a violation (index -1 if none), and the
// Env. Finish runs at the end when no step failed (so INV-NOLEAK is judged too).
func Run(cfg Config, ops []Op) (int, []spec.Violation, *Env, error) {
	e, err := NewEnv(cfg)
	if err != nil {
		return -1, nil, nil, err
	}
	for i, o := range ops {
		if r := e.Step(o); len(r.Violations) > 0 {
			return i, r.Violations, e, nil
		}
	}
	if v := e.Finish(); len(v) > 0 {
		return len(ops), v, e, nil
	}
	return -1, nil, e, nil
}

// interiorOfLive reports whether p lies strictly inside the block of a live allocation of v.
func interiorOfLive(v spec.View, p vmm.DevicePtr) bool {
	for _, a := range v.Live {
		if a.Ptr < p && p < a.Ptr.Add(max(a.Size, 1)) {
			return true
		}
	}
	return false
}

// judgeEmptyCacheReports is INV-EMPTIED's "a driver call it could not make is an error it reports" for the
// unmaps of an EmptyCache that answered err, given its unmaps in call order: an unmap the driver refused
// and that no later unmap of the same range in the call made good (a cached block's unmap is not retried;
// an orphan mapping's is, four times: spec/FINDINGS.md F17) leaves what it could not unmap on the device,
// and the caller must hear of it (PyTorch's release_cached_blocks raises the driver's error). gmlake-paper's
// garbage_collect_fused_blocks stops at a failed teardown quietly, as GLake's: not judged.
func judgeEmptyCacheReports(policy string, err error, unmaps []unmapCall) []spec.Violation {
	if err != nil || policy == impl.PolicyGMLakePaper {
		return nil
	}
	for i, u := range unmaps {
		if u.err == nil || slices.ContainsFunc(unmaps[i+1:], func(v unmapCall) bool { return v.err == nil && v.r == u.r }) {
			continue
		}
		return []spec.Violation{{Inv: spec.InvEmptied, Msg: fmt.Sprintf(
			"EmptyCache returned no error, but the driver refused an unmap of %s at %v during it (%v) that no later unmap made good: its failure is the caller's to hear",
			vmm.FormatBytes(u.r.Size), u.r.Base, u.err)}}
	}
	return nil
}

// unmapCalls returns the unmaps of the current step, in call order (nil off the simulated device).
func (e *Env) unmapCalls() []unmapCall {
	if e.calls == nil {
		return nil
	}
	return e.calls.unmaps
}
