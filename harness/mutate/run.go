package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Checker is one independent checker's test set: the tests of one package selected by a -run pattern (less
// those its -skip pattern names).
type Checker struct {
	Name string
	// Pkg is the package path relative to the module root ("./harness"); "" is the mutated folder's own
	// package (the "unit" checker: impl's tests for impl/, serve's for impl/serve).
	Pkg  string
	Run  string // -test.run pattern
	Skip string // -test.skip pattern ("": none): tests another checker of the same package runs instead
	Env  []string
	// Dirs are the mutated folders whose code the checker's tests call (nil: every folder). A checker is not
	// run on a mutant of another folder: it cannot kill it, and the figures say so (Outcome.Unreached).
	Dirs []string
	_    struct{}
}

// For returns the checker as it runs on a mutant of folder dir (Pkg resolved), and whether it reaches dir.
func (c Checker) For(dir string) (Checker, bool) {
	if c.Dirs != nil && !slices.Contains(c.Dirs, dir) {
		return c, false
	}
	if c.Pkg == "" {
		c.Pkg = "./" + dir
	}
	return c, true
}

// The folders each checker's tests call. The harness's checkers drive impl.Allocator, the serving layer too
// where their configuration says Serve (rapid's swarm, porcupine's odd seeds, the explorer's tight-served
// universe, the fuzz decoder's serve bit, the campaign, the golden F10); the ITF traces, the integrity
// check and the trace replays drive the engine alone; the Go facade's tests (package gmlake) drive the engine
// and impl/clib's knob parsing; the C library (impl/clib) is reached by its own tests, the facade's, capi's
// (the C library built from the mutant: the ABI fuzz target, capi's other tests, the Python package's) and
// the clib checker's (harness/ops: the op language through impl/clib, which drives the layer and the engine
// too). capi (libgmlake.so's Go code) is reached only by capi's tests, split in three independent sets; the
// trace format and recorder (trace) by its own tests, the replays (harness/replay reads traces), the op
// language's trace lines, capi's recorder tests (real processes: signals, forks) and the CLI's tests;
// replay's figures (harness/replay) by its own tests and the CLI's.
var (
	engineOnly = []string{"impl"}
	harnessed  = []string{"impl", "impl/serve"}
	allLayers  = []string{"impl", "impl/serve", "impl/clib"}
	// unitDirs are the folders whose own package's tests are one checker (capi's are split in three).
	unitDirs = []string{"impl", "impl/serve", "impl/clib", "trace", "harness/replay"}
	library  = []string{"impl/clib", "capi"} // what libgmlake.so is built from
)

