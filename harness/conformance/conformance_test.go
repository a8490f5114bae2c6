package conformance

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

func newModel(g uint64) vmm.Driver {
	// With GMLAKE_CUDA_HANDLES naming rdma the GPU's handles are GPUDirect-RDMA capable, and the model
	// poisons them as the H200's driver does (sim.DeviceConfig.RDMAHandles): TestConformanceReal then
	// checks that rule too.
	rdma := strings.Contains(os.Getenv("GMLAKE_CUDA_HANDLES"), "rdma")
	return sim.NewDevice(sim.DeviceConfig{Granularity: g, SyncStreams: true, RDMAHandles: rdma})
}

// envInt reads a positive integer from the environment, or returns def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func long() bool { return os.Getenv("GMLAKE_PROFILE") == "long" }

// The rules every conformance run must exercise at least once (docs/cuda-vmm.md): granularity, offset 0,
// partial unmap, aliasing (maps of a mapped handle, reads through them), lifetime (free of a mapped
// reservation, use after release), access (set access on partly mapped ranges).
var requiredRules = []string{
	"create-misaligned-size", "reserve-misaligned-size", "map-misaligned-size", "set-access-misaligned-size",
	"map-nonzero-offset", "map-part-of-handle", "map-beyond-handle", "map-over-mapped", "map-misaligned-ptr",
	"unmap-part-of-mapping", "unmap-with-hole", "unmap-unmapped",
	"set-access-partly-mapped", "set-access-unmapped", "set-access-part-of-mapping",
	"free-address-mapped", "free-address-wrong-size", "free-address-interior",
	"legal", "legal-init",
}

// modelOnlyRules are exercised only without a GPU: on the GPU they fault the context or crash the process.
var modelOnlyRules = []string{"memset-without-access", "destroy-default-stream", "map-after-release", "release-after-release"}

func checkCoverage(t *testing.T, rep *Report, extra ...string) {
	t.Helper()
	for _, r := range append(requiredRules, extra...) {
		if rep.ByRule[r] == 0 {
			t.Errorf("rule %q was never exercised", r)
		}
	}
	for _, k := range []vmm.CallKind{vmm.CallCreate, vmm.CallRelease, vmm.CallReserve, vmm.CallFreeAddress, vmm.CallMap,
		vmm.CallUnmap, vmm.CallSetAccess, vmm.CallMemInfo, vmm.CallCreateStream, vmm.CallDestroyStream, vmm.CallStreamQuery,
		vmm.CallCreateEvent, vmm.CallRecordEvent, vmm.CallQueryEvent, vmm.CallStreamWaitEvent, vmm.CallDestroyEvent,
		vmm.CallMemset, vmm.CallRead} {
		if rep.ByKind[k.Short()] == 0 {
			t.Errorf("call %s was never made", k)
		}
	}
}

func reportDiffs(t *testing.T, what string, ds []Difference) {
	t.Helper()
	for i, d := range ds {
		if i == 10 {
			t.Errorf("... and %d more", len(ds)-10)
			break
		}
		var pre strings.Builder
		for j, op := range d.Prefix {
			if j >= len(d.Prefix)-8 {
				fmt.Fprintf(&pre, "\n    %d: %v", j, op)
			}
		}
		t.Errorf("%s: %v\n  last calls before it:%s", what, d, pre.String())
	}
}

// TestConformanceSelf checks the reference device against what the H200 answers (each call's measured
// result, ConfOp.Expect, and every byte read back, aliasing included), with calls that would fault a real
// GPU too: CI's stand-in for TestConformanceReal.
func TestConformanceSelf(t *testing.T) {
	seqs := 30
	if long() {
		seqs = 600
	}
	rep, err := Run(Config{Seed: 1, Sequences: seqs, Calls: 300, ModelOnlyFaults: true}, newModel, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	checkCoverage(t, rep, modelOnlyRules...)
	reportDiffs(t, "the reference device differs from what the H200 answers", rep.AgainstRules)
	for _, e := range rep.CleanupErrors {
		t.Error(e)
	}
}

// TestConformanceComparesTwoDevices runs the model against a second model: the symbolic mapping of
// handles, pointers, streams and events must make two correct devices agree on every call.
func TestConformanceComparesTwoDevices(t *testing.T) {
	dut := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	rep, err := Run(Config{Seed: 7, Sequences: 10, Calls: 300}, newModel, dut)
	if err != nil {
		t.Fatal(err)
	}
	reportDiffs(t, "two reference devices differ", rep.Differences)
	if lk := dut.Leaks(); !lk.Empty() {
		t.Errorf("the device under test was not left as found: %v", lk)
	}
}

// liar is a reference device with one seeded deviation, to prove the comparison bites.
type liar struct {
	vmm.Driver
	kind string
}

func (l *liar) Map(p vmm.DevicePtr, size uint64, h vmm.Handle, off uint64) error {
	if l.kind == "offset" && off != 0 {
		return vmm.Errorf(vmm.CallMap, vmm.InvalidValue, "seeded deviation")
	}
	return l.Driver.Map(p, size, h, off)
}

func (l *liar) Read(p vmm.DevicePtr, dst []byte, s vmm.Stream) error {
	err := l.Driver.Read(p, dst, s)
	if l.kind == "data" && len(dst) > 100 {
		dst[100]++
	}
	return err
}

func (l *liar) Unmap(p vmm.DevicePtr, size uint64) error {
	if l.kind == "partial-unmap" {
		// Accept a range that starts at a mapping, whatever it covers: unmap nothing and say yes.
		if err := l.Driver.Unmap(p, size); vmm.ResultOf(err) == vmm.InvalidValue {
			return nil
		} else {
			return err
		}
	}
	return l.Driver.Unmap(p, size)
}

// TestConformanceCatchesSeededDeviations: a reference device that answers one rule wrongly is reported.
func TestConformanceCatchesSeededDeviations(t *testing.T) {
	for _, kind := range []string{"offset", "data", "partial-unmap"} {
		t.Run(kind, func(t *testing.T) {
			dut := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
			ref := func(g uint64) vmm.Driver { return &liar{Driver: newModel(g), kind: kind} }
			rep, err := Run(Config{Seed: 3, Sequences: 10, Calls: 300}, ref, dut)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Differences) == 0 {
				t.Fatalf("the seeded deviation %q went unnoticed over %d calls", kind, rep.Calls)
			}
			t.Logf("first: %v", rep.Differences[0])
		})
	}
}

