package harness

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// ExploreConfig is the small universe the bounded exhaustive explorer enumerates: a device of a few chunks,
// a few streams, a handful of sizes, every op sequence up to Depth.
type ExploreConfig struct {
	Policy   string
	Capacity uint64   // 0: 8 x 2 MiB (16 MiB)
	Sizes    []uint64 // 0: DefaultExploreSizes(policy)
	Streams  int      // 0: 2
	Depth    int      // 0: 4
	Faults   bool     // also explore allocations under an injected driver fault (map, set_access, create)
	// FaultCalls, with Faults: the call kinds a fault may hit (nil: map, set_access, create); each is tried
	// on an allocation of the largest size, a free of the oldest live allocation, an EmptyCache and the
	// end of each capture underway.
	FaultCalls  []vmm.CallKind
	MaxLive     int         // no allocation while this many are live (0: no limit): a narrower, deeper universe
	Knobs       impl.Config // the engine's knobs (EnvConfig.Knobs), e.g. a small stitch threshold
	SyncStreams bool
	MaxPending  int // units of work launched and not completed per stream (0: 2)
	MaxStates   int // stop expanding after this many distinct states (0: no limit)
	Deadline    time.Duration
	Mutations   impl.Mutation
	Ignore      map[string]bool // see EnvConfig.Ignore
	// Differential: count only violations the engine without Mutations does not show (EnvConfig); the
	// explorer then also keeps going past states whose violations the baseline shares.
	Differential bool
	// Serve explores the engine through the serving layer (impl/serve, what libgmlake runs): an out of
	// memory synchronises every stream and retries, EmptyCache synchronises first (ops.Config.Serve).
	Serve bool
	// Pools: the private pools p1..pPools (CUDA graph pools, torch.cuda.MemPool) the universe creates,
	// allocates from (each of PoolSizes on every stream, under MaxLive), and releases; a released pool may
	// be created again (it comes back with the memory it still holds) and is asked once for an allocation
	// it must refuse (ErrUnknownPool). 0: none. Use counts stay at most 1.
	Pools     int
	PoolSizes []uint64 // nil: Sizes
	// Prefix roots the universe: every explored sequence starts with these ops (a scenario template that
	// builds a state deep in a few ops, e.g. a pool's block recorded on another stream with work pending
	// there); Depth counts the ops after it. It must run without a violation.
	Prefix []ops.Op
	// CaptureStreams: streams 0..CaptureStreams-1 begin and end CUDA graph captures (capture-begin,
	// capture-end), so frees of blocks recorded on other streams are deferred until the last capture ends.
	CaptureStreams int
	// Forget: streams 1..Streams-1 may be forgotten (forget sN: ForgetStream, what a caller does before
	// cuStreamDestroy), plainly and, with FaultCalls, behind a fault. A forgotten stream's pending work still
	// completes; no alloc, record or launch on it is explored after (the contract refuses them, C-FORGET).
	Forget bool
	// Resets: reset-peak and reset-acc (torch.cuda.reset_peak_memory_stats, reset_accumulated_memory_stats)
	// are moves too, and the state hash covers what INV-TORCHSTATS reads (statsShape): the statistics'
	// currents, peaks and what the totals count from, so a universe with them splits states that differ only
	// in their history's peaks. Off, the statistics are not hashed (their totals grow with every op).
	Resets bool

	_ struct{}
}

// ExploreResult is what the explorer covered, and the first violation it found.
type ExploreResult struct {
	States    int // distinct canonical states reached (the initial one included)
	Sequences int // op sequences run (one per transition tried)
	Steps     int // ops executed, replays included
	Depth     int // the depth fully explored
	Truncated bool
	// Fingerprint hashes the set of distinct states within Depth of the root (their canonical hashes): a
	// universe explored to the same depth reaches the same set on every run and machine, whatever the
	// budget cut off after it, so a changed fingerprint says the engine, the ops or the hash now reach
	// other states.
	Fingerprint uint64
	Violation   []spec.Violation
	Ops         []ops.Op   // the sequence that produced Violation
	Cfg         ops.Config // the Env configuration the explorer ran (Program prints it with Ops)
	Elapsed     time.Duration
}

// Program is the sequence that produced Violation as a program (it replays in every checker).
func (r ExploreResult) Program() *ops.Program { return &ops.Program{Cfg: r.Cfg, Ops: r.Ops} }

