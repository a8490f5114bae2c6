package harness

import (
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/serve"
	"github.com/gmlake/gmlake/model/contract"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// LinearConfig configures one concurrent history: one goroutine per stream, each drawing its ops from the
// one generator (ops.Rules: allocating, freeing its own allocations, recording them on other streams,
// launching and completing work on its own stream, now and then emptying the cache; half of them end by
// forgetting their stream), all against one engine.
type LinearConfig struct {
	Policy     string
	Goroutines int           // streams, one goroutine each; 0: 4
	Ops        int           // operations per goroutine; 0: 25
	Capacity   uint64        // device bytes; 0: 96 MiB
	Seed       int64         // the goroutines' random choices
	Mutations  impl.Mutation // seeded bugs
	Timeout    time.Duration // porcupine's budget; 0: 10 s
	// Serve: the goroutines call the serving layer (impl/serve: what libgmlake runs) under MemoryLimit
	// bytes (0: no cap); each stream it synchronises on out of memory or EmptyCache is in the history as
	// that stream's completion, over the synchronisation's interval.
	Serve       bool
	MemoryLimit uint64
	// Device, if set, opens the device the history runs on instead of a simulated one of Capacity bytes
	// (harness/gpu: the real GPU), closed at the end.
	Device func() (ops.Device, error)

	_ struct{}
}

// linearEngine is what the goroutines call: impl.Allocator, or the serving layer over it.
type linearEngine interface {
	Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error)
	Free(p vmm.DevicePtr) error
	RecordStream(p vmm.DevicePtr, s vmm.Stream) error
	EmptyCache() error
	Close() (impl.CloseReport, error)
}

// recordedSync is the serving layer's synchroniser in a concurrent history: it completes the stream's work
// on the device and records the completion as an operation of its own (client: the stream's index past the
// goroutines'), so porcupine linearizes it inside the synchronisation's interval, before the retry.
type recordedSync struct {
	dev    ops.Device
	client map[vmm.Stream]int
	record func(client int, in contract.ContractInput, call func() contract.ContractOutput) contract.ContractOutput
}

func (r recordedSync) Synchronize(s vmm.Stream) error {
	r.record(r.client[s], contract.ContractInput{Op: contract.COpComplete, Stream: s}, func() contract.ContractOutput {
		r.dev.Complete(s)
		return contract.ContractOutput{}
	})
	return nil
}

// LinearResult is the verdict on one history.
type LinearResult struct {
	Result  porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Ops     int                   // operations in the history
	VizPath string                // the HTML visualization, written when Result is Illegal
	Program string                // the history's ops in call order as a program file, when Result is Illegal
	Err     error                 // setup failure
}

// ContractModel is the allocator contract as a porcupine model (contract.ContractState is a value, Step
// never mutates it).
func ContractModel(cfg *contract.ContractConfig) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return contract.NewContract(cfg) },
		Step: func(state, input, output any) (bool, any) {
			return contract.ContractStep(state.(contract.ContractState), input.(contract.ContractInput), output.(contract.ContractOutput))
		},
		Equal: func(a, b any) bool { return a.(contract.ContractState).Key() == b.(contract.ContractState).Key() },
		Hash: func(s any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(contract.ContractState).Key()))
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string {
			return fmt.Sprintf("%v -> %v", in.(contract.ContractInput), out.(contract.ContractOutput))
		},
		DescribeState: func(s any) string { return s.(contract.ContractState).String() },
	}
}

var linearSizes = []uint64{1, 512, 4096, vmm.MiB, 3 * vmm.MiB, 7 * vmm.MiB, 12 * vmm.MiB, 24 * vmm.MiB}

// RunLinear records one concurrent history and checks it for linearizability against the contract. On
// an illegal history it writes porcupine's HTML visualization and returns its path.
func RunLinear(cfg LinearConfig) LinearResult {
	r, _, _ := runLinearHist(cfg)
	return r
}

