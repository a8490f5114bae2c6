package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/harness/replay"
)

// The replay command end to end on a bundled trace: the table (one row per policy, in the table order, with
// PyTorch's reference found in peaks.json beside the trace), the JSON array and the plot file; progress goes
// to stderr as one line per replay when stderr is not a terminal.
func TestReplayCommandWritesTableJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	f := replayFlags{policies: replay.ReplayPolicies, device: "sim", json: filepath.Join(dir, "r.json"),
		plot: filepath.Join(dir, "r.svg"), points: 200}
	var out, errOut bytes.Buffer
	if err := runReplay(context.Background(), f, []string{"../../testdata/traces/llama1b-ckpt.trace.gz"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	table, targets, _ := strings.Cut(out.String(), "\n\n")
	if !strings.HasPrefix(targets, "gmlake on llama1b-ckpt: reserved ") {
		t.Errorf("no target line after the table:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 1+len(replay.ReplayPolicies) {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, p := range replay.ReplayPolicies {
		ref := "13.56 exp" // PyTorch's expandable segments, the one to beat
		if p == "caching" {
			ref = "17.51 nat" // PyTorch's native allocator
		}
		if fields := strings.Fields(lines[i+1]); fields[0] != "llama1b-ckpt" || fields[1] != p || !strings.Contains(lines[i+1], ref) {
			t.Errorf("row %d: want llama1b-ckpt %s with %s: %s", i+1, p, ref, lines[i+1])
		}
	}
	if n := strings.Count(errOut.String(), "replayed llama1b-ckpt with "); n != len(replay.ReplayPolicies) {
		t.Errorf("stderr has %d progress lines:\n%s", n, errOut.String())
	}
	var rows []map[string]any
	b, _ := os.ReadFile(f.json)
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != len(replay.ReplayPolicies) {
		t.Errorf("json: %v, %d rows", err, len(rows))
	}
	if st, err := os.Stat(f.plot); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
}

// --paper-fragment-limit replays gmlake-paper once per limit, a row each, named policy@limit, and a lower
// limit stitches more (GLake's documents use 32 MiB to 1 GiB).
func TestReplayCommandSweepsThePaperFragmentLimit(t *testing.T) {
	f := replayFlags{policies: []string{"gmlake-paper", "gmlake"}, device: "sim", paperLimits: []string{"32MiB", "1GiB"}}
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
		{policies: []string{"nope"}, device: "sim"},
		{policies: replay.ReplayPolicies, device: "tpu"},
		{policies: replay.ReplayPolicies, device: "sim", plot: "x.gif"},
		{policies: replay.ReplayPolicies, device: "sim", paperLimits: []string{"lots"}},
		{policies: replay.ReplayPolicies, device: "sim", paperLimits: []string{"1000"}},
	} {
		if err := runReplay(context.Background(), f, trace, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("flags %+v accepted", f)
		}
	}
	err := runReplay(context.Background(), replayFlags{policies: replay.ReplayPolicies, device: "sim"}, []string{"missing.trace"}, &bytes.Buffer{}, &bytes.Buffer{})
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
	f := replayFlags{policies: []string{"caching"}, device: "cuda"}
	err := runReplay(context.Background(), f, []string{"../../testdata/traces/llama1b-ckpt.trace.gz"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "--device cuda: ") {
		t.Errorf("err = %v, want the reason the CUDA driver could not be opened", err)
	}
	t.Log(err)
}
