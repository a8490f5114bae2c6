// Package trace reads allocation traces of real training runs: the text format of testdata/traces/README.md
// (gzip or plain), one event a line in program order:
//
//	a ID SIZE STREAM   allocation ID of SIZE bytes (as requested) on STREAM (0, 1, 2 in order of first use)
//	r ID               free requested: the program is done with the block, but it may not be reused yet
//	                   (another stream may still use it); PyTorch records one before each free_completed
//	f ID               free completed: from now on the block may be reused
//
// Blank lines and lines whose first field starts with '#' are skipped. Every ID is allocated once, and
// freed (r then f, or f alone) at most once after; Read refuses anything else with a *ParseError naming
// file and line, and a compressed stream that ends early with an error naming the line it ended at.
//
// It owns parsing and writing that format (a pure format package: libgmlake links it to write the traces of
// GMLAKE_TRACE); replaying a trace through an allocator, and converting PyTorch's memory snapshot pickles to
// a Trace, live in harness (replay.go, pickle.go).
package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
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

// ErrEmpty says a trace has no events: nothing to replay (an empty file, /dev/null).
var ErrEmpty = errors.New("trace: no events")

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
// allocated once and freed at most once after its allocation. A gzip stream that ends early is an error
// naming the line where it ended, never a shorter trace.
func Read(r io.Reader, file string) (*Trace, error) {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 1<<16 {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", file, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	t := &Trace{Name: Name(file)}
	var st idStates
	line := 0
	for {
		text, rerr := br.ReadSlice('\n')
		if rerr == bufio.ErrBufferFull {
			return nil, &ParseError{File: file, Line: line + 1, Text: string(text[:64]) + "...", Msg: "line longer than 64 KiB"}
		}
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w (truncated or corrupt input)", file, line+1, rerr)
		}
		if len(text) > 0 {
			line++
			if ev, ok, msg := parseLine(text); msg != "" {
				return nil, &ParseError{File: file, Line: line, Text: string(bytes.TrimRight(text, "\r\n")), Msg: msg}
			} else if ok {
				if msg := st.apply(ev); msg != "" {
					return nil, &ParseError{File: file, Line: line, Text: string(bytes.TrimRight(text, "\r\n")), Msg: msg}
				}
				if ev.Op == OpAlloc && ev.Stream+1 > t.Streams {
					t.Streams = ev.Stream + 1
				}
				t.Events = append(t.Events, ev)
			}
		}
		if rerr == io.EOF {
			return t, nil
		}
	}
}

// idStates tracks each ID's state while reading: a slice for the small dense IDs traces use, a map beyond.
type idStates struct {
	dense  []byte // indexed by ID < denseIDs: 0 never seen, 'a' live, 'r' free requested, 'f' freed
	sparse map[uint64]byte
}

const denseIDs = 1 << 26

func (s *idStates) get(id uint64) byte {
	if id < denseIDs {
		if id < uint64(len(s.dense)) {
			return s.dense[id]
		}
		return 0
	}
	return s.sparse[id]
}

func (s *idStates) set(id uint64, v byte) {
	if id < denseIDs {
		if id >= uint64(len(s.dense)) {
			s.dense = append(s.dense, make([]byte, int(id)+1-len(s.dense)+len(s.dense)/2)...)
		}
		s.dense[id] = v
		return
	}
	if s.sparse == nil {
		s.sparse = make(map[uint64]byte)
	}
	s.sparse[id] = v
}

// apply checks ev against the ID's state and records it; it returns a message when ev is illegal.
func (s *idStates) apply(ev Event) string {
	st := s.get(ev.ID)
	switch ev.Op {
	case OpAlloc:
		if st != 0 {
			return "id allocated twice"
		}
		s.set(ev.ID, 'a')
	case OpFreeRequest:
		if st != 'a' {
			return "free requested of an id that is not live"
		}
		s.set(ev.ID, 'r')
	case OpFree:
		if st != 'a' && st != 'r' {
			return "free of an id that is not live"
		}
		s.set(ev.ID, 'f')
	}
	return ""
}

