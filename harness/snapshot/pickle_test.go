package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/trace"
)

// testdata/snapshot.pickle is written by testdata/make_snapshot.py; this is the trace it must convert to.
func TestReadSnapshotFixture(t *testing.T) {
	tr, err := LoadTrace("testdata/snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	const M = 1 << 20
	want := []trace.Event{
		// blocks allocated before the window, in the order their frees appear, on their recorded streams
		{Op: trace.OpAlloc, ID: 0, Size: 3 * M, Stream: 0},
		{Op: trace.OpAlloc, ID: 6, Size: 4 * M, Stream: 1},
		{Op: trace.OpFree, ID: 0}, // free_requested + free_completed back to back: one f
		{Op: trace.OpAlloc, ID: 1, Size: 1000, Stream: 0},
		{Op: trace.OpAlloc, ID: 2, Size: 5 * M, Stream: 0},
		{Op: trace.OpAlloc, ID: 3, Size: 8 * M, Stream: 1},
		{Op: trace.OpFree, ID: 1},
		{Op: trace.OpFreeRequest, ID: 3}, // cross-stream: requested, then other work, then completed
		{Op: trace.OpAlloc, ID: 4, Size: 2 * M, Stream: 0},
		{Op: trace.OpFree, ID: 3},
		{Op: trace.OpAlloc, ID: 5, Size: 700, Stream: 0}, // the address reused: a new ID
		{Op: trace.OpFree, ID: 6},
	}
	if tr.Name != "snapshot" || tr.Streams != 2 {
		t.Errorf("name %q streams %d, want snapshot, 2", tr.Name, tr.Streams)
	}
	if len(tr.Events) != len(want) {
		t.Fatalf("got %d events, want %d:\n%v", len(tr.Events), len(want), tr.Events)
	}
	for i := range want {
		if tr.Events[i] != want[i] {
			t.Errorf("event %d = %v, want %v", i, tr.Events[i], want[i])
		}
	}
	// The converted trace is a legal text trace: it writes and reads back unchanged.
	var buf bytes.Buffer
	if err := trace.Write(&buf, tr.Events); err != nil {
		t.Fatal(err)
	}
	back, err := trace.Read(&buf, "snapshot.trace")
	if err != nil {
		t.Fatalf("converted trace does not read back: %v", err)
	}
	if len(back.Events) != len(want) || back.Streams != 2 {
		t.Errorf("read back %d events, %d streams", len(back.Events), back.Streams)
	}
}

func TestReadSnapshotChoosesDevice(t *testing.T) {
	f, err := os.Open("testdata/snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Read(f, "snapshot.pickle", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 1 || tr.Events[0] != (trace.Event{Op: trace.OpAlloc, ID: 0, Size: 512}) {
		t.Errorf("device 1: %v", tr.Events)
	}
	f.Seek(0, 0)
	if _, err := Read(f, "snapshot.pickle", 2); !errors.Is(err, ErrInvalid) {
		t.Errorf("device 2 of 2: err = %v, want ErrInvalid", err)
	}
}

func TestReadSnapshotTruncatedSaysOffset(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, len(b) / 3, len(b) - 1} {
		_, err := Read(bytes.NewReader(b[:n]), "cut.pickle", -1)
		var se *Error
		if !errors.As(err, &se) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("cut at %d: err = %v, want a *Error", n, err)
		}
		if se.Offset <= 0 || se.Offset > int64(n) || !strings.HasPrefix(err.Error(), "cut.pickle: offset ") {
			t.Errorf("cut at %d: %q: want the file and an offset in (0, %d]", n, err, n)
		}
	}
}

func TestReadSnapshotBadEntrySaysWhich(t *testing.T) {
	_, err := LoadTrace("testdata/snapshot_bad_entry.pickle")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "snapshot_bad_entry.pickle: device_traces[0][2]: entry has no \"size\"") {
		t.Errorf("err = %v", err)
	}
}

// A pickle that is not a snapshot dict (here: the text trace's bytes behind a pickle header) is refused
// with a message naming the file.
func TestReadSnapshotNotASnapshot(t *testing.T) {
	// protocol 2: PROTO 2, EMPTY_LIST, STOP: a valid pickle of [].
	_, err := Read(bytes.NewReader([]byte{0x80, 2, ']', '.'}), "list.pickle", -1)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "list.pickle") || !strings.Contains(err.Error(), "device_traces") {
		t.Errorf("err = %v", err)
	}
	// garbage after a pickle header
	_, err = Read(bytes.NewReader([]byte{0x80, 2, 0xff, 0xfe}), "junk.pickle", -1)
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "junk.pickle: offset 2: unknown pickle opcode 0xff") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadTraceTextAndErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "small.trace")
	if err := os.WriteFile(p, []byte("a 0 10 0\nf 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTrace(p)
	if err != nil || tr.Name != "small" || len(tr.Events) != 2 {
		t.Fatalf("LoadTrace = %v, %v", tr, err)
	}
	if _, err := LoadTrace(filepath.Join(dir, "missing.trace")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.trace")
	os.WriteFile(bad, []byte("a 0 10 0\nq\n"), 0o644)
	if _, err := LoadTrace(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2:") {
		t.Errorf("bad trace: %v, want %s:2: ...", err, bad)
	}
}

// FuzzReadSnapshot: any bytes give a trace or an error wrapping ErrInvalid, never a panic, and a trace that
// comes back is legal (it writes and reads back through the text parser).
func FuzzReadSnapshot(f *testing.F) {
	for _, p := range []string{"testdata/snapshot.pickle", "testdata/snapshot_bad_entry.pickle"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := Read(bytes.NewReader(b), "fuzz.pickle", -1)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := trace.Write(&buf, tr.Events); err != nil {
			t.Fatal(err)
		}
		if _, err := trace.Read(&buf, "fuzz.trace"); err != nil {
			t.Fatalf("converted trace is not legal: %v", err)
		}
	})
}
