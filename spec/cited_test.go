package spec

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every invariant SPEC.md names is defined as a constant here and cited by at least one test (by name, in
// a test's comment, name or subtest) in spec, model or harness: no invariant without a check.
func TestEveryInvariantCited(t *testing.T) {
	doc, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\*\*(INV-[A-Z]+)\*\*`)
	var names []string
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		names = append(names, m[1])
	}
	if len(names) < 8 {
		t.Fatalf("SPEC.md defines only %d invariants: %v", len(names), names)
	}
	var tests strings.Builder
	for _, dir := range []string{".", "../model/contract", "../model/sim", "../harness", "../harness/ops"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, f := range files {
			if filepath.Base(f) == "cited_test.go" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tests.Write(b)
		}
	}
	consts, err := os.ReadFile("check.go")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.Contains(string(consts), `"`+n+`"`) {
			t.Errorf("%s is in SPEC.md but has no constant in check.go", n)
		}
		if !strings.Contains(tests.String(), n) {
			t.Errorf("%s is cited by no test", n)
		}
	}
	t.Logf("%d invariants, each cited: %v", len(names), names)
}