func openGPU(t *testing.T) *cudavmm.Driver {
	t.Helper()
	d, err := cudavmm.New(0)
	if err != nil {
		t.Skipf("no CUDA GPU here, skipping the real-device test: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	// cudavmm.New reads GMLAKE_CUDA_HANDLES (default posix_fd): the handle types cuMemCreate asks for.
	t.Logf("handles: %s", d.HandleTypes())
	return d
}

// TestConformanceReal runs the random sequences on the reference device and on the GPU and requires that
// they agree on every call. GMLAKE_CONFORMANCE_SEQUENCES (default 40, of 300 calls) scales it.
func TestConformanceReal(t *testing.T) {
	d := openGPU(t)
	free0, total, _ := d.MemInfo()
	seqs := envInt("GMLAKE_CONFORMANCE_SEQUENCES", 40)
	rep, err := Run(Config{Seed: int64(envInt("GMLAKE_CONFORMANCE_SEED", 1)), Sequences: seqs, Calls: 300}, newModel, d)
	if err != nil {
		t.Fatal(err)
	}
	free1, _, _ := d.MemInfo()
	t.Logf("GPU: granularity %s, free before %s, after %s, of %s", vmm.FormatBytes(d.Granularity()),
		vmm.FormatBytes(free0), vmm.FormatBytes(free1), vmm.FormatBytes(total))
	t.Log(rep.Summary())
	for i, a := range rep.AgainstRules {
		if i == 20 {
			break
		}
		t.Logf("written rule contradicted by both devices: %v", a)
	}
	checkCoverage(t, rep)
	reportDiffs(t, "the reference device differs from the GPU", rep.Differences)
	for _, e := range rep.CleanupErrors {
		t.Errorf("cleanup: %s", e)
	}
}

// TestConformanceRealRules runs the sequences on the GPU alone and checks it against the written rules
// (vmm's package doc): it prints, per rule, what the GPU answered, so a wrong rule is found with its call.
// Contradictions are logged, not failures: the rules are documentation, the GPU is the judge.
func TestConformanceRealRules(t *testing.T) {
	d := openGPU(t)
	seqs := envInt("GMLAKE_CONFORMANCE_SEQUENCES", 40)
	rep, err := Run(Config{Seed: int64(envInt("GMLAKE_CONFORMANCE_SEED", 1)), Sequences: seqs, Calls: 300},
		func(uint64) vmm.Driver { return d }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	seen := map[string]bool{}
	for _, a := range rep.AgainstRules {
		key := a.Op.Rule + a.Ref.Result.Name()
		if !seen[key] {
			seen[key] = true
			t.Logf("the GPU contradicts the written rule: %v", a)
		}
	}
	for _, e := range rep.CleanupErrors {
		t.Errorf("cleanup: %s", e)
	}
	free, total, _ := d.MemInfo()
	t.Logf("GPU free after: %s of %s", vmm.FormatBytes(free), vmm.FormatBytes(total))
}

func integrityCfg(policy string) IntegrityConfig {
	ops := 600
	if long() {
		ops = 5000
	}
	return IntegrityConfig{Policy: policy, Seed: 11, Ops: envInt("GMLAKE_INTEGRITY_OPS", ops), MaxLive: 4 * vmm.GiB}
}

// TestEngineIntegritySelf runs the integrity workload on the simulated device for every policy: each
// allocation keeps its pattern until freed, and nothing leaks.
func TestEngineIntegritySelf(t *testing.T) {
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
			cfg := integrityCfg(p)
			cfg.Ops = min(cfg.Ops, 400)
			rep, err := EngineIntegrity(dev, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
			if len(rep.Corruptions) > 0 {
				t.Errorf("%d corrupted allocations", len(rep.Corruptions))
			}
			if lk := dev.Leaks(); !lk.Empty() {
				t.Errorf("after Close: %v", lk)
			}
		})
	}
}

// TestRDMAPatternsReal runs sim.RDMAPatterns on the GPU: with GPUDirect-RDMA-capable handles exactly the
// poisoning patterns fail their last map with CUDA_ERROR_UNKNOWN (the rule sim.DeviceConfig.RDMAHandles
// models); with the default handles (POSIX fd) none does.
func TestRDMAPatternsReal(t *testing.T) {
	d := openGPU(t)
	if !strings.Contains(d.HandleTypes(), "rdma") {
		t.Skipf("the device does not report GPUDirect RDMA with VMM (%s)", d.HandleTypes())
	}
	for _, spec := range []string{"posix_fd", "rdma", "posix_fd,rdma"} {
		if err := d.RequestHandles(spec); err != nil {
			t.Fatal(err)
		}
		for _, p := range sim.RDMAPatterns {
			last, err := sim.RunRDMAPattern(d, p)
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			want := p.Poisoned && strings.Contains(spec, "rdma")
			if got := errors.Is(last, vmm.UnknownCUDAError); got != want || !want && last != nil {
				t.Errorf("handles %s, %s: last map = %v, want poisoned %v", spec, p.Name, last, want)
			}
		}
	}
	if err := d.RequestHandles("posix_fd"); err != nil {
		t.Fatal(err)
	}
}

// mapCounter counts the Maps its driver fails with CUDA_ERROR_UNKNOWN.
type mapCounter struct {
	vmm.Driver
	unknown int
}

func (d *mapCounter) Map(p vmm.DevicePtr, size uint64, h vmm.Handle, off uint64) error {
	err := d.Driver.Map(p, size, h, off)
	if errors.Is(err, vmm.UnknownCUDAError) {
		d.unknown++
	}
	return err
}

// TestEngineNeverPoisonsRDMAHandles: every policy runs the integrity workload on a model of GPUDirect-RDMA
// capable handles (sim.DeviceConfig.RDMAHandles: the H200's driver never maps a handle again once a mapping
// of it got its first access after another mapping of it was unmapped) without one map failing, so the engine
// may ask for the RDMA flag (cudavmm's GMLAKE_CUDA_HANDLES=posix_fd,rdma).
func TestEngineNeverPoisonsRDMAHandles(t *testing.T) {
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true, RDMAHandles: true})
			d := &mapCounter{Driver: dev}
			cfg := integrityCfg(p)
			cfg.Ops = min(cfg.Ops, 1000)
			rep, err := EngineIntegrity(d, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d.unknown > 0 || len(rep.Corruptions) > 0 {
				t.Errorf("%d maps of poisoned handles, %d corrupted allocations: %v", d.unknown, len(rep.Corruptions), rep)
			}
			if lk := dev.Leaks(); !lk.Empty() {
				t.Errorf("after Close: %v", lk)
			}
		})
	}
}

