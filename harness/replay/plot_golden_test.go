package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gmlake/gmlake/harness/golden"
)

// Property: the figure WritePlot draws changes only on purpose. Two traces' panels (sizes, paddings, axes,
// legend, lines) are drawn as SVG, which is text and deterministic, and compared byte for byte with the
// committed testdata/plot-golden.svg (a layout constant that moved, a legend, an axis or a padding, fails
// here). After a deliberate change, look at the new file and rewrite it:
//
//	go test ./harness/replay -run TestWritePlotMatchesGolden -update
func TestWritePlotMatchesGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.svg")
	if err := WritePlot(path, twoTraceResults()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, got, filepath.Join("testdata", "plot-golden.svg"),
		"go test ./harness/replay -run TestWritePlotMatchesGolden -update")
}
