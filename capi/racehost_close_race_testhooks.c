//go:build gmlake_testhooks

// The threaded C program testdata/close_race.c compiled into the test binary (test hooks only), so that its
// calls into the library run in a Go host, where the race detector can watch them (racehost_testhooks.go).
#define main gm_close_race_main
#include "testdata/close_race.c"
#undef main
