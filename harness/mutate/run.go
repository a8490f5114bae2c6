package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Checker is one independent checker's test set: the tests of one package selected by a -run pattern.
type Checker struct {
	Name string
	Pkg  string // package path relative to the module root ("./harness")
	Run  string // -test.run pattern
	Env  []string
	_    struct{}
}

// Checkers is every checker the project has, each run alone against each mutant. GMLAKE_PROFILE=mutation
// asks the time-bound ones (exploration) for a shorter budget; the others run exactly as in make test.
var Checkers = []Checker{
	{Name: "unit", Pkg: "./impl", Run: "."},
	{Name: "rapid", Pkg: "./harness", Run: "^TestRapid$"},
	{Name: "porcupine", Pkg: "./harness", Run: "^TestLinearizable$"},
	{Name: "explore", Pkg: "./harness", Run: "^(TestExplore|TestExploreDeep)$"},
	{Name: "itf", Pkg: "./harness", Run: "^TestITFConformance$"},
	{Name: "findings", Pkg: "./harness", Run: "^(TestFindings|TestScenarioHistories)$"}, // the golden histories
	{Name: "integrity", Pkg: "./harness/conformance", Run: "^TestEngineIntegritySelf$"},
	{Name: "replay", Pkg: "./harness/replay", Run: "^(TestBaselinesMatchTorchPeakReserved|TestBundledTracesLivePeakMatchesTorch|TestReplayEveryPolicyMultiStream|TestReplayCachingPeaksByHand|TestGMLakeTargetsOnBundledTraces)$"},
	{Name: "fuzz", Pkg: "./fuzz", Run: "^(FuzzOps|TestRandomPrograms)$"},
	{Name: "campaign", Pkg: "./fuzz", Run: "^TestCampaignClean$"},
}

// Options configure a run.
type Options struct {
	Root     string    // module root
	Checkers []Checker // nil: Checkers
	Timeout  time.Duration
	Workers  int       // checkers run at once for one mutant (0: 2)
	Log      io.Writer // progress, one line per mutant
	// FirstKill runs the checkers one at a time and stops at the first that kills the mutant (make test's
	// sample: only "killed or not" matters, not by whom).
	FirstKill bool
	_         struct{}
}

