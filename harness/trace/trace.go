// Package trace reads allocation traces of real training runs: the text format of testdata/traces/README.md
// (gzip or plain), one event a line in program order:
//
//	a ID SIZE STREAM   allocation ID of SIZE bytes (as requested) on STREAM (0, 1, 2 in order of first use)
//	r ID               free requested while another stream may still use the block
//	f ID               free completed: from now on the block may be reused
//
// It owns parsing and writing that format; replaying a trace through an allocator lives in harness.
package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Op is the kind of a trace event.
type Op byte

const (
	OpAlloc       Op = 'a' // allocation
	OpFreeRequest Op = 'r' // free requested, other streams may still use the block
	OpFree        Op = 'f' // free completed
)

// Event is one line of a trace.
type Event struct {
	Op     Op
	ID     uint64
	Size   uint64 // OpAlloc only
	Stream int    // OpAlloc only
}

// String prints the event in the trace format.
func (e Event) String() string {
	if e.Op == OpAlloc {
		return fmt.Sprintf("a %d %d %d", e.ID, e.Size, e.Stream)
	}
	return fmt.Sprintf("%c %d", e.Op, e.ID)
}

// Trace is a parsed trace.
type Trace struct {
	Name    string // file name without .trace.gz / .trace
	Events  []Event
	Streams int // number of distinct streams
}

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("trace: malformed")

// ParseError says where the input is bad.
type ParseError struct {
	File string
	Line int
	Text string
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d: %s: %q", e.File, e.Line, e.Msg, e.Text)
}

func (e *ParseError) Unwrap() error { return ErrSyntax }

// Name derives a trace name from its path: the base name without .gz, .trace, .txt.
func Name(path string) string {
	n := filepath.Base(path)
	for _, suf := range []string{".gz", ".trace", ".txt"} {
		n = strings.TrimSuffix(n, suf)
	}
	return n
}

// ReadFile parses the trace at path, gzip-compressed or plain (detected by content).
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Read(f, path)
	if err != nil {
		return nil, err
	}
	t.Name = Name(path)
	return t, nil
}

// Read parses a trace from r (gzip or plain); file names the input in errors. It checks that every ID is
// allocated once and freed at most once after its allocation.
func Read(r io.Reader, file string) (*Trace, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", file, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	t := &Trace{Name: Name(file)}
	state := make(map[uint64]byte) // 'a' live, 'r' free requested, 'f' freed
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 || text[0] == '#' {
			continue
		}
		ev, msg := parseLine(text)
		if msg != "" {
			return nil, &ParseError{File: file, Line: line, Text: string(text), Msg: msg}
		}
		st, seen := state[ev.ID]
		switch ev.Op {
		case OpAlloc:
			if seen {
				return nil, &ParseError{File: file, Line: line, Text: string(text), Msg: "id allocated twice"}
			}
			if ev.Stream+1 > t.Streams {
				t.Streams = ev.Stream + 1
			}
			state[ev.ID] = 'a'
		case OpFreeRequest:
			if !seen || st != 'a' {
				return nil, &ParseError{File: file, Line: line, Text: string(text), Msg: "free requested of an id that is not live"}
			}
			state[ev.ID] = 'r'
		case OpFree:
			if !seen || st == 'f' {
				return nil, &ParseError{File: file, Line: line, Text: string(text), Msg: "free of an id that is not live"}
			}
			state[ev.ID] = 'f'
		}
		t.Events = append(t.Events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w (truncated or corrupt input)", file, line+1, err)
	}
	return t, nil
}

func parseLine(text []byte) (Event, string) {
	f := strings.Fields(string(text))
	if len(f) == 0 || len(f[0]) != 1 {
		return Event{}, "unknown event (want a, r or f)"
	}
	var ev Event
	switch f[0][0] {
	case 'a':
		if len(f) != 4 {
			return ev, "alloc wants 'a ID SIZE STREAM'"
		}
	case 'r', 'f':
		if len(f) != 2 {
			return ev, "free wants '" + f[0] + " ID'"
		}
	default:
		return ev, "unknown event (want a, r or f)"
	}
	ev.Op = Op(f[0][0])
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return ev, "bad id"
	}
	ev.ID = id
	if ev.Op == OpAlloc {
		size, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil || size == 0 {
			return ev, "bad size (want a positive integer)"
		}
		s, err := strconv.ParseUint(f[3], 10, 16)
		if err != nil {
			return ev, "bad stream (want 0..65535)"
		}
		ev.Size, ev.Stream = size, int(s)
	}
	return ev, ""
}

// Write writes events in the trace format (plain text).
func Write(w io.Writer, events []Event) error {
	bw := bufio.NewWriter(w)
	for _, e := range events {
		if _, err := fmt.Fprintln(bw, e.String()); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes events to path, gzip-compressed when the name ends in .gz.
func WriteFile(path string, events []Event) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	err = Write(w, events)
	if zw != nil {
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
