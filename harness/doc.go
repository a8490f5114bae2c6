// Package harness checks the engine: the op language (ops.go, text that prints and parses back) and the
// judge's environment (ops_env.go: the contract, spec's invariants and the history invariants after every
// step), rapid state-machine tests against the contract, porcupine linearizability checks, bounded
// exhaustive exploration, the mutation check, and ITF trace conformance with the Quint spec.
//
// Its neighbours own the rest: harness/replay (trace replay and its report), harness/trace and
// harness/snapshot (the trace formats), harness/itf (the ITF decoder), harness/conformance (driver
// conformance and GPU integrity).
package harness