// Checkers is every checker the project has, each run alone against each mutant of a folder it reaches.
// GMLAKE_PROFILE=mutation asks the time-bound ones (exploration) for a shorter budget; the others run
// exactly as in make test.
var Checkers = []Checker{
	// A folder's own tests, less impl/clib's settings fuzz target (the settings checker, below).
	{Name: "unit", Run: ".", Skip: "^FuzzParseEnv$", Dirs: unitDirs},
	{Name: "rapid", Pkg: "./harness", Run: "^TestRapid$", Dirs: harnessed},
	{Name: "porcupine", Pkg: "./harness", Run: "^TestLinearizable$", Dirs: harnessed},
	{Name: "explore", Pkg: "./harness", Run: "^(TestExplore|TestExploreDeep)$", Dirs: harnessed},
	{Name: "itf", Pkg: "./harness", Run: "^TestITFConformance$", Dirs: engineOnly},
	{Name: "findings", Pkg: "./harness", Run: "^(TestFindings|TestScenarioHistories)$", Dirs: harnessed}, // the golden histories
	{Name: "integrity", Pkg: "./harness/conformance", Run: "^TestEngineIntegritySelf$", Dirs: engineOnly},
	// The replays read the bundled traces (trace's reader) and replay them on the engine; not run on
	// harness/replay itself, where they are part of its unit tests.
	{Name: "replay", Pkg: "./harness/replay", Run: "^(TestBaselinesMatchTorchPeakReserved|TestBundledTracesLivePeakMatchesTorch|TestReplayEveryPolicyMultiStream|TestReplayCachingPeaksByHand|TestGMLakeTargetsOnBundledTraces)$", Dirs: []string{"impl", "trace"}},
	{Name: "fuzz", Pkg: "./fuzz", Run: "^(FuzzOps|TestRandomPrograms)$", Dirs: harnessed},
	{Name: "campaign", Pkg: "./fuzz", Run: "^TestCampaignClean$", Dirs: harnessed},
	// The decision goldens: generated programs whose every placement, byte count and driver call is pinned
	// (a regression oracle: it says a decision moved, the judges say whether it is wrong).
	{Name: "decisions", Pkg: "./fuzz", Run: "^TestDecisionHistories$", Dirs: harnessed},
	// The Go facade (package gmlake) runs the engine under its knob parsing: what a Go program calls.
	{Name: "facade", Pkg: ".", Run: ".", Dirs: []string{"impl", "impl/clib"}},
	// capi's tests build libgmlake.so with go build; the mutant's overlay reaches that build through
	// GOFLAGS (runChecker), so the library under test is the mutant's. Three independent sets: the ABI fuzz
	// target (its committed corpus and generated sequences of every exported function, judged after each
	// call), the Python package's tests over the library, and the rest (C/C++ hosts, settings, lifecycle,
	// the recorder in real processes).
	// The ABI fuzz target also runs on the engine and the serving layer, which every call of libgmlake.so
	// reaches (its ledger judges what the engine answers: a pointer, a base, an export's pieces); the other two
	// sets, slower, only on the library's own folders.
	{Name: "abi", Pkg: "./capi", Run: "^(FuzzABI|TestABIFuzzCallsEveryFunction)$", Dirs: []string{"impl", "impl/serve", "impl/clib", "capi"}},
	{Name: "python", Pkg: "./capi", Run: "^TestPython$", Dirs: library},
	{Name: "capi", Pkg: "./capi", Run: ".", Skip: "^(FuzzABI|TestABIFuzzCallsEveryFunction|TestPython)$", Dirs: library},
	// capi's recorder tests on the trace package: GMLAKE_TRACE in real processes (SIGTERM, SIGINT, forks,
	// two processes on one path). On capi's own mutants they are part of the capi checker.
	{Name: "recorder", Pkg: "./capi", Run: "^TestTrace", Dirs: []string{"trace"}},
	// The settings table's fuzz target: any two settings with hostile values, parsed, refused in one line
	// naming the setting, or accepted only inside the table's range.
	{Name: "settings", Pkg: "./impl/clib", Run: "^FuzzParseEnv$", Dirs: []string{"impl/clib"}},
	// The op language itself: its text (ops, headers with the seeded bugs by name, trace lines) parses back,
	// and the Env runs and judges short sequences on the engine.
	{Name: "ops", Pkg: "./harness/ops", Run: "^(TestOpsRoundTrip|TestParse.*|TestTraceLinesAreOps|TestHeader.*|TestEnv.*)$", Dirs: engineOnly},
	// The op language's reading of trace lines (trace's events as ops) on the trace package.
	{Name: "tracelines", Pkg: "./harness/ops", Run: "^TestTraceLinesAreOps$", Dirs: []string{"trace"}},
	// The op language through the C library's plain-integer surface (swarm sequences with the layers' own
	// ops, and its scenarios), judged by the contract, the spec and INV-SERVE.
	{Name: "clib", Pkg: "./harness/ops", Run: "^(TestCLib.*|TestKnobTextParsesBack)$", Dirs: allLayers},
	// The CLI's tests (cmd/gmlake): replay's inputs (pipes, cut traces, folders), its tables and JSON.
	{Name: "cli", Pkg: "./cmd/gmlake", Run: ".", Dirs: []string{"trace", "harness/replay"}},
}

