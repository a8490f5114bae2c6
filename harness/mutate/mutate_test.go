package mutate

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const sampleSrc = `package p

func f(a, b int, ok bool) (int, error) {
	var err error
	if a < b && ok {
		a++
	} else {
		b = a + 1
	}
	g()
	if !ok {
		return 0, err
	}
	return a * b, nil
}

func g() {}
`

// Property: the generator makes every kind of mutant it documents from a function that has each
// construct, each a single edit that still parses, with a unique key.
func TestGenerateEveryKind(t *testing.T) {
	ms, err := generateFile("p/p.go", []byte(sampleSrc))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	keys := map[string]bool{}
	for _, m := range ms {
		kinds[m.Kind]++
		if keys[m.Key()] {
			t.Errorf("duplicate key %q", m.Key())
		}
		keys[m.Key()] = true
		out := string(m.Apply([]byte(sampleSrc)))
		if out == sampleSrc {
			t.Errorf("%v changes nothing", m)
		}
		if _, err := generateFile("p/p.go", []byte(out)); err != nil {
			t.Errorf("%v does not parse: %v", m, err)
		}
	}
	for _, k := range []string{"cmp-boundary", "cmp-negate", "logic", "arith", "const", "bool", "drop", "cond-negate", "swap-branches", "return-nil"} {
		if kinds[k] == 0 && k != "bool" {
			t.Errorf("no %s mutant in %v", k, kinds)
		}
	}
	// The swap exchanges the two blocks.
	for _, m := range ms {
		if m.Kind == "swap-branches" {
			out := string(m.Apply([]byte(sampleSrc)))
			if !strings.Contains(out, "{\n\t\tb = a + 1\n\t} else {\n\t\ta++\n\t}") {
				t.Errorf("swap-branches gave:\n%s", out)
			}
		}
	}
}

// Property: an operator swap is the expression with its operator swapped, whatever the precedences: the
// outer || of `a || b || c` made && groups as (a || b) && c, not a || (b && c) (a textual swap's reading:
// for the engine's `!paper || piece == 0 || piece >= size` an equivalent mutant), the inner && of
// `a && b && c` made || as (a || b) && c, not a || (b && c), and & made | keeps its operands too; a swap
// within one precedence (+ to -) stays a one-token edit. Each mutant's key still names the operator.
func TestOperatorSwapKeepsTheOperandsGrouping(t *testing.T) {
	src := "package p\n\nfunc f(a, b, c bool, x, y, z int) (bool, bool) {\n\tif a && b && c {\n\t\treturn a, true\n\t}\n\treturn a || b || c, x & y == z + 1\n}\n"
	ms, err := generateFile("p/p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"return ((a || b) && (c)), x":          "the outer ||",
		"return ((a) && (b)) || c, x":          "the inner ||",
		"return a || b || c, ((x) | (y)) == z": "&",
		"return a || b || c, x & y == z - 1":   "+",
		"if ((a) || (b)) && c {":               "the inner && of a wider &&",
	}
	found := map[string]bool{}
	for _, m := range ms {
		out := string(m.Apply([]byte(src)))
		for w := range want {
			if (m.Kind == "logic" || m.Kind == "arith") && strings.Contains(out, w) {
				found[w] = true
				if m.Orig != "||" && m.Orig != "&&" && m.Orig != "&" && m.Orig != "+" {
					t.Errorf("%v: Orig %q, want the operator", m, m.Orig)
				}
			}
		}
		if _, err := generateFile("p/p.go", []byte(out)); err != nil {
			t.Errorf("%v does not parse: %v", m, err)
		}
	}
	for w, what := range want {
		if !found[w] {
			t.Errorf("no mutant of %s gives %q", what, w)
		}
	}
}

// Property: a sample is a seeded choice: the same seed gives the same keys, another seed others, and
// Select finds them again by key (and reports keys whose code is gone).
func TestSampleAndSelect(t *testing.T) {
	ms, _ := generateFile("p/p.go", []byte(sampleSrc))
	a, b := Sample(ms, 5, 7), Sample(ms, 5, 7)
	for i := range a {
		if a[i].Key() != b[i].Key() {
			t.Fatalf("seed 7 drew %v then %v", a[i], b[i])
		}
	}
	keys, err := os.CreateTemp(t.TempDir(), "keys")
	if err != nil {
		t.Fatal(err)
	}
	keys.Write(FormatKeys("test", a))
	keys.WriteString("p.go f drop 99 gone()\n")
	keys.Close()
	ks, err := ReadKeys(keys.Name())
	if err != nil {
		t.Fatal(err)
	}
	found, gone := Select(ms, ks)
	if len(found) != len(a) || len(gone) != 1 {
		t.Fatalf("found %d of %d, gone %v", len(found), len(a), gone)
	}
}