// parseLine parses one line. ok is false for blank lines and comments; msg says what is wrong, if anything.
func parseLine(text []byte) (ev Event, ok bool, msg string) {
	var f [5][]byte
	n := 0
	for i := 0; i < len(text); {
		for i < len(text) && isSpace(text[i]) {
			i++
		}
		j := i
		for j < len(text) && !isSpace(text[j]) {
			j++
		}
		if j > i {
			if n == len(f) {
				n++ // too many fields; the arity check below reports it
				break
			}
			f[n] = text[i:j]
			n++
		}
		i = j
	}
	if n == 0 || f[0][0] == '#' {
		return ev, false, ""
	}
	if len(f[0]) != 1 {
		return ev, false, "unknown event (want a, r or f)"
	}
	switch f[0][0] {
	case 'a':
		if n != 4 {
			return ev, false, "alloc wants 'a ID SIZE STREAM'"
		}
	case 'r', 'f':
		if n != 2 {
			return ev, false, "free wants '" + string(f[0]) + " ID'"
		}
	default:
		return ev, false, "unknown event (want a, r or f)"
	}
	ev.Op = Op(f[0][0])
	id, good := parseUint(f[1])
	if !good {
		return ev, false, "bad id"
	}
	ev.ID = id
	if ev.Op == OpAlloc {
		size, good := parseUint(f[2])
		if !good || size == 0 {
			return ev, false, "bad size (want a positive integer)"
		}
		s, good := parseUint(f[3])
		if !good || s > 65535 {
			return ev, false, "bad stream (want 0..65535)"
		}
		ev.Size, ev.Stream = size, int(s)
	}
	return ev, true, ""
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// parseUint parses a decimal uint64 (no sign, no overflow).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Writer writes events in the trace format one at a time, buffered: what a program tracing its own
// allocations (capi's GMLAKE_TRACE) and Write share. It checks nothing: the writer of a trace keeps its
// IDs legal. Not safe for concurrent use.
type Writer struct {
	bw   *bufio.Writer
	line []byte
	gz   *gzip.Writer // Create only: nil unless the path ends in .gz
	file *os.File     // Create only
}

// NewWriter returns a Writer of plain text to w. Flush (or Close) writes out what is buffered.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 1<<16), line: make([]byte, 0, 64)}
}

// Create creates the file at path and returns a Writer to it, gzip-compressed when the name ends in .gz.
// Close flushes and closes the file.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	tw := NewWriter(w)
	tw.gz, tw.file = zw, f
	return tw, nil
}

// Write writes one event as one line.
func (w *Writer) Write(e Event) error {
	line := append(w.line[:0], byte(e.Op), ' ')
	line = strconv.AppendUint(line, e.ID, 10)
	if e.Op == OpAlloc {
		line = append(line, ' ')
		line = strconv.AppendUint(line, e.Size, 10)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(e.Stream), 10)
	}
	line = append(line, '\n')
	w.line = line
	_, err := w.bw.Write(line)
	return err
}

// Flush writes out the buffered lines.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Close flushes, and for a Writer from Create closes the compressor and the file. It returns the first
// error of the three.
func (w *Writer) Close() error {
	err := w.bw.Flush()
	if w.gz != nil {
		if e := w.gz.Close(); err == nil {
			err = e
		}
	}
	if w.file != nil {
		if e := w.file.Close(); err == nil {
			err = e
		}
	}
	return err
}

// Write writes events in the trace format (plain text).
func Write(w io.Writer, events []Event) error {
	tw := NewWriter(w)
	for _, e := range events {
		if err := tw.Write(e); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// WriteFile writes events to path, gzip-compressed when the name ends in .gz.
func WriteFile(path string, events []Event) error {
	tw, err := Create(path)
	if err != nil {
		return err
	}
	for _, e := range events {
		if err = tw.Write(e); err != nil {
			break
		}
	}
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	return err
}
