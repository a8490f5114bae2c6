//go:build gmlake_testhooks

// The threaded C++ programs testdata/abi_test.cc and testdata/torch_abi_test.cc compiled into the test binary
// (test hooks only), so that their calls into the library run in a Go host, where the race detector can watch
// them (racehost_testhooks.go). Each is its own program: one per process (the test re-executes itself).
#define main gm_abi_test_main_cc
#include "testdata/abi_test.cc"
#undef main

extern "C" int gm_abi_test_main(int argc, char **argv) { return gm_abi_test_main_cc(argc, argv); }
