package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gmlake/gmlake/harness/replay"
	"github.com/gmlake/gmlake/harness/snapshot"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

type replayFlags struct {
	policies []string
	device   string
	json     string
	plot     string
	peaks    string
	points   int
	// paperLimits: gmlake-paper is replayed once per fragment limit (GLake's fragLimit), a row each.
	paperLimits []string
	wide        bool // every column in the table (default: what fits 120 columns)
	// deviceSizes: the what-if: each trace is replayed on a simulated device of each size, a row each.
	deviceSizes []string
	targets     bool // print the project's targets for gmlake against expandable (make run's verdict)
}

func init() {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay [flags] TRACE|FOLDER...",
		Short: "Replay training allocation traces through allocator policies and compare their memory use",
		Long: `replay drives each trace (the text format of testdata/traces/README.md, gzip or plain, or a PyTorch
memory snapshot pickle from torch.cuda.memory._dump_snapshot) through each policy, on the simulated H200 or a
real GPU, and prints one table: per trace and policy the peak live and reserved GiB (live: each request
rounded up to 512 B), fragmentation (1 - allocated/reserved, and 1 - live/reserved), the peak reserved over
expandable's on the same trace ("vs exp") and the modeled driver time. --wide adds the events, peak
allocated bytes, PyTorch's own measured peak reserved from peaks.json (caching against the native allocator,
every other policy against expandable_segments), the driver calls by kind, the modeled driver time as a
share of the recorded training time and the replay's speed; --json writes every figure.

Each input is read once, as it comes: a file, a pipe, /dev/stdin or - (standard input), <(zcat ...); every
policy replays it at the same time. A folder replays the traces in it; a file that is not a trace (a README,
a .txt beside the traces) is skipped with a note. A policy under which the trace does not fit the device is
a row that says where ("does not fit: event N of M, live X GiB at that point"); the other policies go on.

--device-size asks what-if: would the job fit a GPU of that size (80GB, 94GB, 141GB, 192GB; several,
comma-separated) under each policy: each trace is replayed on a simulated device of each size, a row each.
docs/replay.md lists the usable memory of common GPUs.

With --device cuda each pair is replayed on GPU 0 as well as on the simulated device: the table then has a row
for each, and the GPU rows show the wall time measured inside driver calls beside the modeled time.`,
		Example: `  gmlake replay testdata/traces/*.trace.gz
  gmlake replay --policy caching,gmlake --json out.json --plot out.png testdata/traces/llama1b-ckpt.trace.gz
  gmlake replay --device-size 80GB,141GB run.trace.gz
  zcat run.trace.gz | gmlake replay -
  gmlake replay snapshot.pickle`,
		Args:          cobra.MinimumNArgs(1),
		SilenceErrors: true, // main prints the error once
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), f, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	listVar(fl, &f.policies, "policy", replay.Policies, "policies to replay, comma-separated (of "+strings.Join(impl.Policies, ", ")+")")
	fl.StringVar(&f.device, "device", "sim", "sim (the simulated H200) or cuda (GPU 0, with a simulated replay beside it)")
	fl.StringVar(&f.json, "json", "", "write the results as a JSON array to `FILE`")
	fl.StringVar(&f.plot, "plot", "", "plot reserved and allocated memory over each trace to `FILE` (.png or .svg)")
	fl.StringVar(&f.peaks, "peaks", "", "PyTorch's measured peaks (`FILE`); default: peaks.json beside the first trace, if any")
	fl.IntVar(&f.points, "plot-points", 2000, "timeline samples per trace and policy for --plot (about; at most twice that)")
	listVar(fl, &f.paperLimits, "paper-fragment-limit", nil, "replay gmlake-paper once per fragment limit (GLake's fragLimit), a row each, e.g. 32MiB,256MiB,512MiB,1GiB (its documents use all four)")
	fl.BoolVar(&f.wide, "wide", false, "print every column: events, allocated, PyTorch's measured peak, driver calls by kind, share of training, replay speed")
	listVar(fl, &f.deviceSizes, "device-size", nil, "what-if: replay on simulated devices of these sizes, a row each, e.g. 80GB,94GB,141GB,192GB (docs/replay.md: the usable memory of common GPUs)")
	fl.BoolVar(&f.targets, "targets", false, "print whether gmlake meets the project's targets against expandable on each trace (make run's verdict)")
	rootCmd.AddCommand(cmd)
}