// DefaultExploreSizes returns the handful of sizes for a policy's universe: sub-chunk, one chunk, a
// split remainder, and sizes that need several chunks (so that stitching happens under gmlake).
// gmlake-paper grows PyTorch's segments (20 MiB for a request of 1 to 10 MiB), so it takes their sizes.
func DefaultExploreSizes(policy string) []uint64 {
	switch policy {
	case impl.PolicyCaching, impl.PolicyExpandable, impl.PolicyGMLakePaper:
		return []uint64{512, 2 * vmm.MiB, 11 * vmm.MiB, 22 * vmm.MiB}
	}
	return []uint64{512, 2 * vmm.MiB, 3 * vmm.MiB, 6 * vmm.MiB}
}

// DefaultExploreCapacity is the device of the universe: 8 chunks of 2 MiB for gmlake; PyTorch's policies
// and gmlake-paper create 20 MiB segments, so their device holds 3 of those (64 MiB). (On 16 MiB every
// large request of gmlake-paper ran out of memory: its universes reached only the small pool's states.)
func DefaultExploreCapacity(policy string) uint64 {
	switch policy {
	case impl.PolicyCaching, impl.PolicyExpandable, impl.PolicyGMLakePaper:
		return 64 * vmm.MiB
	}
	return 16 * vmm.MiB
}

// exploreOps lists every op enabled in env's current state.
func exploreOps(env *ops.Env, cfg ExploreConfig) []ops.Op {
	var seq []ops.Op
	id, gone := env.NextID(), goneSet(env)
	for s := 0; s < cfg.Streams && (cfg.MaxLive == 0 || len(env.LiveIDs()) < cfg.MaxLive); s++ {
		if gone[s] {
			continue
		}
		for _, sz := range cfg.Sizes {
			seq = append(seq, ops.Op{Kind: ops.OpAlloc, ID: id, Size: sz, Stream: s})
		}
	}
	for _, l := range env.LiveIDs() {
		seq = append(seq, ops.Op{Kind: ops.OpFree, ID: l})
		p := env.Ptr(l)
		if c, ok := env.Contract.LiveAt(p); ok {
			for s := 0; s < cfg.Streams; s++ {
				if !gone[s] && env.Streams[s] != c.Stream && !containsStream(c.Uses, env.Streams[s]) {
					seq = append(seq, ops.Op{Kind: ops.OpRecord, ID: l, Stream: s})
				}
			}
		}
	}
	maxPending := cfg.MaxPending
	if maxPending == 0 {
		maxPending = 2
	}
	for s := 0; s < cfg.Streams; s++ {
		if !gone[s] && env.Hist.Pending(env.Streams[s]) < uint64(maxPending) {
			seq = append(seq, ops.Op{Kind: ops.OpLaunch, Stream: s})
		}
		if env.Hist.Pending(env.Streams[s]) > 0 {
			seq = append(seq, ops.Op{Kind: ops.OpComplete, Stream: s})
		}
		if cfg.Forget && s > 0 && !gone[s] {
			seq = append(seq, ops.Op{Kind: ops.OpForget, Stream: s})
		}
	}
	seq = append(seq, ops.Op{Kind: ops.OpEmptyCache})
	if cfg.Resets {
		seq = append(seq, ops.Op{Kind: ops.OpResetPeak}, ops.Op{Kind: ops.OpResetAcc})
	}
	for p := 1; p <= cfg.Pools; p++ {
		if env.A.PoolUseCount(explorePool(p)) == 0 {
			seq = append(seq, ops.Op{Kind: ops.OpPoolCreate, Pool: p})
			if everCreated(env, p) {
				seq = append(seq, ops.Op{Kind: ops.OpAlloc, ID: id, Size: cfg.Sizes[0], Pool: p})
			}
			continue
		}
		seq = append(seq, ops.Op{Kind: ops.OpPoolRelease, Pool: p})
		sizes := cfg.PoolSizes
		if sizes == nil {
			sizes = cfg.Sizes
		}
		for s := 0; s < cfg.Streams && (cfg.MaxLive == 0 || len(env.LiveIDs()) < cfg.MaxLive); s++ {
			if gone[s] {
				continue
			}
			for _, sz := range sizes {
				seq = append(seq, ops.Op{Kind: ops.OpAlloc, ID: id, Size: sz, Stream: s, Pool: p})
			}
		}
	}
	if cfg.CaptureStreams > 0 {
		capturing := captureSet(env)
		for s := 0; s < cfg.CaptureStreams && s < cfg.Streams; s++ {
			if capturing[s] {
				seq = append(seq, ops.Op{Kind: ops.OpCaptureEnd, Stream: s})
			} else {
				seq = append(seq, ops.Op{Kind: ops.OpCaptureBegin, Stream: s})
			}
		}
	}
	return seq
}

