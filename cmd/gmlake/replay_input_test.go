package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The replay command's inputs and outputs (issue 36 item 7): each input read once, as it comes; results
// keyed by input; outputs never over inputs; an out of memory a row; the what-if device sizes.

const bundled = "../../testdata/traces/llama1b-ckpt.trace.gz"

// bundledText is the bundled trace decompressed: what `zcat` would write into a pipe.
func bundledText(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(bundled)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type jsonRow struct {
	Input      string `json:"input"`
	Trace      string `json:"trace"`
	Policy     string `json:"policy"`
	Device     string `json:"device"`
	Events     int    `json:"events"`
	Reserved   uint64 `json:"peak_reserved_bytes"`
	DoesNotFit *struct {
		Event   int    `json:"event"`
		Of      int    `json:"of"`
		Message string `json:"message"`
	} `json:"does_not_fit"`
}

func readRows(t *testing.T, path string) []jsonRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []jsonRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// Property: a trace from a pipe (what `<(zcat x.trace.gz)` and /dev/stdin are) is replayed whole under every
// policy: the pipe is read once, by all of them, and each row has all 74,251 events (the up-front check used
// to consume the pipe and report 0 events and success). A plot over it has its timeline though the length
// was not known in advance.
func TestReplayReadsAPipeOnceUnderEveryPolicy(t *testing.T) {
	text := bundledText(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write(text)
		w.Close()
	}()
	dir := t.TempDir()
	js, plot := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	pipe := fmt.Sprintf("/dev/fd/%d", r.Fd())
	out, _, err := execute(t, "replay", "--policy", "caching,expandable,gmlake", "--json", js, "--plot", plot, "--plot-points", "50", pipe)
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows(t, js)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3:\n%s", len(rows), out)
	}
	for _, row := range rows {
		if row.Events != 74251 || row.Reserved == 0 || row.Input != pipe {
			t.Errorf("%s from the pipe: %d events, %d bytes reserved, input %q; want 74251 events of %s", row.Policy, row.Events, row.Reserved, row.Input, pipe)
		}
	}
	if st, err := os.Stat(plot); err != nil || st.Size() < 1000 {
		t.Errorf("no plot of the pipe: %v", err)
	}
}