// Options configure a run.
type Options struct {
	Root     string    // module root
	Checkers []Checker // nil: Checkers
	Timeout  time.Duration
	Workers  int       // checkers run at once for one mutant (0: 2)
	Log      io.Writer // progress, one line per mutant
	// FirstKill runs the checkers one at a time and stops at the first that kills the mutant (make test's
	// sample: only "killed or not" matters, not by whom), building each checker's package only when its
	// turn comes.
	FirstKill bool
	_         struct{}
}

// Outcome is what happened to one mutant.
type Outcome struct {
	Mutant   Mutant
	Invalid  string   // compile error (first line): the mutant is not counted
	KilledBy []string // checkers whose tests failed
	TimedOut []string // checkers that ran past the timeout twice (counted as killed: the mutant hangs)
	// Unreached are the checkers of the run not run on the mutant: they never call its folder (Checker.Dirs).
	Unreached []string `json:",omitempty"`
	Elapsed   time.Duration
	// Judged is the reviewed verdict on the mutant from the judgement list (Report.Judge), if it names it.
	Judged *Judgement `json:",omitempty"`
}

// Killed reports whether any checker killed the mutant.
func (o Outcome) Killed() bool { return len(o.KilledBy) > 0 }

// Report sums a run.
type Report struct {
	Outcomes []Outcome
	Checkers []string
}

