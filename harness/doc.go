// Package harness checks the engine with the checkers that speak harness/ops (the op language and its
// executor Env: the contract, spec's invariants and the history invariants after every step): rapid
// state-machine tests against the contract with swarm configurations (ops.DrawSwarm: each sequence draws
// streams, sync, capacity, knobs, a fault schedule over every call kind, actions switched off; sizes at
// every threshold), porcupine linearizability checks, bounded exhaustive exploration (explore.go:
// deduplicated states, deep universes to depth 8, a fault on every call kind), the seeded-bug check (-tags
// gmlake_mutants), and ITF trace conformance with the Quint spec.
//
// Every failure saves an op list that `gmlake fuzz --replay FILE` (or GMLAKE_OPS=FILE go test ./harness
// -run TestOpsFile) replays; docs/verification.md says how for each checker.
//
// Its neighbours own the rest: harness/ops (the op language, Env), harness/mutate (the mutation tool, gmlake mutate), harness/replay (trace
// replay and its report), trace and harness/snapshot (the trace formats), harness/itf (the ITF
// decoder), harness/conformance (driver conformance and GPU integrity).
package harness
