// Package snapshot owns reading PyTorch's memory snapshots (the pickle torch.cuda.memory._dump_snapshot
// writes) into a trace Trace, and LoadTrace, which opens either kind of file by its content.
//
// It is apart from trace on purpose: trace is the project's own text format, a pure package that
// libgmlake links to write GMLAKE_TRACE; the pickle reader (a subset of Python's pickle machine) is only
// ever needed to replay, so the library does not carry it.
//
// The pickle machine (prune.go) builds only what the conversion reads, into gopickle's value types: a dict
// keeps the keys of a snapshot's root and entries, the memo what is fetched again, so reading takes memory
// proportional to the input, not to the stack frames it records (TestReadSnapshotMemoryIsBoundedByItsSize).
// It imports and calls nothing. Its errors say Python's kinds of value, never Go's types.
package snapshot
