package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/impl/cudavmm"
)

// settingsRun compiles testdata/settings.c against the library once per test and returns a function that
// runs it under the simulated device (256 MiB) and env: whether its 1 MiB allocation succeeded, device 0's
// statistics, the library's error text and what the library said on stderr.
func settingsRun(t *testing.T) func(env ...string) (ok bool, stats map[string]any, errText, stderr string) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on this machine")
	}
	dir := buildLib(t)
	bin := filepath.Join(t.TempDir(), "settings")
	cmd := exec.Command(cc, "-O1", "-o", bin, filepath.Join("testdata", "settings.c"), "-I.", "-L"+dir, "-lgmlake",
		"-Wl,-rpath,"+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling settings.c: %v\n%s", err, out)
	}
	return func(env ...string) (bool, map[string]any, string, string) {
		t.Helper()
		c := exec.Command(bin)
		c.Env = append(simEnv(), env...)
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		if err := runHost(c); err != nil {
			t.Fatalf("%v: %v\n%s%s", env, err, stdout.String(), stderr.String())
		}
		var ok bool
		var errText string
		stats := map[string]any{}
		for _, l := range strings.Split(stdout.String(), "\n") {
			switch k, v, _ := strings.Cut(l, "="); k {
			case "alloc":
				ok = v == "ok"
			case "error":
				errText = v
			case "stats":
				if err := json.Unmarshal([]byte(v), &stats); err != nil {
					t.Fatalf("%v: stats %q: %v", env, v, err)
				}
			}
		}
		return ok, stats, errText, stderr.String()
	}
}

// Property: a GMLAKE_MEMORY_LIMIT below one 2 MiB granule (0.5 rounds to 0 bytes, which meant "no cap"; 1
// byte admits nothing) is a configuration error naming the variable, said once, and no allocation succeeds;
// one granule is taken as the cap (issue 36 item 3).
func TestMemoryLimitBelowOneGranuleIsRefused(t *testing.T) {
	run := settingsRun(t)
	for _, v := range []string{"0.5", "0.4KiB", "0", "1", "1MiB", "2097151"} {
		ok, stats, errText, stderr := run("GMLAKE_MEMORY_LIMIT=" + v)
		if ok {
			t.Errorf("GMLAKE_MEMORY_LIMIT=%s: an allocation succeeded (cap %v bytes)", v, stats["memory_limit_bytes"])
		}
		if strings.Count(stderr, "GMLAKE_MEMORY_LIMIT") != 1 || !strings.Contains(stderr, "configuration error") {
			t.Errorf("GMLAKE_MEMORY_LIMIT=%s: stderr should name the variable once in a configuration error:\n%s", v, stderr)
		}
		if !strings.Contains(errText, "GMLAKE_MEMORY_LIMIT") || !strings.Contains(errText, "2MiB") {
			t.Errorf("GMLAKE_MEMORY_LIMIT=%s: the error %q should name the variable and the least cap (2MiB)", v, errText)
		}
	}
	ok, stats, errText, stderr := run("GMLAKE_MEMORY_LIMIT=2MiB")
	if !ok || stats["memory_limit_bytes"] != float64(2<<20) || stderr != "" {
		t.Errorf("GMLAKE_MEMORY_LIMIT=2MiB: alloc %v (%s), cap %v, stderr %q; want the 2 MiB cap, silently", ok, errText,
			stats["memory_limit_bytes"], stderr)
	}
}