// TestEngineIntegrityReal runs the same workload on the GPU for every policy (up to 4 GiB live).
func TestEngineIntegrityReal(t *testing.T) {
	d := openGPU(t)
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			free0, _, _ := d.MemInfo()
			rep, err := EngineIntegrity(d, integrityCfg(p))
			if err != nil {
				t.Fatal(err)
			}
			free1, _, _ := d.MemInfo()
			t.Log(rep)
			t.Logf("device free before %s, after Close %s", vmm.FormatBytes(free0), vmm.FormatBytes(free1))
			if len(rep.Corruptions) > 0 {
				t.Errorf("%d corrupted allocations", len(rep.Corruptions))
			}
			if free1+64*vmm.MiB < free0 {
				t.Errorf("the allocator did not return its memory: %s less free after Close", vmm.FormatBytes(free0-free1))
			}
		})
	}
}

// dropper loses every n-th Memset (answers success, writes nothing): a stand-in for a mapping bug.
type dropper struct {
	vmm.Driver
	n, i int
}

func (d *dropper) Memset(p vmm.DevicePtr, size uint64, v byte, s vmm.Stream) error {
	d.i++
	if d.i%d.n == 0 {
		return nil
	}
	return d.Driver.Memset(p, size, v, s)
}

// TestEngineIntegrityCatchesLostWrites: when bytes of an allocation do not hold what was written, the
// integrity run reports it with the allocation and the byte.
func TestEngineIntegrityCatchesLostWrites(t *testing.T) {
	dev := &dropper{Driver: sim.NewDevice(sim.DeviceConfig{SyncStreams: true}), n: 25}
	rep, err := EngineIntegrity(dev, IntegrityConfig{Policy: impl.PolicyGMLake, Seed: 5, Ops: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Corruptions) == 0 {
		t.Fatalf("lost writes went unnoticed: %v", rep)
	}
	t.Log(rep.Corruptions[0])
}