// explorePool is the engine's name of the ops' private pool n, as ops.Env names it (Explore checks that
// the two agree before it uses pools).
func explorePool(n int) impl.PoolID { return impl.PoolID{A: uint64(n), B: 1} }

// everCreated reports whether an op of env's run created pool p.
func everCreated(env *ops.Env, p int) bool {
	for _, o := range env.Ops {
		if o.Kind == ops.OpPoolCreate && o.Pool == p {
			return true
		}
	}
	return false
}

// goneSet is the stream indexes ForgetStream forgot in env's run (the contract's record, C-FORGET).
func goneSet(env *ops.Env) map[int]bool {
	gone := map[int]bool{}
	for s, ds := range env.Streams {
		if containsStream(env.Contract.Gone, ds) {
			gone[s] = true
		}
	}
	return gone
}

// captureSet is the streams capturing a CUDA graph after env's run (SetCapturing fails only after Close
// or under an injected fault, which the explored states do not hold).
func captureSet(env *ops.Env) map[int]bool {
	on := map[int]bool{}
	for _, o := range env.Ops {
		switch o.Kind {
		case ops.OpCaptureBegin:
			on[o.Stream] = true
		case ops.OpCaptureEnd:
			delete(on, o.Stream)
		}
	}
	return on
}

// checkPoolNames verifies that explorePool names pools as the Env does: pool-create p1 must give the engine
// pool explorePool(1) a use count of 1.
func checkPoolNames(envCfg ops.Config) error {
	env, err := ops.NewEnv(envCfg)
	if err != nil {
		return err
	}
	defer env.Finish()
	if r := env.Step(ops.Op{Kind: ops.OpPoolCreate, Pool: 1}); r.Err != nil {
		return fmt.Errorf("explore: pool-create p1 under policy %s: %w (a universe with Pools needs a policy with private pools)", envCfg.Policy, r.Err)
	}
	if n := env.A.PoolUseCount(explorePool(1)); n != 1 {
		return fmt.Errorf("explore: after pool-create p1 the engine's pool %v has use count %d, want 1: explorePool does not name pools as ops.Env does", explorePool(1), n)
	}
	return nil
}

