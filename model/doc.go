// Package model is the reference semantics: the simulated GPU (a vmm.Driver that enforces every rule of
// notes/cuda-vmm.md with the error CUDA gives, with shadow contents, controllable streams, fault injection,
// counters and modeled time) and the allocator contract, a pure state machine of what any correct
// allocator must do, used as the oracle by the harness and the fuzzers. Slow and obviously right.
package model
