//go:build gmlake_testhooks

// testdata/torch_abi_test.cc compiled into the test binary (test hooks only): see racehost_abi_testhooks.cc.
#define main gm_torch_abi_test_main_cc
#include "testdata/torch_abi_test.cc"
#undef main

extern "C" int gm_torch_abi_test_main(int argc, char **argv) {
	(void)argc;
	(void)argv;
	return gm_torch_abi_test_main_cc();
}
