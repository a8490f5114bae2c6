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

// Measured on the H200 (2026-12-01, driver 580.159.04, commit 6f17e23: the one generator for rapid and
// porcupine, INV-TORCHSTATS and CheckInvariants after every step), `make gpu`, then on the GPU machine, from
// harness/gpu, `gpu.test -test.v -test.run OnGPU -rapid.checks=1000 -gpu.histories=200` (97 s in all):
//
//	rapid, 1 GiB cap      sequences  steps    out of memory  violations  wall
//	gmlake                1000       51548    525            0           27.1 s
//	caching               1000       49146    536            0            4.2 s
//	expandable            1000       51103    608            0            9.2 s
//	gmlake-paper          1000       49788    417            0           35.9 s
//	porcupine, 256 MiB    histories  ops      illegal                    wall
//	gmlake                200        68721    0                           6.8 s
//	caching               200        69376    0                           3.0 s
//	expandable            200        69762    0                           3.0 s
//	gmlake-paper          200        69788    0                           6.9 s
//
// and `gpu-mutants.test -test.run Bite -gpu.bitechecks=150 -gpu.bitehistories=20` (16 s): all 9 seeded bugs
// reachable without fault injection caught on the GPU by rapid (porcupine alone: 4 of 9; the other five
// keep every answer legal and break only state invariants the contract does not see).