// listFlag is a comma-separated list flag: the first use replaces the default, later ones append, so that
// a value given twice is seen (and refused) rather than merged. Replace (pflag.SliceValue) sets the list
// and makes the next use replace it again (a fresh command line).
type listFlag struct {
	p   *[]string
	set bool
}

func listVar(fl *pflag.FlagSet, p *[]string, name string, def []string, usage string) {
	*p = slices.Clone(def)
	fl.Var(&listFlag{p: p}, name, usage)
	fl.Lookup(name).DefValue = "[" + strings.Join(def, ",") + "]"
}

func (l *listFlag) Set(v string) error {
	if !l.set {
		*l.p = nil
	}
	l.set = true
	for _, s := range strings.Split(v, ",") {
		*l.p = append(*l.p, strings.TrimSpace(s))
	}
	return nil
}
func (l *listFlag) Type() string   { return "strings" }
func (l *listFlag) String() string { return "[" + strings.Join(*l.p, ",") + "]" }
func (l *listFlag) Append(v string) error {
	*l.p = append(*l.p, v)
	return nil
}
func (l *listFlag) Replace(vs []string) error {
	*l.p, l.set = slices.Clone(vs), false
	return nil
}
func (l *listFlag) GetSlice() []string { return slices.Clone(*l.p) }

// openCUDA opens the real driver on GPU 0. It is the one place the replay command touches impl/cudavmm.
func openCUDA() (vmm.Driver, func() error, error) {
	d, err := cudavmm.New(0)
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}

// The ranges of replay's flags.
const (
	maxPlotPoints = 1_000_000
	// minDeviceSize is the smallest --device-size: one 2 MiB chunk; maxDeviceSize 1 PiB.
	minDeviceSize = 2 * vmm.MiB
	maxDeviceSize = 1 << 50
)

// replayRun is one replay of each trace: a policy, for gmlake-paper swept over fragment limits its limit
// (0: the default) and row label, and for --device-size the simulated device's size and its label.
type replayRun struct {
	policy    string
	fragLimit uint64
	label     string
	capacity  uint64 // 0: the default simulated H200
	device    string // the Result's Device: "sim", or "sim 80GB"
}

// replayInput is one input: its path as given, the name of its trace, and the file it was stat'ed as.
type replayInput struct {
	path string
	st   os.FileInfo
}

