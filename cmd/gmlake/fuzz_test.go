package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gmlake/gmlake/vmm"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{"": 0, "4096": 4096, "512MiB": 512 * vmm.MiB, "30GiB": 30 * vmm.GiB,
		"1.5G": 3 * vmm.GiB / 2, "2GB": 2e9, "7 K": 7 * vmm.KiB} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseBytes("lots"); err == nil {
		t.Error("parseBytes accepted a bad size")
	}
}

// Property: `gmlake fuzz` runs a short campaign on the simulated device, prints progress on stderr and one
// JSON summary line (ops, ops_per_sec, violations, leaks) on stdout, and exits cleanly; `--replay` runs a
// saved program.
func TestFuzzCommand(t *testing.T) {
	var out, errb bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errb)
	defer rootCmd.SetOut(nil)
	defer rootCmd.SetErr(nil)
	rootCmd.SetArgs([]string{"fuzz", "--duration", "1s", "--streams", "3", "--seed", "9", "--capacity", "2GiB",
		"--policy", "caching", "--progress-every", "300ms", "--out", t.TempDir()})
	if err := rootCmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var sum struct {
		Policy     string  `json:"policy"`
		Ops        uint64  `json:"ops"`
		OpsPerSec  float64 `json:"ops_per_sec"`
		Violations *int    `json:"violations"`
		Leaks      *int    `json:"leaks"`
	}
	line := strings.TrimSpace(out.String())
	if err := json.Unmarshal([]byte(line), &sum); err != nil {
		t.Fatalf("stdout is not one JSON line: %v\n%s", err, line)
	}
	if sum.Policy != "caching" || sum.Ops == 0 || sum.OpsPerSec <= 0 || sum.Violations == nil || *sum.Violations != 0 || sum.Leaks == nil || *sum.Leaks != 0 {
		t.Errorf("summary %s", line)
	}
	if !strings.Contains(errb.String(), "ops/s") {
		t.Errorf("no progress line on stderr:\n%s", errb.String())
	}

	prog := filepath.Join(t.TempDir(), "p.ops")
	os.WriteFile(prog, []byte("# policy=gmlake capacity=1073741824 granularity=0 streams=2 sync=false\na 1 4096 0\nrecord a1 s1\nlaunch s1\nf 1\ncompleteall\n"), 0o644)
	rout, _, err := execute(t, "fuzz", "--replay", prog, "--policy", "gmlake")
	if err != nil {
		t.Fatalf("--replay: %v\n%s", err, rout)
	}
	if !strings.Contains(rout, "gmlake: ok") {
		t.Errorf("--replay printed %q", rout)
	}
}

// execute runs the command line args with every flag of every subcommand back at its default (cobra keeps
// flag values between Execute calls), and returns stdout, stderr and the error.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	for _, c := range rootCmd.Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				sv.Replace(nil)
				if f.DefValue != "[]" {
					sv.Replace(strings.Split(strings.Trim(f.DefValue, "[]"), ","))
				}
			} else {
				f.Value.Set(f.DefValue)
			}
			f.Changed = false
		})
	}
	var out, errb bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errb)
	defer rootCmd.SetOut(nil)
	defer rootCmd.SetErr(nil)
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	return out.String(), errb.String(), err
}

// Property: bad campaign flags are configuration errors said up front, before any campaign runs, naming the
// flag (issue 14 item 9): no summary line, no saved reproducer.
func TestFuzzCommandRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--streams", "0"}, "--streams"},
		{[]string{"--streams", "-3"}, "--streams"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--duration", "-5s"}, "--duration"},
		{[]string{"--capacity", "1"}, "--capacity"},
		{[]string{"--out", "/nonexistent/gmlake"}, "--out"},
		{[]string{"--out", filepath.Join(dir, "f")}, "--out"}, // a file, not a folder
	} {
		os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
		args := append([]string{"fuzz", "--duration", "1s", "--policy", "caching", "--out", dir}, c.args...)
		out, errOut, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.flag) || !errors.Is(err, errBadFlag) {
			t.Errorf("%v: err = %v, want an error naming %s (errBadFlag)", c.args, err, c.flag)
		}
		if out != "" || strings.Contains(errOut, "fuzz: policy") {
			t.Errorf("%v: a campaign ran:\n%s%s", c.args, out, errOut)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "gmlake-fuzz-*")); len(m) > 0 {
			t.Errorf("%v: saved %v", c.args, m)
		}
	}
}