// Property (make test's fixed sample): every mutant of testdata/ci.txt is killed by the unit tests (of the
// mutant's folder) or rapid.
// Each is compiled through an overlay and run against the checkers until one kills it; a survivor fails the
// test and names itself. Replay one: gmlake mutate --keys harness/mutate/testdata/ci.txt.
func TestCISampleKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary per mutant")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	root, _ := filepath.Abs("../..")
	keys, err := ReadKeys("testdata/ci.txt")
	if err != nil {
		t.Fatal(err)
	}
	all, err := GenerateDirs(root, KeyDirs(keys), Skip)
	if err != nil {
		t.Fatal(err)
	}
	ms, gone := Select(all, keys)
	for _, g := range gone {
		t.Errorf("the sample names a mutant whose code changed (pick another with gmlake mutate --list): %s", g)
	}
	var cs []Checker
	for _, c := range Checkers {
		if c.Name == "unit" || c.Name == "rapid" {
			cs = append(cs, c)
		}
	}
	// The verdict must not depend on the machine's speed (CI is a loaded 2-core machine): a checker's run
	// may take ten minutes before it counts as hanging (and a timeout is confirmed once with twice that),
	// and the whole run stops a minute before go test's own deadline, which then reports the sample as
	// truncated (a skip; the mutants judged so far still judged, a survivor among them still fails) instead
	// of failing the package by a timeout panic.
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
		defer cancel()
	}
	var log strings.Builder
	rep, err := Run(ctx, ms, Options{Root: root, Checkers: cs, FirstKill: true, Timeout: 10 * time.Minute, Log: &log})
	t.Log(log.String())
	truncated := errors.Is(err, context.DeadlineExceeded)
	if err != nil && !truncated {
		t.Fatal(err)
	}
	judged := 0
	if rep != nil {
		judged = len(rep.Outcomes)
		for _, o := range rep.Outcomes {
			switch {
			case o.Invalid != "":
				t.Errorf("%v does not compile any more: %s", o.Mutant, o.Invalid)
			case !o.Killed():
				t.Errorf("SURVIVED: %v (gmlake mutate --keys harness/mutate/testdata/ci.txt)", o.Mutant)
			case len(o.TimedOut) == len(o.KilledBy):
				t.Logf("killed by timeouts alone (%s, 10 min then 20 min): %v", strings.Join(o.TimedOut, ","), o.Mutant)
			}
		}
	}
	if truncated {
		t.Skipf("TRUNCATED: go test's deadline came after %d of %d mutants; the rest were not judged "+
			"(run with a longer -timeout, or gmlake mutate --keys harness/mutate/testdata/ci.txt)", judged, len(ms))
	}
}

// Property: the judgement list (testdata/equivalent.txt) parses, every verdict has a reason, and every
// judgement still names a mutant of impl/ (a judgement of code that changed must be judged again).
func TestJudgementsNameLiveMutants(t *testing.T) {
	js, err := ReadJudgements("testdata/equivalent.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(js) == 0 {
		t.Fatal("the judgement list is empty")
	}
	keys := make([]string, len(js))
	for i, j := range js {
		keys[i] = j.Key
	}
	all, err := GenerateDirs("../..", KeyDirs(keys), Skip)
	if err != nil {
		t.Fatal(err)
	}
	by, stale := Judge(all, js)
	for _, j := range stale {
		t.Errorf("judgement of a mutant whose code changed (judge it again: gmlake mutate --list): %s", j.Key)
	}
	if len(by) != len(js)-len(stale) {
		t.Errorf("%d judgements matched %d mutants", len(js)-len(stale), len(by))
	}
}