// Outcome is what happened to one mutant.
type Outcome struct {
	Mutant   Mutant
	Invalid  string   // compile error (first line): the mutant is not counted
	KilledBy []string // checkers whose tests failed
	TimedOut []string // checkers that ran past the timeout twice (counted as killed: the mutant hangs)
	Elapsed  time.Duration
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

// Run compiles each mutant through an overlay and runs every checker against it.
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

	// The unmutated build must pass every checker, or that checker would kill everything.
	base, err := build(ctx, root, tmp, nil, opt.Checkers)
	if err != nil {
		return nil, fmt.Errorf("building the unmutated checkers: %w", err)
	}
	// Each checker's timeout: three times its unmutated run plus 20 s (or Options.Timeout).
	timeouts := map[string]time.Duration{}
	start := time.Now()
	var took []string
	for _, c := range opt.Checkers {
		t0 := time.Now()
		if fail, timedOut := runChecker(ctx, root, base, c, 10*time.Minute); fail || timedOut {
			return nil, fmt.Errorf("checker %s fails on the unmutated engine: fix it first (go test %s -run '%s')", c.Name, c.Pkg, c.Run)
		}
		timeouts[c.Name] = 3*time.Since(t0) + 20*time.Second
		if opt.Timeout > 0 {
			timeouts[c.Name] = opt.Timeout
		}
		took = append(took, fmt.Sprintf("%s %.1fs", c.Name, time.Since(t0).Seconds()))
	}
	fmt.Fprintf(opt.Log, "baseline: %d checkers pass on the unmutated engine in %v (%s)\n",
		len(opt.Checkers), time.Since(start).Round(time.Second), strings.Join(took, ", "))

	rep := &Report{}
	for _, c := range opt.Checkers {
		rep.Checkers = append(rep.Checkers, c.Name)
	}
	for i, m := range ms {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		t0 := time.Now()
		o := Outcome{Mutant: m}
		bins, err := build(ctx, root, tmp, &m, opt.Checkers)
		// run runs one checker; a timeout is confirmed once with twice the time, since a loaded machine can
		// slow a checker past its timeout without any hang (a kill must be the mutant's doing).
		run := func(c Checker) (fail, timedOut bool) {
			fail, timedOut = runChecker(ctx, root, bins, c, timeouts[c.Name])
			if timedOut && ctx.Err() == nil {
				fail, timedOut = runChecker(ctx, root, bins, c, 2*timeouts[c.Name])
			}
			return fail, timedOut
		}
		if err != nil {
			o.Invalid = firstLine(err.Error())
		} else if opt.FirstKill {
			for _, c := range opt.Checkers {
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
			for _, c := range opt.Checkers {
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
		o.Elapsed = time.Since(t0)
		rep.Outcomes = append(rep.Outcomes, o)
		fmt.Fprintf(opt.Log, "mutant %d/%d %s: %s [%v]\n", i+1, len(ms), m, o.verdict(), o.Elapsed.Round(100*time.Millisecond))
	}
	return rep, nil
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

// build compiles the test binary of every checker's package under the mutant (nil: none) into a fresh
// folder and returns package -> binary.
func build(ctx context.Context, root, tmp string, m *Mutant, cs []Checker) (map[string]string, error) {
	dir, err := os.MkdirTemp(tmp, "bin-")
	if err != nil {
		return nil, err
	}
	args := []string{"test", "-c", "-o", dir + string(filepath.Separator)}
	if m != nil {
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			return nil, err
		}
		mf := filepath.Join(dir, "mutant.go")
		if err := os.WriteFile(mf, m.Apply(src), 0o644); err != nil {
			return nil, err
		}
		ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, m.File): mf}})
		of := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(of, ov, 0o644); err != nil {
			return nil, err
		}
		args = append(args, "-overlay", of)
	}
	pkgs := map[string]string{}
	var list []string
	for _, c := range cs {
		if _, ok := pkgs[c.Pkg]; !ok {
			pkgs[c.Pkg] = filepath.Join(dir, filepath.Base(c.Pkg)+".test")
			list = append(list, c.Pkg)
		}
	}
	cmd := exec.CommandContext(ctx, "go", append(args, list...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s(%v)", out, err)
	}
	return pkgs, nil
}

// runChecker runs one checker's tests from its package folder (tests read testdata/ relative to it).
func runChecker(ctx context.Context, root string, bins map[string]string, c Checker, timeout time.Duration) (failed, timedOut bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins[c.Pkg], "-test.run", c.Run, "-test.count=1", "-test.failfast")
	cmd.Dir = filepath.Join(root, c.Pkg)
	cmd.Env = append(append(os.Environ(), "GMLAKE_PROFILE=mutation"), c.Env...)
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
}

// NonEquivalent is the score's denominator.
func (s Score) NonEquivalent() int { return s.Valid - s.Equivalent }

// Score sums the outcomes.
func (r *Report) Score() Score {
	s := Score{Generated: len(r.Outcomes), PerChecker: map[string]int{}, Alone: map[string]int{}}
	for _, o := range r.Outcomes {
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
		if !o.Killed() {
			s.Survived++
			continue
		}
		s.Killed++
		if len(o.KilledBy) >= 2 {
			s.Twice++
		}
		for _, c := range o.KilledBy {
			s.PerChecker[c]++
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

// Summary prints the score, the kills per checker, the survivors (with their verdicts), the mutants only
// one checker kills, and the judged-equivalent mutants apart.
func (r *Report) Summary(w io.Writer) Score {
	s := r.Score()
	n := s.NonEquivalent()
	fmt.Fprintf(w, "mutants: %d generated, %d compile (%d invalid), %d judged equivalent; of the %d others: %d killed (%.1f%%), %d killed by >= 2 checkers (%.1f%%), %d survived\n",
		s.Generated, s.Valid, s.Invalid, s.Equivalent, n, s.Killed, pct(s.Killed, n), s.Twice, pct(s.Twice, n), s.Survived)
	fmt.Fprintf(w, "%-10s %7s %7s %s\n", "checker", "kills", "score", "only-killer")
	for _, c := range r.Checkers {
		fmt.Fprintf(w, "%-10s %7d %6.1f%% %d\n", c, s.PerChecker[c], pct(s.PerChecker[c], n), s.Alone[c])
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
