package clib

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// settingsSection is the heading of docs/pytorch.md's section that holds the settings table.
const settingsSection = "## Configuration by environment"

// docsTable returns the Markdown table of docs/pytorch.md's settings section (its lines that start with
// "|"), and the whole file.
func docsTable(t *testing.T) (table, whole string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "pytorch.md"))
	if err != nil {
		t.Fatal(err)
	}
	whole = string(b)
	i := strings.Index(whole, settingsSection+"\n")
	if i < 0 {
		t.Fatalf("docs/pytorch.md has no section %q", settingsSection)
	}
	sec := whole[i+len(settingsSection):]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	var rows []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	return strings.Join(rows, "\n") + "\n", whole
}

// Property: docs/pytorch.md's settings table is the settings table, row for row: every setting a user sets
// is documented with its unit, its values and its default as the parser enforces them, and the docs list no
// setting the table lacks. GMLAKE_UPDATE=1 rewrites the docs' table from the settings table.
func TestDocsStateEverySetting(t *testing.T) {
	got, whole := docsTable(t)
	want := SettingsMarkdown()
	if got == want {
		return
	}
	if os.Getenv("GMLAKE_UPDATE") == "1" {
		whole = strings.Replace(whole, got, want, 1)
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "pytorch.md"), []byte(whole), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote docs/pytorch.md's settings table")
		return
	}
	gotRows, wantRows := map[string]bool{}, map[string]bool{}
	for _, r := range strings.Split(strings.TrimSpace(got), "\n") {
		gotRows[r] = true
	}
	for _, r := range strings.Split(strings.TrimSpace(want), "\n") {
		wantRows[r] = true
		if !gotRows[r] {
			t.Errorf("docs/pytorch.md (%s) lacks the row\n%s", settingsSection, r)
		}
	}
	for r := range gotRows {
		if !wantRows[r] {
			t.Errorf("docs/pytorch.md (%s) has a row the settings table does not give:\n%s", settingsSection, r)
		}
	}
	if !t.Failed() {
		t.Errorf("docs/pytorch.md's settings table has the rows in another order; want\n%s", want)
	}
	t.Log("GMLAKE_UPDATE=1 go test -run TestDocsStateEverySetting ./impl/clib rewrites the docs' table")
}

// Property: every GMLAKE_ variable the user-facing docs name (README, docs/pytorch.md, the C header,
// gmlake_torch's source) is in the settings table (GMLAKE_<KNOB> stands for the knobs; the C header's
// constants, GMLAKE_ERR_OOM and the like, are not variables).
func TestEveryDocumentedVariableIsInTheTable(t *testing.T) {
	name := regexp.MustCompile(`\bGMLAKE(_[A-Z0-9_]*[A-Z0-9])?\b`)
	header, err := os.ReadFile(filepath.Join("..", "..", "capi", "gmlake.h"))
	if err != nil {
		t.Fatal(err)
	}
	constant := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b(GMLAKE_[A-Z0-9_]+)\s*=|#define\s+(GMLAKE_[A-Z0-9_]+)`).FindAllStringSubmatch(string(header), -1) {
		m[1] += m[2]
		constant[m[1]] = true
	}
	files := []string{"README.md", "docs/pytorch.md", "capi/gmlake.h"}
	py, _ := filepath.Glob(filepath.Join("..", "..", "python", "gmlake_torch", "*.py"))
	for _, p := range py {
		files = append(files, strings.TrimPrefix(filepath.ToSlash(p), "../../"))
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			seen++
			if _, ok := LookupSetting(n); !ok && !constant[n] {
				t.Errorf("%s names %s, which is not in the settings table (impl/clib/settings.go)", f, n)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d GMLAKE_ names found in %v: is the pattern right?", seen, files)
	}
}
