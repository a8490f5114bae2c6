package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/harness/trace"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// RapidConfig configures the rapid state machine: the engine (policy, mutations) against the contract,
// with every invariant after every step.
type RapidConfig struct {
	Policy    string
	Streams   int             // 0: 3
	Mutations impl.Mutation   // seeded bugs (TestMutationsCaught)
	NoFaults  bool            // no driver fault injection
	NoSwarm   bool            // one fixed configuration (3 streams, default knobs) instead of DrawSwarm's
	Ignore    map[string]bool // invariants whose violations are dropped (see EnvConfig.Ignore)
	// Differential: count only violations the engine without Mutations does not show (EnvConfig).
	Differential bool
	// Counters, if non-nil, count runs (sequences) and steps.
	Counters *RapidCounters
	// Device, if set, opens the device each sequence runs on instead of a simulated one (harness/gpu: the
	// real GPU), closed when the sequence ends; the swarm's capacity and sync do not apply there, and
	// faults and streams unknown to the device are off (the real driver has no fault injection, and a
	// made-up CUstream is not a call to make).
	Device func() (ops.Device, error)
	// Serve runs every sequence through the serving layer (the swarm draws it for half of them otherwise),
	// under MemoryLimit bytes when that is set.
	Serve       bool
	MemoryLimit uint64
	_           struct{}

	_ struct{}
}

// RapidCounters counts what the rapid machine ran.
type RapidCounters struct {
	Sequences, Steps, OOMs, Faults atomic.Int64
}

var (
	traceSizesOnce sync.Once
	traceSizes     []uint64
)

// TraceSizes returns the request sizes of the bundled real traces (testdata/traces), one entry per
// allocation, so sampling from it follows their distribution. Empty if the traces are not found.
func TraceSizes() []uint64 {
	traceSizesOnce.Do(func() {
		dir := repoFile("testdata/traces")
		files, _ := filepath.Glob(filepath.Join(dir, "*.trace.gz"))
		sort.Strings(files)
		for _, f := range files {
			tr, err := trace.ReadFile(f)
			if err != nil {
				continue
			}
			for _, ev := range tr.Events {
				if ev.Op == trace.OpAlloc && ev.Size > 0 {
					traceSizes = append(traceSizes, ev.Size)
				}
			}
		}
	})
	return traceSizes
}

