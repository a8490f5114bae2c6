package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Property: the torch engine ABI (gmlake.h) gives PyTorch's statistics consistent with the allocations made
// (per small/large pool, peaks, resets), out of memory with its figures (a request larger than the device
// included), cacheInfo, getBaseAllocation and the memory fraction, on the simulated device (see
// testdata/torch_abi_test.cc for each check).
func TestTorchABI(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	dir := buildLib(t)
	bin := filepath.Join(t.TempDir(), "torch_abi_test")
	cmd := exec.Command(cxx, "-O1", "-o", bin, filepath.Join("testdata", "torch_abi_test.cc"), "-I.", "-L"+dir,
		"-lgmlake", "-Wl,-rpath,"+dir, "-lpthread")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling torch_abi_test.cc: %v\n%s", err, out)
	}
	run := exec.Command(bin)
	run.Env = simEnv()
	out, err := hostOutput(run)
	if err != nil || !strings.Contains(string(out), " passed, 0 failed") {
		t.Fatalf("torch_abi_test: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
