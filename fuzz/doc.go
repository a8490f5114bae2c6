// Package fuzz hunts allocator bugs at scale: native go test -fuzz targets with a committed seed corpus, and
// the fuzz campaign run by `gmlake fuzz` on the simulated device or a real GPU.
//
// # Programs
//
// Everything here runs programs: a setup (policy, device capacity, streams) and a sequence of operations
// (ops.go): Alloc, Free, RecordStream, a unit of work on a stream, completing a stream's work, EmptyCache,
// an injected driver failure (sim.Device.FailNth), and misuse the allocator must refuse. A program prints
// as a trace of harness/trace's format with '#!' comment lines for what that format cannot say, so a saved
// program is a trace `gmlake replay` reads, and `gmlake fuzz --replay` (ReadProgram + Exec) runs exactly;
// the same command replays the harness's op lists and histories (rapid, explore, porcupine, findings).
//
// # The executor and the fuzz targets
//
// Exec (exec.go) runs a program single-threaded through one policy on a fresh simulated device, judged after
// every step by ops.Env (the allocator contract, every state invariant of spec/SPEC.md, the history
// invariants INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM) plus the device's data: a pattern written into
// each allocation and read back before its free (pattern.go), and the device's leak report after Close.
//
// FuzzOps decodes bytes into programs (decode.go: sizes from 1 B to 8 GiB skewed toward the policies'
// boundaries, small devices so out-of-memory paths run) and runs each through every policy. FuzzTraceRead,
// FuzzProgramRead and FuzzITF feed malformed input to the trace parser, the program reader and the ITF
// decoder (itf.Decode): no panic, errors that say where, round trips. The seed corpus in
// testdata/fuzz/ includes windows cut from the real traces (TestGenerateCorpus); `go test ./fuzz` runs it.
//
// # The campaign
//
// RunCampaign (campaign.go) runs one goroutine per stream on one allocator, writing and verifying patterns
// on the device, pausing all workers periodically to check the invariants (on a GPU against a ledger of the
// driver calls that succeeded, harness/gpu.Ledger), checking for leaks at the end, and on failure saving the
// operation log as a program, re-running it single-threaded and minimizing it (minimize.go).
package fuzz
