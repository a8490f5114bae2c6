// Package trace owns the allocation trace of a training run, a product package: its format (read checked,
// written streaming), and the recorder that libgmlake runs for GMLAKE_TRACE. The text of
// testdata/traces/README.md, gzip or plain, one event a line in program order:
//
//	a ID SIZE STREAM   allocation ID of SIZE bytes (as requested) on STREAM (0, 1, 2 in order of first use)
//	r ID               free requested: the program is done with the block, but it may not be reused yet
//	                   (another stream may still use it); PyTorch records one before each free_completed
//	f ID               free completed: from now on the block may be reused
//
// Blank lines and lines whose first field starts with '#' are skipped. Every ID is allocated once, and
// freed (r then f, or f alone) at most once after; Read refuses anything else with a *ParseError naming
// file and line.
//
// Two versions, told apart by the first line. v1 (the bundled traces, Write, NewWriter) is the bare lines;
// a v1 gzip stream that ends early is an error naming the line it ended at. v2 (Create, WriteFile,
// LogWriter, the Recorder) is a write-ahead log, so that what survives a kill -9 is a prefix, never garbage:
//
//	# gmlake-trace v2 pid=1234       the header: the first line
//	a 0 4096 0                       a block: up to MaxBlockEvents event lines ...
//	f 0
//	# crc32c 2 1a2b3c4d              ... closed by its checksum line: its events, the CRC32C (Castagnoli, hex)
//	                                 of every byte of its lines since the previous framing line
//	# end 2 exit                     an end record: the events so far, and why ("close", "stop", "exit",
//	                                 "SIGTERM", "SIGINT"); more blocks may follow one (a signal's checkpoint)
//
// Each block (with the end record after it, if any) is written by one write; gzip-compressed, as one whole
// gzip member, so that a file cut between writes is a valid gzip stream and gzip tools read it whole. A
// v2 trace is complete when its last record is an end record. A reader returns the events of every block
// its checksum line vouches for, in order, and stops at the first thing that is not a whole record (a line
// without its newline, a block without its checksum line or that does not match it, a gzip member cut short,
// a file that ends without an end record): Next, Read and ReadFile return a *CutError (errors.Is(err,
// ErrCut)) saying after how many events, at which line and byte offset of the text (decompressed) the
// trace was cut, and why; Read and ReadFile return the Trace of the events before the cut with it. A caller
// may replay those and say the trace was cut.
//
// The Recorder writes a process's allocations as v2 (Record; Active keeps libgmlake's one slot). It writes a
// block every RecordOptions.FlushEvents events (DefaultFlushEvents, 4096) or FlushInterval after the first
// event it holds (DefaultFlushInterval, 1 s), whichever comes first, and at Close; with FlushOnSignals also
// on SIGTERM and SIGINT, after which the signal goes on to the handler that was there before (a host's,
// Python's SIGINT) or its default action (the process dies by it). A trace belongs to the process that
// opened it: after fork() the child writes nothing of the parent's (each call checks the pid first and
// touches no lock), and opens a trace of its own only if the path has {pid}. {pid} and {rank} (RANK, else
// LOCAL_RANK, else 0) expand in the path, and the file is locked (flock) while written: a path another live
// process is writing is refused with a *BusyError (ErrBusy) that names the writer's pid and suggests {rank}.
//
// Replaying a trace through an allocator (harness/replay) and converting PyTorch's memory snapshot pickles
// to a Trace (harness/snapshot) live elsewhere: the product links this package, not those.
package trace

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// ReadFile parses the trace at path, gzip-compressed or plain (detected by content). Like Read, a v2 trace
// cut short gives the Trace of the events before the cut and a *CutError.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Read(f, path)
	if t != nil {
		t.Name = Name(path)
	}
	return t, err
}

// Read parses a trace from r (gzip or plain); file names the input in errors. It checks that every ID is
// allocated once and freed at most once after its allocation. A v2 trace cut short returns the events
// before the cut and a *CutError (errors.Is(err, ErrCut)); a v1 gzip stream that ends early is an error
// naming the line where it ended, never a shorter trace. It holds every event: to replay a long trace in
// constant memory, read it with a Reader instead.
func Read(r io.Reader, file string) (*Trace, error) {
	rd, err := NewReader(r, file)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	t := &Trace{Name: Name(file)}
	for {
		ev, ok, err := rd.Next()
		if errors.Is(err, ErrCut) {
			t.Streams = rd.Streams()
			return t, err
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			t.Streams = rd.Streams()
			return t, nil
		}
		t.Events = append(t.Events, ev)
	}
}