// Run compiles each mutant through an overlay and runs every checker that reaches its folder against it.
func Run(ctx context.Context, ms []Mutant, opt Options) (*Report, error) {
	if opt.Checkers == nil {
		opt.Checkers = Checkers
	}
	if opt.Workers <= 0 {
		opt.Workers = 2
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	root, err := filepath.Abs(opt.Root)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gmlake-mutate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	// The checkers of each folder mutated, their packages resolved (unit is the folder's own package).
	var dirs []string
	byDir := map[string][]Checker{}
	for _, m := range ms {
		d := m.Dir()
		if _, ok := byDir[d]; ok {
			continue
		}
		dirs = append(dirs, d)
		byDir[d] = []Checker{}
		for _, c := range opt.Checkers {
			if rc, ok := c.For(d); ok {
				byDir[d] = append(byDir[d], rc)
			}
		}
	}
	var all []Checker // every (checker, package) pair once, for the baseline
	seen := map[string]bool{}
	for _, d := range dirs {
		for _, c := range byDir[d] {
			if !seen[c.Name+"\x00"+c.Pkg] {
				seen[c.Name+"\x00"+c.Pkg] = true
				all = append(all, c)
			}
		}
	}

	// A rapid fail file left in a checker's folder is replayed by every run of that checker: a kill it
	// gives would come from an earlier failure, not from the mutant's own sequences.
	if stale := staleFailFiles(root, all); len(stale) > 0 {
		return nil, fmt.Errorf("%w: %s: every run of the checker would replay them first; move them out of the tree "+
			"(each replays alone with -rapid.failfile=FILE) and run again", ErrStaleFailFiles, strings.Join(stale, ", "))
	}
	// The unmutated build must pass every checker, or that checker would kill everything.
	base, err := build(ctx, root, tmp, nil, all)
	if err != nil {
		return nil, fmt.Errorf("building the unmutated checkers: %w", err)
	}
	// Each checker's timeout: three times its unmutated run plus 20 s (or Options.Timeout).
	timeouts := map[string]time.Duration{}
	start := time.Now()
	var took []string
	for _, c := range all {
		t0 := time.Now()
		if fail, timedOut := runChecker(ctx, root, base, c, 10*time.Minute); fail || timedOut {
			if ctx.Err() != nil {
				return nil, ctx.Err() // interrupted: the baseline says nothing about the checker
			}
			return nil, fmt.Errorf("checker %s fails on the unmutated engine: fix it first (go test %s -run '%s')", c.Name, c.Pkg, c.Run)
		}
		k := c.Name + "\x00" + c.Pkg
		timeouts[k] = 3*time.Since(t0) + 20*time.Second
		if opt.Timeout > 0 {
			timeouts[k] = opt.Timeout
		}
		took = append(took, fmt.Sprintf("%s(%s) %.1fs", c.Name, c.Pkg, time.Since(t0).Seconds()))
	}
	fmt.Fprintf(opt.Log, "baseline: %d checkers pass on the unmutated code in %v (%s)\n",
		len(all), time.Since(start).Round(time.Second), strings.Join(took, ", "))
	for _, d := range dirs {
		if miss := unreached(opt.Checkers, d); len(miss) > 0 {
			fmt.Fprintf(opt.Log, "not run on %s (they never call it): %s\n", d, strings.Join(miss, ","))
		}
	}

	rep := &Report{}
	for _, c := range opt.Checkers {
		rep.Checkers = append(rep.Checkers, c.Name)
	}
	for i, m := range ms {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		t0 := time.Now()
		cs := byDir[m.Dir()]
		o := Outcome{Mutant: m, Unreached: unreached(opt.Checkers, m.Dir())}
		var bins binaries
		var err error
		if opt.FirstKill && len(cs) > 0 {
			// Only the first checker's package now; the others' only if it does not kill (below).
			bins, err = build(ctx, root, tmp, &m, cs[:1])
		} else {
			bins, err = build(ctx, root, tmp, &m, cs)
		}
		// run runs one checker; a timeout is confirmed once with twice the time, since a loaded machine can
		// slow a checker past its timeout without any hang (a kill must be the mutant's doing).
		run := func(c Checker) (fail, timedOut bool) {
			k := c.Name + "\x00" + c.Pkg
			fail, timedOut = runChecker(ctx, root, bins, c, timeouts[k])
			if timedOut && ctx.Err() == nil {
				fail, timedOut = runChecker(ctx, root, bins, c, 2*timeouts[k])
			}
			return fail, timedOut
		}
		if err != nil {
			o.Invalid = firstLine(err.Error())
		} else if opt.FirstKill {
			for _, c := range cs {
				if _, ok := bins.bin[c.Pkg]; !ok {
					more, err := build(ctx, root, tmp, &m, []Checker{c})
					if err != nil {
						o.Invalid = firstLine(err.Error())
						break
					}
					maps.Copy(bins.bin, more.bin)
				}
				fail, timedOut := run(c)
				if timedOut {
					o.TimedOut = append(o.TimedOut, c.Name)
				}
				if fail || timedOut {
					o.KilledBy = append(o.KilledBy, c.Name)
					break
				}
			}
		} else {
			var mu sync.Mutex
			sem := make(chan struct{}, opt.Workers)
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					fail, timedOut := run(c)
					mu.Lock()
					defer mu.Unlock()
					if fail || timedOut {
						o.KilledBy = append(o.KilledBy, c.Name)
					}
					if timedOut {
						o.TimedOut = append(o.TimedOut, c.Name)
					}
				}()
			}
			wg.Wait()
			sortByChecker(o.KilledBy, opt.Checkers)
			sortByChecker(o.TimedOut, opt.Checkers)
		}
		if ctx.Err() != nil {
			// Interrupted while this mutant ran: its checkers were killed, which says nothing about it.
			return rep, ctx.Err()
		}
		o.Elapsed = time.Since(t0)
		rep.Outcomes = append(rep.Outcomes, o)
		fmt.Fprintf(opt.Log, "mutant %d/%d %s: %s [%v]\n", i+1, len(ms), m, o.verdict(), o.Elapsed.Round(100*time.Millisecond))
	}
	return rep, nil
}

// unreached names the checkers of cs that never call folder dir.
func unreached(cs []Checker, dir string) []string {
	var out []string
	for _, c := range cs {
		if _, ok := c.For(dir); !ok {
			out = append(out, c.Name)
		}
	}
	return out
}

func (o Outcome) verdict() string {
	switch {
	case o.Invalid != "":
		return "invalid (" + o.Invalid + ")"
	case o.Killed():
		s := "killed by " + strings.Join(o.KilledBy, ",")
		if len(o.TimedOut) > 0 {
			s += " (timeout: " + strings.Join(o.TimedOut, ",") + ")"
		}
		return s
	}
	return "SURVIVED"
}

