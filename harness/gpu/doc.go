// Package gpu owns the real GPU as the checkers' device: Device, the device side of the op executor on
// impl/cudavmm (real streams whose work a test holds back and releases, as the simulated device's Launch and
// Complete; a Ledger of what this process holds, standing in for the simulated device's state), and the
// GPU-only tests that run rapid's and porcupine's generated ops through the serving layer (impl/serve: what
// libgmlake runs) on the H200, judged by the same contract and invariants as on the simulated device.
// Without a CUDA driver the tests skip.
//
// The stream clock: each stream has a 32-bit gate word in device memory. Launch(s) queues on s a wait for
// the word to reach the unit's number (cuStreamWaitValue32), then real work (a memset of a scratch buffer);
// Complete(s) writes the word from a stream of its own (cuStreamWriteValue32) and synchronises s. So work
// on a stream completes exactly when the test says, never earlier, and the engine's events recorded behind
// it complete then too: the contract's clock is the device's, as on the simulated device. The streams are
// non-blocking (they do not synchronise with the legacy default stream), so holding one back holds back no
// other.
package gpu

// Measured on the H200 (2026-12-01, driver 580.159.04, commit 20786b0), `make gpu`, then on the GPU machine
// `bin/gpu.test -test.v -test.run OnGPU -rapid.checks=1000 -gpu.histories=200` (90 s in all):
//
//	rapid, 1 GiB cap      sequences  steps    out of memory  violations  wall
//	gmlake                1000       32708    401            0           22.5 s
//	caching               1000       35203    489            0            2.8 s
//	expandable            1000       33945    493            0            6.2 s
//	gmlake-paper          1000       33225    513            0           36.4 s
//	porcupine, 256 MiB    histories  ops      illegal                    wall
//	each policy           200        59120-60932  0                      2.9-8.1 s (240816 ops in all)
//
// and `bin/gpu-mutants.test -test.run Bite -gpu.bitechecks=60 -gpu.bitehistories=10` (10 s): 8 of the 9
// seeded bugs reachable without fault injection caught on the GPU (wrong-best-fit escaped 60 sequences that
// run; the run before caught it with 100, INV-BESTFIT).