// repoFile finds rel from the working directory or one of its parents (tests run in the package folder).
func repoFile(rel string) string {
	dir, _ := os.Getwd()
	for i := 0; i < 4; i++ {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return rel
}

// SizeGen draws request sizes from 1 B to GiBs, biased to the sizes of real traces: half from the trace
// distribution, the rest small, medium, or huge.
func SizeGen() *rapid.Generator[uint64] {
	gens := []*rapid.Generator[uint64]{
		rapid.Uint64Range(0, 4096), // 0: ErrInvalidSize
		rapid.Uint64Range(1, 64*vmm.MiB),
		rapid.Uint64Range(1, 4*vmm.GiB),
	}
	if ts := TraceSizes(); len(ts) > 0 {
		g := rapid.SampledFrom(ts)
		gens = append(gens, g, g, g)
	}
	return rapid.OneOf(gens...)
}

// RunRapid runs one rapid test case: a random sequence of ops through a fresh Env, failing t at the first
// violation with the violations and the op list (the reproducer), and checking INV-NOLEAK at the end.
// Unless cfg.NoSwarm, the sequence first draws its own configuration and action set (DrawSwarm: streams,
// sync, capacity, knobs, fault schedule, actions switched off).
func RunRapid(t *rapid.T, cfg RapidConfig) {
	var sw ops.Swarm
	if cfg.NoSwarm {
		sw = ops.Swarm{Streams: 3, Capacity: rapid.SampledFrom([]uint64{64 * vmm.MiB, 512 * vmm.MiB, 4 * vmm.GiB}).Draw(t, "capacity"),
			Off: map[string]bool{"alloc-threshold": true, "alloc-repeat": true, "pending-pair": true}}
		if !cfg.NoFaults {
			sw.Faults = ops.FaultCalls
		} else {
			sw.Off["fail"], sw.Off["clearfaults"] = true, true
		}
	} else {
		sw = ops.DrawSwarm(t, cfg.Policy, cfg.NoFaults)
	}
	if cfg.Streams != 0 {
		sw.Streams = cfg.Streams
	}
	if cfg.Serve {
		sw.Serve, sw.MemoryLimit = true, cfg.MemoryLimit
	}
	var dev ops.Device
	if cfg.Device != nil {
		d, err := cfg.Device()
		if err != nil {
			t.Fatalf("opening the device: %v", err)
		}
		dev = d
		if c, ok := d.(interface{ Close() error }); ok {
			defer func() {
				if err := c.Close(); err != nil {
					t.Fatalf("closing the device: %v", err)
				}
			}()
		}
		sw.Faults = nil
		sw.Off["fail"], sw.Off["clearfaults"], sw.Off["bad-stream"] = true, true, true
	}
	streams := sw.Streams
	env, err := ops.NewEnv(ops.Config{Policy: cfg.Policy, Capacity: sw.Capacity, Streams: streams, SyncStreams: sw.Sync,
		Knobs: sw.Knobs, Mutations: cfg.Mutations, Ignore: cfg.Ignore, Differential: cfg.Differential,
		Device: dev, Serve: sw.Serve, MemoryLimit: sw.MemoryLimit})
	if err != nil {
		t.Fatalf("%v", err)
	}
	if cfg.Counters != nil {
		cfg.Counters.Sequences.Add(1)
	}
	var used []uint64 // request sizes of this sequence (rule sizes-repeat)
	thresholds := rapid.SampledFrom(ops.Thresholds(cfg.Policy, sw.Knobs, env.Cfg.Granularity))
	sizes := rapid.OneOf(SizeGen(), SizeGen(), thresholds, rapid.Uint64Range(1, env.Capacity()))
	drawSize := func(t *rapid.T) uint64 {
		var sz uint64
		if len(used) > 0 && !sw.Off["alloc-repeat"] && rapid.IntRange(0, 5).Draw(t, "repeat?") == 0 {
			sz = rapid.SampledFrom(used).Draw(t, "repeat-size")
		} else {
			sz = sizes.Draw(t, "size")
		}
		used = append(used, sz)
		return sz
	}
	step := func(t *rapid.T, op ops.Op) ops.StepResult {
		r := env.Step(op)
		if cfg.Counters != nil {
			cfg.Counters.Steps.Add(1)
			if r.Err != nil && errIsOOM(r.Err) {
				cfg.Counters.OOMs.Add(1)
			}
		}
		if len(r.Violations) > 0 {
			failRapid(t, env, r.Violations)
		}
		return r
	}
	pickLive := func(t *rapid.T) int {
		ids := env.LiveIDs()
		if len(ids) == 0 {
			t.Skip("nothing live")
		}
		return rapid.SampledFrom(ids).Draw(t, "live")
	}
	stream := rapid.IntRange(0, streams-1)
	alloc := func(t *rapid.T) {
		step(t, ops.Op{Kind: ops.OpAlloc, ID: env.NextID(), Size: drawSize(t), Stream: stream.Draw(t, "stream")})
	}
	free := func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpFree, ID: pickLive(t)}) }
	actions := map[string]func(*rapid.T){
		"alloc":  alloc,
		"alloc2": alloc,
		"alloc3": alloc,
		"alloc-threshold2": func(t *rapid.T) {
			sz := thresholds.Draw(t, "threshold")
			used = append(used, sz)
			step(t, ops.Op{Kind: ops.OpAlloc, ID: env.NextID(), Size: sz, Stream: stream.Draw(t, "stream")})
		},
		"alloc-threshold": func(t *rapid.T) {
			sz := thresholds.Draw(t, "threshold")
			used = append(used, sz)
			step(t, ops.Op{Kind: ops.OpAlloc, ID: env.NextID(), Size: sz, Stream: stream.Draw(t, "stream")})
		},
		"free":  free,
		"free2": free,
		"double-free": func(t *rapid.T) {
			ids := env.FreedIDs()
			if len(ids) == 0 {
				t.Skip("nothing freed")
			}
			step(t, ops.Op{Kind: ops.OpFree, ID: rapid.SampledFrom(ids).Draw(t, "freed")})
		},
		"free-interior": func(t *rapid.T) {
			step(t, ops.Op{Kind: ops.OpFreeInterior, ID: pickLive(t), Offset: rapid.Uint64Range(1, 4096).Draw(t, "offset")})
		},
		"record": func(t *rapid.T) {
			step(t, ops.Op{Kind: ops.OpRecord, ID: pickLive(t), Stream: stream.Draw(t, "stream")})
		},
		"launch":      func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpLaunch, Stream: stream.Draw(t, "stream")}) },
		"launch2":     func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpLaunch, Stream: stream.Draw(t, "stream")}) },
		"complete":    func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpComplete, Stream: stream.Draw(t, "stream")}) },
		"completeall": func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpCompleteAll}) },
		"emptycache":  func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpEmptyCache}) },
		"bad-stream": func(t *rapid.T) { // a stream the device does not know: ErrUnknownStream
			step(t, ops.Op{Kind: ops.OpAlloc, ID: env.NextID(), Size: drawSize(t), Stream: streams})
		},
		// pending-pair (a scenario template): a block and its neighbour on stream a, the block recorded on
		// stream b, work pending on both, both freed; then maybe b completes, maybe the cache is emptied,
		// maybe a request of the pair's size comes on b. Reaches the multi-stream pending states (an event
		// completing after its neighbour was freed, then EmptyCache) in one action.
		"pending-pair": func(t *rapid.T) {
			a := stream.Draw(t, "pair-a")
			b := stream.Draw(t, "pair-b")
			x, y := env.NextID(), env.NextID()+1
			sx, sy := drawSize(t), drawSize(t)
			if r := step(t, ops.Op{Kind: ops.OpAlloc, ID: x, Size: sx, Stream: a}); r.Err != nil {
				return
			}
			if r := step(t, ops.Op{Kind: ops.OpAlloc, ID: y, Size: sy, Stream: a}); r.Err != nil {
				y = -1
			}
			step(t, ops.Op{Kind: ops.OpRecord, ID: x, Stream: b})
			step(t, ops.Op{Kind: ops.OpLaunch, Stream: a})
			step(t, ops.Op{Kind: ops.OpLaunch, Stream: b})
			step(t, ops.Op{Kind: ops.OpFree, ID: x})
			if y >= 0 {
				step(t, ops.Op{Kind: ops.OpFree, ID: y})
			}
			switch rapid.IntRange(0, 3).Draw(t, "pair-then") {
			case 0:
				step(t, ops.Op{Kind: ops.OpComplete, Stream: a})
				step(t, ops.Op{Kind: ops.OpEmptyCache})
			case 1:
				step(t, ops.Op{Kind: ops.OpComplete, Stream: b})
				step(t, ops.Op{Kind: ops.OpEmptyCache})
			case 2:
				step(t, ops.Op{Kind: ops.OpAlloc, ID: env.NextID(), Size: sx, Stream: b})
			}
		},
		"close": func(t *rapid.T) { // rarely: Close mid-sequence, then every call must fail with ErrClosed
			if rapid.IntRange(0, 9).Draw(t, "close?") != 0 {
				t.Skip("not this time")
			}
			step(t, ops.Op{Kind: ops.OpCompleteAll})
			step(t, ops.Op{Kind: ops.OpClose})
		},
		"": func(t *rapid.T) {}, // the invariants run inside each step
	}
	if len(sw.Faults) > 0 {
		actions["fail"] = func(t *rapid.T) {
			if cfg.Counters != nil {
				cfg.Counters.Faults.Add(1)
			}
			res := rapid.SampledFrom([]vmm.Result{vmm.OutOfMemory, vmm.UnknownCUDAError, vmm.InvalidValue}).Draw(t, "result")
			step(t, ops.Op{Kind: ops.OpFail, Call: rapid.SampledFrom(sw.Faults).Draw(t, "call"),
				N: rapid.IntRange(1, 4).Draw(t, "n"), Result: res})
		}
		actions["clearfaults"] = func(t *rapid.T) { step(t, ops.Op{Kind: ops.OpClearFaults}) }
	}
	for name := range sw.Off {
		delete(actions, name)
	}
	t.Repeat(actions)
	if vs := env.Finish(); len(vs) > 0 {
		failRapid(t, env, vs)
	}
}

