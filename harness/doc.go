// Package harness checks and measures the engine: rapid state-machine tests against the contract model,
// porcupine linearizability checks, bounded exhaustive exploration, the mutation check, ITF trace
// conformance with the Quint spec, driver conformance between the simulated and the real device, and the
// replay of real training traces through every policy.
package harness