// Reader reads a trace one event at a time, checking each as Read does, in memory that does not grow with
// the trace's length: it keeps the live IDs and the set of IDs ever allocated as runs of consecutive IDs
// (one run for the usual 0, 1, 2, ... numbering). Not safe for concurrent use.
type Reader struct {
	file    string
	br      *bufio.Reader
	zr      *gzip.Reader // nil for plain text
	line    int
	events  int
	streams int
	// live holds the state of every allocated, not yet freed ID: 'a' live, 'r' free requested.
	live map[uint64]byte
	seen idRuns // every ID allocated so far

	err    error  // sticky: a cut (v2), reported by every later Next
	header string // the v2 header line without its newline; "" for v1
	v2     framing
}

// NewReader returns a Reader of r (gzip or plain, detected by content); file names the input in errors.
func NewReader(r io.Reader, file string) (*Reader, error) {
	br, ok := r.(*bufio.Reader)
	if ok && br.Size() > 1<<16 {
		// The 64 KiB line limit is the format's, whatever buffer the caller has: a larger *bufio.Reader is
		// read through one of 64 KiB (hidden from bufio.NewReaderSize, which would hand it back as it is).
		ok = false
	}
	if !ok || br.Size() < 1<<16 {
		br = bufio.NewReaderSize(struct{ io.Reader }{r}, 1<<16)
	}
	rd := &Reader{file: file, br: br, live: make(map[uint64]byte)}
	magic, _ := br.Peek(2)
	if len(magic) == 1 && magic[0] == 0x1f {
		rd.err = rd.cut("the gzip stream ends inside its first header")
		return rd, nil
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			rd.err = rd.cut("the gzip stream ends inside its first header")
			return rd, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", file, err)
		}
		rd.zr = zr
		rd.br = bufio.NewReaderSize(zr, 1<<16)
	}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Next returns the next event; ok is false at the end of the trace. An error (a *ParseError, a *CutError
// of a v2 trace that ends early, or a read error naming the line) ends the trace.
func (rd *Reader) Next() (ev Event, ok bool, err error) {
	if rd.err != nil {
		return ev, false, rd.err
	}
	if rd.header != "" {
		return rd.nextFramed()
	}
	for {
		text, rerr := rd.br.ReadSlice('\n')
		if rerr == bufio.ErrBufferFull {
			return ev, false, &ParseError{File: rd.file, Line: rd.line + 1, Text: string(text[:64]) + "...", Msg: "line longer than 64 KiB"}
		}
		if rerr != nil && rerr != io.EOF {
			return ev, false, readErr(rd.file, rd.line+1, rerr)
		}
		if len(text) > 0 {
			rd.line++
			ev, ok, msg := parseLine(text)
			if msg == "" && ok {
				msg = rd.apply(ev)
			}
			if msg != "" {
				return ev, false, &ParseError{File: rd.file, Line: rd.line, Text: string(bytes.TrimRight(text, "\r\n")), Msg: msg}
			}
			if ok {
				if ev.Op == OpAlloc && ev.Stream+1 > rd.streams {
					rd.streams = ev.Stream + 1
				}
				rd.events++
				return ev, true, nil
			}
		}
		if rerr == io.EOF {
			return ev, false, nil
		}
	}
}

// Events returns the number of events read so far; Streams the number of distinct streams so far (the
// largest stream number + 1); Live the IDs allocated and not freed so far.
func (rd *Reader) Events() int  { return rd.events }
func (rd *Reader) Streams() int { return rd.streams }
func (rd *Reader) Live() int    { return len(rd.live) }

// Close releases the decompressor (not the underlying reader).
func (rd *Reader) Close() error {
	if rd.zr != nil {
		return rd.zr.Close()
	}
	return nil
}

// apply checks ev against the ID's state and records it; it returns a message when ev is illegal.
func (rd *Reader) apply(ev Event) string {
	switch ev.Op {
	case OpAlloc:
		if !rd.seen.add(ev.ID) {
			return "id allocated twice"
		}
		rd.live[ev.ID] = 'a'
	case OpFreeRequest:
		if rd.live[ev.ID] != 'a' {
			return "free requested of an id that is not live"
		}
		rd.live[ev.ID] = 'r'
	case OpFree:
		if st := rd.live[ev.ID]; st != 'a' && st != 'r' {
			return "free of an id that is not live"
		}
		delete(rd.live, ev.ID)
	}
	return ""
}

// idRuns is a set of IDs as sorted, disjoint, non-adjacent runs [lo, hi]: O(1) memory for IDs that come
// in order, O(runs) in general. Past maxIDRuns runs (IDs scattered at random) the runs freeze and new IDs
// go to a map, an entry per ID, so that adding stays O(log runs) rather than O(runs).
type idRuns struct {
	runs  []idRun // sorted by lo
	extra map[uint64]struct{}
}

type idRun struct{ lo, hi uint64 }

const maxIDRuns = 1 << 12

// add inserts id and reports whether it was new.
func (s *idRuns) add(id uint64) bool {
	n := len(s.runs)
	if s.extra == nil && n > 0 && s.runs[n-1].hi != math.MaxUint64 && id == s.runs[n-1].hi+1 { // the next ID
		s.runs[n-1].hi = id
		return true
	}
	// i: the first run with lo > id.
	i, _ := slices.BinarySearchFunc(s.runs, id, func(r idRun, id uint64) int {
		if r.lo <= id {
			return -1
		}
		return 1
	})
	if i > 0 && id <= s.runs[i-1].hi {
		return false
	}
	if s.extra != nil {
		if _, dup := s.extra[id]; dup {
			return false
		}
		s.extra[id] = struct{}{}
		return true
	}
	if n >= maxIDRuns {
		s.extra = map[uint64]struct{}{id: {}}
		return true
	}
	joinLeft := i > 0 && s.runs[i-1].hi+1 == id
	joinRight := i < n && id+1 == s.runs[i].lo
	switch {
	case joinLeft && joinRight:
		s.runs[i-1].hi = s.runs[i].hi
		s.runs = slices.Delete(s.runs, i, i+1)
	case joinLeft:
		s.runs[i-1].hi = id
	case joinRight:
		s.runs[i].lo = id
	default:
		s.runs = slices.Insert(s.runs, i, idRun{id, id})
	}
	return true
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
// allocations and Write share. It checks nothing: the writer of a trace keeps its IDs legal. A Writer from
// NewWriter writes v1 lines (a text for programs and tests); one from Create writes the v2 format, a block
// every DefaultFlushEvents events and at Flush, an end record at Close. Not safe for concurrent use (the
// Recorder is the concurrent writer of a process's allocations).
type Writer struct {
	bw   *bufio.Writer // NewWriter only
	line []byte
	log  *LogWriter // Create only
	file *os.File   // Create only
}

// NewWriter returns a Writer of v1 plain text to w. Flush (or Close) writes out what is buffered.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 1<<16), line: make([]byte, 0, 64)}
}

// Create creates the file at path and returns a Writer of the v2 format to it, gzip-compressed (a gzip
// member per block) when the name ends in .gz. Close writes the end record and closes the file.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	lw, err := NewLogWriter(f, strings.HasSuffix(path, ".gz"), "")
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Writer{log: lw, file: f}, nil
}