// Property: an output (--json, --plot) that is an input, however spelled (the same path, ./path, a hard
// link), is refused before anything is written, and the input is unchanged (`--json X X` used to overwrite
// the trace with the result).
func TestReplayRefusesAnOutputThatIsAnInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.trace")
	if err := os.WriteFile(in, bundledText(t), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Link(in, link); err != nil {
		t.Fatal(err)
	}
	sum := func() [32]byte { b, _ := os.ReadFile(in); return sha256.Sum256(b) }
	before := sum()
	for _, args := range [][]string{
		{"--json", in, in},
		{"--json", filepath.Join(dir, ".", "x.trace"), in},
		{"--json", link, in},
		{"--plot", filepath.Join(dir, "x.svg"), "--json", filepath.Join(dir, "x.svg"), in},
	} {
		_, _, err := execute(t, append([]string{"replay", "--policy", "caching"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: err = %v, want a refusal naming the flag", args, err)
		}
		if sum() != before {
			t.Fatalf("%v: the input was overwritten", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.svg")); err == nil {
		t.Errorf("a refused output was written")
	}
}

// Property: a policy under which the trace does not fit the device is a row saying where ("does not fit:
// event N of M, live X GiB at that point") and the other policies' rows are there; nothing speaks of batch
// sizes (training advice); the command succeeds. --device-size replays on each size, a row each.
func TestReplayDoesNotFitIsARowAndTheOtherPoliciesGoOn(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	out, errOut, err := execute(t, "replay", "--policy", "caching,gmlake", "--device-size", "12GB,80GB", "--json", js, bundled)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, errOut)
	}
	b, _ := os.ReadFile(js)
	if strings.Contains(out+errOut+string(b), "batch size") {
		t.Errorf("training advice in a replay:\n%s%s", out, errOut)
	}
	rows := readRows(t, js)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 2 policies x 2 sizes:\n%s", len(rows), out)
	}
	fits := 0
	for _, row := range rows {
		switch {
		case row.Device == "sim 12GB" && row.DoesNotFit != nil:
			if row.DoesNotFit.Of != 74251 || row.DoesNotFit.Event < 1 || row.DoesNotFit.Event > 74251 ||
				!strings.HasPrefix(row.DoesNotFit.Message, fmt.Sprintf("does not fit: event %d of 74251, live ", row.DoesNotFit.Event)) {
				t.Errorf("%s on %s: %+v", row.Policy, row.Device, *row.DoesNotFit)
			}
			if !strings.Contains(out, row.DoesNotFit.Message) {
				t.Errorf("the table has no row saying %q:\n%s", row.DoesNotFit.Message, out)
			}
		case row.Device == "sim 80GB" && row.DoesNotFit == nil && row.Events == 74251:
			fits++
		default:
			t.Errorf("row %+v: want each policy not to fit 12 GB and to fit 80 GB", row)
		}
	}
	if fits != 2 {
		t.Errorf("%d policies fit 80 GB, want 2", fits)
	}
}

// Property: --device-size takes sizes with units, a list; a size that is not one, below a chunk, or given
// twice is refused naming the flag; so is a policy given twice.
func TestReplayDeviceSizeAndPolicyListsRefuseBadAndDuplicateValues(t *testing.T) {
	for _, args := range [][]string{
		{"--device-size", "lots"}, {"--device-size", "1MB"}, {"--device-size", "-80GB"}, {"--device-size", "NaN"},
		{"--device-size", "80GB,80GB"}, {"--device-size", "80GB", "--device", "cuda"},
		{"--policy", "gmlake,gmlake"}, {"--paper-fragment-limit", "32MiB,32MiB", "--policy", "gmlake-paper"},
	} {
		out, _, err := execute(t, append(append([]string{"replay"}, args...), bundled)...)
		if err == nil || !strings.Contains(err.Error(), args[0]) || out != "" {
			t.Errorf("%v: err = %v (output %q), want a refusal naming %s", args, err, out, args[0])
		}
	}
}

// Property: a folder given as input replays the traces in it and skips what is not one (a README, a .txt,
// a subfolder) with a note; so does a stray file named beside a trace (a glob's catch).
func TestReplayFolderAndGlobSkipWhatIsNotATrace(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "run.trace"), bundledText(t), 0o644)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# traces\nthese are traces\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("batch 32, 8 GPUs\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "old"), 0o755)
	for _, args := range [][]string{
		{dir},
		{filepath.Join(dir, "README.md"), filepath.Join(dir, "notes.txt"), filepath.Join(dir, "run.trace")},
	} {
		out, errOut, err := execute(t, append([]string{"replay", "--policy", "caching"}, args...)...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		if !strings.Contains(out, "run  caching") && !strings.Contains(out, "run caching") {
			t.Errorf("%v: no row for the trace:\n%s", args, out)
		}
		for _, stray := range []string{"README.md", "notes.txt"} {
			if !strings.Contains(errOut, "skipped "+filepath.Join(dir, stray)) {
				t.Errorf("%v: no note that %s was skipped:\n%s", args, stray, errOut)
			}
		}
	}
	if _, _, err := execute(t, "replay", filepath.Join(dir, "README.md")); err == nil || !strings.Contains(err.Error(), "nothing to replay") {
		t.Errorf("a README alone: err = %v, want nothing to replay", err)
	}
}

// Property: the project's targets verdict ("targets met", "MISSED") is printed only with --targets (make
// run asks for it); a user's trace gets the table alone.
func TestReplayPrintsTheTargetsOnlyWhenAsked(t *testing.T) {
	out, _, err := execute(t, "replay", bundled)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "targets met") || strings.Contains(out, "MISSED") {
		t.Errorf("a verdict without --targets:\n%s", out)
	}
	out, _, err = execute(t, "replay", "--targets", bundled)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "gmlake on llama1b-ckpt: reserved ") {
		t.Errorf("no verdict with --targets:\n%s", out)
	}
}

// Property: every result is keyed by its input: two inputs of one trace name (a/x.trace, b/x.trace) are two
// sets of rows, each named by its path, in the table and in the JSON.
func TestReplayKeysResultsByInput(t *testing.T) {
	dir := t.TempDir()
	text := bundledText(t)
	var ins []string
	for _, d := range []string{"a", "b"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
		p := filepath.Join(dir, d, "x.trace")
		os.WriteFile(p, text, 0o644)
		ins = append(ins, p)
	}
	js := filepath.Join(dir, "r.json")
	out, _, err := execute(t, append([]string{"replay", "--policy", "caching,expandable", "--json", js}, ins...)...)
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows(t, js)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i, row := range rows {
		if want := ins[i/2]; row.Input != want || row.Trace != want {
			t.Errorf("row %d: input %q trace %q, want both %q", i, row.Input, row.Trace, want)
		}
	}
	if strings.Count(out, "1.000x") != 2 {
		t.Errorf("each input's expandable row is its own reference (1.000x twice):\n%s", out)
	}
	if !bytes.Contains([]byte(out), []byte(ins[1])) {
		t.Errorf("the table does not name %s:\n%s", ins[1], out)
	}
}
