package fuzz

import (
	"os"
	"regexp"
	"testing"
)

// Property (issue 36 item 8): `make fuzz` (fuzz/run.sh) minimizes new inputs within what every target
// accepts: FuzzOpsOnGPU refuses a minimization above maxGPUMinimizeExecs runs before it looks for a GPU, so
// a larger default failed `make fuzz` on every machine, GPU or not.
func TestFuzzScriptMinimizesWithinEveryTargetsLimit(t *testing.T) {
	b, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FUZZMINIMIZE=\$\{FUZZMINIMIZE:-([^}]+)\}$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("run.sh sets no default FUZZMINIMIZE (want FUZZMINIMIZE=${FUZZMINIMIZE:-Nx}, passed as -fuzzminimizetime)")
	}
	if !regexp.MustCompile(`-fuzzminimizetime "\$FUZZMINIMIZE"`).Match(b) {
		t.Errorf("run.sh does not pass $FUZZMINIMIZE as -fuzzminimizetime")
	}
	if err := minimizeFits(string(m[1])); err != nil {
		t.Errorf("run.sh's default minimization %s: %v", m[1], err)
	}
}
