// Package spec states the allocator's contract once: SPEC.md in words, with numbered invariants (INV-...),
// and Go predicates over a snapshot of the allocator plus the device that every test and fuzzer calls.
// It imports only vmm, so the engine cannot see its judge.
//
// The pieces:
//   - View: the allocator's state (impl.Snapshot) beside the device's (sim.Device.State()), built by
//     ops.ViewOf. Device.Backing resolves a virtual range through the device's mappings into physical
//     byte ranges, the ground truth every aliasing check uses.
//   - Check(View): every state invariant (INV-NOOVERLAP, INV-MAPPED, INV-NOALIAS, INV-REFCOUNT, INV-STATS,
//     INV-MIRROR, INV-BLOCKS, INV-NOLEAK), one exported predicate each; a Violation names its INV.
//   - CheckBestFit(before, after, ...): INV-BESTFIT, a step predicate.
//   - History: what the history invariants need (the stream clock the test drives, and marks on physical
//     bytes freed under pending work): INV-STREAM (OnAlloc), INV-RELEASESAFE (CheckRelease), and, with an
//     OOMRule per policy, INV-NOSPURIOUSOOM (CheckNoSpuriousOOM).
//
// FINDINGS.md lists what the checkers found in the engine, with reproducers.
package spec