func runReplay(ctx context.Context, f replayFlags, paths []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	// Every flag and output path is checked before the first replay: a mistake costs nothing.
	runs, err := replayRuns(f)
	if err != nil {
		return err
	}
	if f.points < 1 || f.points > maxPlotPoints {
		return badFlag("--plot-points %d: want 1 to %d", f.points, maxPlotPoints)
	}
	if f.plot != "" {
		if ext := strings.ToLower(filepath.Ext(f.plot)); ext != ".png" && ext != ".svg" {
			return badFlag("--plot %s: want a .png or .svg file name", f.plot)
		}
	}
	if f.json != "" && f.plot != "" && samePath(f.json, f.plot) {
		return badFlag("--json %s and --plot %s: the same file; give each its own", f.json, f.plot)
	}
	inputs, notes, err := resolveInputs(paths)
	if err != nil {
		return err
	}
	peaksPath := f.peaks
	if peaksPath == "" && len(inputs) > 0 {
		dir := filepath.Dir(inputs[0].path)
		if inputs[0].st.IsDir() {
			dir = inputs[0].path
		}
		if p := filepath.Join(dir, "peaks.json"); fileExists(p) {
			peaksPath = p
		}
	}
	// An output that names an input (the same file, however it is spelled) would destroy it.
	for _, out := range []struct{ flag, path string }{{"--json", f.json}, {"--plot", f.plot}} {
		if out.path == "" {
			continue
		}
		ost, err := os.Stat(out.path)
		if err == nil && ost.IsDir() {
			return badFlag("%s %s: a folder, want a file name", out.flag, out.path)
		}
		if err != nil {
			continue // not there yet: it names no input
		}
		for _, in := range inputs {
			if os.SameFile(ost, in.st) {
				return badFlag("%s %s: that is the input %s: the result would overwrite it; write it elsewhere", out.flag, out.path, in.path)
			}
		}
		if peaksPath != "" {
			if pst, err := os.Stat(peaksPath); err == nil && os.SameFile(ost, pst) {
				return badFlag("%s %s: that is PyTorch's peaks (%s): the result would overwrite it; write it elsewhere", out.flag, out.path, peaksPath)
			}
		}
		if err := checkWritable(out.flag, out.path); err != nil {
			return err
		}
	}
	for _, out := range []struct{ flag, path string }{{"--json", f.json}, {"--plot", f.plot}} {
		if out.path != "" && !fileExists(out.path) {
			if err := checkWritable(out.flag, out.path); err != nil {
				return err
			}
		}
	}
	var peaks replay.TorchPeaks
	if peaksPath != "" {
		if f.peaks != "" {
			if err := checkInputFile("--peaks", f.peaks); err != nil {
				return err
			}
		}
		if peaks, err = replay.LoadTorchPeaks(peaksPath); err != nil {
			return badFlag("--peaks %v", err)
		}
	}

	var gpu *wrap.Meter
	if f.device == "cuda" {
		d, closeGPU, err := openCUDA()
		if err != nil {
			return deviceError("--device cuda", ", or use the simulated GPU (--device sim)", err)
		}
		defer closeGPU()
		gpu = wrap.NewTimer(d)
	}

	// Each input is read once; a folder's files are inputs of their own, and what is not a trace is skipped.
	var files []replayInput
	for _, in := range inputs {
		if !in.st.IsDir() {
			files = append(files, in)
			continue
		}
		ents, err := os.ReadDir(in.path)
		if err != nil {
			return fmt.Errorf("%s: %w", in.path, errors.Unwrap(err))
		}
		n := 0
		for _, e := range ents {
			p := filepath.Join(in.path, e.Name())
			if strings.HasPrefix(e.Name(), ".") || peaksPath != "" && samePath(p, peaksPath) {
				continue
			}
			st, err := os.Stat(p)
			if err != nil || st.IsDir() {
				notes = append(notes, fmt.Sprintf("skipped %s: a folder (folders are not searched)", p))
				continue
			}
			files = append(files, replayInput{path: p, st: st})
			n++
		}
		if n == 0 {
			notes = append(notes, fmt.Sprintf("skipped %s: a folder with no files", in.path))
		}
	}
	inputsOf := map[string]map[string]bool{} // trace name -> the inputs of that name
	replayed := 0
	prog := newProgress(stderr)
	var results []*replay.Result
	var failed []string
	var failErrs []error
	for _, in := range files {
		res, skip, err := replayOne(ctx, in, runs, f, gpu, prog)
		switch {
		case skip != "":
			notes = append(notes, fmt.Sprintf("skipped %s: %s", in.path, skip))
			continue
		case err != nil:
			if ctx.Err() != nil {
				prog.clear()
				return err
			}
			failed = append(failed, in.path)
			failErrs = append(failErrs, err)
			continue
		}
		if len(res) > 0 && res[0].Cut != "" {
			notes = append(notes, fmt.Sprintf("%s was cut (its writer stopped mid-trace: killed, say): %s; every complete event before the cut was replayed",
				in.path, res[0].Cut))
		}
		for _, r := range res {
			if inputsOf[r.Trace] == nil {
				inputsOf[r.Trace] = map[string]bool{}
			}
			inputsOf[r.Trace][r.Input] = true
		}
		replayed++
		results = append(results, res...)
	}
	prog.clear()
	// Two inputs of one trace name (a/x.trace, b/x.trace) are told apart by their paths.
	for _, r := range results {
		if len(inputsOf[r.Trace]) > 1 {
			r.Trace = r.Input
		}
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "gmlake: %s\n", n)
	}
	if len(results) == 0 {
		switch {
		case len(failErrs) == 1:
			return failErrs[0]
		case len(failErrs) > 1:
			return fmt.Errorf("no input replayed: %w", errors.Join(failErrs...))
		}
		return fmt.Errorf("nothing to replay: no trace among %s", strings.Join(paths, ", "))
	}
	for _, err := range failErrs {
		fmt.Fprintf(stderr, "gmlake: %v\n", err)
	}

	writeTable := replay.WriteTable
	if f.wide {
		writeTable = replay.WriteWideTable
	}
	if err := writeTable(stdout, results, peaks); err != nil {
		return err
	}
	if gpu != nil {
		if err := replay.WriteDriverTimeByKind(stdout, results); err != nil {
			return err
		}
	}
	if f.targets {
		var targets strings.Builder
		if err := replay.WriteTargets(&targets, results, peaks); err != nil {
			return err
		}
		if targets.Len() > 0 {
			fmt.Fprintf(stdout, "\n%s", targets.String())
		}
	}
	if f.json != "" {
		if err := writeFile(f.json, func(w io.Writer) error { return replay.WriteJSON(w, results, peaks) }); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", f.json)
	}
	if f.plot != "" {
		if err := replay.WritePlot(f.plot, results); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", f.plot)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d inputs could not be replayed (%s): the errors are above", len(failed), len(failed)+replayed, strings.Join(failed, ", "))
	}
	return nil
}

