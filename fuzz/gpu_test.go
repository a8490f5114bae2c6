package fuzz

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmlake/gmlake/harness/gpu"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/vmm"
)

// The GPU-only fuzzing: the campaign and FuzzOps's programs on the real driver (harness/gpu.Device), through
// the serving layer, judged as on the simulated device. Without a CUDA driver they skip (CI has none). On the
// GPU machine (no Go there; `make gpu` builds bin/fuzz.test):
//
//	cd fuzz && ../bin/fuzz.test -test.run OnGPU -test.v -campaign.gpu-time=30s
//	cd fuzz && ../bin/fuzz.test -test.run '^$' -test.fuzz FuzzOpsOnGPU -test.fuzztime 60s -test.parallel 8 -test.fuzzcachedir /tmp/fuzzcache

var (
	gpuCampaignTime = flag.Duration("campaign.gpu-time", 5*time.Second, "how long TestCampaignOnGPU runs each policy")
	gpuCampaignCap  = flag.Uint64("campaign.gpu-capacity", 8<<30, "TestCampaignOnGPU's capacity (the serving layer's cap), bytes")
)

var (
	gpuOnce   sync.Once
	gpuHolder *cudavmm.Driver // keeps the primary context retained for the process (each run opens its own Device)
	gpuErr    error
)

// gpuAvailable opens the CUDA device once per process, or says why not.
func gpuAvailable() error {
	gpuOnce.Do(func() {
		gpu.EnsureConnections() // before the context exists
		gpuHolder, gpuErr = cudavmm.New(0)
	})
	return gpuErr
}

