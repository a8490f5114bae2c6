package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/ from what the command writes now")

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
	golden := filepath.Join("testdata", "saw-plot.svg")
	const update = "go test ./cmd/gmlake -run TestReplayPlotMatchesGolden -update"
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (write it: %s)", err, update)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the plot differs from %s from byte %d (%d bytes, want %d): %q, want %q; if the change is meant, "+
			"look at the new plot and rewrite the golden file: %s", golden, i, len(got), len(want),
			got[max(0, i-40):min(len(got), i+40)], want[max(0, i-40):min(len(want), i+40)], update)
	}
}