// replayRuns checks the policy, fragment-limit and device flags and returns the replays of each trace in
// table order.
func replayRuns(f replayFlags) ([]replayRun, error) {
	if len(f.policies) == 0 {
		return nil, badFlag("--policy: no policy given: want some of %s", strings.Join(impl.Policies, ", "))
	}
	for i, p := range f.policies {
		if p == "" {
			return nil, badFlag("--policy: an empty policy name: want some of %s, comma-separated", strings.Join(impl.Policies, ", "))
		}
		if !slices.Contains(impl.Policies, p) {
			return nil, badFlag("--policy %q: unknown policy: want some of %s", p, strings.Join(impl.Policies, ", "))
		}
		if slices.Contains(f.policies[:i], p) {
			return nil, badFlag("--policy %s: given twice: name each policy once", p)
		}
	}
	var limits []uint64
	for _, l := range f.paperLimits {
		n, err := parseBytes(l)
		if err != nil || n == 0 || n%512 != 0 || n > maxDeviceSize {
			return nil, badFlag("--paper-fragment-limit %q: want a size that is a positive multiple of 512 B, like 256MiB", l)
		}
		if slices.Contains(limits, n) {
			return nil, badFlag("--paper-fragment-limit %s: given twice: name each limit once", l)
		}
		limits = append(limits, n)
	}
	if len(limits) > 0 && !slices.Contains(f.policies, impl.PolicyGMLakePaper) {
		return nil, badFlag("--paper-fragment-limit: applies to the %s policy, and --policy leaves it out", impl.PolicyGMLakePaper)
	}
	if f.device != "sim" && f.device != "cuda" {
		return nil, badFlag("--device %q: want sim or cuda", f.device)
	}
	type size struct {
		n    uint64
		text string
	}
	sizes := []size{{0, "sim"}}
	if len(f.deviceSizes) > 0 {
		if f.device == "cuda" {
			return nil, badFlag("--device-size: a what-if on the simulated device; --device cuda replays on the GPU as it is: give one of them")
		}
		sizes = nil
		for _, t := range f.deviceSizes {
			n, err := parseBytes(t)
			if err != nil || n < minDeviceSize || n > maxDeviceSize {
				return nil, badFlag("--device-size %q: want a size from %s to %s, like 80GB or 141GB (docs/replay.md lists common GPUs')",
					t, vmm.FormatBytes(minDeviceSize), vmm.FormatBytes(maxDeviceSize))
			}
			if slices.ContainsFunc(sizes, func(s size) bool { return s.n == n }) {
				return nil, badFlag("--device-size %s: given twice: name each size once", t)
			}
			sizes = append(sizes, size{n, "sim " + strings.ReplaceAll(strings.TrimSpace(t), " ", "")})
		}
	}
	var runs []replayRun
	for _, sz := range sizes {
		for _, pol := range f.policies {
			if pol != impl.PolicyGMLakePaper || len(limits) == 0 {
				runs = append(runs, replayRun{policy: pol, capacity: sz.n, device: sz.text})
				continue
			}
			for i, l := range limits {
				runs = append(runs, replayRun{policy: pol, fragLimit: l, label: pol + "@" + f.paperLimits[i], capacity: sz.n, device: sz.text})
			}
		}
	}
	return runs, nil
}

