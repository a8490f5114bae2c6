// Package clib owns the engine as the C library (capi/, libgmlake.so, PyTorch's allocator) sees it: a
// serve.Engine (which holds the memory cap, the synchronise-and-retry on out of memory and the mapping of C
// streams to the simulated device's: the layer every checker of the harness drives) addressed with plain
// integers (pointers and C streams as uintptr), the settings table and its one parser (settings.go: every
// GMLAKE_ environment variable with its unit, range, default and reader; the knobs set by reflection over
// impl.Config; ParseEnv, which libgmlake's engine start and gmlake_check_settings both run; byte counts with
// units), the memory cap (the stricter of the limit and the fraction, and which setting it came from),
// PyTorch's statistics and failure figures, the segment-event hook, and the statistics as JSON. capi is the
// C ABI over it; the Go facade (package gmlake) shares its knob parsing.
package clib
