package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gmlake/gmlake/harness/mutate"
)

// jsonWhere says where a JSON document went wrong, without the decoder's Go type names.
func jsonWhere(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("a JSON %s where it wants another kind, at byte %d", te.Value, te.Offset)
	}
	return "it does not decode"
}

func init() {
	var (
		dir, keysFile, saveKeys, jsonOut, only string
		emit                                   string
		judgeFile, fromJSON                    string
		sample                                 int
		seed                                   uint64
		list, failOnSurvivor                   bool
		timeout                                time.Duration
		workers                                int
	)
	cmd := &cobra.Command{
		Use:   "mutate",
		Short: "Mutation testing: mutate the engine's source (and its serving layers) and report which checkers kill each mutant",
		Long: `mutate generates mutants of the engine (flipped and off-by-one comparisons, dropped statements, swapped
branches, changed constants, ...; see harness/mutate), compiles each through go test -overlay (the tree is
not touched), runs every checker's tests that call the mutated folder against it separately (a checker that
never calls it is not run there, and the figures say so; "unit" is the folder's own package's tests) and
prints which checkers killed it, the score per checker (timeout kills counted apart) and the survivors.
It needs the Go toolchain and runs from the module root.

Examples:
  gmlake mutate --list                              # every mutant, no run
  gmlake mutate --sample 80 --seed 12               # a seeded random sample
  gmlake mutate --keys testdata/mutants/sample80.txt # a saved sample (before/after comparisons)
  gmlake mutate                                     # every mutant of impl/
  gmlake mutate --dir impl,impl/serve               # every mutant of the engine and the serving layer (make verify)
  gmlake mutate --dir impl/serve --checkers unit,rapid --sample 40 --seed 11
  gmlake mutate --dir impl/clib,capi,trace --sample 30 --seed 18  # the perimeter: settings, the C ABI, traces
  gmlake mutate --from-json bin/mutants.json         # the figures of a saved run, judged again
  gmlake mutate --dir python/gmlake_torch/csrc --sample 10 --seed 3 --emit out/cxx  # C++ mutants for the GPU

Survivors named in the judgement list (--judgements, harness/mutate/testdata/equivalent.txt: one
"KEY ## VERDICT: reason" a line) print with their verdict; those judged equivalent leave the score's
denominator and print apart, and a judged mutant that some checker kills prints as misjudged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every value is checked before a mutant is generated.
			switch {
			case sample < 0:
				return badFlag("--sample %d: want a count of mutants, 0 (all) or more", sample)
			case workers < 1 || workers > 256:
				return badFlag("--workers %d: want 1 to 256", workers)
			case timeout < 0:
				return badFlag("--timeout %v: want a positive duration, like 5m (0: 3x the checker's unmutated time + 20s)", timeout)
			case strings.TrimSpace(dir) == "":
				return badFlag("--dir: no folder given: want package folders like impl,impl/serve")
			}
			for _, in := range []struct{ flag, path string }{{"--keys", keysFile}, {"--judgements", judgeFile}, {"--from-json", fromJSON}} {
				if in.path != "" {
					if err := checkInputFile(in.flag, in.path); err != nil {
						return err
					}
				}
			}
			for _, out := range []struct{ flag, path string }{{"--save-keys", saveKeys}, {"--json", jsonOut}} {
				if out.path != "" {
					if st, err := os.Stat(out.path); err == nil && st.IsDir() {
						return badFlag("%s %s: a folder, want a file name", out.flag, out.path)
					}
					if err := checkWritable(out.flag, out.path); err != nil {
						return err
					}
				}
			}
			if emit != "" {
				if st, err := os.Stat(emit); err == nil && !st.IsDir() {
					return badFlag("--emit %s: a file, want a folder for the mutated sources (made if missing)", emit)
				}
				if st, err := os.Stat(path.Dir(path.Clean(emit))); err != nil || !st.IsDir() {
					return badFlag("--emit %s: its parent folder %s does not exist", emit, path.Dir(path.Clean(emit)))
				}
			}
			for _, name := range strings.Split(only, ",") {
				if only != "" && !slices.ContainsFunc(mutate.Checkers, func(c mutate.Checker) bool { return c.Name == name }) {
					var names []string
					for _, c := range mutate.Checkers {
						names = append(names, c.Name)
					}
					return badFlag("--checkers %q: no such checker (the checkers: %s)", name, strings.Join(names, ","))
				}
			}
			var saved *mutate.Report // --from-json, decoded before any work
			if fromJSON != "" {
				b, err := os.ReadFile(fromJSON)
				if err != nil {
					return badFlag("--from-json %s: %v", fromJSON, errors.Unwrap(err))
				}
				saved = &mutate.Report{}
				if err := json.Unmarshal(b, saved); err != nil {
					return badFlag("--from-json %s: not the JSON of gmlake mutate --json (%v)", fromJSON, jsonWhere(err))
				}
			}
			dirs := strings.Split(dir, ",")
			for _, d := range dirs {
				if st, err := os.Stat(path.Clean(strings.TrimSpace(d))); err != nil || !st.IsDir() {
					return badFlag("--dir %s: no such folder here (gmlake mutate runs from the module root; folders like impl,impl/serve)", d)
				}
			}
			for i := range dirs {
				dirs[i] = path.Clean(strings.TrimSpace(dirs[i]))
			}
			all, err := mutate.GenerateDirs(".", dirs, mutate.Skip)
			if err != nil {
				return err
			}
			var judged map[string]mutate.Judgement
			if judgeFile != "" {
				read, err := mutate.ReadJudgements(judgeFile)
				if err != nil {
					return err
				}
				var js []mutate.Judgement // those of the folders mutated
				for _, j := range read {
					if slices.Contains(dirs, mutate.KeyDir(j.Key)) {
						js = append(js, j)
					}
				}
				var stale []mutate.Judgement
				judged, stale = mutate.Judge(all, js)
				for _, j := range stale {
					fmt.Fprintf(os.Stderr, "stale judgement (the code it named changed; judge again): %s\n", j.Key)
				}
			}
			if saved != nil {
				rep := *saved
				for i := range rep.Outcomes {
					rep.Outcomes[i].Judged = nil
				}
				rep.Judge(judged)
				rep.Summary(os.Stdout)
				return nil
			}
			ms := all
			var hdr string // a saved key file's header: the sample file's own, or the sample drawn
			if keysFile != "" {
				keys, err := mutate.ReadKeys(keysFile)
				if err != nil {
					return err
				}
				var gone []string
				ms, gone = mutate.Select(all, keys)
				for _, g := range gone {
					fmt.Fprintf(os.Stderr, "gone (the code it named changed): %s\n", g)
				}
				// Saved again (with each site's fingerprint): the sample file's own header.
				if hdr, err = mutate.ReadKeyHeader(keysFile); err != nil {
					return err
				}
			} else if sample > 0 {
				ms = mutate.Sample(all, sample, seed)
			}
			if keysFile == "" {
				hdr = fmt.Sprintf("mutants of %s: gmlake mutate --sample %d --seed %d (%d of %d)", dir, sample, seed, len(ms), len(all))
			}
			if saveKeys != "" {
				if err := os.WriteFile(saveKeys, mutate.FormatKeys(hdr, ms), 0o644); err != nil {
					return err
				}
			}
			if emit != "" {
				if err := mutate.EmitCXX(".", emit, ms); err != nil {
					return badFlag("--emit %s: %v", emit, err)
				}
				fmt.Fprintf(os.Stderr, "%d mutated files and their keys (mutants.tsv) written to %s\n", len(ms), emit)
				return nil
			}
			if list {
				for _, m := range ms {
					fmt.Println(m)
				}
				fmt.Fprintf(os.Stderr, "%d mutants (%d in %s)\n", len(ms), len(all), dir)
				return nil
			}
			checkers := mutate.Checkers
			if only != "" {
				checkers = nil
				for _, c := range mutate.Checkers {
					if strings.Contains(","+only+",", ","+c.Name+",") {
						checkers = append(checkers, c)
					}
				}
				for _, name := range strings.Split(only, ",") {
					if !slices.ContainsFunc(mutate.Checkers, func(c mutate.Checker) bool { return c.Name == name }) {
						var names []string
						for _, c := range mutate.Checkers {
							names = append(names, c.Name)
						}
						return fmt.Errorf("--checkers: no checker %q (the checkers: %s)", name, strings.Join(names, ","))
					}
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(os.Stderr, "%d mutants of %d in %s, %d checkers\n", len(ms), len(all), dir, len(checkers))
			rep, err := mutate.Run(ctx, ms, mutate.Options{Root: ".", Checkers: checkers, Timeout: timeout, Workers: workers, Log: os.Stderr})
			if rep == nil {
				return err
			}
			rep.Judge(judged)
			sc := rep.Summary(os.Stdout)
			if jsonOut != "" {
				b, _ := json.MarshalIndent(rep, "", " ")
				if werr := os.WriteFile(jsonOut, b, 0o644); werr != nil {
					return werr
				}
			}
			if err != nil {
				return err
			}
			if failOnSurvivor && sc.Survived > 0 {
				return fmt.Errorf("%d of %d non-equivalent mutants survived", sc.Survived, sc.NonEquivalent())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", mutate.DefaultDir, "the package folders to mutate, comma-separated (relative to the module root: impl, impl/serve, impl/clib, capi, trace, harness/replay); keys outside impl/ name their folder")
	f.IntVar(&sample, "sample", 0, "run a seeded random sample of this many mutants (0: all)")
	f.Uint64Var(&seed, "seed", 1, "the sample's seed")
	f.StringVar(&keysFile, "keys", "", "run the mutants named in this sample file (one key a line)")
	f.StringVar(&saveKeys, "save-keys", "", "write the chosen mutants' keys to this file")
	f.StringVar(&jsonOut, "json", "", "write every outcome as JSON to this file")
	f.StringVar(&judgeFile, "judgements", "harness/mutate/testdata/equivalent.txt", "the reviewed verdicts on surviving mutants (\"\": none)")
	f.StringVar(&fromJSON, "from-json", "", "print the figures of a run saved with --json (judged with --judgements) and stop")
	f.StringVar(&only, "checkers", "", "comma-separated checker names to run (default: all)")
	f.BoolVar(&list, "list", false, "list the mutants and stop")
	f.StringVar(&emit, "emit", "", "write each chosen mutant's whole mutated file into this folder, with mutants.tsv naming them, and stop: the C++ allocator's mutants, judged on a GPU machine (harness/mutate/gpu/cxx_mutants.sh)")
	f.BoolVar(&failOnSurvivor, "fail-on-survivor", false, "exit 1 if a mutant that compiles survives")
	f.DurationVar(&timeout, "timeout", 0, "per-checker timeout (0: 3x its unmutated time + 20s)")
	f.IntVar(&workers, "workers", 2, "checkers run at once for one mutant")
	rootCmd.AddCommand(cmd)
}