// runLinearHist is RunLinear that also returns the history and the contract's configuration (for debugging
// a failure).
func runLinearHist(cfg LinearConfig) (LinearResult, []porcupine.Operation, *contract.ContractConfig) {
	if cfg.Goroutines == 0 {
		cfg.Goroutines = 4
	}
	if cfg.Ops == 0 {
		cfg.Ops = 25
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = 96 * vmm.MiB
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	var dev ops.Device
	if cfg.Device != nil {
		d, err := cfg.Device()
		if err != nil {
			return LinearResult{Err: err}, nil, nil
		}
		dev = d
		if c, ok := d.(interface{ Close() error }); ok {
			defer func() { _ = c.Close() }()
		}
	} else {
		dev = sim.NewDevice(sim.DeviceConfig{Capacity: cfg.Capacity})
	}
	streams := []vmm.Stream{vmm.DefaultStream}
	for len(streams) < cfg.Goroutines {
		s, err := dev.CreateStream()
		if err != nil {
			return LinearResult{Err: err}, nil, nil
		}
		streams = append(streams, s)
	}
	rule := ops.PolicyOOMRule(cfg.Policy, dev.Granularity())
	capacity := dev.Capacity()
	if cfg.Serve && cfg.MemoryLimit != 0 {
		capacity = min(capacity, cfg.MemoryLimit)
	}
	ccfg := &contract.ContractConfig{Capacity: capacity, Granularity: dev.Granularity(), Streams: streams[1:],
		Errors: ops.ContractErrors, Footprint: rule.Need}

	var clock atomic.Int64
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in contract.ContractInput, call func() contract.ContractOutput) contract.ContractOutput {
		start := clock.Add(1)
		out := func() (out contract.ContractOutput) {
			defer func() {
				if p := recover(); p != nil {
					out = contract.ContractOutput{Err: fmt.Errorf("engine panicked: %v", p)}
				}
			}()
			return call()
		}()
		end := clock.Add(1)
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: start, Output: out, Return: end})
		mu.Unlock()
		return out
	}
	kc := impl.Config{Policy: cfg.Policy, TestOnlyMutations: cfg.Mutations}
	var a linearEngine
	var forget func(vmm.Stream) error // ForgetStream, through the serving layer when there is one
	if cfg.Serve {
		rs := recordedSync{dev: dev, client: map[vmm.Stream]int{}, record: record}
		for i, s := range streams {
			rs.client[s] = cfg.Goroutines + i
		}
		e, err := serve.New(dev, serve.Config{Engine: kc, MemoryLimit: cfg.MemoryLimit, Sync: rs})
		if err != nil {
			return LinearResult{Err: err}, nil, nil
		}
		a, forget = e, e.ForgetStream
	} else {
		e, err := impl.New(dev, kc)
		if err != nil {
			return LinearResult{Err: err}, nil, nil
		}
		a, forget = e, e.ForgetStream
	}
	// Every goroutine draws its ops from the one generator (ops.Rules), on its own stream; seq collects
	// them with their call times, so an illegal history is also a program that replays single-threaded.
	var seqMu sync.Mutex
	var seq []timedOp
	var wg sync.WaitGroup
	for g := 0; g < cfg.Goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			src := ops.RandSource(rand.New(rand.NewSource(cfg.Seed*1000 + int64(g))))
			gen := ops.NewGen(ops.Swarm{Streams: len(streams)}, cfg.Policy, capacity, dev.Granularity())
			gen.Home, gen.Sizes = g, linearSizes
			rules := gen.On(linearRules...)
			st := &linearState{next: g << 20}
			ptr := map[int]vmm.DevicePtr{}
			s := streams[g]
			for i := 0; i < cfg.Ops; i++ {
				if src.Intn(4, "yield?") == 0 {
					runtime.Gosched()
				}
				var op []ops.Op
				for try := 0; op == nil && try < 8; try++ {
					_, op = gen.Next(rules, st, src)
				}
				if op == nil { // nothing live to free or record: allocate
					op = gen.Make(rules[0], st, src)
				}
				for _, o := range op {
					var in contract.ContractInput
					var call func() contract.ContractOutput
					switch o.Kind {
					case ops.OpAlloc:
						in = contract.ContractInput{Op: contract.COpAlloc, Size: o.Size, Stream: s}
						call = func() contract.ContractOutput {
							p, err := a.Alloc(o.Size, s)
							return contract.ContractOutput{Ptr: p, Err: err}
						}
					case ops.OpFree:
						p := ptr[o.ID]
						in, call = contract.ContractInput{Op: contract.COpFree, Ptr: p}, func() contract.ContractOutput {
							return contract.ContractOutput{Err: a.Free(p)}
						}
					case ops.OpRecord:
						p, to := ptr[o.ID], streams[o.Stream]
						in = contract.ContractInput{Op: contract.COpRecordStream, Ptr: p, Stream: to}
						call = func() contract.ContractOutput { return contract.ContractOutput{Err: a.RecordStream(p, to)} }
					case ops.OpLaunch:
						in, call = contract.ContractInput{Op: contract.COpLaunch, Stream: s}, func() contract.ContractOutput {
							dev.Launch(s)
							return contract.ContractOutput{}
						}
					case ops.OpComplete:
						in, call = contract.ContractInput{Op: contract.COpComplete, Stream: s}, func() contract.ContractOutput {
							dev.Complete(s)
							return contract.ContractOutput{}
						}
					case ops.OpEmptyCache:
						in, call = contract.ContractInput{Op: contract.COpEmptyCache}, func() contract.ContractOutput {
							return contract.ContractOutput{Err: a.EmptyCache()}
						}
					default:
						continue // not one of linearRules' ops
					}
					at := clock.Load()
					out := record(g, in, call)
					seqMu.Lock()
					seq = append(seq, timedOp{at, o})
					seqMu.Unlock()
					st.after(o, out.Err == nil, out.Ptr, ptr)
				}
			}
			// Half the goroutines end by forgetting their stream (ForgetStream, C-FORGET: as a thread that
			// destroys its stream when done; goroutine 0's is the default stream, a misuse), concurrently
			// with the others' records on it and their reuse of what it freed.
			if src.Intn(2, "forget?") == 0 {
				o := ops.Op{Kind: ops.OpForget, Stream: g}
				at := clock.Load()
				record(g, contract.ContractInput{Op: contract.COpForgetStream, Stream: s}, func() contract.ContractOutput {
					return contract.ContractOutput{Err: forget(s)}
				})
				seqMu.Lock()
				seq = append(seq, timedOp{at, o})
				seqMu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	dev.CompleteAll()
	func() {
		defer func() { _ = recover() }()
		_, _ = a.Close()
	}()

	res := CheckHistory(ccfg, history, cfg.Timeout, fmt.Sprintf("%s-seed%d", cfg.Policy, cfg.Seed))
	if res.Result == porcupine.Illegal {
		// The same ops in the order they were called, as a program: it replays single-threaded in any
		// checker (gmlake fuzz --replay FILE --minimize), though a concurrency-only failure may pass there.
		sort.SliceStable(seq, func(i, j int) bool { return seq[i].at < seq[j].at })
		p := &ops.Program{Cfg: ops.Config{Policy: cfg.Policy, Capacity: capacity, Granularity: dev.Granularity(),
			Streams: cfg.Goroutines, Mutations: cfg.Mutations, Serve: cfg.Serve, MemoryLimit: cfg.MemoryLimit}}
		for _, t := range seq {
			p.Ops = append(p.Ops, t.op)
		}
		res.Program = saveOps(p.String())
	}
	return res, history, ccfg
}

