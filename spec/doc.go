// Package spec states the allocator's contract once: SPEC.md in words, with numbered invariants (INV-...),
// and Go predicates over a snapshot of the allocator plus the device that every test and fuzzer calls.
// It imports only vmm, so the engine cannot see its judge.
package spec
