// Package itf owns decoding the Informal Trace Format (ITF, Apalache ADR-015), the JSON that
// `quint run --out-itf` writes: a trace of states, each a record of Quint values. It knows nothing of the
// allocator; the conformance runner that drives the engine with the spec's traces is harness's
// (itf_test.go), and tla/ writes the traces.
package itf
