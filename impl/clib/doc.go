// Package clib owns the engine as the C library (capi/, libgmlake.so, PyTorch's allocator) sees it: an
// impl.Allocator on one device addressed with plain integers (pointers and C streams as uintptr), knobs
// given as text (environment variables) set by reflection over impl.Config, byte counts with units, the
// memory-fraction cap, synchronising the streams and retrying once on out of memory (as PyTorch does), the
// mapping of C streams to the simulated device's streams, and the statistics as JSON. capi is the C ABI over
// it; the Go facade (package gmlake) shares its knob parsing.
package clib