// Property: with GMLAKE_MEMORY_LIMIT and GMLAKE_MEMORY_FRACTION both set, the stricter cap is in force (the
// fraction replaced the limit even when looser), the statistics say which setting won, and the library says
// so once on stderr; one setting alone, or a fraction of 1 (no cap), is taken silently (issue 36 item 3).
func TestStricterOfMemoryLimitAndFractionWins(t *testing.T) {
	run := settingsRun(t)
	const MiB = 1 << 20
	for _, c := range []struct {
		env  []string
		cap  float64
		from string
		note bool // one line on stderr saying which setting won
	}{
		{[]string{"GMLAKE_MEMORY_LIMIT=32MiB", "GMLAKE_MEMORY_FRACTION=0.5"}, 32 * MiB, "GMLAKE_MEMORY_LIMIT", true},
		{[]string{"GMLAKE_MEMORY_LIMIT=200MiB", "GMLAKE_MEMORY_FRACTION=0.25"}, 64 * MiB, "GMLAKE_MEMORY_FRACTION", true},
		{[]string{"GMLAKE_MEMORY_LIMIT=32MiB"}, 32 * MiB, "GMLAKE_MEMORY_LIMIT", false},
		{[]string{"GMLAKE_MEMORY_FRACTION=0.25"}, 64 * MiB, "GMLAKE_MEMORY_FRACTION", false},
		{[]string{"GMLAKE_MEMORY_FRACTION=1", "GMLAKE_MEMORY_LIMIT=200MiB"}, 200 * MiB, "GMLAKE_MEMORY_LIMIT", false},
		{nil, 0, "none", false},
	} {
		ok, stats, errText, stderr := run(c.env...)
		if !ok {
			t.Errorf("%v: the allocation failed: %s", c.env, errText)
			continue
		}
		if stats["memory_limit_bytes"] != c.cap || stats["memory_limit_from"] != c.from {
			t.Errorf("%v: cap %v from %v; want %v bytes from %s", c.env, stats["memory_limit_bytes"],
				stats["memory_limit_from"], c.cap, c.from)
		}
		lines := strings.Count(stderr, "\n")
		switch {
		case c.note && (lines != 1 || !strings.Contains(stderr, c.from) || !strings.Contains(stderr, "stricter")):
			t.Errorf("%v: stderr %q; want one line saying %s is the stricter", c.env, stderr, c.from)
		case !c.note && stderr != "":
			t.Errorf("%v: stderr %q; want nothing", c.env, stderr)
		}
	}
}

// Property: GMLAKE_VERBOSE is a boolean like every other: 0 (or false) is off, 1 (or true) prints the
// engine's configuration once; any other value is a configuration error (it was "on" for any text, 0 too).
func TestVerboseZeroIsOff(t *testing.T) {
	run := settingsRun(t)
	for v, lines := range map[string]int{"0": 0, "false": 0, "1": 1, "TRUE": 1} {
		ok, _, errText, stderr := run("GMLAKE_VERBOSE=" + v)
		if !ok || strings.Count(stderr, "engine started") != lines || strings.Count(stderr, "\n") != lines {
			t.Errorf("GMLAKE_VERBOSE=%s: alloc %v (%s), stderr %q; want %d line(s) saying the engine started", v, ok,
				errText, stderr, lines)
		}
	}
	if ok, _, _, stderr := run("GMLAKE_VERBOSE=yes"); ok || !strings.Contains(stderr, "GMLAKE_VERBOSE") {
		t.Errorf("GMLAKE_VERBOSE=yes: alloc %v, stderr %q; want a configuration error naming it", ok, stderr)
	}
}

// Property: the settings table's handle types are the CUDA driver's (cudavmm parses GMLAKE_CUDA_HANDLES): each
// word the table takes, the driver's parser takes, and a misspelt one both refuse.
func TestCUDAHandlesTableIsTheDriversWords(t *testing.T) {
	s, ok := clib.LookupSetting("GMLAKE_CUDA_HANDLES")
	if !ok || len(s.Choices) == 0 {
		t.Fatalf("GMLAKE_CUDA_HANDLES: %+v", s)
	}
	for _, w := range append(s.Choices, strings.Join(s.Choices, ",")) {
		if err := cudavmm.CheckHandles(w); err != nil {
			t.Errorf("the table takes %q, the driver refuses it: %v", w, err)
		}
	}
	for _, bad := range []string{"rmda", "posix", "posix_fd;rdma"} {
		_, err := clib.ParseEnv([]string{"GMLAKE_CUDA_HANDLES=" + bad}, settingChecks)
		if cudavmm.CheckHandles(bad) == nil || err == nil || !strings.Contains(err.Error(), "GMLAKE_CUDA_HANDLES") {
			t.Errorf("%q: the driver says %v, the settings parser %v; want both to refuse", bad, cudavmm.CheckHandles(bad), err)
		}
	}
}
