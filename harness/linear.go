package harness

import (
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model"
	"github.com/gmlake/gmlake/vmm"
)

// LinearConfig configures one concurrent history: one goroutine per stream, each allocating, freeing its
// own allocations, recording them on other streams, launching and completing work on its own stream, and
// now and then emptying the cache, all against one engine.
type LinearConfig struct {
	Policy     string
	Goroutines int           // streams, one goroutine each; 0: 4
	Ops        int           // operations per goroutine; 0: 25
	Capacity   uint64        // device bytes; 0: 96 MiB
	Seed       int64         // the goroutines' random choices
	Mutations  impl.Mutation // seeded bugs
	Timeout    time.Duration // porcupine's budget; 0: 10 s
	_          struct{}
}

// LinearResult is the verdict on one history.
type LinearResult struct {
	Result  porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Ops     int                   // operations in the history
	VizPath string                // the HTML visualization, written when Result is Illegal
	Err     error                 // setup failure
}

// ContractModel is the allocator contract as a porcupine model (model.ContractState is a value, Step
// never mutates it).
func ContractModel(cfg *model.ContractConfig) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return model.NewContract(cfg) },
		Step: func(state, input, output any) (bool, any) {
			return model.ContractStep(state.(model.ContractState), input.(model.ContractInput), output.(model.ContractOutput))
		},
		Equal: func(a, b any) bool { return a.(model.ContractState).Key() == b.(model.ContractState).Key() },
		Hash: func(s any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(model.ContractState).Key()))
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string {
			return fmt.Sprintf("%v -> %v", in.(model.ContractInput), out.(model.ContractOutput))
		},
		DescribeState: func(s any) string { return s.(model.ContractState).String() },
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
func runLinearHist(cfg LinearConfig) (LinearResult, []porcupine.Operation, *model.ContractConfig) {
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
	dev := model.NewDevice(model.DeviceConfig{Capacity: cfg.Capacity})
	streams := []vmm.Stream{vmm.DefaultStream}
	for len(streams) < cfg.Goroutines {
		s, err := dev.CreateStream()
		if err != nil {
			return LinearResult{Err: err}, nil, nil
		}
		streams = append(streams, s)
	}
	a, err := impl.New(dev, impl.Config{Policy: cfg.Policy, TestOnlyMutations: cfg.Mutations})
	if err != nil {
		return LinearResult{Err: err}, nil, nil
	}
	rule := PolicyOOMRule(cfg.Policy, dev.Granularity())
	ccfg := &model.ContractConfig{Capacity: dev.Capacity(), Granularity: dev.Granularity(), Streams: streams[1:],
		Errors: ContractErrors, Footprint: rule.Need}

	var clock atomic.Int64
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in model.ContractInput, call func() model.ContractOutput) model.ContractOutput {
		start := clock.Add(1)
		out := func() (out model.ContractOutput) {
			defer func() {
				if p := recover(); p != nil {
					out = model.ContractOutput{Err: fmt.Errorf("engine panicked: %v", p)}
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
	var wg sync.WaitGroup
	for g := 0; g < cfg.Goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(cfg.Seed*1000 + int64(g)))
			s := streams[g]
			var mine []vmm.DevicePtr
			for i := 0; i < cfg.Ops; i++ {
				if rng.Intn(4) == 0 {
					runtime.Gosched()
				}
				switch r := rng.Intn(20); {
				case r < 8 || len(mine) == 0:
					in := model.ContractInput{Op: model.COpAlloc, Size: linearSizes[rng.Intn(len(linearSizes))], Stream: s}
					out := record(g, in, func() model.ContractOutput {
						p, err := a.Alloc(in.Size, s)
						return model.ContractOutput{Ptr: p, Err: err}
					})
					if out.Err == nil {
						mine = append(mine, out.Ptr)
					}
				case r < 14:
					k := rng.Intn(len(mine))
					p := mine[k]
					mine = append(mine[:k], mine[k+1:]...)
					record(g, model.ContractInput{Op: model.COpFree, Ptr: p}, func() model.ContractOutput {
						return model.ContractOutput{Err: a.Free(p)}
					})
				case r < 16:
					p := mine[rng.Intn(len(mine))]
					o := streams[rng.Intn(len(streams))]
					record(g, model.ContractInput{Op: model.COpRecordStream, Ptr: p, Stream: o}, func() model.ContractOutput {
						return model.ContractOutput{Err: a.RecordStream(p, o)}
					})
				case r < 18:
					record(g, model.ContractInput{Op: model.COpLaunch, Stream: s}, func() model.ContractOutput {
						dev.Launch(s)
						return model.ContractOutput{}
					})
				case r < 19:
					record(g, model.ContractInput{Op: model.COpComplete, Stream: s}, func() model.ContractOutput {
						dev.Complete(s)
						return model.ContractOutput{}
					})
				default:
					record(g, model.ContractInput{Op: model.COpEmptyCache}, func() model.ContractOutput {
						return model.ContractOutput{Err: a.EmptyCache()}
					})
				}
			}
		}(g)
	}
	wg.Wait()
	dev.CompleteAll()
	func() {
		defer func() { _ = recover() }()
		_, _ = a.Close()
	}()

	return CheckHistory(ccfg, history, cfg.Timeout, fmt.Sprintf("%s-seed%d", cfg.Policy, cfg.Seed)), history, ccfg
}

// CheckHistory checks one history against the contract; when it is illegal it writes porcupine's HTML
// visualization (named name.html in a fresh temporary folder) and returns its path.
func CheckHistory(ccfg *model.ContractConfig, history []porcupine.Operation, timeout time.Duration, name string) LinearResult {
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
