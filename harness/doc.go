// Package harness checks the engine: the op language (ops.go, text that prints and parses back) and the
// judge's environment (ops_env.go: the contract, spec's invariants and the history invariants after every
// step, INV-TORCH's PyTorch decisions, INV-NOLEAK with the device's events), rapid state-machine tests
// against the contract with swarm configurations (swarm.go: each sequence draws streams, sync, capacity,
// knobs, a fault schedule over every call kind, actions switched off; sizes at every threshold), porcupine
// linearizability checks, bounded exhaustive exploration (explore.go: deduplicated states, deep universes
// to depth 8, a fault on every call kind), the seeded-bug check (-tags gmlake_mutants), and ITF trace
// conformance with the Quint spec.
//
// Every failure saves an op list that `gmlake fuzz --replay FILE` (or GMLAKE_OPS=FILE go test ./harness
// -run TestOpsFile) replays; docs/verification.md says how for each checker.
//
// Its neighbours own the rest: harness/mutate (the mutation tool, gmlake mutate), harness/replay (trace
// replay and its report), harness/trace and harness/snapshot (the trace formats), harness/itf (the ITF
// decoder), harness/conformance (driver conformance and GPU integrity).
package harness