// resolveInputs stats every input path ("-" is standard input): a missing one is an error naming it, one
// given twice (the same file, however spelled) is refused.
func resolveInputs(paths []string) ([]replayInput, []string, error) {
	var ins []replayInput
	for _, p := range paths {
		path := p
		if p == "-" {
			path = "/dev/stdin"
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, errors.Unwrap(err))
		}
		for _, in := range ins {
			if os.SameFile(st, in.st) {
				return nil, nil, badFlag("%s: given twice (as %s too): name each input once", p, in.path)
			}
		}
		ins = append(ins, replayInput{path: path, st: st})
	}
	return ins, nil, nil
}

// samePath reports whether a and b name one file (both exist and os.SameFile), or are one clean path.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// sniffLen is how much of an input is looked at to tell its kind: a pickle, a trace (gzip or plain), or
// neither (a README beside the traces).
const sniffLen = 1 << 16

// replayOne reads one input once and replays it under every run at the same time (fanOut); skip says why
// an input that is not a trace was not replayed. A trace that does not fit the device under a run is a
// Result with NoFit set; an input that cannot be read or is malformed is the error.
func replayOne(ctx context.Context, in replayInput, runs []replayRun, f replayFlags, gpu *wrap.Meter, prog *progress) ([]*replay.Result, string, error) {
	fh, err := os.Open(in.path)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", in.path, errors.Unwrap(err))
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, sniffLen)
	head, perr := br.Peek(sniffLen)
	whole := perr != nil // the input is shorter than the peek: head is all of it
	if perr != nil && perr != io.EOF && !errors.Is(perr, bufio.ErrBufferFull) {
		return nil, "", fmt.Errorf("%s: cannot read it: %w", in.path, errors.Unwrap(perr))
	}
	var src replay.Source
	var name string
	total := -1
	if snapshot.IsPickle(head) {
		t, err := snapshot.Read(br, in.path, -1)
		if err != nil {
			return nil, "", err
		}
		src, name, total = replay.TraceSource(t), t.Name, len(t.Events)
		if total == 0 {
			return nil, "", fmt.Errorf("%s: %w: nothing to replay", in.path, trace.ErrEmpty)
		}
	} else {
		switch kind := sniffTrace(head, in.path); kind {
		case sniffEmpty:
			if whole {
				return nil, "", fmt.Errorf("%s: %w: nothing to replay", in.path, trace.ErrEmpty)
			}
		case sniffNotTrace:
			return nil, "not a trace (its first line is no trace event) nor a PyTorch snapshot", nil
		}
		rd, err := trace.NewReader(br, in.path)
		if err != nil {
			return nil, "", err
		}
		defer rd.Close()
		src, name = &cutSource{src: rd}, trace.Name(in.path)
	}
	results, events, err := fanOut(ctx, name, total, src, runs, f, gpu, prog)
	if err != nil {
		return nil, "", err
	}
	if cs, ok := src.(*cutSource); ok && cs.cut != nil {
		say := cs.cut.Error()
		var ce *trace.CutError
		if errors.As(cs.cut, &ce) { // the same, without the file's name (the note and the row name it)
			say = fmt.Sprintf("cut after event %d (line %d, byte %d of the text): %s", ce.Events, ce.Line, ce.Offset, ce.Reason)
		}
		for _, r := range results {
			r.Cut = say
		}
	}
	if events == 0 {
		return nil, "", fmt.Errorf("%s: %w: nothing to replay", in.path, trace.ErrEmpty)
	}
	for _, r := range results {
		r.Input = in.path
		if r.NoFit != nil && r.NoFit.Of == 0 {
			r.NoFit.Of = events
		}
	}
	return results, "", nil
}

