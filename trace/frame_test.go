package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordedEvents is a legal trace of n events over 3 streams, with requested frees and IDs out of order.
func recordedEvents(n int, seed int64) []Event {
	rng := rand.New(rand.NewSource(seed))
	var evs []Event
	var live []uint64
	reqd := map[uint64]bool{}
	next := uint64(0)
	for len(evs) < n {
		if len(live) > 0 && rng.Intn(3) == 0 {
			i := rng.Intn(len(live))
			id := live[i]
			if !reqd[id] && rng.Intn(4) == 0 {
				reqd[id] = true
				evs = append(evs, Event{Op: OpFreeRequest, ID: id})
				continue
			}
			live = append(live[:i], live[i+1:]...)
			evs = append(evs, Event{Op: OpFree, ID: id})
			continue
		}
		id := next
		next += 1 + uint64(rng.Intn(3))
		live = append(live, id)
		evs = append(evs, Event{Op: OpAlloc, ID: id, Size: 1 + uint64(rng.Int63n(1<<34)), Stream: rng.Intn(3)})
	}
	return evs
}

// encodeV2 writes evs as a v2 trace in blocks of `block` events (a checkpoint end record after the first
// half), closed by an end record; it returns the bytes and where each record ends (its byte offset in the
// encoding, with the number of events complete there).
func encodeV2(t testing.TB, evs []Event, block int, compress bool) (data []byte, ends []recEnd) {
	t.Helper()
	var buf bytes.Buffer
	lw, err := NewLogWriter(&buf, compress, "pid=1 test")
	if err != nil {
		t.Fatal(err)
	}
	ends = append(ends, recEnd{int64(buf.Len()), 0, false})
	for i, e := range evs {
		lw.Add(e)
		if lw.Buffered() == block {
			if err := lw.Commit(); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, recEnd{int64(buf.Len()), i + 1, false})
		}
		if i == len(evs)/2 {
			if err := lw.End("SIGTERM"); err != nil { // a checkpoint: more follows
				t.Fatal(err)
			}
			ends = append(ends, recEnd{int64(buf.Len()), i + 1, true})
		}
	}
	if err := lw.Commit(); err != nil {
		t.Fatal(err)
	}
	ends = append(ends, recEnd{int64(buf.Len()), len(evs), false})
	if err := lw.End("close"); err != nil {
		t.Fatal(err)
	}
	ends = append(ends, recEnd{int64(buf.Len()), len(evs), true})
	return buf.Bytes(), ends
}

type recEnd struct {
	off    int64 // bytes written when the record was complete
	events int   // events complete there
	end    bool  // an end record: a trace that stops there is complete
}

// endsAt reports whether the first n bytes end with an end record (a complete trace).
func endsAt(ends []recEnd, n int) bool {
	for _, e := range ends {
		if e.off == int64(n) && e.end {
			return true
		}
	}
	return false
}

// completeAt returns the events complete in the first n bytes: those of the last record written whole.
func completeAt(ends []recEnd, n int) int {
	k := 0
	for _, e := range ends {
		if e.off <= int64(n) {
			k = e.events
		}
	}
	return k
}

// checkPrefix reads data and checks that what comes back is exactly evs[:k] for k >= atLeast (a cut
// reported) or exactly evs[:atLeast] with no error (complete: it ends with an end record), never an
// invented or altered event.
func checkPrefix(t *testing.T, data []byte, evs []Event, atLeast int, complete bool, what string) {
	t.Helper()
	tr, err := Read(bytes.NewReader(data), "cut.trace")
	if complete {
		if err != nil || tr == nil || len(tr.Events) != atLeast {
			t.Fatalf("%s: the whole trace: %v", what, err)
		}
	} else {
		var ce *CutError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCut) {
			t.Fatalf("%s: a cut trace read with error %v, want a *CutError", what, err)
		}
		if tr == nil || ce.Events != len(tr.Events) {
			t.Fatalf("%s: the cut says %d events, Read returned %v", what, ce.Events, tr)
		}
		if len(tr.Events) < atLeast {
			t.Fatalf("%s: %d events read, but %d were complete before the cut (%v)", what, len(tr.Events), atLeast, err)
		}
	}
	if len(tr.Events) > len(evs) {
		t.Fatalf("%s: %d events read of %d written", what, len(tr.Events), len(evs))
	}
	for i, e := range tr.Events {
		if e != evs[i] {
			t.Fatalf("%s: event %d read as %v, written as %v", what, i, e, evs[i])
		}
	}
}

// Property (the write-ahead log): a v2 trace cut at ANY byte offset, plain or gzip, reads as exactly a
// prefix of the events written, every event of a record complete before the cut included, and says it was
// cut (a *CutError); only a file that ends with an end record (the whole file, or one cut right after the
// checkpoint a signal writes) reads without error. Plain text and gzip, every offset.
func TestCutTraceReadsExactlyAPrefixAndSaysWhere(t *testing.T) {
	evs := recordedEvents(700, 1)
	for _, compress := range []bool{false, true} {
		data, ends := encodeV2(t, evs, 64, compress)
		for n := 1; n <= len(data); n++ {
			// Every record whole before the cut must be read (for gzip: its member is whole).
			checkPrefix(t, data[:n], evs, completeAt(ends, n), endsAt(ends, n), fmt.Sprintf("gzip=%v cut at %d of %d", compress, n, len(data)))
		}
		// And the cut's position: for plain text, exactly the end of the last complete record.
		if !compress {
			for _, n := range []int{len(data) / 3, len(data) / 2, len(data) - 1} {
				_, err := Read(bytes.NewReader(data[:n]), "cut.trace")
				var ce *CutError
				errors.As(err, &ce)
				want := int64(0)
				for _, e := range ends {
					if e.off <= int64(n) {
						want = e.off
					}
				}
				if ce == nil || ce.Offset != want || ce.Events != completeAt(ends, n) {
					t.Errorf("cut at %d: %v, want the cut at byte %d after %d events", n, err, want, completeAt(ends, n))
				}
			}
		}
	}
}