// faultOps are the compound transitions "allocate while a driver call fails": arm the fault, allocate,
// clear. They keep the explored states free of armed faults.
func faultOps(env *ops.Env, cfg ExploreConfig) [][]ops.Op {
	if !cfg.Faults {
		return nil
	}
	var out [][]ops.Op
	id := env.NextID()
	if cfg.FaultCalls != nil {
		live, capturing, gone := env.LiveIDs(), captureSet(env), goneSet(env)
		for _, k := range cfg.FaultCalls {
			arm := ops.Op{Kind: ops.OpFail, Call: k, N: 1, Result: vmm.UnknownCUDAError}
			if k == vmm.CallCreate {
				arm.Result = vmm.OutOfMemory
			}
			if cfg.MaxLive == 0 || len(live) < cfg.MaxLive {
				out = append(out, []ops.Op{arm, {Kind: ops.OpAlloc, ID: id, Size: cfg.Sizes[len(cfg.Sizes)-1]}, {Kind: ops.OpClearFaults}})
			}
			if len(live) > 0 {
				out = append(out, []ops.Op{arm, {Kind: ops.OpFree, ID: live[0]}, {Kind: ops.OpClearFaults}})
			}
			out = append(out, []ops.Op{arm, {Kind: ops.OpEmptyCache}, {Kind: ops.OpClearFaults}})
			// The end of a capture records the events of the frees it deferred: a failure there keeps
			// them deferred for the next Alloc, SetCapturing or EmptyCache to try again.
			for s := 0; s < cfg.CaptureStreams && s < cfg.Streams; s++ {
				if capturing[s] {
					out = append(out, []ops.Op{arm, {Kind: ops.OpCaptureEnd, Stream: s}, {Kind: ops.OpClearFaults}})
				}
			}
			// Forgetting a stream records its last event: a failure leaves it known, as before.
			for s := 1; cfg.Forget && s < cfg.Streams; s++ {
				if !gone[s] {
					out = append(out, []ops.Op{arm, {Kind: ops.OpForget, Stream: s}, {Kind: ops.OpClearFaults}})
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		k vmm.CallKind
		n int
		r vmm.Result
	}{{vmm.CallMap, 2, vmm.UnknownCUDAError}, {vmm.CallSetAccess, 1, vmm.UnknownCUDAError}, {vmm.CallCreate, 1, vmm.OutOfMemory}} {
		for _, sz := range cfg.Sizes[1:] {
			out = append(out, []ops.Op{{Kind: ops.OpFail, Call: c.k, N: c.n, Result: c.r}, {Kind: ops.OpAlloc, ID: id, Size: sz}, {Kind: ops.OpClearFaults}})
		}
	}
	return out
}

func containsStream(ss []vmm.Stream, s vmm.Stream) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Explore enumerates every op sequence up to cfg.Depth from a fresh engine, breadth first, running each
// through the real engine on the reference device with every invariant checked after every step, and
// dedupes states by a canonical hash (addresses relative to their reservation, handles renumbered), so each
// distinct state is expanded once. Each transition replays its prefix in a fresh Env (the engine cannot be
// cloned); prefixes replay in light mode (history kept, predicates skipped: they passed when first run).
func Explore(cfg ExploreConfig) (ExploreResult, error) {
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultExploreCapacity(cfg.Policy)
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = DefaultExploreSizes(cfg.Policy)
	}
	if cfg.Streams == 0 {
		cfg.Streams = 2
	}
	if cfg.Depth == 0 {
		cfg.Depth = 4
	}
	start := time.Now()
	envCfg := ops.Config{Policy: cfg.Policy, Capacity: cfg.Capacity, Streams: cfg.Streams, Mutations: cfg.Mutations,
		Ignore: cfg.Ignore, Differential: cfg.Differential, Knobs: cfg.Knobs, SyncStreams: cfg.SyncStreams, Serve: cfg.Serve}
	var res ExploreResult
	replay := func(prefix []ops.Op) (*ops.Env, error) {
		light := envCfg
		light.NoChecks = true
		env, err := ops.NewEnv(light)
		if err != nil {
			return nil, err
		}
		for _, o := range prefix {
			env.Step(o)
			res.Steps++
		}
		env.ResumeChecks()
		return env, nil
	}
	if cfg.Pools > 0 {
		if err := checkPoolNames(envCfg); err != nil {
			return res, err
		}
	}
	init, err := ops.NewEnv(envCfg)
	if err != nil {
		return res, err
	}
	for _, o := range cfg.Prefix {
		r := init.Step(o)
		res.Steps++
		if len(r.Violations) > 0 {
			res.Violation, res.Ops, res.Cfg = r.Violations, append([]ops.Op(nil), init.Ops...), envCfg
			res.Elapsed = time.Since(start)
			return res, nil
		}
	}
	hash := func(env *ops.Env) uint64 {
		h := canonicalHash(env, cfg.Pools)
		if cfg.Resets {
			h = statsHash(h, env)
		}
		return h
	}
	seen := map[uint64]int{hash(init): 0} // state -> its distance from the root
	res.States = 1
	frontier := [][]ops.Op{append([]ops.Op(nil), cfg.Prefix...)}
	for depth := 0; depth < cfg.Depth && len(frontier) > 0; depth++ {
		var next [][]ops.Op
		for _, prefix := range frontier {
			if cfg.Deadline > 0 && time.Since(start) > cfg.Deadline || cfg.MaxStates > 0 && res.States >= cfg.MaxStates {
				res.Truncated = true
				res.Elapsed, res.Fingerprint = time.Since(start), fingerprint(seen, res.Depth)
				return res, nil
			}
			probe, err := replay(prefix)
			if err != nil {
				return res, err
			}
			var moves [][]ops.Op
			for _, o := range exploreOps(probe, cfg) {
				moves = append(moves, []ops.Op{o})
			}
			moves = append(moves, faultOps(probe, cfg)...)
			for _, mv := range moves {
				env, err := replay(prefix)
				if err != nil {
					return res, err
				}
				res.Sequences++
				var vs []spec.Violation
				for _, o := range mv {
					r := env.Step(o)
					res.Steps++
					vs = append(vs, r.Violations...)
				}
				seq := append(append([]ops.Op(nil), prefix...), mv...)
				if len(vs) == 0 {
					h := hash(env)
					if _, ok := seen[h]; ok {
						continue
					}
					seen[h] = depth + 1
					res.States++
					next = append(next, seq)
					// Closing must leave nothing behind (INV-NOLEAK), from every distinct state reached.
					vs = env.Finish()
					res.Steps += 3
				}
				if len(vs) > 0 {
					res.Violation, res.Ops, res.Cfg = vs, seq, envCfg
					res.Elapsed, res.Fingerprint = time.Since(start), fingerprint(seen, res.Depth)
					return res, nil
				}
			}
		}
		frontier = next
		res.Depth = depth + 1
	}
	res.Elapsed, res.Fingerprint = time.Since(start), fingerprint(seen, res.Depth)
	return res, nil
}

// canonicalHash hashes the observable state: the engine's blocks, chunks and live set, the device's
// mappings and handles, the stream clock and the outstanding marks, the streams forgotten, with every
// virtual address written as (reservation index, offset) and every handle renumbered in order of first
// mapping, so two states that differ only in the concrete addresses or handle ids the device chose hash
// the same. With private pools or captures in the run it also covers what decides their future
// (poolCaptureShape).
func canonicalHash(env *ops.Env, pools int) uint64 {
	v := env.View()
	res := v.Device.Reservations
	addr := func(p vmm.DevicePtr) string {
		i := sort.Search(len(res), func(i int) bool { return res[i].Limit() > p })
		if i < len(res) && res[i].Contains(p) {
			return fmt.Sprintf("r%d+%x", i, uint64(p-res[i].Base))
		}
		return fmt.Sprintf("?%x", uint64(p))
	}
	hid := map[vmm.Handle]int{}
	hname := func(h vmm.Handle) int {
		if n, ok := hid[h]; ok {
			return n
		}
		hid[h] = len(hid)
		return hid[h]
	}
	var b strings.Builder
	for _, r := range res {
		fmt.Fprintf(&b, "R%x;", r.Size)
	}
	for _, m := range v.Device.Mappings {
		fmt.Fprintf(&b, "M%s:%x:%d:%v;", addr(m.VA.Base), m.VA.Size, hname(m.Handle), m.Accessible)
	}
	for _, h := range v.Device.Handles {
		fmt.Fprintf(&b, "H%d:%x:%v;", hname(h.Handle), h.Size, h.Released)
	}
	for _, c := range v.Chunks {
		fmt.Fprintf(&b, "C%d:%d;", hname(c.Handle), c.Refs)
	}
	blocks := make([]string, 0, len(v.Blocks))
	for _, bl := range v.Blocks {
		blocks = append(blocks, fmt.Sprintf("B%v:%d:%s:%x:%d:%d", bl.Stitched, bl.State, addr(bl.Range.Base), bl.Range.Size, bl.Stream, bl.Events))
	}
	sort.Strings(blocks)
	b.WriteString(strings.Join(blocks, ";"))
	for _, a := range v.Live {
		fmt.Fprintf(&b, "L%s:%d:%x:%d:%v;", addr(a.Ptr), a.Requested, a.Size, a.Stream, a.Uses)
	}
	fmt.Fprintf(&b, "S%d:%d:%d:%d;", v.Stats.Requested, v.Stats.Allocated, v.Stats.Reserved, v.Stats.Mapped)
	for _, s := range env.Streams {
		fmt.Fprintf(&b, "P%d;", env.Hist.Pending(s))
	}
	for _, m := range env.Hist.Marks() {
		fmt.Fprintf(&b, "K%d:%x:%x:%d:%v;", hname(m.Phys.Handle), m.Phys.Lo, m.Phys.Hi, m.FreedOn, len(m.Clock))
	}
	for s, ds := range env.Streams {
		if containsStream(env.Contract.Gone, ds) {
			fmt.Fprintf(&b, "F%d;", s) // forgotten: no alloc, record or launch on it any more
		}
	}
	fmt.Fprintf(&b, "|%s", contractShape(env))
	poolCaptureShape(&b, env, pools, addr)
	h := fnv.New64a()
	h.Write([]byte(b.String()))
	return h.Sum64()
}

// contractShape is the contract's freed ranges with addresses made canonical by their order, and the
// streams each waits for.
func contractShape(env *ops.Env) string {
	var b strings.Builder
	for _, f := range env.Contract.Freed {
		fmt.Fprintf(&b, "%x:", f.Range.Size)
		for _, w := range f.Wait {
			fmt.Fprintf(&b, "%d,", w.Stream)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// poolCaptureShape writes what the View leaves out of a state with private pools or captures, and what
// decides its future: the streams capturing (their frees of blocks used on other streams wait; the Env
// then judges out of memory and INV-EMPTIED differently); whether a pool op ran (from then on the Env
// checks INV-POOL and no longer judges best fit, PyTorch's decisions and INV-NOSPURIOUSOOM); each pool's
// use count and the live allocations asked from it; and the pool of every segment and stitched block
// (PyTorch's snapshot: a free block serves only its pool's requests, and a living pool's memory stays).
// The free blocks deferred during a capture are the View's pending blocks, with the streams they wait for
// in the contract's freed ranges (contractShape). INV-POOL's memory of the ranges a pool handed out is not
// hashed: in a state reached without a violation it is the ranges of the pool's segments and blocks.
func poolCaptureShape(b *strings.Builder, env *ops.Env, pools int, addr func(vmm.DevicePtr) string) {
	pooled, capturing := false, captureSet(env)
	for _, o := range env.Ops {
		pooled = pooled || o.Kind == ops.OpPoolCreate || o.Kind == ops.OpPoolRelease
	}
	for s := 0; s < len(env.Streams); s++ {
		if capturing[s] {
			fmt.Fprintf(b, "G%d;", s)
		}
	}
	if !pooled {
		return
	}
	b.WriteString("|pooled;")
	for p := 1; p <= pools; p++ {
		id := explorePool(p)
		fmt.Fprintf(b, "U%d:%d:", p, env.A.PoolUseCount(id))
		for _, ptr := range env.A.PoolLive(id) {
			fmt.Fprintf(b, "%s,", addr(ptr))
		}
		b.WriteByte(';')
	}
	ts := env.A.TorchSnapshot()
	for _, seg := range ts.Segments {
		fmt.Fprintf(b, "T%s:%v;", addr(seg.Addr), seg.Pool)
	}
	for _, st := range ts.Stitched {
		fmt.Fprintf(b, "X%s:%v;", addr(st.Addr), st.Pool)
	}
}

// statsHash mixes into the state hash h what INV-TORCHSTATS reads of env's state, for a universe with the
// reset moves (ExploreConfig.Resets): the engine's statistics, each value's current and peak, whether its
// allocated and freed totals are zero (right after reset-acc they must be) and what they count (allocated -
// freed), the num_* counters the same way, the engine's own peaks (the View's Stats), and the judge's model
// (ops.Env.StatsModel: the highest currents seen since the last reset-peak, the currents and the handles
// held at the last reset-acc). The absolute totals are left out: they grow with every op, and no judge reads
// them but through those.
func statsHash(h uint64, env *ops.Env) uint64 {
	var b strings.Builder
	got := env.A.TorchStats()
	seen, base, heldBase := env.StatsModel()
	arrays := func(s *impl.DeviceStats) []impl.StatArray {
		return []impl.StatArray{s.Allocation, s.Segment, s.Active, s.InactiveSplit, s.AllocatedBytes, s.ReservedBytes,
			s.ActiveBytes, s.InactiveSplitBytes, s.RequestedBytes}
	}
	ga, sa, ba := arrays(&got), arrays(&seen), arrays(&base)
	for k := range ga {
		for i, g := range ga[k] {
			fmt.Fprintf(&b, "%d:%d:%v:%v:%d:%d:%d;", g.Current, g.Peak, g.Allocated == 0, g.Freed == 0, g.Allocated-g.Freed,
				sa[k][i].Current, ba[k][i].Current)
		}
	}
	n := func(x int64) string { return map[bool]string{true: "0", false: "+"}[x == 0] }
	fmt.Fprintf(&b, "N%s%s%s%s:%d:%d;", n(got.NumAllocRetries), n(got.NumOOMs), n(got.NumDeviceAlloc), n(got.NumDeviceFree),
		got.NumDeviceAlloc-got.NumDeviceFree, heldBase)
	st := env.A.Stats()
	fmt.Fprintf(&b, "P%d:%d:%d", st.PeakAllocatedBytes, st.PeakRequestedBytes, st.PeakReservedBytes)
	f := fnv.New64a()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], h)
	f.Write(buf[:])
	f.Write([]byte(b.String()))
	return f.Sum64()
}

// fingerprint hashes the states within depth of the root, independently of the order they were found in
// (a budget that cuts the next depth short leaves that set whole).
func fingerprint(seen map[uint64]int, depth int) uint64 {
	hs := make([]uint64, 0, len(seen))
	for h, d := range seen {
		if d <= depth {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	f := fnv.New64a()
	var buf [8]byte
	for _, h := range hs {
		binary.LittleEndian.PutUint64(buf[:], h)
		f.Write(buf[:])
	}
	return f.Sum64()
}
