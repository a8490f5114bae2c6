package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gmlake/gmlake/harness/golden"
	"github.com/gmlake/gmlake/impl"
)

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
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, got, filepath.Join("testdata", "plot-golden.svg"),
		"go test ./harness/replay -run TestWritePlotMatchesGolden -update")
}