func sortByChecker(names []string, cs []Checker) {
	rank := map[string]int{}
	for i, c := range cs {
		rank[c.Name] = i
	}
	sort.Slice(names, func(i, j int) bool { return rank[names[i]] < rank[names[j]] })
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return short(l)
		}
	}
	return short(s)
}

// binaries are the test binaries of one build: package -> binary, and the overlay that made them ("":
// the unmutated build).
type binaries struct {
	bin     map[string]string
	overlay string
}

// build compiles the test binary of every checker's package under the mutant (nil: none) into a fresh
// folder, in one go test -c (its packages compile in parallel).
func build(ctx context.Context, root, tmp string, m *Mutant, cs []Checker) (binaries, error) {
	dir, err := os.MkdirTemp(tmp, "bin-")
	if err != nil {
		return binaries{}, err
	}
	out := binaries{bin: map[string]string{}}
	args := []string{"test", "-c", "-o", dir + string(filepath.Separator)}
	if m != nil {
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			return binaries{}, err
		}
		mf := filepath.Join(dir, "mutant"+filepath.Ext(m.File)) // a C file's compiler goes by the extension
		if err := os.WriteFile(mf, m.Apply(src), 0o644); err != nil {
			return binaries{}, err
		}
		b, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, m.File): mf}})
		out.overlay = filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(out.overlay, b, 0o644); err != nil {
			return binaries{}, err
		}
		args = append(args, "-overlay", out.overlay)
	}
	var list, names []string
	for _, c := range cs {
		if _, ok := out.bin[c.Pkg]; !ok {
			// go test -c -o DIR/ names each binary after the last element of the package's import path.
			name, err := importBase(root, c.Pkg)
			if err != nil {
				return binaries{}, err
			}
			out.bin[c.Pkg] = ""
			list, names = append(list, c.Pkg), append(names, name)
		}
	}
	// Packages of one name (the module's own package gmlake and cmd/gmlake) cannot share one -o folder: one
	// go test -c per group of distinct names, each into its own folder.
	for g, group := range groupByName(list, names) {
		gdir := filepath.Join(dir, fmt.Sprintf("g%d", g))
		if err := os.Mkdir(gdir, 0o755); err != nil {
			return binaries{}, err
		}
		a := slices.Clone(args)
		a[3] = gdir + string(filepath.Separator) // the -o folder
		var pkgs []string
		for _, i := range group {
			out.bin[list[i]] = filepath.Join(gdir, names[i]+".test")
			pkgs = append(pkgs, list[i])
		}
		cmd := exec.CommandContext(ctx, "go", append(a, pkgs...)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return binaries{}, fmt.Errorf("%s(%v)", b, err)
		}
	}
	return out, nil
}

// groupByName splits the indices of names into groups in which no name is repeated, in order: each index
// goes to the first group that does not hold its name yet.
func groupByName(list, names []string) [][]int {
	var groups [][]int
	var taken []map[string]bool
	for i := range list {
		g := 0
		for g < len(groups) && taken[g][names[i]] {
			g++
		}
		if g == len(groups) {
			groups, taken = append(groups, nil), append(taken, map[string]bool{})
		}
		groups[g] = append(groups[g], i)
		taken[g][names[i]] = true
	}
	return groups
}

// importBase is the last element of the import path of package folder pkg ("./impl/serve": serve; ".":
// the module's own last element, from go.mod).
func importBase(root, pkg string) (string, error) {
	if p := path.Clean(filepath.ToSlash(pkg)); p != "." {
		return path.Base(p), nil
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return path.Base(strings.Trim(f[1], `"`)), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}

// ErrStaleFailFiles is Run's refusal to start while rapid fail files lie in a checker's folder.
var ErrStaleFailFiles = errors.New("mutate: rapid fail files in the checkers' folders")

// staleFailFiles lists the rapid fail files (testdata/rapid/TEST/*.fail, rapid's own layout) in the folders
// of the checkers cs run from, relative to root.
func staleFailFiles(root string, cs []Checker) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.Pkg] {
			continue
		}
		seen[c.Pkg] = true
		files, _ := filepath.Glob(filepath.Join(root, c.Pkg, "testdata", "rapid", "*", "*.fail"))
		for _, f := range files {
			if r, err := filepath.Rel(root, f); err == nil {
				out = append(out, r)
			}
		}
	}
	sort.Strings(out)
	return out
}

