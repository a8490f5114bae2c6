// Package snapshot owns reading PyTorch's memory snapshots (the pickle torch.cuda.memory._dump_snapshot
// writes) into a trace Trace, and LoadTrace, which opens either kind of file by its content.
//
// It is apart from trace on purpose: trace is the project's own text format, a pure package that
// libgmlake links to write GMLAKE_TRACE; the pickle reader (a subset of Python's pickle machine) is only
// ever needed to replay, so the library does not carry it.
package snapshot
