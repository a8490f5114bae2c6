package gpu_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/harness"
	"github.com/gmlake/gmlake/harness/gpu"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/vmm"
)

// The GPU-only checkers: rapid's generated ops and porcupine's concurrent histories through the serving
// layer (impl/serve, what libgmlake runs) on the real driver (impl/cudavmm), judged by the contract, the
// spec's invariants and the stream history, exactly as on the simulated device. Without a CUDA driver they
// skip. On the GPU machine:
//
//	go test -c -o bin/gpu.test ./harness/gpu && GMLAKE_GPU_OUT=out ./bin/gpu.test -test.v -rapid.checks=200 -gpu.histories=50

var (
	histories = flag.Int("gpu.histories", 10, "porcupine histories per policy on the GPU")
	capacity  = flag.Uint64("gpu.capacity", 1<<30, "the memory cap the engine runs under on the GPU, bytes (the judge's capacity)")
)

// requireGPU skips the test without a usable GPU, and otherwise keeps the device's primary context
// retained for the test's whole run (each sequence opens its own Device; without a holder each would
// create the context anew).
func requireGPU(t *testing.T) {
	t.Helper()
	gpu.EnsureConnections() // before the context exists
	d, err := cudavmm.New(0)
	if err != nil {
		t.Skipf("no CUDA GPU here, skipping the GPU checkers: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
}

func openDevice(limit uint64) func() (ops.Device, error) {
	return func() (ops.Device, error) {
		return gpu.Open(gpu.Config{Capacity: limit})
	}
}

// figures are what a GPU run reports (written as JSON lines under $GMLAKE_GPU_OUT, printed too).
type figures struct {
	Checker    string  `json:"checker"`
	Policy     string  `json:"policy"`
	Sequences  int64   `json:"sequences,omitempty"`
	Steps      int64   `json:"steps,omitempty"`
	OOMs       int64   `json:"ooms,omitempty"`
	Histories  int     `json:"histories,omitempty"`
	Ops        int     `json:"ops,omitempty"`
	Unknown    int     `json:"inconclusive,omitempty"`
	Violations int     `json:"violations"`
	Seconds    float64 `json:"wall_seconds"`
	Device     string  `json:"device"`
}

var outMu sync.Mutex

func report(t *testing.T, f figures) {
	t.Helper()
	b, _ := json.Marshal(f)
	t.Logf("figures: %s", b)
	dir := os.Getenv("GMLAKE_GPU_OUT")
	if dir == "" {
		return
	}
	outMu.Lock()
	defer outMu.Unlock()
	fh, err := os.OpenFile(filepath.Join(dir, "gpu-figures.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("writing the figures: %v", err)
		return
	}
	defer fh.Close()
	fmt.Fprintf(fh, "%s\n", b)
}

// keepFailFiles copies the fail files rapid wrote for t (testdata/rapid/NAME/*.fail, NAME being t's name
// with / as _) under $GMLAKE_GPU_OUT, the folder a GPU run brings back, and prints the command that replays
// each: a GPU machine is given back after the run, and rapid's seed alone replays a failure only where the
// generator has not changed.
func keepFailFiles(t *testing.T) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "rapid", strings.ReplaceAll(t.Name(), "/", "_"), "*.fail"))
	dir := os.Getenv("GMLAKE_GPU_OUT")
	for _, f := range files {
		keep := f
		if dir != "" {
			b, err := os.ReadFile(f)
			if err == nil {
				keep = filepath.Join(dir, filepath.Base(f))
				err = os.WriteFile(keep, b, 0o644)
			}
			if err != nil {
				t.Errorf("keeping rapid's fail file %s under $GMLAKE_GPU_OUT: %v", f, err)
				continue
			}
		}
		t.Logf("replay on the GPU: ./gpu.test -test.run '^%s$' -test.v -rapid.failfile=%s", t.Name(), keep)
	}
}

func deviceName() string {
	return fmt.Sprintf("CUDA device 0 under a %s cap", vmm.FormatBytes(*capacity))
}

// TestRapidOnGPU runs rapid's state machine (the swarm's configurations, the serving layer always on, no
// fault injection: the real driver has none) per policy on the GPU: every step judged by the contract, the
// spec's invariants on the ledger's account of the device, and the stream history, with real streams whose
// work completes when the ops say (harness/gpu's clock).
func TestRapidOnGPU(t *testing.T) {
	requireGPU(t)
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			var c harness.RapidCounters
			start := time.Now()
			f := figures{Checker: "rapid", Policy: p, Device: deviceName()}
			defer func() {
				f.Sequences, f.Steps, f.OOMs, f.Seconds = c.Sequences.Load(), c.Steps.Load(), c.OOMs.Load(), time.Since(start).Seconds()
				if t.Failed() {
					f.Violations = 1
					keepFailFiles(t)
				}
				report(t, f)
			}()
			rapid.Check(t, func(rt *rapid.T) {
				harness.RunRapid(rt, harness.RapidConfig{Policy: p, NoFaults: true, Serve: true, MemoryLimit: *capacity,
					Device: openDevice(*capacity), Counters: &c})
			})
		})
	}
}

// TestLinearizableOnGPU records concurrent histories on the GPU, one goroutine per real stream (4), through
// the serving layer under a 256 MiB cap (its synchronisations recorded as the streams' completions), and
// checks each for linearizability against the contract.
func TestLinearizableOnGPU(t *testing.T) {
	requireGPU(t)
	const limit = 256 * vmm.MiB
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			start := time.Now()
			f := figures{Checker: "porcupine", Policy: p, Device: fmt.Sprintf("CUDA device 0 under a %s cap", vmm.FormatBytes(limit))}
			defer func() {
				f.Seconds = time.Since(start).Seconds()
				report(t, f)
			}()
			for seed := int64(1); seed <= int64(*histories); seed++ {
				r := harness.RunLinear(harness.LinearConfig{Policy: p, Seed: seed, Ops: 60, Serve: true, MemoryLimit: limit,
					Device: openDevice(limit)})
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				f.Histories++
				f.Ops += r.Ops
				switch r.Result {
				case porcupine.Illegal:
					f.Violations++
					t.Errorf("seed %d: history of %d ops on the GPU is not linearizable against the contract; visualization: %s\n"+
						"replay on the GPU: ./gpu.test -test.run 'TestLinearizableOnGPU/%s$' -gpu.histories=%d -test.v", seed, r.Ops, r.VizPath, p, seed)
				case porcupine.Unknown:
					f.Unknown++
				}
			}
		})
	}
}

// Property: a failing GPU test's rapid fail files come back with the run: keepFailFiles copies each one
// rapid wrote for the test under $GMLAKE_GPU_OUT, byte for byte (no GPU needed).
func TestKeepFailFilesCopiesThemUnderGPUOut(t *testing.T) {
	t.Chdir(t.TempDir())
	out := t.TempDir()
	t.Setenv("GMLAKE_GPU_OUT", out)
	dir := filepath.Join("testdata", "rapid", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := []byte("# 2026120115230000 v0.4.8\n0x1 0x2\n")
	if err := os.WriteFile(filepath.Join(dir, "x-1.fail"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	keepFailFiles(t)
	got, err := os.ReadFile(filepath.Join(out, "x-1.fail"))
	if err != nil || string(got) != string(want) {
		t.Fatalf("the fail file under $GMLAKE_GPU_OUT: %q, %v; want %q", got, err, want)
	}
}
