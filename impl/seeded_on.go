//go:build gmlake_mutants

package impl

// SeededBugs reports whether the seeded bugs (Mutation) are compiled in: only with -tags gmlake_mutants,
// so the library users run carries none of them.
const SeededBugs = true

// seeded reports whether the seeded bug m is switched on (Config.TestOnlyMutations).
func (a *Allocator) seeded(m Mutation) bool { return a.mut&m != 0 }

func checkSeeded(Mutation) error { return nil }
