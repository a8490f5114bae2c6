//go:build !gmlake_mutants

package impl

import "fmt"

// SeededBugs reports whether the seeded bugs (Mutation) are compiled in: only with -tags gmlake_mutants,
// so the library users run carries none of them.
const SeededBugs = false

// seeded is constant false without the tag: the compiler drops every seeded branch.
func (a *Allocator) seeded(Mutation) bool { return false }

// checkSeeded refuses seeded bugs asked of an engine built without them, rather than run a test that
// believes a bug is on.
func checkSeeded(m Mutation) error {
	if m != 0 {
		return fmt.Errorf("%w: seeded bugs %v need the build tag gmlake_mutants (go test -tags gmlake_mutants)", ErrBadConfig, m)
	}
	return nil
}