// Property: no single corrupted byte of a v2 trace makes an invented or altered event: what is read is
// always a prefix of what was written (the block whose checksum fails is where the trace is cut).
func TestCorruptByteNeverReadsAsAnEvent(t *testing.T) {
	evs := recordedEvents(300, 2)
	data, _ := encodeV2(t, evs, 50, false)
	rng := rand.New(rand.NewSource(3))
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= byte(1 + rng.Intn(255))
		tr, err := Read(bytes.NewReader(bad), "bad.trace")
		if tr == nil {
			continue // refused outright (a header of another version, or a syntax error)
		}
		if len(tr.Events) > len(evs) {
			t.Fatalf("byte %d: %d events read of %d written", i, len(tr.Events), len(evs))
		}
		for j, e := range tr.Events {
			if e != evs[j] {
				t.Fatalf("byte %d (%q): event %d read as %v, written as %v (err %v)", i, data[i], j, e, evs[j], err)
			}
		}
	}
}

// A cut is reported with the numbers a user needs (file, events, line, byte) and the reason.
func TestCutErrorSaysWhereAndWhy(t *testing.T) {
	evs := recordedEvents(10, 4)
	data, _ := encodeV2(t, evs, 4, false)
	first := bytes.Index(data, []byte(sumTag))
	cut := first + bytes.IndexByte(data[first:], '\n') + 1 + 3 // three bytes into the second block
	_, err := Read(bytes.NewReader(data[:cut]), "run.trace")
	msg := fmt.Sprint(err)
	for _, want := range []string{"run.trace: cut after event 4 (line 6, byte ", "no newline", "the 4 events before the cut are complete"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	// A file that ends after a whole block but without its end record says the writer did not close it.
	end := bytes.LastIndex(data, []byte("# end "))
	_, err = Read(bytes.NewReader(data[:end]), "run.trace")
	var ce *CutError
	if !errors.As(err, &ce) || ce.Events != len(evs) || !strings.Contains(ce.Reason, "without an end record") {
		t.Errorf("no end record: %v", err)
	}
}

// The old format stays readable as it was: v1 files (the bundled traces) read as their lines say, and
// a file of another version is refused, naming the versions this gmlake reads.
func TestV1TracesReadAsBefore(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*.trace.gz"))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(zr)
		lines := 0
		for _, l := range bytes.Split(text, []byte("\n")) {
			if len(l) > 0 && l[0] != '#' {
				lines++
			}
		}
		tr, err := ReadFile(p)
		if err != nil || len(tr.Events) != lines {
			t.Errorf("%s: %v, %d events of %d lines", p, err, len(tr.Events), lines)
		}
	}
	if _, err := Read(strings.NewReader("# gmlake-trace v3\na 0 1 0\n"), "new.trace"); err == nil || !strings.Contains(err.Error(), "v1 and v2") {
		t.Errorf("a v3 trace: %v", err)
	}
}

// Property: a Writer from Create writes a v2 trace (gzip: a member per block, which gzip tools read as one
// stream) that reads back as the events written, complete.
func TestCreateWritesV2ThatGzipReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.trace.gz")
	evs := recordedEvents(2*DefaultFlushEvents+10, 5)
	if err := WriteFile(path, evs); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil || !bytes.HasPrefix(text, []byte(magicV2)) || bytes.Count(text, []byte(sumTag)) != 3 {
		t.Fatalf("gzip reads %d bytes (%v), want a v2 header and 3 blocks", len(text), err)
	}
	tr, err := ReadFile(path)
	if err != nil || len(tr.Events) != len(evs) {
		t.Fatalf("read back: %v", err)
	}
}

// Fuzz: the Reader never panics on arbitrary bytes, and whatever it accepts (wholly, or up to a cut)
// re-encodes, as v2 plain and gzip and as v1, to the same events.
func FuzzReader(f *testing.F) {
	evs := recordedEvents(40, 6)
	for _, compress := range []bool{false, true} {
		data, _ := encodeV2(f, evs, 8, compress)
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	var v1 bytes.Buffer
	Write(&v1, evs)
	f.Add(v1.Bytes())
	f.Add([]byte("# gmlake-trace v2\na 0 1 0\n# crc32c 1 00000000\n# end 1 close\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Read(bytes.NewReader(data), "fuzz.trace")
		if err != nil && !errors.Is(err, ErrCut) {
			if tr != nil {
				t.Fatalf("Read returned a trace with a non-cut error %v", err)
			}
			return
		}
		for _, compress := range []bool{false, true} {
			var buf bytes.Buffer
			lw, err := NewLogWriter(&buf, compress, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tr.Events {
				lw.Add(e)
				if lw.Buffered() == 7 {
					lw.Commit()
				}
			}
			lw.End("close")
			back, err := Read(&buf, "again.trace")
			if err != nil || !eventsSame(back.Events, tr.Events) || back.Streams != tr.Streams {
				t.Fatalf("re-encoded (gzip=%v) reads back differently: %v", compress, err)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, tr.Events); err != nil {
			t.Fatal(err)
		}
		back, err := Read(&buf, "v1.trace")
		if err != nil || !eventsSame(back.Events, tr.Events) {
			t.Fatalf("as v1 reads back differently: %v", err)
		}
	})
}

func eventsSame(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
