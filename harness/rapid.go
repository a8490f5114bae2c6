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
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/trace"
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
	// Finished, if set, is handed the Env of every sequence that ran to its end clean (after Finish): its
	// Program is the sequence as a reproducer prints it (the decision goldens are drawn this way).
	Finished func(*ops.Env)
	_        struct{}
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

// RunRapid runs one rapid test case: a random sequence of ops through a fresh Env, failing t at the first
// violation with the violations and the op list (the reproducer), and checking INV-NOLEAK at the end.
// Unless cfg.NoSwarm, the sequence first draws its own configuration and action set (DrawSwarm: streams,
// sync, capacity, knobs, fault schedule, actions switched off).
func RunRapid(t *rapid.T, cfg RapidConfig) {
	var sw ops.Swarm
	if cfg.NoSwarm {
		sw = ops.Swarm{Streams: 3, Capacity: rapid.SampledFrom([]uint64{64 * vmm.MiB, 512 * vmm.MiB, 4 * vmm.GiB}).Draw(t, "capacity"),
			Off: map[string]bool{"alloc-threshold": true, "alloc-repeat": true, "pending-pair": true, "pool": true, "capture": true}}
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
	env, err := ops.NewEnv(ops.Config{Policy: cfg.Policy, DefaultName: sw.DefaultName, Capacity: sw.Capacity, Streams: streams, SyncStreams: sw.Sync,
		Knobs: sw.Knobs, Mutations: cfg.Mutations, Ignore: cfg.Ignore, Differential: cfg.Differential,
		Device: dev, Serve: sw.Serve, MemoryLimit: sw.MemoryLimit})
	if err != nil {
		t.Fatalf("%v", err)
	}
	// A case cut short (a violation, rapid's shrinking, a draw it discards) never reaches Finish: close the
	// engine anyway, before the device closes (defers run last first), so that on a real GPU its memory is
	// given back and the next case does not find the device full.
	defer closeUnfinished(env)
	if cfg.Counters != nil {
		cfg.Counters.Sequences.Add(1)
	}
	gen := ops.NewGen(sw, cfg.Policy, env.Capacity(), env.Cfg.Granularity)
	gen.Traces = TraceSizes()
	step := func(t *rapid.T, op ops.Op) {
		r := env.Step(op)
		if cfg.Counters != nil {
			cfg.Counters.Steps.Add(1)
			if r.Err != nil && errIsOOM(r.Err) {
				cfg.Counters.OOMs.Add(1)
			}
			if op.Kind == ops.OpFail {
				cfg.Counters.Faults.Add(1)
			}
		}
		if len(r.Violations) > 0 {
			failRapid(t, env, r.Violations)
		}
	}
	// One rapid action per rule of the generator (ops.Rules), repeated by its weight.
	actions := map[string]func(*rapid.T){
		"": func(t *rapid.T) {}, // the invariants run inside each step
	}
	for _, rule := range gen.On() {
		rule := rule
		act := func(t *rapid.T) {
			seq := gen.Make(rule, env, ops.RapidSource(t))
			if seq == nil {
				t.Skip(rule.Name + " does not apply now")
			}
			for _, o := range seq {
				step(t, o)
			}
		}
		for w := 1; w <= rule.Weight; w++ {
			name := rule.Name
			if w > 1 {
				name = fmt.Sprintf("%s%d", rule.Name, w)
			}
			actions[name] = act
		}
	}
	t.Repeat(actions)
	if vs := env.Finish(); len(vs) > 0 {
		failRapid(t, env, vs)
	}
	if cfg.Finished != nil {
		cfg.Finished(env)
	}
}

// closeUnfinished closes the engine of a run that ended before Env.Finish, judging nothing (the run already
// failed or was discarded). A panic inside the engine's Close is the run's own failure, reported already.
func closeUnfinished(env *ops.Env) {
	if env.Closed() {
		return
	}
	defer func() { _ = recover() }()
	env.Step(ops.Op{Kind: ops.OpClearFaults})
	env.Step(ops.Op{Kind: ops.OpCompleteAll})
	env.Step(ops.Op{Kind: ops.OpClose})
}

func errIsOOM(err error) bool { return errors.Is(err, vmm.ErrOutOfMemory) }

// failRapid fails t with the violations, the op list, and where the op list was saved.
func failRapid(t *rapid.T, env *ops.Env, vs []spec.Violation) {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  %v\n", v)
	}
	seq := env.Describe()
	// One file per configuration and process, overwritten by each failing attempt: rapid replays the shrunk
	// case last (the process id keeps concurrent test runs from overwriting each other's).
	path := saveOpsAs(fmt.Sprintf("gmlake-rapid-%s-%#x-%d.ops", env.Cfg.Policy, uint32(env.Cfg.Mutations), os.Getpid()), seq)
	t.Fatalf("invariant violated after %d steps:\n%sops (replay and shrink: gmlake fuzz --replay %s --minimize, or GMLAKE_SHRINK=1 GMLAKE_OPS=%s go test ./harness -run TestOpsFile -v):\n%s",
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