// Property: a campaign on the real GPU, one worker per stream drawing the one generator's ops through the
// serving layer under the cap, finds no violation for any policy: every pattern reads back (the other
// streams' held-back writes included), every lock-step check against the ledger passes, and after Close the
// ledger holds nothing. Its figures go to $GMLAKE_GPU_OUT/campaign-gpu.jsonl.
func TestCampaignOnGPU(t *testing.T) {
	if err := gpuAvailable(); err != nil {
		t.Skipf("no CUDA GPU here, skipping the GPU campaign: %v", err)
	}
	for _, policy := range impl.Policies {
		t.Run(policy, func(t *testing.T) {
			s, err := RunCampaign(context.Background(), CampaignConfig{Device: "cuda", Policy: policy, Duration: *gpuCampaignTime,
				Seed: 1, Streams: 8, Capacity: *gpuCampaignCap, CheckEvery: 500 * time.Millisecond, OutDir: t.TempDir(),
				MinimizeFor: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			line, _ := json.Marshal(s)
			t.Logf("summary: %s", line)
			if dir := os.Getenv("GMLAKE_GPU_OUT"); dir != "" {
				if f, err := os.OpenFile(filepath.Join(dir, "campaign-gpu.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
					fmt.Fprintf(f, "%s\n", line)
					f.Close()
				}
			}
			if !s.OK() {
				t.Fatalf("%d violations, %d leaks: %s\nsaved: %s; %s", s.Violations, s.Leaks, s.Failure, s.Trace, s.Replay)
			}
			if s.Ops == 0 || s.Allocs == 0 || s.Allocs != s.Frees {
				t.Fatalf("the campaign did too little: %+v", s)
			}
		})
	}
}

// gpuProgram is a decoded program as the real driver can run it: no op names a stream the environment
// lacks (the engine would be handed a made-up CUstream; bad-stream is the simulated device's), and the
// device the judge sees is at most maxDecodeSize (several fuzzing processes share the GPU). Fault ops stay:
// ops.Env refuses them on a real device.
func gpuProgram(p *ops.Program) *ops.Program {
	q := &ops.Program{Cfg: p.Cfg}
	q.Cfg.Patterns = false
	for _, o := range p.Ops {
		switch o.Kind {
		case ops.OpAlloc, ops.OpRecord, ops.OpLaunch, ops.OpComplete, ops.OpCaptureBegin, ops.OpCaptureEnd, ops.OpForget:
			if o.Stream >= p.Cfg.Streams {
				continue
			}
		}
		q.Ops = append(q.Ops, o)
	}
	return q
}

// fuzzConnections is the CUDA_DEVICE_MAX_CONNECTIONS of FuzzOpsOnGPU's processes. A decoded program gates at
// most MaxStreams streams, so CUDA's default of 8 hardware queues holds it. At gpu.Connections (32) a
// context, the 16 workers of a 16-core H200 host ran the GPU out of channel IDs (NVRM: "Failed to allocate
// Channel ID on heap") and died while testing the seed corpus (the fuzzer: "fuzzing process terminated
// without fuzzing: EOF").
const fuzzConnections = 8

// A program's streams fit the queues (a compile error, a negative constant converted to uint, otherwise).
const _ = uint(fuzzConnections - MaxStreams)

// maxGPUFuzzWorkers is the most fuzzing workers FuzzOpsOnGPU runs with. The GPU time-slices the workers'
// contexts, so a program's time grows with their number, and the fuzzer kills an input that runs past 10 s.
// Measured on the H200 (80 s each, the instrumented binary): 4 and 8 workers fuzzed clean (8: 2,590 inputs);
// 16, the default on its 16-core host, lost a worker while minimizing twice in two runs ("fuzzing process
// hung or terminated unexpectedly while minimizing"), on inputs that replay alone in 0.4 s.
const maxGPUFuzzWorkers = 8

// gpuFuzzWorkersFit refuses a fuzzing run of more than maxGPUFuzzWorkers workers (-test.parallel, GOMAXPROCS
// by default), with the flag to pass; a run of the seed corpus alone (no -test.fuzz) runs in one process.
func gpuFuzzWorkersFit() error {
	fz, par := flag.Lookup("test.fuzz"), flag.Lookup("test.parallel")
	if fz == nil || par == nil || fz.Value.String() == "" {
		return nil
	}
	n, err := strconv.Atoi(par.Value.String())
	if err != nil || n <= maxGPUFuzzWorkers {
		return nil
	}
	return fmt.Errorf("FuzzOpsOnGPU fuzzes with at most %d workers, one CUDA context each, and -test.parallel is %d "+
		"(GOMAXPROCS unless set): at 16 the GPU's time-slicing ran inputs past the fuzzer's 10 s limit; "+
		"pass -test.parallel %d", maxGPUFuzzWorkers, n, maxGPUFuzzWorkers)
}

// maxGPUMinimizeExecs bounds the fuzzer's minimization of a new input on the GPU (-test.fuzzminimizetime,
// as a count of runs: "20x"). The coordinator hands new-coverage inputs to the workers to minimize before it
// fuzzes on; at the default (60 s of runs an input) minimizing the corpus's large programs (~1 KB, 256 ops
// each through every judge on a real driver) took every worker for the whole minute: on the H200 8 workers
// fuzzed 943 inputs in 9 s and none in the 53 s after (session 8, GODEBUG=fuzzdebug=1 on the simulated
// device showed the same: each ~1 KB input held its worker the full minimization time).
const maxGPUMinimizeExecs = 20

// gpuFuzzMinimizeFits refuses a GPU fuzzing run whose minimization is time-bound or longer than
// maxGPUMinimizeExecs runs an input, with the flag to pass.
func gpuFuzzMinimizeFits() error {
	fz, mt := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzminimizetime")
	if fz == nil || mt == nil || fz.Value.String() == "" {
		return nil
	}
	return minimizeFits(mt.Value.String())
}

// minimizeFits judges one -test.fuzzminimizetime value (as the testing package prints it: "20x" or "1m0s").
func minimizeFits(v string) error {
	if n, err := strconv.Atoi(strings.TrimSuffix(v, "x")); err == nil && strings.HasSuffix(v, "x") && n <= maxGPUMinimizeExecs {
		return nil
	}
	return fmt.Errorf("FuzzOpsOnGPU minimizes a new input for at most %d runs, and -test.fuzzminimizetime is %s: "+
		"minimizing the corpus's large programs on the GPU by time held every worker and fuzzed nothing; "+
		"pass -test.fuzzminimizetime %dx", maxGPUMinimizeExecs, v, maxGPUMinimizeExecs)
}

// FuzzOpsOnGPU is FuzzOps on the real GPU: the same decoded programs (the serving layer as header[2] says)
// through one policy each (the input chooses) on harness/gpu.Device, every step judged by the contract, the spec's invariants on
// the ledger's account and the stream history. Without the pattern check: its read-back is cuMemcpyDtoH on
// the legacy default stream, which a unit held back on stream 0 would hold back for good (the campaign
// checks the data path on the GPU, its workers on streams of their own). Seeded with the FuzzOps corpus.
//
// Each fuzzing worker is a process with a CUDA context of its own (-test.parallel of them, GOMAXPROCS by
// default), so the target asks for fuzzConnections hardware queues, not the campaign's gpu.Connections.
func FuzzOpsOnGPU(f *testing.F) {
	if err := gpuFuzzWorkersFit(); err != nil {
		f.Fatal(err)
	}
	if err := gpuFuzzMinimizeFits(); err != nil {
		f.Fatal(err)
	}
	if os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS") == "" {
		_ = os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", strconv.Itoa(fuzzConnections)) // before the context exists
	}
	if err := gpuAvailable(); err != nil {
		f.Skipf("no CUDA GPU here, skipping FuzzOpsOnGPU: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzOps", "*"))
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		b, err := readCorpusFile(data)
		if err != nil {
			f.Fatalf("%s: %v", path, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// One policy per input, chosen by the input (the fuzzer's worker kills an input that runs past 10 s,
		// and a real driver is slower than the simulated device); a device of at most 1 GiB, as the GPU
		// checkers' cap.
		p := gpuProgram(Decode(data))
		capacity := min(p.Cfg.Capacity, vmm.GiB)
		policy := impl.Policies[int(crc32.ChecksumIEEE(data))%len(impl.Policies)]
		d, err := gpu.Open(gpu.Config{Capacity: capacity})
		if err != nil {
			t.Fatalf("opening the GPU: %v", err)
		}
		cfg := p.Cfg
		cfg.Policy, cfg.Device = policy, d
		i, vs, _, err := ops.Run(cfg, p.Ops)
		if cerr := d.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the GPU: %w", cerr)
		}
		if err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
		if i >= 0 {
			sim := *p
			sim.Cfg.Capacity = capacity
			t.Fatalf("%s on the GPU: %s\n\nprogram (save it and run `gmlake fuzz --replay FILE --policy %s --minimize` on the simulated device):\n%s",
				policy, describeRun(p.Ops, i, vs), policy, programText(&sim))
		}
	})
}

// Property: FuzzOpsOnGPU runs only with a minimization bounded by a count of at most maxGPUMinimizeExecs
// runs an input; a time bound (the default 60 s among them) or a larger count is refused with the flag to
// pass.
func TestGPUFuzzMinimizationIsBoundedByRuns(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{{"20x", true}, {"1x", true}, {"0x", true}, {"21x", false}, {"1m0s", false}, {"5s", false}, {"x", false}} {
		err := minimizeFits(c.v)
		if (err == nil) != c.ok {
			t.Errorf("-test.fuzzminimizetime %s: %v, want ok %v", c.v, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "-test.fuzzminimizetime 20x") {
			t.Errorf("-test.fuzzminimizetime %s: the refusal %q does not name the flag to pass", c.v, err)
		}
	}
}
