package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/trace"
)

// Property: a trace whose writer was killed mid-trace (a v2 file, gzip or plain, cut at an arbitrary byte:
// what SIGKILL leaves) is replayed up to the cut under every policy: the command succeeds, every row has the
// complete events before the cut (as many as the reader vouches for, more than none, fewer than written),
// its JSON row and the notes say where it was cut. It used to refuse the whole file (issue 36 item 5: the
// reader reports the cut, the replay goes on with what is complete).
func TestReplayOfACutTraceReplaysWhatIsCompleteAndSaysSo(t *testing.T) {
	evs := bundledEvents(t, 20000)
	for _, name := range []string{"cut.trace", "cut.trace.gz"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			w, err := trace.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b[:len(b)*3/5], 0o644); err != nil { // cut 60% in: mid-block
				t.Fatal(err)
			}
			_, rerr := trace.ReadFile(path)
			if !strings.Contains(errText(rerr), "cut after event") {
				t.Fatalf("the reader does not report the cut file as cut: %v", rerr)
			}
			js := filepath.Join(dir, "r.json")
			out, stderr, err := execute(t, "replay", "--policy", "caching,gmlake", "--json", js, path)
			if err != nil {
				t.Fatalf("replay of a cut trace: %v\n%s%s", err, out, stderr)
			}
			t.Logf("%s%s", out, stderr)
			if !strings.Contains(out+stderr, "was cut") {
				t.Errorf("replay does not say the input was cut:\n%s%s", out, stderr)
			}
			for _, row := range readRows(t, js) {
				if row.Events <= 0 || row.Events >= len(evs) || row.Events%trace.DefaultFlushEvents != 0 {
					t.Errorf("%s: %d events replayed of %d written, want the complete blocks' (a multiple of %d)",
						row.Policy, row.Events, len(evs), trace.DefaultFlushEvents)
				}
			}
		})
	}
}

// bundledEvents is the first n events of the bundled trace: a trace of its own (what is live at its end is
// released at Close, as a training run's last tensors are).
func bundledEvents(t *testing.T, n int) []trace.Event {
	t.Helper()
	tr, err := trace.ReadFile(bundled)
	if err != nil {
		t.Fatal(err)
	}
	return tr.Events[:min(n, len(tr.Events))]
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
