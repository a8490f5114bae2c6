package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Property: before a device's engine starts, gmlake_get_memory_fraction reads GMLAKE_MEMORY_FRACTION with the
// settings parser, as the engine's start will: a value the start refuses (2, a word) is an error naming the
// variable, not a silent 1.0, and a value the start takes (with the spaces it trims) is reported as given.
func TestMemoryFractionBeforeStartIsTheParsersValue(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on this machine")
	}
	dir := buildLib(t)
	bin := filepath.Join(t.TempDir(), "fraction_before")
	if out, err := exec.Command(cc, "-O1", "-o", bin, filepath.Join("testdata", "fraction_before.c"), "-I.", "-L"+dir,
		"-lgmlake", "-Wl,-rpath,"+dir).CombinedOutput(); err != nil {
		t.Fatalf("compiling fraction_before.c: %v\n%s", err, out)
	}
	for _, tc := range []struct{ value, want, errHas string }{
		{"", "fraction=1", ""},
		{"0.25", "fraction=0.25", ""},
		{" 0.5", "fraction=0.5", ""},
		{"2", "fraction=-1", "GMLAKE_MEMORY_FRACTION"},
		{"half", "fraction=-1", "GMLAKE_MEMORY_FRACTION"},
	} {
		c := exec.Command(bin)
		c.Env = append(simEnv(), "GMLAKE_MEMORY_FRACTION="+tc.value)
		out, err := hostOutput(c)
		text := string(out)
		if err != nil || !strings.Contains(text, tc.want+"\n") || (tc.errHas != "" && !strings.Contains(text, "error=") ||
			!strings.Contains(text, tc.errHas)) {
			t.Errorf("GMLAKE_MEMORY_FRACTION=%q: %v\n%s(want %q, an error naming %q)", tc.value, err, text, tc.want, tc.errHas)
		}
	}
}
