// Package ops is the one operation language of the checkers: operations as values that print as text
// and parse back (op.go), the setup header and whole op lists, the executor Env that runs them through the
// engine on the reference device and judges every step (env.go: the allocator contract, the spec's state
// invariants, the history invariants), the View the judge looks at (view.go: ViewOf), the shrinker
// (shrink.go) and the one generator (gen.go: named, weighted rules over a Source of choices, rapid's or a
// seeded math/rand's; swarm.go: the swarm configuration draw and the threshold sizes).
//
// rapid, exploration, porcupine (harness), the fuzz targets and the fuzz campaign (fuzz), the ITF runner
// and `gmlake fuzz --replay` all speak it, so a reproducer saved by any of them replays in every other.
package ops