// Property: a judged-equivalent survivor leaves the score's denominator, a judged mutant that is killed
// counts as killed (and prints as misjudged), and killed-by-two counts only mutants two checkers killed.
func TestScoreLeavesOutJudgedEquivalents(t *testing.T) {
	ms, _ := generateFile("p/p.go", []byte(sampleSrc))
	eq := Judgement{Key: ms[0].Key(), Verdict: VerdictEquivalent, Reason: "test"}
	open := Judgement{Key: ms[3].Key(), Verdict: "open", Reason: "test"}
	rep := &Report{Checkers: []string{"a", "b"}, Outcomes: []Outcome{
		{Mutant: ms[0]},                          // survivor judged equivalent
		{Mutant: ms[1], KilledBy: []string{"a"}}, // killed once
		{Mutant: ms[2], KilledBy: []string{"a", "b"}},
		{Mutant: ms[3]}, // survivor judged open
		{Mutant: ms[4], Invalid: "does not compile"},
		{Mutant: ms[5], KilledBy: []string{"b"}}, // judged equivalent, but killed
	}}
	rep.Judge(map[string]Judgement{ms[0].Key(): eq, ms[3].Key(): open, ms[5].Key(): {Key: ms[5].Key(), Verdict: VerdictEquivalent, Reason: "wrong"}})
	var out strings.Builder
	s := rep.Summary(&out)
	if s.Valid != 5 || s.Equivalent != 1 || s.NonEquivalent() != 4 || s.Killed != 3 || s.Twice != 1 || s.Survived != 1 {
		t.Fatalf("score %+v\n%s", s, out.String())
	}
	for _, want := range []string{"misjudged: ", "equivalent: ", "[open: test]", "killed by one only (a)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// Property: every committed sample (testdata/*.txt but the judgement list) still reads as it was saved: a
// bare file name is a file of impl/ (the keys saved before other folders were mutated keep their meaning),
// a key with a folder names a folder that has mutants, and most of each file's keys still name a mutant
// (a before/after sample whose code moved on: some sites are gone, which the tool reports as gone; one whose
// code was rewritten is marked retired in its header).
func TestKeyFilesNameLiveMutants(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no key files: %v", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "equivalent.txt" {
			continue
		}
		keys, err := ReadKeys(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if len(strings.Fields(k)) < 5 {
				t.Errorf("%s: %q is not a key (file function kind n text)", f, k)
			}
		}
		all, err := GenerateDirs("../..", KeyDirs(keys), Skip)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		found, gone := Select(all, keys)
		// A sample of code since rewritten says so in its header ("retired: why"): a record of its session,
		// no longer a sample to run again.
		if hdr, _ := ReadKeyHeader(f); strings.Contains(hdr, "\nretired: ") || strings.HasPrefix(hdr, "retired: ") {
			if len(found) == len(keys) {
				t.Errorf("%s: retired, but every key still names a mutant: drop the retired line", f)
			}
			continue
		}
		if len(keys) == 0 || 4*len(found) < 3*len(keys) {
			t.Errorf("%s: %d of %d keys name a mutant (gone: %v)", f, len(found), len(keys), gone)
		}
		for _, m := range found {
			if d := KeyDir(m.Key()); d != m.Dir() {
				t.Errorf("%s: %v's key says folder %s", f, m, d)
			}
		}
	}
}

// Property: the keys of impl/'s mutants carry the bare file name, those of other folders the folder, and
// a key's folder is the mutant's; Select finds mutants of several folders by key.
func TestKeysNameTheirFolder(t *testing.T) {
	ms, err := GenerateDirs("../..", []string{"impl", "impl/serve", "impl"}, Skip)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var pick []Mutant
	for _, m := range ms {
		k := m.Key()
		if KeyDir(k) != m.Dir() || strings.HasPrefix(k, "impl/") != (m.Dir() != DefaultDir) {
			t.Fatalf("%v: key %q, folder %s", m, k, m.Dir())
		}
		if !seen[m.Dir()] {
			seen[m.Dir()] = true
			pick = append(pick, m)
		}
		if seen[k] {
			t.Fatalf("impl named twice, or two mutants keyed %q", k)
		}
		seen[k] = true
	}
	if len(pick) != 2 {
		t.Fatalf("mutants of %d folders, want impl and impl/serve", len(pick))
	}
	found, gone := Select(ms, []string{pick[0].Key(), pick[1].Key()})
	if len(found) != 2 || len(gone) != 0 || found[1].File != pick[1].File {
		t.Fatalf("Select found %v, gone %v", found, gone)
	}
}

