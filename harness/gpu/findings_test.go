package gpu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmlake/gmlake/harness/gpu"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/vmm"
)

// findingsDir holds the findings' golden histories (spec/FINDINGS.md; harness.TestFindings).
var findingsDir = filepath.Join("..", "testdata", "findings")

// runFindingsOn replays every closed finding whose program a device without fault injection can run (the
// 2 MiB granularity of an H200; a fault op or a seeded mutation needs the simulated device and is left
// out, as are open findings) on the devices open makes, one per program under its capacity (at most
// 1 GiB). Each must run without a violation: the bug it records stays fixed on that device too. The
// outcomes may differ from the golden history (addresses and timing are the device's), the judgement
// may not. It returns the programs run and their ops.
func runFindingsOn(t *testing.T, open func(capacity uint64) (ops.Device, error)) (programs, steps int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(findingsDir, "*.history"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no findings in %s (%v)", findingsDir, err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, open := ops.LeadingComments(string(data)); open {
			continue
		}
		p, err := ops.Parse(string(data), path)
		if err != nil {
			t.Fatal(err)
		}
		if why := needsSimulatedDevice(p); why != "" {
			t.Logf("%s: left out (%s)", filepath.Base(path), why)
			continue
		}
		capacity := min(p.Cfg.Capacity, vmm.GiB)
		d, err := open(capacity)
		if err != nil {
			t.Fatalf("opening the device: %v", err)
		}
		cfg := p.Cfg
		cfg.Capacity, cfg.Device = capacity, d
		i, vs, _, err := ops.Run(cfg, p.Ops)
		if c, ok := d.(interface{ Close() error }); ok {
			if cerr := c.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if i >= 0 {
			t.Errorf("%s: step %d (%v) violates %v on this device (on the simulated device: gmlake fuzz --replay %s --minimize)",
				filepath.Base(path), i, p.Ops[i], vs, path)
			continue
		}
		programs++
		steps += len(p.Ops)
	}
	return programs, steps
}

// needsSimulatedDevice says why program p cannot run on a device without fault injection, or "".
func needsSimulatedDevice(p *ops.Program) string {
	switch {
	case p.Cfg.Granularity != 0 && p.Cfg.Granularity != 2*vmm.MiB:
		return "granularity " + vmm.FormatBytes(p.Cfg.Granularity)
	case p.Cfg.Mutations != 0:
		return "a seeded mutation"
	}
	for _, op := range p.Ops {
		if op.Kind == ops.OpFail {
			return "an injected fault: " + op.String()
		}
	}
	return ""
}

// TestFindingsOnGPU: the findings stay fixed on the real driver (spec/FINDINGS.md; among them F6, found
// by FuzzOpsOnGPU on the H200 and closed by the out-of-memory path's wait, cuStreamSynchronize here).
func TestFindingsOnGPU(t *testing.T) {
	requireGPU(t)
	start := time.Now()
	n, steps := runFindingsOn(t, func(c uint64) (ops.Device, error) { return gpu.Open(gpu.Config{Capacity: c}) })
	f := figures{Checker: "findings", Policy: "as each says", Sequences: int64(n), Steps: int64(steps), Seconds: time.Since(start).Seconds(), Device: deviceName()}
	if t.Failed() {
		f.Violations = 1
	}
	report(t, f)
}

// TestFindingsOnTheGPUPath: the same replay through the GPU's path (a Ledger for the engine's driver) on the
// simulated device, so a finding that fails on the GPU fails there for the GPU's reasons; and it runs a
// good share of them (a filter that leaves everything out would make the GPU test pass on nothing).
func TestFindingsOnTheGPUPath(t *testing.T) {
	n, _ := runFindingsOn(t, func(c uint64) (ops.Device, error) { return openLedgerSim(c)() })
	files, _ := filepath.Glob(filepath.Join(findingsDir, "*.history"))
	if 2*n < len(files) {
		t.Errorf("ran %d of %d findings on the GPU's path: the filter leaves out more than half", n, len(files))
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".history"))
	}
	t.Logf("ran %d of %d findings (%s)", n, len(files), strings.Join(names, " "))
}
