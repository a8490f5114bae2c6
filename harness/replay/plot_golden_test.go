package replay

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/gmlake/gmlake/impl"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden plots in testdata/ from what the code draws now")

// Property: the figure WritePlot draws changes only on purpose. Two traces' panels (sizes, paddings, axes,
// legend, lines) are drawn as SVG, which is text and deterministic, and compared byte for byte with the
// committed testdata/plot-golden.svg (a layout constant that moved, a legend, an axis or a padding, fails
// here). After a deliberate change, look at the new file and rewrite it:
//
//	go test ./harness/replay -run TestWritePlotMatchesGolden -update
func TestWritePlotMatchesGolden(t *testing.T) {
	rs := sampleReplayResults()
	rs = append(rs, &Result{Trace: "other", Policy: impl.PolicyGMLake, Device: "sim", PeakReservedBytes: 1 << 30,
		Timeline: []Sample{{0, 1 << 20, 1 << 20, 1 << 30}, {10, 1 << 29, 1 << 29, 1 << 30}, {20, 1 << 20, 1 << 20, 1 << 30}}})
	path := filepath.Join(t.TempDir(), "p.svg")
	if err := WritePlot(path, rs); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, path, filepath.Join("testdata", "plot-golden.svg"), "go test ./harness/replay -run TestWritePlotMatchesGolden -update")
}

// checkGolden compares the file at got with the golden file (rewriting it under -update).
func checkGolden(t *testing.T, got, golden, update string) {
	t.Helper()
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (write it: %s)", err, update)
	}
	if !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && i < len(want) && b[i] == want[i] {
			i++
		}
		t.Fatalf("the plot differs from %s from byte %d (%d bytes, want %d): %q, want %q; if the change is meant, "+
			"look at the new plot and rewrite the golden file: %s", golden, i, len(b), len(want),
			excerpt(b, i), excerpt(want, i), update)
	}
}

func excerpt(b []byte, i int) string {
	return string(b[max(0, i-40):min(len(b), i+40)])
}
