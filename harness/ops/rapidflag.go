package ops

import (
	"flag"
	"os"
	"strings"
)

// SetRapidDefault sets rapid's -rapid.<name> flag to value for a test, unless the command line or the
// RAPID_<NAME> environment variable chose it (so a failure's printed -rapid.seed still replays it); it
// returns a func that restores the flag. The checkers' tests use it to pin a fixed seed and budget in make test.
func SetRapidDefault(name, value string) func() {
	f := flag.Lookup("rapid." + name)
	if f == nil || os.Getenv("RAPID_"+strings.ToUpper(name)) != "" {
		return func() {}
	}
	set := false
	flag.Visit(func(g *flag.Flag) { set = set || g.Name == "rapid."+name })
	if set {
		return func() {}
	}
	old := f.Value.String()
	_ = f.Value.Set(value)
	return func() { _ = f.Value.Set(old) }
}
