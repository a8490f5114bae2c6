// Package golden owns the golden files of the project's tests: an output compared byte for byte with a file
// committed beside the test (testdata/), and rewritten from the code's output under the test binary's -update
// flag, after a person has looked at the new output. Tests only: nothing in the product imports it.
package golden

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from what the code writes now")

// Check fails t unless got equals the golden file at path, saying from which byte they differ, both sides
// around it, and rewrite: the command that rewrites the file (go test ... -update) once the change is meant.
// Under -update it writes got to path instead.
func Check(t testing.TB, got []byte, path, rewrite string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it: %s)", err, rewrite)
	}
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Fatalf("the output differs from %s from byte %d (%d bytes, want %d): %q, want %q; if the change is meant, "+
		"look at the new output and rewrite the golden file: %s", path, i, len(got), len(want), around(got, i),
		around(want, i), rewrite)
}

func around(b []byte, i int) string {
	return string(b[max(0, i-40):min(len(b), i+40)])
}