// Property: unit is the mutated folder's own tests, and a checker runs only on the folders its tests call.
func TestCheckersForFolder(t *testing.T) {
	for _, c := range []struct {
		dir         string
		unit        string
		runs, skips []string
	}{
		{"impl", "./impl", []string{"rapid", "itf", "replay", "integrity", "facade", "abi"}, []string{"capi", "python", "recorder", "cli"}},
		{"impl/serve", "./impl/serve", []string{"rapid", "porcupine", "explore", "findings", "fuzz", "campaign", "clib", "abi"}, []string{"itf", "integrity", "replay", "capi", "python"}},
		{"impl/clib", "./impl/clib", []string{"capi", "abi", "python", "settings", "facade", "clib"}, []string{"rapid", "fuzz", "itf", "recorder"}},
		{"trace", "./trace", []string{"replay", "recorder", "tracelines", "cli"}, []string{"rapid", "capi", "abi", "ops", "clib"}},
		{"harness/replay", "./harness/replay", []string{"cli"}, []string{"replay", "rapid", "capi"}},
		// capi has no unit checker: its tests are the abi, python and capi checkers, which run apart.
		{"capi", "", []string{"abi", "python", "capi"}, []string{"unit", "recorder", "rapid", "facade"}},
	} {
		for _, ch := range Checkers {
			rc, ok := ch.For(c.dir)
			switch {
			case ch.Name == "unit" && c.unit != "" && (!ok || rc.Pkg != c.unit):
				t.Errorf("unit on %s: %v %+v, want package %s", c.dir, ok, rc, c.unit)
			case slices.Contains(c.runs, ch.Name) && !ok, slices.Contains(c.skips, ch.Name) && ok:
				t.Errorf("%s on %s: reaches=%v", ch.Name, c.dir, ok)
			}
		}
	}
}

// Property: a kill that is only a timeout is counted apart, and so is a kill by two that rests on one.
func TestScoreCountsTimeoutKillsApart(t *testing.T) {
	ms, _ := generateFile("p/p.go", []byte(sampleSrc))
	rep := &Report{Checkers: []string{"a", "b", "c"}, Outcomes: []Outcome{
		{Mutant: ms[0], KilledBy: []string{"a"}, TimedOut: []string{"a"}},            // a timeout only
		{Mutant: ms[1], KilledBy: []string{"a", "b"}, TimedOut: []string{"b"}},       // two, one of them a timeout
		{Mutant: ms[2], KilledBy: []string{"a", "b", "c"}, TimedOut: []string{"c"}},  // two outright
		{Mutant: ms[3], KilledBy: []string{"b"}, Unreached: []string{"c"}},           // c never calls it
		{Mutant: ms[4], KilledBy: []string{"a", "b"}, TimedOut: []string{"a", "b"}},  // two timeouts
		{Mutant: ms[5], KilledBy: []string{"a", "c"}, TimedOut: nil, Unreached: nil}, // two outright
	}}
	var out strings.Builder
	s := rep.Summary(&out)
	if s.TimeoutOnly != 2 || s.Twice != 4 || s.TwiceOnTimeout != 2 || s.TimedOut["b"] != 2 || s.Ran["c"] != 5 || s.Ran["a"] != 6 {
		t.Fatalf("score %+v\n%s", s, out.String())
	}
	for _, want := range []string{"2 kills are timeouts only; 2 of the 4 kills by >= 2 checkers rest on a timeout", "resting on a timeout (a,b; timeout: b)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

const seededSrc = `package p

func (a *A) f(x, lo int, whole bool) int {
	if a.seeded(1) {
		x = lo + 1
	}
	if whole || (a.seeded(2) && x >= lo) {
		x++
	}
	if !a.seeded(3) {
		x--
	} else {
		x = 7
	}
	return x * 2
}
`

// Property: code a seeded switch rules out in the production build (the body of `if seeded(M)`, the
// operands of `seeded(M) && x`, the else of `if !seeded(M)`) yields no mutant, while the live code around
// it still does, with the same keys as if the dead sites were mutants (so saved samples keep their meaning).
func TestSeededGuardedCodeIsNotMutated(t *testing.T) {
	ms, err := generateFile("p/p.go", []byte(seededSrc))
	if err != nil {
		t.Fatal(err)
	}
	dead := map[int]bool{5: true, 13: true} // x = lo + 1; x = 7
	var got []string
	for _, m := range ms {
		got = append(got, m.Key())
		if dead[m.Line] {
			t.Errorf("%v lies in code the production build never runs", m)
		}
		if m.Line == 7 && m.Col > 28 { // past the &&
			t.Errorf("%v mutates an operand of seeded(2) && ...", m)
		}
	}
	for _, want := range []string{
		"p/p.go (*A).f logic 0 ||",                // whole || (...): live
		"p/p.go (*A).f logic 1 &&",                // seeded(2) && x >= lo as ||: x >= lo, live
		"p/p.go (*A).f drop 1 x++",                // the body of the live if
		"p/p.go (*A).f drop 2 x--",                // the then branch of !seeded(3)
		"p/p.go (*A).f arith 1 *",                 // after the dead lo + 1
		"p/p.go (*A).f cond-negate 0 a.seeded(1)", // the condition itself is live: negated it runs the body
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no mutant %q in %q", want, got)
		}
	}
}

// Property: Run refuses to start, building nothing, while a rapid fail file lies in a checker's folder
// (every run of the checker would replay it first, so its kills would not be the mutant's), and names it.
func TestRunRefusesStaleRapidFailFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "harness", "testdata", "rapid", "TestRapid")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "TestRapid-20261202-1.fail"), []byte("# v0.4.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := []Checker{{Name: "rapid", Pkg: "./harness", Run: "^TestRapid$"}}
	_, err := Run(context.Background(), []Mutant{{File: "impl/x.go"}}, Options{Root: root, Checkers: cs})
	if !errors.Is(err, ErrStaleFailFiles) || !strings.Contains(err.Error(), "harness/testdata/rapid/TestRapid/TestRapid-20261202-1.fail") {
		t.Fatalf("Run with a stale fail file: %v, want ErrStaleFailFiles naming it", err)
	}
	if got := staleFailFiles(root, []Checker{{Pkg: "./impl"}}); len(got) != 0 {
		t.Fatalf("a folder without fail files lists %v", got)
	}
}