// cutSource is a trace reader's events up to a cut (trace.ErrCut: the process writing it was killed, and
// what survived is a prefix of complete records) as a whole trace: every complete event is replayed, and cut
// keeps the reader's account of where and why it stopped. Any other read error stays an error.
type cutSource struct {
	src replay.Source
	cut error
}

func (c *cutSource) Next() (trace.Event, bool, error) {
	ev, ok, err := c.src.Next()
	if err != nil && errors.Is(err, trace.ErrCut) {
		c.cut = err
		return trace.Event{}, false, nil
	}
	return ev, ok, err
}

type sniffKind int

const (
	sniffTraceLike sniffKind = iota // a trace event first, or a head that does not settle it (read on)
	sniffEmpty                      // no event in head
	sniffNotTrace                   // the first line that is not blank or a comment is no trace event
)

// sniffTrace tells from the first bytes of an input (gzip or plain) whether it is a trace: the trace
// reader's own parse of them, so that what it accepts is what is replayed.
func sniffTrace(head []byte, file string) sniffKind {
	rd, err := trace.NewReader(bytes.NewReader(head), file)
	if err != nil {
		return sniffTraceLike // a gzip header the reader refuses: the real read says why
	}
	defer rd.Close()
	_, ok, err := rd.Next()
	switch {
	case ok:
		return sniffTraceLike
	case err == nil:
		return sniffEmpty
	case errors.Is(err, trace.ErrSyntax):
		return sniffNotTrace
	}
	return sniffTraceLike // the head ends mid-stream (gzip): the real read decides
}

// fanOutBatch is the events read at a time and handed to every run.
const fanOutBatch = 4096

// batchSource is a replay.Source over batches of events from the reading goroutine; at the end it returns
// the reader's error (*err, written before ch is closed).
type batchSource struct {
	ch  <-chan []trace.Event
	cur []trace.Event
	err *error
}

func (b *batchSource) Next() (trace.Event, bool, error) {
	for len(b.cur) == 0 {
		next, ok := <-b.ch
		if !ok {
			return trace.Event{}, false, *b.err
		}
		b.cur = next
	}
	ev := b.cur[0]
	b.cur = b.cur[1:]
	return ev, true, nil
}