// runChecker runs one checker's tests from its package folder (tests read testdata/ relative to it). Under
// a mutant, GOFLAGS carries its overlay, so that a test that builds with the go command (capi's, which
// builds libgmlake.so) builds the mutant too.
func runChecker(ctx context.Context, root string, bins binaries, c Checker, timeout time.Duration) (failed, timedOut bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"-test.run", c.Run, "-test.count=1", "-test.failfast"}
	if c.Skip != "" {
		args = append(args, "-test.skip", c.Skip)
	}
	cmd := exec.CommandContext(ctx, bins.bin[c.Pkg], args...)
	cmd.Dir = filepath.Join(root, c.Pkg)
	// RAPID_NOFAILFILE: a failure under this mutant leaves no fail file for the next mutant's run to replay.
	cmd.Env = append(append(os.Environ(), "GMLAKE_PROFILE=mutation", "RAPID_NOFAILFILE=true"), c.Env...)
	if bins.overlay != "" {
		cmd.Env = append(cmd.Env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+bins.overlay))
	}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return true, true
	}
	return err != nil, false
}

// Judge attaches the judgement list's verdicts to the outcomes (Judge in mutate.go matches the keys).
func (r *Report) Judge(by map[string]Judgement) {
	for i := range r.Outcomes {
		if j, ok := by[r.Outcomes[i].Mutant.Key()]; ok {
			r.Outcomes[i].Judged = &j
		}
	}
}

// Score is a run's figures. The denominators leave out the mutants that do not compile and the survivors
// judged equivalent (a judged mutant that a checker kills counts as killed: the judgement was wrong).
type Score struct {
	Generated, Valid, Invalid int
	Equivalent                int // survivors judged equivalent
	Killed, Twice             int // killed by at least one, by at least two checkers
	Survived                  int // survivors not judged equivalent
	PerChecker, Alone         map[string]int
	// A kill that is only a timeout is weaker evidence than a failed judgement (the mutant may only be slow):
	// TimeoutOnly counts the killed mutants whose every killer timed out, TwiceOnTimeout the mutants killed by
	// >= 2 checkers of which fewer than 2 failed outright, TimedOut the timeouts per checker.
	TimeoutOnly, TwiceOnTimeout int
	TimedOut                    map[string]int
	// Ran is, per checker, the non-equivalent mutants it was run on: those of the folders it calls.
	Ran map[string]int
}

// NonEquivalent is the score's denominator.
func (s Score) NonEquivalent() int { return s.Valid - s.Equivalent }

// Score sums the outcomes.
func (r *Report) Score() Score { return r.score(r.Outcomes) }

