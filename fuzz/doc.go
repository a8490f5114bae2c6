// Package fuzz hunts allocator bugs at scale: native go test -fuzz targets with a committed seed corpus, and
// the fuzz campaign run by `gmlake fuzz` on the simulated device or a real GPU. It speaks the one op
// language of harness/ops: its targets and its campaign make ops.Programs, run them through ops.Env and
// shrink them with ops.Shrink, so what it saves replays in every other checker and the other way round.
//
// # The fuzz targets
//
// FuzzOps decodes bytes into programs (decode.go: Decode reads the bytes as the choices of the one
// generator, ops.Rules through an ops.ByteSource: every rule and template, sizes skewed toward the
// policies' thresholds (ops.Thresholds), small devices so out-of-memory paths run, misuse as the plain op
// the engine must refuse; and, by a header byte, the swarm's draw of the serving layer and its cap, so half
// the inputs run the engine exactly as libgmlake does, impl/serve) and runs each through every policy in
// ops.Env with the pattern check on (ops.Config.Patterns: a byte of each allocation's id written on the
// device and read back before its free). FuzzOpsOnGPU runs the same programs on the real GPU
// (harness/gpu.Device; skipped without a driver). FuzzTraceRead, FuzzProgramRead and FuzzITF feed
// malformed input to the trace parser, the program parser (ops.Parse) and the ITF decoder (itf.Decode): no
// panic, errors that say where, round trips. The seed corpus in testdata/fuzz/ includes windows cut from
// the real traces (TestGenerateCorpus, through Encode, Decode's inverse); `go test ./fuzz` runs it.
// ReadProgramFile reads a corpus file as the program the target ran, and anything else as ops.ReadFile does.
//
// # The campaign
//
// RunCampaign (campaign.go) runs one goroutine per stream on one engine behind the serving layer, each
// drawing the one generator's ops (campaignRules of ops.Rules, its own stream as home), writing and
// verifying patterns on the device, pausing all workers periodically to check the invariants (on a GPU,
// harness/gpu.Device, against a ledger of the driver calls that succeeded, harness/gpu.Ledger), checking
// for leaks at the end, and logging its ops as ops.Ops. On failure it prints the seed, the last ops and the
// replay command, saves the log as a program, re-runs it single-threaded in ops.Env and shrinks it
// (ops.Shrink); `gmlake fuzz --replay FILE --minimize` does the same by hand. CampaignConfig.Validate is
// the one statement of a campaign's ranges (its errors name the `gmlake fuzz` flag), and a campaign that
// ran its course with no allocation succeeding fails (Summary.Vacuous): it tested nothing. A program file's
// setup line is range-checked where it is parsed, by ops.ParseHeader.
package fuzz
