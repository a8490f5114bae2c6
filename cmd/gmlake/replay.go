package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gmlake/gmlake/harness/replay"
	"github.com/gmlake/gmlake/harness/snapshot"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/cudavmm"
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
}

func init() {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay [flags] TRACE...",
		Short: "Replay training allocation traces through allocator policies and compare their memory use",
		Long: `replay drives each trace (the text format of testdata/traces/README.md, gzip or plain, or a PyTorch
memory snapshot pickle from torch.cuda.memory._dump_snapshot) through each policy, on the simulated H200 or a
real GPU, and prints one table: per trace and policy the peak live bytes (each request rounded up to 512 B),
peak allocated and reserved bytes, fragmentation (1 - allocated/reserved, and 1 - live/reserved), driver calls
by kind and the modeled driver time, beside PyTorch's own measured peak reserved from peaks.json
(caching against the native allocator, every other policy against expandable_segments) and the modeled
driver time as a share of the recorded training time.

With --device cuda each pair is replayed on GPU 0 as well as on the simulated device: the table then has a row
for each, and the GPU rows show the wall time measured inside driver calls beside the modeled time.`,
		Example: `  gmlake replay testdata/traces/*.trace.gz
  gmlake replay --policy caching,gmlake --json out.json --plot out.png testdata/traces/llama1b-ckpt.trace.gz
  gmlake replay snapshot.pickle`,
		Args:          cobra.MinimumNArgs(1),
		SilenceErrors: true, // main prints the error once
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), f, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.policies, "policy", replay.Policies, "policies to replay, comma-separated (of "+strings.Join(impl.Policies, ", ")+")")
	fl.StringVar(&f.device, "device", "sim", "sim (the simulated H200) or cuda (GPU 0, with a simulated replay beside it)")
	fl.StringVar(&f.json, "json", "", "write the results as a JSON array to `FILE`")
	fl.StringVar(&f.plot, "plot", "", "plot reserved and allocated memory over each trace to `FILE` (.png or .svg)")
	fl.StringVar(&f.peaks, "peaks", "", "PyTorch's measured peaks (`FILE`); default: peaks.json beside the first trace, if any")
	fl.IntVar(&f.points, "plot-points", 2000, "timeline samples per trace and policy for --plot")
	fl.StringSliceVar(&f.paperLimits, "paper-fragment-limit", nil, "replay gmlake-paper once per fragment limit (GLake's fragLimit), a row each, e.g. 32MiB,256MiB,512MiB,1GiB (its documents use all four)")
	fl.BoolVar(&f.wide, "wide", false, "print every column: events, allocated, PyTorch's measured peak, driver calls by kind, share of training, replay speed")
	rootCmd.AddCommand(cmd)
}

// openCUDA opens the real driver on GPU 0. It is the one place the replay command touches impl/cudavmm.
func openCUDA() (vmm.Driver, func() error, error) {
	d, err := cudavmm.New(0)
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}