// Property: a key written with its site fingerprint follows its site when an edit elsewhere in the function
// renumbers it, and names nothing once its own line is gone, where a key without one moves to a look-alike
// (the same kind and text in the same function).
func TestSiteKeysDoNotMoveToALookAlike(t *testing.T) {
	const before = "package p\n\nfunc f(a, b, c int) int {\n\tif a < b {\n\t\treturn 1\n\t}\n\tif a < c {\n\t\treturn 2\n\t}\n\treturn 0\n}\n"
	const after = "package p\n\nfunc f(a, b, c int) int {\n\tif a < c { // b went\n\t\treturn 2\n\t}\n\treturn 0\n}\n"
	old, _ := generateFile("p/p.go", []byte(before))
	now, _ := generateFile("p/p.go", []byte(after))
	site := func(ms []Mutant, src, line string) Mutant { // the < mutant (cmp-boundary) on that line
		for _, m := range ms {
			if m.Kind == "cmp-boundary" && m.Orig == "<" && strings.Split(src, "\n")[m.Line-1] == line {
				return m
			}
		}
		t.Fatalf("no < mutant on %q", line)
		return Mutant{}
	}
	ab, ac := site(old, before, "\tif a < b {"), site(old, before, "\tif a < c {")
	acNow := site(now, after, "\tif a < c { // b went")
	if ac.Site != acNow.Site {
		t.Fatalf("a trailing comment changed the site: %s -> %s", ac.Site, acNow.Site)
	}
	found, gone := Select(now, []string{ab.SiteKey(), ac.SiteKey()})
	if len(found) != 1 || found[0].Line != acNow.Line || len(gone) != 1 || gone[0] != ab.SiteKey() {
		t.Fatalf("site keys: found %v, gone %v; want a < c found, a < b gone", found, gone)
	}
	// Without the fingerprint, a < b's key (index 0) names a < c, now index 0: the look-alike.
	if found, _ := Select(now, []string{ab.Key()}); len(found) != 1 || found[0].Line != acNow.Line {
		t.Fatalf("a key without its site: found %v", found)
	}
	ks, err := ReadKeys(writeTemp(t, string(FormatKeys("h", []Mutant{ac}))))
	if err != nil || len(ks) != 1 || ks[0] != ac.SiteKey() {
		t.Fatalf("a key file carries %v (%v), want %q", ks, err, ac.SiteKey())
	}
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Property: two checkers of one package that reach the same folder run disjoint tests (their -run and -skip
// patterns split the package), so a kill by both is two independent verdicts, not one test counted twice;
// and every checker's patterns select at least one test of its package (one that selects none passes all).
func TestCheckersOfOnePackageAreDisjoint(t *testing.T) {
	dirs := []string{"impl", "impl/serve", "impl/clib", "capi", "trace", "harness/replay"}
	tests, err := testNames("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		runs := map[string][]string{} // test -> checkers
		for _, ch := range Checkers {
			rc, ok := ch.For(d)
			if !ok {
				continue
			}
			run, skip := regexp.MustCompile(rc.Run), regexp.MustCompile("$^")
			if rc.Skip != "" {
				skip = regexp.MustCompile(rc.Skip)
			}
			n := 0
			for _, name := range tests[path.Clean(rc.Pkg)] {
				if run.MatchString(name) && !skip.MatchString(name) {
					runs[path.Clean(rc.Pkg)+"."+name] = append(runs[path.Clean(rc.Pkg)+"."+name], rc.Name)
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s on %s runs no test of %s (-run %q -skip %q): it would pass every mutant", rc.Name, d, rc.Pkg, rc.Run, rc.Skip)
			}
		}
		if len(runs) == 0 {
			t.Errorf("no checker runs a test on %s", d)
		}
		for test, cs := range runs {
			if len(cs) > 1 {
				t.Errorf("on %s, %s is run by %v: one test counted as several checkers", d, test, cs)
			}
		}
	}
}

// testNames lists the top-level Test and Fuzz functions of every package folder's _test.go files under
// root, keyed by "./folder" as Checker.Pkg names it ("." for the root).
func testNames(root string) (map[string][]string, error) {
	out := map[string][]string{}
	re := regexp.MustCompile(`(?m)^func ((Test|Fuzz)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if err != nil || e.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		pkg := path.Clean("./" + filepath.ToSlash(rel))
		for _, m := range re.FindAllSubmatch(b, -1) {
			if name := string(m[1]); name != "TestMain" {
				out[pkg] = append(out[pkg], name)
			}
		}
		return nil
	})
	return out, err
}

// Property: a mutant of a cgo file keeps every //export comment immediately before its func (cgo exports a
// function only so; one moved away would make the mutant a build error or a library without the symbol, not
// the behaviour change it stands for), and the mutated file still parses.
func TestCgoExportCommentsStayOnTheirFunc(t *testing.T) {
	ms, err := Generate("../..", "capi", Skip)
	if err != nil {
		t.Fatal(err)
	}
	src := map[string][]byte{}
	exports := 0
	for _, m := range ms {
		if !strings.HasSuffix(m.File, ".go") {
			continue // capi's C (cxx_test.go checks its mutants)
		}
		if src[m.File] == nil {
			if src[m.File], err = os.ReadFile(filepath.Join("../..", m.File)); err != nil {
				t.Fatal(err)
			}
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, m.File, m.Apply(src[m.File]), parser.ParseComments)
		if err != nil {
			t.Fatalf("%v: the mutated file does not parse: %v", m, err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil {
				continue
			}
			last := fd.Doc.List[len(fd.Doc.List)-1]
			if !strings.HasPrefix(last.Text, "//export ") {
				continue
			}
			exports++
			if name := strings.TrimSpace(strings.TrimPrefix(last.Text, "//export ")); name != fd.Name.Name ||
				fset.Position(last.End()).Line+1 != fset.Position(fd.Pos()).Line {
				t.Errorf("%v: //export %s is not immediately before func %s", m, name, fd.Name.Name)
			}
		}
	}
	if len(ms) == 0 || exports == 0 {
		t.Fatalf("%d mutants of capi, %d //export comments seen: nothing judged", len(ms), exports)
	}
}

// Property: the packages one build compiles are split so that no group holds two packages of one name
// (go test -c -o DIR/ names each binary after its package: package gmlake and cmd/gmlake would collide),
// every package is in exactly one group, and the order within a group is the order given.
func TestBuildGroupsHoldDistinctNames(t *testing.T) {
	list := []string{".", "./capi", "./cmd/gmlake", "./impl/clib", "./x/gmlake", "./y/clib"}
	names := []string{"gmlake", "capi", "gmlake", "clib", "gmlake", "clib"}
	groups := groupByName(list, names)
	if len(groups) != 3 {
		t.Fatalf("%d groups %v, want 3 (three packages named gmlake)", len(groups), groups)
	}
	seen := map[int]bool{}
	for _, g := range groups {
		in := map[string]bool{}
		for k, i := range g {
			if in[names[i]] || seen[i] || k > 0 && g[k-1] >= i {
				t.Fatalf("groups %v: %s repeated, or out of order", groups, list[i])
			}
			in[names[i]], seen[i] = true, true
		}
	}
	if len(seen) != len(list) {
		t.Fatalf("groups %v leave out a package of %v", groups, list)
	}
}
