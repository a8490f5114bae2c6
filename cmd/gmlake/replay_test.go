package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gmlake/gmlake/harness/replay"
	"github.com/gmlake/gmlake/trace"
)

// The replay command end to end on a bundled trace: the table (one row per policy, in the table order, with
// PyTorch's reference found in peaks.json beside the trace), the JSON array and the plot file; progress goes
// to stderr as one line per replay when stderr is not a terminal.
func TestReplayCommandWritesTableJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	f := replayFlags{policies: replay.Policies, device: "sim", json: filepath.Join(dir, "r.json"),
		plot: filepath.Join(dir, "r.svg"), points: 200, wide: true, targets: true}
	var out, errOut bytes.Buffer
	if err := runReplay(context.Background(), f, []string{"../../testdata/traces/llama1b-ckpt.trace.gz"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	table, targets, _ := strings.Cut(out.String(), "\n\n")
	if !strings.HasPrefix(targets, "gmlake on llama1b-ckpt: reserved ") {
		t.Errorf("no target line after the table:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 1+len(replay.Policies) {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, p := range replay.Policies {
		ref := "13.56 exp" // PyTorch's expandable segments, the one to beat
		if p == "caching" {
			ref = "17.51 nat" // PyTorch's native allocator
		}
		if fields := strings.Fields(lines[i+1]); fields[0] != "llama1b-ckpt" || fields[1] != p || !strings.Contains(lines[i+1], ref) {
			t.Errorf("row %d: want llama1b-ckpt %s with %s: %s", i+1, p, ref, lines[i+1])
		}
	}
	if n := strings.Count(errOut.String(), "replayed llama1b-ckpt with "); n != len(replay.Policies) {
		t.Errorf("stderr has %d progress lines:\n%s", n, errOut.String())
	}
	var rows []map[string]any
	b, _ := os.ReadFile(f.json)
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != len(replay.Policies) {
		t.Errorf("json: %v, %d rows", err, len(rows))
	}
	if st, err := os.Stat(f.plot); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
}

// --paper-fragment-limit replays gmlake-paper once per limit, a row each, named policy@limit, and a lower
// limit stitches more (GLake's documents use 32 MiB to 1 GiB).
func TestReplayCommandSweepsThePaperFragmentLimit(t *testing.T) {
	f := replayFlags{policies: []string{"gmlake-paper", "gmlake"}, device: "sim", paperLimits: []string{"32MiB", "1GiB"}, points: 1, wide: true}
	var out bytes.Buffer
	if err := runReplay(context.Background(), f, []string{"../../testdata/traces/llama3b-lora.trace.gz"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	table, _, _ := strings.Cut(out.String(), "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	var rows []string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l)[1])
	}
	if want := []string{"gmlake-paper@32MiB", "gmlake-paper@1GiB", "gmlake"}; !slices.Equal(rows, want) {
		t.Fatalf("rows %v, want %v:\n%s", rows, want, table)
	}
	resv := func(l string) string { return strings.Fields(l)[5] }
	if resv(lines[1]) >= resv(lines[2]) {
		t.Errorf("reserved at 32 MiB %s GiB, at 1 GiB %s GiB: want less with the lower limit", resv(lines[1]), resv(lines[2]))
	}
}

func TestReplayCommandRejectsBadFlags(t *testing.T) {
	trace := []string{"../../testdata/traces/llama1b-ckpt.trace.gz"}
	for _, f := range []replayFlags{
		{policies: []string{"nope"}, device: "sim", points: 1},
		{policies: replay.Policies, device: "tpu", points: 1},
		{policies: replay.Policies, device: "sim", plot: "x.gif", points: 1},
		{policies: replay.Policies, device: "sim", paperLimits: []string{"lots"}, points: 1},
		{policies: replay.Policies, device: "sim", paperLimits: []string{"1000"}, points: 1},
	} {
		if err := runReplay(context.Background(), f, trace, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("flags %+v accepted", f)
		}
	}
	err := runReplay(context.Background(), replayFlags{policies: replay.Policies, device: "sim", points: 1}, []string{"missing.trace"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "missing.trace") {
		t.Errorf("missing trace: %v", err)
	}
}

// Without a GPU, --device cuda fails up front with the driver's reason (with one, this is a GPU run's job).
func TestReplayCommandCUDAWithoutDriver(t *testing.T) {
	if _, closeGPU, err := openCUDA(); err == nil {
		closeGPU()
		t.Skip("a CUDA driver is present: the GPU replay is run on the GPU machine")
	}
	f := replayFlags{policies: []string{"caching"}, device: "cuda", points: 1}
	err := runReplay(context.Background(), f, []string{"../../testdata/traces/llama1b-ckpt.trace.gz"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "--device cuda: ") {
		t.Errorf("err = %v, want the reason the CUDA driver could not be opened", err)
	}
	if err != nil && (goName.MatchString(err.Error()) || !strings.Contains(err.Error(), "--device sim")) {
		t.Errorf("err = %v: names Go (%q) where the user types --device sim", err, goName.FindString(err.Error()))
	}
	t.Log(err)
}

// Property: bad replay input is an error said once, before any replay runs (issue 14 item 10): an empty
// trace, no policy, no plot points, an output file that cannot be written; cobra prints nothing itself (main
// prints the error once).
func TestReplayCommandRejectsBadInputUpFront(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.trace")
	os.WriteFile(empty, nil, 0o644)
	good := "../../testdata/traces/llama1b-ckpt.trace.gz"
	for _, c := range []struct {
		args []string
		want string
		kind error
	}{
		{[]string{"replay", empty}, "empty.trace", trace.ErrEmpty},
		{[]string{"replay", "/dev/null"}, "/dev/null", trace.ErrEmpty},
		{[]string{"replay", "--policy", "", good}, "--policy", errBadFlag},
		{[]string{"replay", "--plot", filepath.Join(dir, "p.svg"), "--plot-points", "0", good}, "--plot-points", errBadFlag},
		{[]string{"replay", "--json", "/nonexistent/r.json", good}, "--json", errBadFlag},
		{[]string{"replay", "--plot", "/nonexistent/r.svg", good}, "--plot", errBadFlag},
		{[]string{"replay", "--bogus", good}, "unknown flag", nil},
	} {
		_, errOut, err := execute(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.kind != nil && !errors.Is(err, c.kind)) {
			t.Errorf("%v: err = %v, want one naming %q (%v)", c.args, err, c.want, c.kind)
		}
		if errOut != "" {
			t.Errorf("%v: something ran or printed before the error:\n%s", c.args, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "p.svg")); err == nil {
		t.Errorf("a refused --plot left a file behind")
	}
}

// A snapshot allocation of 2^64-1 bytes is refused with its size, not as "-1 bytes" (issue 14 item 10).
func TestReplayCommandHugeSnapshotSizeSaysItsSize(t *testing.T) {
	// pickle.dumps({'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 2**64-1, 'stream': 0}]]}, 2)
	const p = "\x80\x02}q\x00X\r\x00\x00\x00device_tracesq\x01]q\x02]q\x03}q\x04(X\x06\x00\x00\x00actionq\x05X\x05\x00" +
		"\x00\x00allocq\x06X\x04\x00\x00\x00addrq\x07M\x00\x10X\x04\x00\x00\x00sizeq\x08\x8a\t\xff\xff\xff\xff\xff\xff" +
		"\xff\xff\x00X\x06\x00\x00\x00streamq\tK\x00uaas."
	path := filepath.Join(t.TempDir(), "huge.pickle")
	os.WriteFile(path, []byte(p), 0o644)
	_, _, err := execute(t, "replay", path)
	if err == nil || !strings.Contains(err.Error(), "18446744073709551615 bytes") || strings.Contains(err.Error(), "-1 bytes") {
		t.Fatalf("err = %v, want the size 18446744073709551615 bytes", err)
	}
}

// By default the table fits a 120-column terminal (trace, policy, live, reserved, fragmentation, vs
// expandable, driver time); --wide prints every column (issue 14 item 10).
func TestReplayCommandTableFits120Columns(t *testing.T) {
	good := "../../testdata/traces/llama1b-ckpt.trace.gz"
	out, _, err := execute(t, "replay", good)
	if err != nil {
		t.Fatal(err)
	}
	table, _, _ := strings.Cut(out, "\n\n")
	for _, l := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(l); n > 120 {
			t.Errorf("a %d-column line:\n%s", n, l)
		}
	}
	if !strings.Contains(table, "vs exp") || strings.Contains(table, "Mev/s") {
		t.Errorf("default table:\n%s", table)
	}
	wide, _, err := execute(t, "replay", "--wide", good)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(wide, "Mev/s") {
		t.Errorf("--wide table has not every column:\n%s", wide)
	}
}