func runReplay(ctx context.Context, f replayFlags, paths []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	// Every flag and output path is checked before the first replay: a mistake costs nothing.
	if len(f.policies) == 0 {
		return badFlag("--policy: no policy given: want some of %s", strings.Join(impl.Policies, ", "))
	}
	for _, p := range f.policies {
		if !slices.Contains(impl.Policies, p) {
			return badFlag("--policy: unknown policy %q: want some of %s", p, strings.Join(impl.Policies, ", "))
		}
	}
	var limits []uint64
	for _, l := range f.paperLimits {
		n, err := parseBytes(l)
		if err != nil || n == 0 || n%512 != 0 {
			return badFlag("--paper-fragment-limit %q: want a size that is a positive multiple of 512 B, like 256MiB", l)
		}
		limits = append(limits, n)
	}
	if f.device != "sim" && f.device != "cuda" {
		return badFlag("--device %q: want sim or cuda", f.device)
	}
	if f.points < 1 {
		return badFlag("--plot-points %d: want at least 1", f.points)
	}
	if f.plot != "" {
		if ext := strings.ToLower(filepath.Ext(f.plot)); ext != ".png" && ext != ".svg" {
			return badFlag("--plot %s: want a .png or .svg file name", f.plot)
		}
		if err := checkWritable("--plot", f.plot); err != nil {
			return err
		}
	}
	if f.json != "" {
		if err := checkWritable("--json", f.json); err != nil {
			return err
		}
	}

	var peaks replay.TorchPeaks
	peaksPath := f.peaks
	if peaksPath == "" {
		if p := filepath.Join(filepath.Dir(paths[0]), "peaks.json"); fileExists(p) {
			peaksPath = p
		}
	}
	if peaksPath != "" {
		var err error
		if peaks, err = replay.LoadTorchPeaks(peaksPath); err != nil {
			return err
		}
	}

	traces := make([]*traceInput, 0, len(paths))
	total := 0
	for _, p := range paths {
		t, err := checkTrace(p)
		if err != nil {
			return err
		}
		if t.events == 0 {
			return fmt.Errorf("%s: %w: nothing to replay", p, trace.ErrEmpty)
		}
		traces = append(traces, t)
		runs := len(f.policies)
		if len(limits) > 0 && slices.Contains(f.policies, impl.PolicyGMLakePaper) {
			runs += len(limits) - 1
		}
		total += t.events * runs
	}

	var gpu *wrap.Meter
	if f.device == "cuda" {
		d, closeGPU, err := openCUDA()
		if err != nil {
			return fmt.Errorf("--device cuda: %w", err)
		}
		defer closeGPU()
		gpu = wrap.NewTimer(d)
		total *= 2
	}

	prog := newProgress(stderr, total)
	var results []*replay.Result
	for _, t := range traces {
		sampleEvery := 0
		if f.plot != "" {
			sampleEvery = max(1, t.events/f.points)
		}
		var runs []replayRun
		for _, pol := range f.policies {
			if pol != impl.PolicyGMLakePaper || len(limits) == 0 {
				runs = append(runs, replayRun{policy: pol})
				continue
			}
			for i, l := range limits {
				runs = append(runs, replayRun{policy: pol, fragLimit: l, label: pol + "@" + f.paperLimits[i]})
			}
		}
		for _, run := range runs {
			opts := replay.Options{Policy: run.policy, Config: impl.Config{StitchMin: run.fragLimit},
				SampleEvery: sampleEvery, Progress: prog.update}
			sim, err := t.replay(ctx, opts)
			if err != nil {
				prog.clear()
				return err
			}
			if run.label != "" {
				sim.Policy = run.label
			}
			prog.finished(sim)
			results = append(results, sim)
			if gpu != nil {
				opts.Driver = gpu
				real, err := t.replay(ctx, opts)
				if err != nil {
					prog.clear()
					return err
				}
				real.Device, real.Policy = "cuda:0", sim.Policy
				real.ModeledDriverTime = sim.ModeledDriverTime // what the cost model charges for the same replay
				real.ModeledByKind = sim.ModeledByKind
				prog.finished(real)
				results = append(results, real)
			}
		}
	}
	prog.clear()

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
	var targets strings.Builder
	if err := replay.WriteTargets(&targets, results, peaks); err != nil {
		return err
	}
	if targets.Len() > 0 {
		fmt.Fprintf(stdout, "\n%s", targets.String())
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
	return nil
}

// replayRun is one replay of each trace: a policy, and for gmlake-paper swept over fragment limits its limit
// (0: the default) and row label.
type replayRun struct {
	policy    string
	fragLimit uint64
	label     string
}

// traceInput is one trace to replay: a text trace, streamed from its file by every replay so that memory
// does not grow with its length, or a PyTorch snapshot, held in memory (a pickle is decoded whole).
type traceInput struct {
	path, name string
	events     int
	mem        *trace.Trace // snapshots only
}

// checkTrace reads the trace at path once through (a text trace in constant memory), checking it and
// counting its events, so that a bad trace fails before any replay runs.
func checkTrace(path string) (*traceInput, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	if head, _ := br.Peek(2); snapshot.IsPickle(head) {
		t, err := snapshot.Read(br, path, -1)
		if err != nil {
			return nil, err
		}
		return &traceInput{path: path, name: t.Name, events: len(t.Events), mem: t}, nil
	}
	rd, err := trace.NewReader(br, path)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for {
		_, ok, err := rd.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return &traceInput{path: path, name: trace.Name(path), events: rd.Events()}, nil
		}
	}
}

// replay runs one replay of the trace, streaming a text trace from its file again.
func (t *traceInput) replay(ctx context.Context, opts replay.Options) (*replay.Result, error) {
	if t.mem != nil {
		return replay.Run(ctx, t.mem, opts)
	}
	f, err := os.Open(t.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := trace.NewReader(f, t.path)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return replay.RunStream(ctx, t.name, t.events, rd, opts)
}

// progress shows a bar on a terminal; elsewhere (CI, pipes) one line per finished (trace, policy).
type progress struct {
	w    io.Writer
	bar  *progressbar.ProgressBar
	base int // events of finished replays
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"), progressbar.OptionThrottle(100e6),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	return p
}

func (p *progress) update(done, total int) {
	if p.bar != nil {
		_ = p.bar.Set(p.base + done)
	}
}

func (p *progress) finished(r *replay.Result) {
	p.base += r.Events
	if p.bar != nil {
		p.bar.Describe(r.Trace + " " + r.Policy)
		_ = p.bar.Set(p.base)
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