func (r *Report) score(os []Outcome) Score {
	s := Score{Generated: len(os), PerChecker: map[string]int{}, Alone: map[string]int{},
		TimedOut: map[string]int{}, Ran: map[string]int{}}
	for _, o := range os {
		switch {
		case o.Invalid != "":
			s.Invalid++
			continue
		case !o.Killed() && o.Judged != nil && o.Judged.Equivalent():
			s.Valid++
			s.Equivalent++
			continue
		}
		s.Valid++
		for _, c := range r.Checkers {
			if !slices.Contains(o.Unreached, c) {
				s.Ran[c]++
			}
		}
		if !o.Killed() {
			s.Survived++
			continue
		}
		s.Killed++
		outright := len(o.KilledBy) - len(o.TimedOut)
		if outright == 0 {
			s.TimeoutOnly++
		}
		if len(o.KilledBy) >= 2 {
			s.Twice++
			if outright < 2 {
				s.TwiceOnTimeout++
			}
		}
		for _, c := range o.KilledBy {
			s.PerChecker[c]++
		}
		for _, c := range o.TimedOut {
			s.TimedOut[c]++
		}
		if len(o.KilledBy) == 1 {
			s.Alone[o.KilledBy[0]]++
		}
	}
	return s
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// Summary prints the score (per folder too when the run mutated several), the kills per checker (how many
// of them timeouts, and on how many mutants the checker ran: a checker that never calls a folder is not run
// on its mutants), the survivors (with their verdicts), the mutants only one checker kills, and the
// judged-equivalent mutants apart.
func (r *Report) Summary(w io.Writer) Score {
	s := r.Score()
	n := s.NonEquivalent()
	line := func(what string, s Score) {
		n := s.NonEquivalent()
		fmt.Fprintf(w, "%s: %d generated, %d compile (%d invalid), %d judged equivalent; of the %d others: %d killed (%.1f%%), %d killed by >= 2 checkers (%.1f%%), %d survived\n",
			what, s.Generated, s.Valid, s.Invalid, s.Equivalent, n, s.Killed, pct(s.Killed, n), s.Twice, pct(s.Twice, n), s.Survived)
	}
	line("mutants", s)
	var dirs []string
	byDir := map[string][]Outcome{}
	for _, o := range r.Outcomes {
		d := o.Mutant.Dir()
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], o)
	}
	if len(dirs) > 1 {
		for _, d := range dirs {
			line("  of "+d, r.score(byDir[d]))
		}
	}
	fmt.Fprintf(w, "timeouts: %d kills are timeouts only; %d of the %d kills by >= 2 checkers rest on a timeout (fewer than 2 checkers failed outright)\n",
		s.TimeoutOnly, s.TwiceOnTimeout, s.Twice)
	fmt.Fprintf(w, "%-10s %7s %7s %11s %8s %s\n", "checker", "kills", "score", "only-killer", "timeouts", "ran-on")
	for _, c := range r.Checkers {
		ran := fmt.Sprintf("%d", s.Ran[c])
		if s.Ran[c] < n {
			var not []string
			for _, d := range dirs {
				if sd := r.score(byDir[d]); sd.Ran[c] == 0 && sd.NonEquivalent() > 0 {
					not = append(not, d)
				}
			}
			if len(not) > 0 {
				ran += " (never calls " + strings.Join(not, ", ") + ": not run there)"
			}
		}
		fmt.Fprintf(w, "%-10s %7d %6.1f%% %11d %8d %s\n", c, s.PerChecker[c], pct(s.PerChecker[c], n), s.Alone[c], s.TimedOut[c], ran)
	}
	for _, o := range r.Outcomes {
		switch {
		case o.Invalid != "":
		case o.Killed() && o.Judged != nil:
			fmt.Fprintf(w, "misjudged: %s is killed by %s but judged %s (%s): update the judgement list\n",
				o.Mutant, strings.Join(o.KilledBy, ","), o.Judged.Verdict, o.Judged.Reason)
		case o.Killed() && len(o.KilledBy) == 1:
			how := o.KilledBy[0]
			if len(o.TimedOut) > 0 {
				how += ", timeout"
			}
			fmt.Fprintf(w, "killed by one only (%s): %s\n", how, o.Mutant)
		case o.Killed() && len(o.KilledBy)-len(o.TimedOut) < 2:
			fmt.Fprintf(w, "killed by >= 2 resting on a timeout (%s; timeout: %s): %s\n",
				strings.Join(o.KilledBy, ","), strings.Join(o.TimedOut, ","), o.Mutant)
		case o.Killed():
		case o.Judged == nil:
			fmt.Fprintf(w, "survivor: %s\n", o.Mutant)
		case !o.Judged.Equivalent():
			fmt.Fprintf(w, "survivor: %s [%s: %s]\n", o.Mutant, o.Judged.Verdict, o.Judged.Reason)
		}
	}
	for _, o := range r.Outcomes {
		if o.Invalid == "" && !o.Killed() && o.Judged != nil && o.Judged.Equivalent() {
			fmt.Fprintf(w, "equivalent: %s: %s\n", o.Mutant, o.Judged.Reason)
		}
	}
	return s
}
