package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gmlake/gmlake/fuzz"
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

func init() {
	var (
		device, policy, capacity, maxSize, out, replay   string
		memoryLimit                                      string
		duration, checkEvery, progressEvery, minimizeFor time.Duration
		hangAfter                                        time.Duration
		seed                                             int64
		streams, maxLive, cudaDevice, logOps             int
		memInfoCheck, minimize                           bool
	)
	cmd := &cobra.Command{
		Use:   "fuzz",
		Short: "Run a fuzz campaign against the allocator on the simulated device or a real GPU",
		Long: `fuzz runs the one generator's ops (harness/ops: alloc at any size and at the policies' thresholds,
free, free-interior, RecordStream, stream work and its completion, EmptyCache, the pending-pair template)
from one goroutine per stream on one engine behind the serving layer (impl/serve: what libgmlake runs, its
memory cap and its synchronise-every-stream-and-retry on out of memory) for --duration. Every allocation
is filled with a pattern on the device and a sample is read back before its free (on a GPU, a block
recorded on another stream is also written there, behind work held back on that stream); every
--check-every the workers pause and the spec's invariants are checked on the engine's snapshot and the
device's state (on a GPU: what this process holds, booked by a ledger). At the end everything is freed and
the engine closed, and the device must hold nothing of ours.

A progress line goes to stderr every --progress-every; one JSON summary line per policy goes to stdout
(ops, ops_per_sec, rules, syncs, violations, leaks, replay, ...). On failure the seed, the last operations
and the one replay command are printed, the log is saved as a program of the op language in --out, re-run
single-threaded on the simulated device through the serving layer, and minimized; the paths are printed.
Exit status 1 on any violation or leak.

--replay FILE runs a saved reproducer single-threaded on the simulated device through its policy (or
--policy, or all), every check after every step. FILE is any program of the one op language (harness/ops):
what rapid, the explorer, porcupine, the findings, this campaign and go test -fuzz save, a history (the
outcomes after "//" are ignored), a trace (a/f lines; r is no op, as in gmlake replay), or a FuzzOps corpus
file (go test fuzz v1). With --minimize a failure is shrunk into FILE.POLICY.min.ops.

Examples:
  gmlake fuzz --duration 30s --policy caching
  gmlake fuzz --device cuda --policy gmlake --duration 5m --capacity 30GiB --streams 8 --seed 1
  gmlake fuzz --replay gmlake-fuzz-gmlake-sim-seed1-1764400000.ops --minimize`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			if replay != "" {
				// The campaign's flags do not apply to a replay: given one, it is refused rather than ignored.
				var campaignOnly []string
				fl.VisitAll(func(f *pflag.Flag) {
					if f.Changed && !slices.Contains([]string{"replay", "policy", "minimize", "minimize-time"}, f.Name) {
						campaignOnly = append(campaignOnly, "--"+f.Name)
					}
				})
				if len(campaignOnly) > 0 {
					return badFlag("%s: a campaign's flag, and --replay runs a saved program: leave it out", strings.Join(campaignOnly, ", "))
				}
				if err := checkInputFile("--replay", replay); err != nil {
					return err
				}
				return runReplayProgram(cmd, replay, policy, minimize, minimizeFor)
			}
			if minimize || fl.Changed("minimize") {
				return badFlag("--minimize: shrinks the failure of a saved program: give it with --replay FILE (a campaign minimizes its failures within --minimize-time)")
			}
			for _, sz := range []struct{ flag, v string }{{"capacity", capacity}, {"max-size", maxSize}, {"memory-limit", memoryLimit}} {
				if fl.Changed(sz.flag) && strings.TrimSpace(sz.v) == "" {
					return badFlag("--%s: no size given (want e.g. 512MiB, 30GiB)", sz.flag)
				}
			}
			if device != "sim" && device != "cuda" {
				return badFlag("--device %q: want sim or cuda", device)
			}
			capBytes, err := parseBytes(capacity)
			if err != nil {
				return badFlag("--capacity: %v", err)
			}
			maxBytes, err := parseBytes(maxSize)
			if err != nil {
				return badFlag("--max-size: %v", err)
			}
			limitBytes, err := parseBytes(memoryLimit)
			if err != nil {
				return badFlag("--memory-limit: %v", err)
			}
			// A zero from the command line is a value the user typed, not the campaign's "use the default".
			for _, z := range []struct {
				flag string
				zero bool
			}{{"--streams", streams == 0}, {"--max-live", maxLive == 0}, {"--log-ops", logOps == 0},
				{"--duration", duration == 0}, {"--progress-every", progressEvery == 0}, {"--hang-after", hangAfter == 0},
				{"--capacity", fl.Changed("capacity") && capBytes == 0}, {"--max-size", fl.Changed("max-size") && maxBytes == 0}} {
				if z.zero {
					return badFlag("%s 0: want more than 0", z.flag)
				}
			}
			if policy != "all" && !slices.Contains(impl.Policies, policy) {
				return badFlag("--policy %q: want one of %s, or all", policy, strings.Join(impl.Policies, ", "))
			}
			base := fuzz.CampaignConfig{Device: device, Policy: policy, Duration: duration, Seed: seed, Streams: streams,
				Capacity: capBytes, MemoryLimit: limitBytes, MaxSize: maxBytes, MaxLive: maxLive, CheckEvery: checkEvery,
				Progress: cmd.ErrOrStderr(), ProgressEvery: progressEvery, OutDir: out, MinimizeFor: minimizeFor,
				LogOps: logOps, MemInfoCheck: memInfoCheck, CUDADevice: cudaDevice, HangAfter: hangAfter}
			if policy == "all" {
				base.Policy = ""
			}
			if err := base.Validate(); err != nil {
				return badFlagErr(err)
			}
			if err := checkDir("--out", out); err != nil {
				return err
			}
			policies := []string{policy}
			if policy == "all" {
				policies = impl.Policies
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			var bad []string
			for _, p := range policies {
				cfg := base
				cfg.Policy = p
				cfg.OnHang = func(s *fuzz.Summary) {
					// A worker is stuck inside the allocator: report and exit (the campaign cannot finish).
					line, _ := json.Marshal(s)
					fmt.Fprintln(cmd.OutOrStdout(), string(line))
					fmt.Fprintf(cmd.ErrOrStderr(), "gmlake: fuzz campaign hung: %s\n", s.Failure)
					os.Exit(1)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "fuzz: policy %s on %s for %v, %d streams, seed %d\n", p, device, duration, streams, seed)
				sum, err := fuzz.RunCampaign(ctx, cfg)
				if errors.Is(err, vmm.ErrDriverNotLoaded) {
					return deviceError("--device cuda", ", or use the simulated GPU (--device sim)", err)
				}
				if err != nil {
					return err
				}
				line, _ := json.Marshal(sum)
				fmt.Fprintln(cmd.OutOrStdout(), string(line))
				switch {
				case sum.Vacuous:
					bad = append(bad, fmt.Sprintf("%s: %s", p, sum.Failure))
				case !sum.OK():
					bad = append(bad, fmt.Sprintf("%s: %d violations, %d leaks (%s)", p, sum.Violations, sum.Leaks, sum.Failure))
				}
				if ctx.Err() != nil {
					break
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("fuzz campaign failed: %s", strings.Join(bad, "; "))
			}
			return nil
		},
	}
	cmd.SilenceErrors = true // main prints the error once
	f := cmd.Flags()
	f.StringVar(&device, "device", "sim", "sim (the simulated H200) or cuda (a real GPU through libcuda.so.1)")
	f.StringVar(&policy, "policy", impl.PolicyGMLake, "policy to fuzz: "+strings.Join(impl.Policies, ", ")+", or all (one after the other)")
	f.DurationVar(&duration, "duration", 30*time.Second, "how long to run (per policy)")
	f.Int64Var(&seed, "seed", 0, "random seed (0: from the clock; printed in the summary)")
	f.IntVar(&streams, "streams", 8, "streams, one worker goroutine each")
	f.StringVar(&capacity, "capacity", "", "sim: device size (default 16GiB); cuda: the device the judge sees and the serving layer's cap (default half the free memory). E.g. 30GiB")
	f.StringVar(&maxSize, "max-size", "", "largest request (default capacity/8)")
	f.StringVar(&memoryLimit, "memory-limit", "", "sim: the serving layer's cap on the engine's physical bytes (default none); cuda: the cap is --capacity")
	f.IntVar(&maxLive, "max-live", 48, "most live allocations per worker")
	f.DurationVar(&checkEvery, "check-every", time.Second, "period of the lock-step invariant checks (negative: only at the end)")
	f.DurationVar(&progressEvery, "progress-every", 5*time.Second, "period of the progress line on stderr")
	f.StringVar(&out, "out", ".", "folder for failing sequences")
	f.DurationVar(&minimizeFor, "minimize-time", 60*time.Second, "time budget to minimize a failing sequence (negative: do not)")
	f.IntVar(&logOps, "log-ops", 20000, "operations kept for the reproducer")
	f.DurationVar(&hangAfter, "hang-after", 2*time.Minute, "no operation completing for this long is a hang: the goroutines and the log are saved, exit 1")
	f.BoolVar(&memInfoCheck, "meminfo-check", false, "cuda: also require cuMemGetInfo's free memory back to its start value (only when no other process uses the GPU)")
	f.IntVar(&cudaDevice, "cuda-device", 0, "cuda: device ordinal")
	f.StringVar(&replay, "replay", "", "run a saved program, history, trace or corpus file single-threaded on the simulated device instead of a campaign")
	f.BoolVar(&minimize, "minimize", false, "with --replay: shrink a failure into FILE.POLICY.min.ops")
	rootCmd.AddCommand(cmd)
}

// runReplayProgram runs a saved program, history or trace (any checker's reproducer, or a FuzzOps corpus
// file) single-threaded through ops.Env on the simulated device under its policy (or --policy, or all of
// them), every invariant after every step and the pattern check on; with --minimize a failure is shrunk
// (ops.Shrink) into FILE.POLICY.min.ops, which replays the same way.
func runReplayProgram(cmd *cobra.Command, path, policy string, minimize bool, minimizeFor time.Duration) error {
	p, err := fuzz.ReadProgramFile(path)
	if err != nil {
		return badFlag("--replay %v", err)
	}
	if len(p.Ops) == 0 {
		return badFlag("--replay %s: no operations in it: want a program, history, trace or corpus file", path)
	}
	var policies []string
	switch {
	case cmd.Flags().Changed("policy") && policy == "all":
		policies = impl.Policies
	case cmd.Flags().Changed("policy"):
		if !slices.Contains(impl.Policies, policy) {
			return badFlag("--policy %q: want one of %s, or all", policy, strings.Join(impl.Policies, ", "))
		}
		policies = []string{policy}
	case p.Cfg.Policy != "":
		policies = []string{p.Cfg.Policy}
	default:
		policies = impl.Policies
	}
	failed := 0
	for _, pol := range policies {
		cfg := p.Cfg
		cfg.Policy, cfg.Patterns = pol, true
		start := time.Now()
		i, vs, env, err := ops.Run(cfg, p.Ops)
		if err != nil {
			return err
		}
		if i < 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %d ops ran clean (%.2fs)\n", pol, len(p.Ops), time.Since(start).Seconds())
			continue
		}
		failed++
		at := "the end (clearfaults, completeall, close, leak check)"
		if i < len(p.Ops) {
			at = p.Ops[i].String()
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: FAIL at op %d (%s): %v\nhistory:\n%s", pol, i, at, vs, env.History())
		if minimize {
			if minimizeFor <= 0 {
				minimizeFor = 60 * time.Second
			}
			small, svs := ops.Shrink(cfg, p.Ops, minimizeFor)
			m := &ops.Program{Cfg: cfg, Ops: small}
			mpath := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(path, ".gz"), ".trace"), ".ops") + "." + pol + ".min.ops"
			note := fmt.Sprintf("minimized from %s (%d -> %d ops): %v\nreplay: gmlake fuzz --replay %s", path, len(p.Ops), len(small), svs, mpath)
			if err := m.WriteFile(mpath, note); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: minimized to %d ops: %s\n", pol, len(small), mpath)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s fails under %d of %d policies", path, failed, len(policies))
	}
	return nil
}

// parseBytes reads a size: a number of bytes, or with a unit (KiB, MiB, GiB, TiB; K, M, G, T mean the same;
// KB, MB, GB, TB are powers of ten). "" is 0.
func parseBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	units := []struct {
		suf string
		m   uint64
	}{{"KiB", vmm.KiB}, {"MiB", vmm.MiB}, {"GiB", vmm.GiB}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", vmm.KiB}, {"M", vmm.MiB}, {"G", vmm.GiB}, {"T", 1 << 40}, {"B", 1}}
	mult := uint64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v*float64(mult) >= 1<<64 {
		return 0, fmt.Errorf("bad size %q (want e.g. 1073741824, 512MiB, 30GiB)", s)
	}
	return uint64(v * float64(mult)), nil
}
