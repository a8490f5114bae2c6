// Package wrap owns the decorators of vmm.Driver: drivers that forward every call to another and add one
// thing. Meter counts the calls by kind (the engine's Stats.DriverCalls) and, when timed, the wall time spent
// in each kind (a replay on the real GPU sets it beside the cost model's); Limit caps the physical bytes
// created through it, exactly as a smaller device would (PyTorch's memory fraction, libgmlake). Each is a
// vmm.Driver safe for concurrent use, forwards results and errors unchanged, and counts or books a failed
// call as the driver it wraps does: a call that failed changed nothing.
//
// The fuzz campaign's ledger (fuzz/ledger.go), which books what succeeded into the simulated device's state
// type, is the one decorator kept beside its user: it is the campaign's judge on the GPU.
package wrap