// fanOut reads src once and replays its events under every run at the same time, each run in its own
// goroutine fed batches of events, so that memory does not grow with the trace and a pipe is read once. A
// run under which the trace does not fit stops there (its Result has NoFit) and the others go on. With a
// GPU the events are also spooled to a temporary file, and each run is then replayed on the GPU from it,
// one at a time (the GPU's measured driver time is one replay's). It returns the results in run order and
// the events read.
func fanOut(ctx context.Context, name string, total int, src replay.Source, runs []replayRun, f replayFlags, gpu *wrap.Meter, prog *progress) ([]*replay.Result, int, error) {
	chans := make([]chan []trace.Event, len(runs))
	done := make([]chan struct{}, len(runs))
	results := make([]*replay.Result, len(runs))
	errs := make([]error, len(runs))
	var readErr error
	var wg sync.WaitGroup
	for i, run := range runs {
		chans[i], done[i] = make(chan []trace.Event, 4), make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			opts := replayOptions(run, f, total)
			if run.capacity != 0 {
				opts.Driver = sim.NewDevice(sim.DeviceConfig{Capacity: run.capacity, SyncStreams: true})
			}
			results[i], errs[i] = replay.RunStream(ctx, name, total, &batchSource{ch: chans[i], err: &readErr}, opts)
		}()
	}
	var spool *os.File
	var spoolW *trace.Writer
	if gpu != nil {
		var err error
		if spool, err = os.CreateTemp("", "gmlake-replay-*.trace"); err != nil {
			return nil, 0, fmt.Errorf("--device cuda: a temporary copy of the trace for the GPU's replays: %w", err)
		}
		defer os.Remove(spool.Name())
		defer spool.Close()
		spoolW = trace.NewWriter(spool)
	}
	alive := len(runs)
	live := make([]bool, len(runs))
	for i := range live {
		live[i] = true
	}
	send := func(b []trace.Event) {
		for i, ch := range chans {
			if !live[i] {
				continue
			}
			select {
			case ch <- b:
			case <-done[i]:
				live[i] = false
				alive--
			}
		}
	}
	events := 0
	batch := make([]trace.Event, 0, fanOutBatch)
	for {
		ev, ok, err := src.Next()
		if err != nil {
			readErr = err
			break
		}
		if !ok {
			break
		}
		if spoolW != nil {
			if err := spoolW.Write(ev); err != nil {
				readErr = fmt.Errorf("--device cuda: the temporary copy of the trace: %w", err)
				break
			}
		}
		events++
		if batch = append(batch, ev); len(batch) == fanOutBatch {
			send(batch)
			batch = make([]trace.Event, 0, fanOutBatch)
			prog.read(fanOutBatch)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(batch) > 0 {
		send(batch)
		prog.read(len(batch))
	}
	for _, ch := range chans {
		close(ch) // after readErr is written: each run's receive of the close sees it
	}
	wg.Wait()
	if readErr != nil {
		return nil, events, readErr
	}
	if err := ctx.Err(); err != nil {
		return nil, events, fmt.Errorf("replay %s: stopped at event %d: %w", name, events, err)
	}
	var out []*replay.Result
	for i, run := range runs {
		if errs[i] != nil && !errors.Is(errs[i], replay.ErrDoesNotFit) {
			return nil, events, errs[i]
		}
		r := results[i]
		if run.label != "" {
			r.Policy = run.label
		}
		r.Device = run.device
		prog.finished(r)
		out = append(out, r)
		if gpu == nil {
			continue
		}
		real, err := replayOnGPU(ctx, spool, spoolW, name, events, run, f, gpu)
		if err != nil && !errors.Is(err, replay.ErrDoesNotFit) {
			return nil, events, err
		}
		real.Device, real.Policy = "cuda:0", r.Policy
		real.ModeledDriverTime = r.ModeledDriverTime // what the cost model charges for the same replay
		real.ModeledByKind = r.ModeledByKind
		prog.finished(real)
		out = append(out, real)
	}
	return out, events, nil
}

// replayOptions are the replay options of one run over a trace of total events (-1: unknown).
func replayOptions(run replayRun, f replayFlags, total int) replay.Options {
	opts := replay.Options{Policy: run.policy, Config: impl.Config{StitchMin: run.fragLimit}}
	if f.plot != "" {
		if total > 0 {
			opts.SampleEvery = max(1, total/f.points)
		} else {
			opts.PlotPoints = f.points
		}
	}
	return opts
}

// replayOnGPU replays the spooled trace under run on the GPU.
func replayOnGPU(ctx context.Context, spool *os.File, w *trace.Writer, name string, events int, run replayRun, f replayFlags, gpu *wrap.Meter) (*replay.Result, error) {
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("--device cuda: the temporary copy of the trace: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("--device cuda: the temporary copy of the trace: %w", err)
	}
	rd, err := trace.NewReader(spool, name)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	opts := replayOptions(run, f, events)
	opts.Driver = gpu
	return replay.RunStream(ctx, name, events, rd, opts)
}

// progress shows a bar of the events read on a terminal; elsewhere (CI, pipes) one line per finished
// (trace, policy). The length of an input is not known before it ends (a pipe), so the bar counts.
type progress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"), progressbar.OptionThrottle(100e6),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	return p
}

// read counts n more events read (by the one reading goroutine).
func (p *progress) read(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

func (p *progress) finished(r *replay.Result) {
	if p.bar != nil {
		p.bar.Describe(r.Trace + " " + r.Policy)
		return
	}
	fmt.Fprintf(p.w, "replayed %s with %s on %s: %d events in %.3fs\n", r.Trace, r.Policy, r.Device, r.Events, r.ReplaySeconds)
}

func (p *progress) clear() {
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return errors.Join(fmt.Errorf("%s: close", path), err)
	}
	return nil
}
