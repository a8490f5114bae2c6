package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runLifecycle runs testdata/abi_lifecycle.c's mode against the library in dir on the simulated device.
func runLifecycle(t *testing.T, dir, mode string) {
	t.Helper()
	bin := compileC(t, "abi_lifecycle.c", dir)
	cmd := exec.Command(bin, mode)
	cmd.Env = simEnv() // GMLAKE_TEST_PANIC_SIZE=12345 among them
	out, err := hostOutput(cmd)
	if err != nil || !strings.Contains(string(out), "ok "+mode) {
		t.Fatalf("abi_lifecycle %s: %v\n%s", mode, err, out)
	}
}

// Property (issue 36 item 4): the shipped library has no test hooks: with GMLAKE_TEST_PANIC_SIZE=12345 set,
// an allocation of 12345 bytes is an allocation (it panicked inside the library and disabled the engine).
func TestShippedLibraryIgnoresTestPanicSize(t *testing.T) {
	runLifecycle(t, buildLib(t), "panic-size")
}

// Property (issue 36 item 4): ending a capture that never began, or ending one twice, fails with
// GMLAKE_ERR_INVALID (it returned success).
func TestCaptureEndWithoutBeginFails(t *testing.T) {
	runLifecycle(t, buildLib(t), "capture-end")
}

// Property (issue 36 item 4): an event callback cannot close the engine under the call that fired it:
// gmlake_close from the callback is refused, the allocation it fired from returns a live pointer of a live
// engine, and close afterwards reports it (the callback closed the engine, and the call returned a pointer
// of the closed engine).
func TestEventCallbackCannotCloseItsEngine(t *testing.T) {
	runLifecycle(t, buildLib(t), "close-in-cb")
}

// Property (issue 36 item 4): freeing the last block of a released private pool delivers its segment-unmap
// event before gmlake_free returns (it reached the callback only at some later call).
func TestReleasedPoolUnmapDeliveredByTheFree(t *testing.T) {
	runLifecycle(t, buildLib(t), "pool-unmap")
}

// Property (issue 37 item 2): gmlake_ipc_export gives open descriptors of pieces that cover the allocation;
// a short array, a NULL output, an interior, unknown or freed pointer fail with GMLAKE_ERR_INVALID and write
// nothing; the descriptors are closed once empty_cache releases their handles (no descriptor outlives its
// memory).
func TestIPCExportCoversTheAllocationAndClosesWithIt(t *testing.T) {
	runLifecycle(t, buildLib(t), "ipc-export")
}

// Property (issue 36 item 1): the library's dynamic symbols named gmlake_ are exactly the functions gmlake.h
// declares, so a caller reaches the engine only through functions that validate their arguments (the C
// helpers are GMLAKE_HIDDEN, abi_internal.h). The Go exports gmlakeGo* cannot be hidden (cgo exports them);
// they check their pointer arguments themselves.
func TestLibraryExportsOnlyGmlakeH(t *testing.T) {
	nm, err := exec.LookPath("nm")
	if err != nil {
		t.Skip("no nm on this machine")
	}
	dir := buildLib(t)
	out, err := exec.Command(nm, "-D", "--defined-only", filepath.Join(dir, "libgmlake.so")).Output()
	if err != nil {
		t.Fatalf("nm: %v", err)
	}
	exported := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[2], "gmlake_") {
			exported[f[2]] = true
		}
	}
	h, err := os.ReadFile("gmlake.h")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^[a-z_ ]+[ *](gmlake_[a-z_]+)\(`).FindAllStringSubmatch(string(h), -1) {
		declared[m[1]] = true
	}
	for n := range exported {
		if !declared[n] {
			t.Errorf("libgmlake.so exports %s, which gmlake.h does not declare (mark it GMLAKE_HIDDEN)", n)
		}
	}
	for n := range declared {
		if !exported[n] {
			t.Errorf("gmlake.h declares %s, which libgmlake.so does not export", n)
		}
	}
}
