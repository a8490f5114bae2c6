// Package replay owns the measurement side: real training traces (trace, or PyTorch snapshots read
// by harness/snapshot) driven through each policy of the engine on the simulated H200 or a real GPU, and what
// users read of it: peaks, fragmentation, driver calls and driver time (modeled and measured, by call kind),
// PyTorch's own measurements beside ours, the comparison table, JSON and the memory-over-time plot. It is what
// `make run` and `gmlake replay` print. See replay.go for how trace events become engine calls. A trace
// that does not fit the device is a Result too (NoFit: the event and the live bytes where it stopped), and
// results are keyed by their Input (the path), since two inputs may share a trace name.
package replay
