// Package fuzz holds the native go test -fuzz targets (operation sequences for every policy, the trace and
// ITF parsers) with their seed corpus, and the fuzz campaign run by `gmlake fuzz` on the simulated device
// or a real GPU.
package fuzz
