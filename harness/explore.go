package harness

import (
	"fmt"
	"hash/fnv"
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
	// on an allocation of the largest size, a free of the oldest live allocation and an EmptyCache.
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

	_ struct{}
}

// ExploreResult is what the explorer covered, and the first violation it found.
type ExploreResult struct {
	States    int // distinct canonical states reached (the initial one included)
	Sequences int // op sequences run (one per transition tried)
	Steps     int // ops executed, replays included
	Depth     int // the depth fully explored
	Truncated bool
	Violation []spec.Violation
	Ops       []ops.Op   // the sequence that produced Violation
	Cfg       ops.Config // the Env configuration the explorer ran (Program prints it with Ops)
	Elapsed   time.Duration
}

// Program is the sequence that produced Violation as a program (it replays in every checker).
func (r ExploreResult) Program() *ops.Program { return &ops.Program{Cfg: r.Cfg, Ops: r.Ops} }

// DefaultExploreSizes returns the handful of sizes for a policy's universe: sub-chunk, one chunk, a
// split remainder, and sizes that need several chunks (so that stitching happens under gmlake).
func DefaultExploreSizes(policy string) []uint64 {
	switch policy {
	case impl.PolicyCaching, impl.PolicyExpandable:
		return []uint64{512, 2 * vmm.MiB, 11 * vmm.MiB, 22 * vmm.MiB}
	}
	return []uint64{512, 2 * vmm.MiB, 3 * vmm.MiB, 6 * vmm.MiB}
}

// DefaultExploreCapacity is the device of the universe: 8 chunks of 2 MiB for the stitching policies;
// PyTorch's policies create 20 MiB segments, so their device holds 3 of those (64 MiB).
func DefaultExploreCapacity(policy string) uint64 {
	switch policy {
	case impl.PolicyCaching, impl.PolicyExpandable:
		return 64 * vmm.MiB
	}
	return 16 * vmm.MiB
}

// exploreOps lists every op enabled in env's current state.
func exploreOps(env *ops.Env, cfg ExploreConfig) []ops.Op {
	var seq []ops.Op
	id := env.NextID()
	for s := 0; s < cfg.Streams && (cfg.MaxLive == 0 || len(env.LiveIDs()) < cfg.MaxLive); s++ {
		for _, sz := range cfg.Sizes {
			seq = append(seq, ops.Op{Kind: ops.OpAlloc, ID: id, Size: sz, Stream: s})
		}
	}
	for _, l := range env.LiveIDs() {
		seq = append(seq, ops.Op{Kind: ops.OpFree, ID: l})
		p := env.Ptr(l)
		if c, ok := env.Contract.LiveAt(p); ok {
			for s := 0; s < cfg.Streams; s++ {
				if env.Streams[s] != c.Stream && !containsStream(c.Uses, env.Streams[s]) {
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
		if env.Hist.Pending(env.Streams[s]) < uint64(maxPending) {
			seq = append(seq, ops.Op{Kind: ops.OpLaunch, Stream: s})
		}
		if env.Hist.Pending(env.Streams[s]) > 0 {
			seq = append(seq, ops.Op{Kind: ops.OpComplete, Stream: s})
		}
	}
	seq = append(seq, ops.Op{Kind: ops.OpEmptyCache})
	return seq
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
		live := env.LiveIDs()
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
	init, err := ops.NewEnv(envCfg)
	if err != nil {
		return res, err
	}
	seen := map[uint64]bool{canonicalHash(init): true}
	res.States = 1
	frontier := [][]ops.Op{nil}
	for depth := 0; depth < cfg.Depth && len(frontier) > 0; depth++ {
		var next [][]ops.Op
		for _, prefix := range frontier {
			if cfg.Deadline > 0 && time.Since(start) > cfg.Deadline || cfg.MaxStates > 0 && res.States >= cfg.MaxStates {
				res.Truncated = true
				res.Elapsed = time.Since(start)
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
					h := canonicalHash(env)
					if seen[h] {
						continue
					}
					seen[h] = true
					res.States++
					next = append(next, seq)
					// Closing must leave nothing behind (INV-NOLEAK), from every distinct state reached.
					vs = env.Finish()
					res.Steps += 3
				}
				if len(vs) > 0 {
					res.Violation, res.Ops, res.Cfg = vs, seq, envCfg
					res.Elapsed = time.Since(start)
					return res, nil
				}
			}
		}
		frontier = next
		res.Depth = depth + 1
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// canonicalHash hashes the observable state: the engine's blocks, chunks and live set, the device's
// mappings and handles, the stream clock and the outstanding marks, with every virtual address written as
// (reservation index, offset) and every handle renumbered in order of first mapping, so two states that
// differ only in the concrete addresses or handle ids the device chose hash the same.
func canonicalHash(env *ops.Env) uint64 {
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
	fmt.Fprintf(&b, "|%s", contractShape(env))
	h := fnv.New64a()
	h.Write([]byte(b.String()))
	return h.Sum64()
}

// contractShape is the contract's freed ranges with addresses made canonical by their order.
func contractShape(env *ops.Env) string {
	var b strings.Builder
	for _, f := range env.Contract.Freed {
		fmt.Fprintf(&b, "%x:%v;", f.Range.Size, len(f.Wait))
	}
	return b.String()
}
