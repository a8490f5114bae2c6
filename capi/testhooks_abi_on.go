//go:build gmlake_testhooks

package main

// Test hooks of the C ABI, compiled only with -tags gmlake_testhooks (capi's tests build such a library for
// the checks that need one; `make capi` and the wheel never do).

import (
	"fmt"
	"strconv"
	"sync/atomic"
)

// testHooksBuilt says this library has the test hooks (gmlake_stats_json's "test_hooks").
const testHooksBuilt = true

// testPanicSize, when nonzero, makes an allocation of exactly that many bytes panic inside the library
// (GMLAKE_TEST_PANIC_SIZE), so that tests can check that a panic never crosses into C. Set when an engine
// starts; read without a lock after.
var testPanicSize atomic.Uint64

// loadTestHooks reads the hooks' settings; called when an engine starts.
func loadTestHooks() {
	if v := getenv("GMLAKE_TEST_PANIC_SIZE"); v != "" {
		n, _ := strconv.ParseUint(v, 10, 64)
		testPanicSize.Store(n)
	}
}

// testHookAlloc panics for an allocation of GMLAKE_TEST_PANIC_SIZE bytes.
// testHookAllocArmed reports whether testHookAlloc panics for size (the host cache then takes its two-call path,
// whose replay is done before the allocation's panic).
func testHookAllocArmed(size uint64) bool { return size == testPanicSize.Load() }

func testHookAlloc(size uint64) {
	if size == testPanicSize.Load() {
		panic(fmt.Sprintf("seeded panic: GMLAKE_TEST_PANIC_SIZE=%d", size))
	}
}

// testHookCheck panics inside gmlake_check_settings when the environment it checks holds
// GMLAKE_TEST_PANIC_SIZE=-1 (a value the setting itself refuses), so that a test can see the check's
// recovered panic return a negative result, not a verdict.
func testHookCheck(env []string) {
	for _, kv := range env {
		if kv == "GMLAKE_TEST_PANIC_SIZE=-1" {
			panic("seeded panic in gmlake_check_settings: GMLAKE_TEST_PANIC_SIZE=-1")
		}
	}
}