func errIsOOM(err error) bool { return errors.Is(err, vmm.ErrOutOfMemory) }

// failRapid fails t with the violations, the op list, and where the op list was saved.
func failRapid(t *rapid.T, env *ops.Env, vs []spec.Violation) {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  %v\n", v)
	}
	seq := env.Describe()
	// One file per configuration, overwritten by each failing attempt: rapid replays the shrunk case last.
	path := saveOpsAs(fmt.Sprintf("gmlake-rapid-%s-%#x.ops", env.Cfg.Policy, uint32(env.Cfg.Mutations)), seq)
	t.Fatalf("invariant violated after %d steps:\n%sops (replay: gmlake fuzz --replay %s, or GMLAKE_OPS=%s go test ./harness -run TestOpsFile -v):\n%s",
		env.Steps, b.String(), path, path, seq)
}

// saveOpsAs writes an op list to the named file in the temporary folder and returns its path ("" if it
// could not).
func saveOpsAs(name, seq string) string {
	path := filepath.Join(os.TempDir(), name)
	if err := os.WriteFile(path, []byte(seq), 0o644); err != nil {
		return ""
	}
	return path
}

// saveOps writes an op list to a fresh temporary file and returns its path ("" if it could not).
func saveOps(seq string) string {
	f, err := os.CreateTemp("", "gmlake-ops-*.ops")
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.WriteString(seq); err != nil {
		return ""
	}
	return f.Name()
}
