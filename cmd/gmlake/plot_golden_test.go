package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gmlake/gmlake/harness/golden"
)

// Property: the figure `gmlake replay --plot` writes changes only on purpose. A small saw-tooth trace of two
// streams (testdata/saw.trace) is replayed under caching and gmlake on the simulated device and drawn as SVG
// (text, deterministic), which must equal testdata/saw-plot.svg byte for byte: a moved layout constant, a lost
// legend or axis, a timeline sampled differently, or a policy that now reserves differently on this trace fails
// here. After a deliberate change, look at the new file and rewrite it:
//
//	go test ./cmd/gmlake -run TestReplayPlotMatchesGolden -update
func TestReplayPlotMatchesGolden(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "saw.svg")
	if _, errOut, err := execute(t, "replay", "--policy", "caching,gmlake", "--plot", svg, "--plot-points", "50",
		filepath.Join("testdata", "saw.trace")); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	got, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, got, filepath.Join("testdata", "saw-plot.svg"),
		"go test ./cmd/gmlake -run TestReplayPlotMatchesGolden -update")
}
