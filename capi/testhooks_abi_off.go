//go:build !gmlake_testhooks

package main

// The shipped library has no test hooks: GMLAKE_TEST_PANIC_SIZE means nothing to it (testhooks_abi_on.go is
// the -tags gmlake_testhooks build).

const testHooksBuilt = false

func loadTestHooks() {}

func testHookAlloc(uint64) {}

func testHookAllocArmed(uint64) bool { return false }

func testHookCheck([]string) {}
