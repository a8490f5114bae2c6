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
