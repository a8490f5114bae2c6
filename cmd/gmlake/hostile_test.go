package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// goName matches what a message to a CLI user must not hold (issue 36 item 9): Go type, package or
// constructor names (*big.Int, []replay.TorchRun, sim.NewDevice, strconv.ParseInt), Go slice and map
// types, and goroutine stacks.
var goName = regexp.MustCompile(`\*?\b[a-z][a-z0-9]*\.[A-Z]\w*|\[\][a-zA-Z*]|\bmap\[|goroutine \d|panic:`)

// Property (the generic check of issue 36 item 9): every flag of every subcommand, given a hostile value
// (negative, zero, huge, NaN, empty, a folder, /dev/null, a missing file, a value twice), is refused with a
// one-line error that names the flag and holds no Go name; nothing is printed on stdout and no file is
// written. The values a flag legitimately takes are listed with the reason (legit); every other flag of
// every subcommand is in the table, so a flag added without validation fails here.
func TestEveryFlagRefusesHostileValues(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	os.WriteFile(file, []byte("not a program\n"), 0o644)
	missing := filepath.Join(dir, "missing")
	noDir := "/nonexistent/gmlake/out"
	ints := []string{"-1", "-9223372036854775808", "99999999999999999999", "abc", "", "1e3", "NaN"}
	durs := []string{"-5s", "abc", "", "NaN", "1"}
	sizes := []string{"-1GiB", "NaN", "lots", "1", "1e30", ""}
	bools := []string{"maybe", "2"}
	inFiles := []string{dir, missing, ""}
	outFiles := []string{dir, noDir}

	type cmdCase struct {
		base   []string            // flags that make everything else valid and quick
		args   []string            // positional arguments after the flags
		values map[string][]string // flag -> hostile values
	}
	cases := map[string]cmdCase{
		"replay": {args: []string{bundled}, values: map[string][]string{
			"policy":               {"", "nope", "gmlake,gmlake", "caching,,gmlake"},
			"device":               {"", "tpu", "CUDA"},
			"json":                 append(slices.Clone(outFiles), bundled),
			"plot":                 append(slices.Clone(outFiles), "x.gif", "/dev/null", filepath.Join(dir, "x.txt")),
			"peaks":                {dir, missing, "/dev/null", file},
			"plot-points":          append(slices.Clone(ints), "0", "100000000"),
			"paper-fragment-limit": append(slices.Clone(sizes), "0", "1000", "32MiB,32MiB"),
			"device-size":          append(slices.Clone(sizes), "0", "1MB", "80GB,80GB", "80GB,,94GB"),
			"wide":                 bools,
			"targets":              bools,
		}},
		"fuzz": {base: []string{"--duration", "1s", "--out", dir, "--policy", "caching"}, values: map[string][]string{
			"device":         {"", "tpu"},
			"policy":         {"", "nope", "caching,caching"},
			"duration":       append(slices.Clone(durs), "0s"),
			"seed":           {"abc", "99999999999999999999", ""},
			"streams":        append(slices.Clone(ints), "0", "100000"),
			"capacity":       append(slices.Clone(sizes), "0"),
			"max-size":       append(slices.Clone(sizes), "0", "64GiB"),
			"memory-limit":   sizes,
			"max-live":       append(slices.Clone(ints), "0"),
			"check-every":    {"abc", "", "NaN"},
			"progress-every": append(slices.Clone(durs), "0s"),
			"out":            {missing, file, ""},
			"minimize-time":  {"abc", "", "NaN"},
			"log-ops":        append(slices.Clone(ints), "0"),
			"hang-after":     append(slices.Clone(durs), "0s"),
			"meminfo-check":  bools,
			"cuda-device":    ints,
			"replay":         append(slices.Clone(inFiles[:2]), "/dev/null", file),
			"minimize":       append(slices.Clone(bools), "true"),
		}},
		"probe": {values: map[string][]string{
			"device":      ints,
			"reps":        append(slices.Clone(ints), "0"),
			"stitch-reps": append(slices.Clone(ints), "0"),
			"event-reps":  append(slices.Clone(ints), "0"),
			"handles":     {"nope", "posix_fd,nope"},
			"tolerance":   {"NaN", "-1", "Inf", "abc", ""},
		}},
		"mutate": {base: []string{"--judgements", ""}, values: map[string][]string{
			"dir":              {"", "nope", dir + "/nope"},
			"sample":           ints,
			"seed":             {"-1", "abc", "99999999999999999999", ""},
			"keys":             inFiles[:2],
			"save-keys":        outFiles,
			"json":             outFiles,
			"judgements":       inFiles[:2],
			"from-json":        append(slices.Clone(inFiles[:2]), "/dev/null", file),
			"checkers":         {"nope", "unit,nope"},
			"list":             bools,
			"emit":             {file, noDir, missing + "/sub"},
			"fail-on-survivor": bools,
			"timeout":          {"-5s", "abc", "NaN"},
			"workers":          append(slices.Clone(ints), "0"),
		}},
	}
	before := listDir(t, dir)
	for _, sub := range rootCmd.Commands() {
		c, ok := cases[sub.Name()]
		if !ok {
			if !slices.Contains([]string{"help", "completion"}, sub.Name()) {
				t.Errorf("subcommand %s has no hostile values in this table: add it", sub.Name())
			}
			continue
		}
		sub.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return // cobra's own, added once a command has run
			}
			values, ok := c.values[f.Name]
			if !ok {
				t.Errorf("%s --%s has no hostile values in this table: add them", sub.Name(), f.Name)
				return
			}
			for _, v := range values {
				args := append(append([]string{sub.Name()}, c.base...), "--"+f.Name+"="+v)
				args = append(args, c.args...)
				out, _, err := execute(t, args...)
				switch {
				case err == nil:
					t.Errorf("%v: accepted", args)
				case !strings.Contains(err.Error(), "--"+f.Name):
					t.Errorf("%v: the error does not name --%s: %v", args, f.Name, err)
				case strings.Contains(err.Error(), "\n"):
					t.Errorf("%v: a multi-line error: %v", args, err)
				case goName.MatchString(err.Error()):
					t.Errorf("%v: the error names Go (%q): %v", args, goName.FindString(err.Error()), err)
				}
				if out != "" {
					t.Errorf("%v: printed on stdout before refusing:\n%s", args, out)
				}
				if after := listDir(t, dir); !slices.Equal(after, before) {
					t.Fatalf("%v: wrote files: %v, had %v", args, after, before)
				}
			}
		})
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		names = append(names, p)
		return nil
	})
	return names
}
