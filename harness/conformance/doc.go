// Package conformance owns checking a driver against the simulated one: random call sequences, legal and
// illegal, run on model/sim and on another vmm.Driver (the real GPU through impl/cudavmm), every outcome and
// every byte read back compared (conformance.go); and the engine's integrity on any driver, every allocation
// pattern-filled after Alloc and checked before Free (conformance_engine.go). On the GPU machine its test
// binary (make gpu: bin/conformance.test) runs TestConformanceReal, TestConformanceRealRules and
// TestEngineIntegrityReal; without a driver those skip.
package conformance
