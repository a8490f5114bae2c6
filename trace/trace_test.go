package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestReadReportsFileAndLineOfBadInput(t *testing.T) {
	cases := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"unknown op", "a 0 10 0\nx 0\n", 2, "unknown event"},
		{"alloc arity", "a 0 10\n", 1, "alloc wants"},
		{"free arity", "a 0 10 0\nf 0 1\n", 2, "free wants"},
		{"bad id", "a zero 10 0\n", 1, "bad id"},
		{"zero size", "a 0 0 0\n", 1, "bad size"},
		{"negative size", "a 0 -5 0\n", 1, "bad size"},
		{"bad stream", "a 0 10 70000\n", 1, "bad stream"},
		{"double alloc", "a 0 10 0\n# comment\n\na 0 10 0\n", 4, "allocated twice"},
		{"free unknown", "a 0 10 0\nf 1\n", 2, "not live"},
		{"double free", "a 0 10 0\nf 0\nf 0\n", 3, "not live"},
		{"request after free", "a 0 10 0\nf 0\nr 0\n", 3, "not live"},
		{"double request", "a 0 10 0\nr 0\nr 0\n", 3, "not live"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in), "x.trace")
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Read = %v, want a *ParseError", err)
			}
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("error %v does not match ErrSyntax", err)
			}
			if pe.File != "x.trace" || pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("error %q: want x.trace:%d and %q", err, c.line, c.msg)
			}
			if want := "x.trace:" + strconv.Itoa(c.line) + ":"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestReadTruncatedGzipSaysWhere(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i := 0; i < 5000; i++ {
		zw.Write([]byte("a " + strconv.Itoa(i) + " 4096 0\n"))
	}
	zw.Close()
	cut := buf.Bytes()[:buf.Len()/2]
	_, err := Read(bytes.NewReader(cut), "cut.trace.gz")
	if err == nil {
		t.Fatal("Read of a truncated gzip stream succeeded")
	}
	if !strings.HasPrefix(err.Error(), "cut.trace.gz:") || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("error %q does not name the file and say it is truncated", err)
	}
}

func sampleEvents() []Event {
	return []Event{
		{Op: OpAlloc, ID: 0, Size: 1000, Stream: 0},
		{Op: OpAlloc, ID: 1, Size: 5 << 20, Stream: 1},
		{Op: OpFreeRequest, ID: 1},
		{Op: OpFree, ID: 0},
		{Op: OpAlloc, ID: 7, Size: 1 << 40, Stream: 2},
		{Op: OpFree, ID: 1},
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	for _, name := range []string{"rt.trace", "rt.trace.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			evs := sampleEvents()
			if err := WriteFile(path, evs); err != nil {
				t.Fatal(err)
			}
			raw, _ := os.ReadFile(path)
			if gz := len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b; gz != strings.HasSuffix(name, ".gz") {
				t.Errorf("gzip = %v for %s", gz, name)
			}
			got, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != "rt" || got.Streams != 3 || len(got.Events) != len(evs) {
				t.Fatalf("got name %q, %d streams, %d events; want rt, 3, %d", got.Name, got.Streams, len(got.Events), len(evs))
			}
			for i := range evs {
				if got.Events[i] != evs[i] {
					t.Errorf("event %d = %+v, want %+v", i, got.Events[i], evs[i])
				}
			}
		})
	}
}

func TestReadSkipsCommentsAndBlankLines(t *testing.T) {
	tr, err := Read(strings.NewReader("# header\n\na 3 10 0\n   \nf 3\n"), "c.trace")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 2 || tr.Events[1] != (Event{Op: OpFree, ID: 3}) {
		t.Errorf("events = %+v", tr.Events)
	}
}

func TestNameStripsSuffixes(t *testing.T) {
	for in, want := range map[string]string{"a/b/llama.trace.gz": "llama", "x.trace": "x", "y.txt": "y", "z": "z"} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	n := 0
	for i := 0; i < 50000; i++ {
		buf.WriteString("a " + strconv.Itoa(i) + " 8388608 0\n")
		n++
		if i > 0 {
			buf.WriteString("f " + strconv.Itoa(i-1) + "\n")
			n++
		}
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