// Write writes one event.
func (w *Writer) Write(e Event) error {
	if w.log != nil {
		w.log.Add(e)
		if w.log.Buffered() >= DefaultFlushEvents {
			return w.log.Commit()
		}
		return nil
	}
	w.line = appendEvent(w.line[:0], e)
	_, err := w.bw.Write(w.line)
	return err
}

// Flush writes out the buffered events (for Create's, as one block).
func (w *Writer) Flush() error {
	if w.log != nil {
		return w.log.Commit()
	}
	return w.bw.Flush()
}

// Close flushes, and for a Writer from Create writes the end record and closes the file. It returns the
// first error.
func (w *Writer) Close() error {
	if w.log == nil {
		return w.bw.Flush()
	}
	err := w.log.End("close")
	if e := w.file.Close(); err == nil {
		err = e
	}
	return err
}

// Write writes events in the v1 trace format (plain text, unframed).
func Write(w io.Writer, events []Event) error {
	tw := NewWriter(w)
	for _, e := range events {
		if err := tw.Write(e); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// WriteFile writes events to path in the v2 format, gzip-compressed when the name ends in .gz.
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

// readErr is a read error at line: the data ended early or does not decompress (truncated or corrupt input),
// or the file itself could not be read (a folder, an I/O error), which says nothing about its contents.
func readErr(file string, line int, err error) error {
	var corrupt flate.CorruptInputError
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt) {
		return fmt.Errorf("%s:%d: %w (truncated or corrupt input)", file, line, err)
	}
	return fmt.Errorf("%s:%d: cannot read it: %w", file, line, err)
}
