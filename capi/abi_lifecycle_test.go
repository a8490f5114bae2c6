package main

import (
	"os/exec"
	"strings"
	"testing"
)

// runLifecycle runs testdata/abi_lifecycle.c's mode against the library in dir on the simulated device.
func runLifecycle(t *testing.T, dir, mode string) {
	t.Helper()
	bin := compileC(t, "abi_lifecycle.c", dir)
	cmd := exec.Command(bin, mode)
	cmd.Env = simEnv() // GMLAKE_TEST_PANIC_SIZE=12345 among them
	out, err := cmd.CombinedOutput()
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