// linearRules are the generator's rules porcupine's goroutines draw from (the first is their fallback).
var linearRules = []string{"alloc", "free", "record", "launch", "complete", "emptycache"}

// timedOp is an op of a concurrent history and the clock when it was called.
type timedOp struct {
	at int64
	op ops.Op
}

// linearState is a goroutine's own view of its run (ops.State): the ids it allocated and freed.
type linearState struct {
	live, freed []int
	next        int
}

func (s *linearState) LiveIDs() []int  { return append([]int(nil), s.live...) }
func (s *linearState) FreedIDs() []int { return append([]int(nil), s.freed...) }
func (s *linearState) NextID() int     { return s.next }

// after notes what op did: an alloc that succeeded binds its id (ptr), a free ends it either way (the
// goroutine does not free it again).
func (s *linearState) after(o ops.Op, ok bool, p vmm.DevicePtr, ptr map[int]vmm.DevicePtr) {
	switch o.Kind {
	case ops.OpAlloc:
		s.next++
		if ok {
			ptr[o.ID] = p
			s.live = append(s.live, o.ID)
		}
	case ops.OpFree:
		for i, id := range s.live {
			if id == o.ID {
				s.live = append(s.live[:i], s.live[i+1:]...)
				break
			}
		}
		s.freed = append(s.freed, o.ID)
	}
}

// CheckHistory checks one history against the contract; when it is illegal it writes porcupine's HTML
// visualization (named name.html in a fresh temporary folder) and returns its path.
func CheckHistory(ccfg *contract.ContractConfig, history []porcupine.Operation, timeout time.Duration, name string) LinearResult {
	res, info := porcupine.CheckOperationsVerbose(ContractModel(ccfg), history, timeout)
	out := LinearResult{Result: res, Ops: len(history)}
	if res == porcupine.Illegal {
		dir, err := os.MkdirTemp("", "gmlake-porcupine-")
		if err == nil {
			out.VizPath = filepath.Join(dir, name+".html")
			if err := porcupine.VisualizePath(ContractModel(ccfg), info, out.VizPath); err != nil {
				out.VizPath = ""
				out.Err = err
			}
		}
	}
	return out
}
