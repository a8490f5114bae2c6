package trace

// The v2 format: the v1 lines, framed so that a file cut anywhere (a kill -9, a full disk, a torn write) reads
// as exactly the events of its complete blocks and says where it was cut. The package doc describes it.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

const (
	magicV2 = "# gmlake-trace v2" // the first line of a v2 trace starts so
	magicV  = "# gmlake-trace v"  // ... of any versioned trace
	sumTag  = "# crc32c "         // a block's checksum line: "# crc32c EVENTS HEX8"
	endTag  = "# end "            // an end record: "# end TOTAL REASON"

	// MaxBlockEvents bounds the events of one block: a reader holds one block in memory until its checksum
	// line vouches for it, and refuses (as a cut) a block longer than this.
	MaxBlockEvents = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCut is wrapped by every *CutError: the trace ends before its writer closed it. The events before the cut
// were all read and are exactly what the writer wrote; a caller may replay them and say the trace was cut.
var ErrCut = errors.New("trace: cut short")

// CutError says where a v2 trace was cut: after its last complete record. Every event before the cut has
// been returned (Read's Trace holds them); none after it is.
type CutError struct {
	File   string
	Events int    // complete events before the cut
	Line   int    // the last line of the last complete record (0: not even the header is complete)
	Offset int64  // the byte offset, in the trace's text (decompressed for gzip), where the complete records end
	Reason string // what was found at the cut
}

func (e *CutError) Error() string {
	return fmt.Sprintf("%s: cut after event %d (line %d, byte %d of the text): %s; the %d events before the cut are complete",
		e.File, e.Events, e.Line, e.Offset, e.Reason, e.Events)
}

func (e *CutError) Unwrap() error { return ErrCut }

// framing is a v2 Reader's state: the block being read, and where the last complete record ended.
type framing struct {
	pend     []Event // the current block's events, vouched for by its checksum line
	pendLine []int   // the line of each
	pendPos  int     // the next of pend to return
	total    int     // events of the complete blocks so far
	ended    bool    // the last record read is an end record
	reason   string  // the reason of the last end record
	off      int64   // bytes of text consumed
	good     struct {
		line int
		off  int64
	} // the end of the last complete record
}

// cut returns the *CutError of a trace cut after its last complete record.
func (rd *Reader) cut(reason string) *CutError {
	return &CutError{File: rd.file, Events: rd.v2.total, Line: rd.v2.good.line, Offset: rd.v2.good.off, Reason: reason}
}

// Header returns a v2 trace's first line (without its newline: "# gmlake-trace v2 pid=..."); "" for v1.
func (rd *Reader) Header() string { return rd.header }

// Ended returns the reason of the last end record read ("close", "exit", "stop", "SIGTERM", ...); "" if
// none was (a v1 trace, or a v2 trace not read to its end).
func (rd *Reader) Ended() string { return rd.v2.reason }

// readHeader reads a v2 header, if the text starts with one. A text that ends inside what can only be
// a header is a cut; a header of another version is refused.
func (rd *Reader) readHeader() error {
	if rd.err != nil {
		return nil
	}
	head, perr := rd.br.Peek(len(magicV))
	if string(head) != magicV {
		if perr != nil && strings.HasPrefix(magicV, string(head)) && (len(head) > 0 || errors.Is(perr, io.ErrUnexpectedEOF)) {
			rd.err = rd.cut("the file ends inside its header line")
		}
		return nil
	}
	text, err := rd.br.ReadSlice('\n')
	if err != nil {
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("%s:1: trace header longer than 64 KiB", rd.file)
		}
		rd.err = rd.cut("the file ends inside its header line")
		return nil
	}
	line := string(bytes.TrimRight(text, "\r\n"))
	if line != magicV2 && !strings.HasPrefix(line, magicV2+" ") {
		return fmt.Errorf("%s:1: %q: this gmlake reads trace formats v1 and v2 (written by a newer gmlake?)", rd.file, line)
	}
	rd.header = line
	rd.line = 1
	rd.v2.off = int64(len(text))
	rd.v2.good.line, rd.v2.good.off = 1, rd.v2.off
	return nil
}

// nextFramed is Next for a v2 trace: the next event of a complete block.
func (rd *Reader) nextFramed() (ev Event, ok bool, err error) {
	f := &rd.v2
	for f.pendPos >= len(f.pend) {
		done, err := rd.readBlock()
		if err != nil {
			rd.err = err
			return ev, false, err
		}
		if done {
			return ev, false, nil
		}
	}
	ev, line := f.pend[f.pendPos], f.pendLine[f.pendPos]
	f.pendPos++
	if msg := rd.apply(ev); msg != "" {
		rd.err = &ParseError{File: rd.file, Line: line, Text: ev.String(), Msg: msg}
		return ev, false, rd.err
	}
	if ev.Op == OpAlloc && ev.Stream+1 > rd.streams {
		rd.streams = ev.Stream + 1
	}
	rd.events++
	return ev, true, nil
}

// readBlock reads up to the next checksum line and leaves the block's events in pend. done reports the end
// of a complete trace (its last record an end record); a *CutError anything else that ends it.
func (rd *Reader) readBlock() (done bool, err error) {
	f := &rd.v2
	f.pend, f.pendLine, f.pendPos = f.pend[:0], f.pendLine[:0], 0
	var sum uint32
	lines := 0 // lines of the block so far, events or not
	for {
		text, rerr := rd.br.ReadSlice('\n')
		switch {
		case rerr == bufio.ErrBufferFull:
			return false, rd.cut(fmt.Sprintf("line %d is longer than 64 KiB (not written by gmlake: corrupt)", rd.line+1))
		case rerr == io.EOF && len(text) == 0 && lines == 0:
			if f.ended {
				return true, nil
			}
			return false, rd.cut("the file ends without an end record: its writer did not close it (killed, e.g. by kill -9?)")
		case rerr == io.EOF && len(text) == 0:
			return false, rd.cut(fmt.Sprintf("the file ends inside a block (%d lines without their checksum line)", lines))
		case rerr == io.EOF:
			return false, rd.cut(fmt.Sprintf("line %d has no newline (a write cut short)", rd.line+1))
		case rerr != nil:
			return false, rd.cut(fmt.Sprintf("reading line %d: %v", rd.line+1, rerr))
		}
		rd.line++
		f.off += int64(len(text))
		if len(text) > 1 && text[0] == '#' {
			switch {
			case bytes.HasPrefix(text, []byte(sumTag)):
				n, want, good := parseSum(text[len(sumTag):])
				if !good {
					return false, rd.cut(fmt.Sprintf("line %d: a malformed checksum line (corrupt)", rd.line))
				}
				if n != len(f.pend) || want != sum {
					return false, rd.cut(fmt.Sprintf("the block ending at line %d does not match its checksum line (torn or corrupt)", rd.line))
				}
				f.total += n
				f.ended = false
				f.good.line, f.good.off = rd.line, f.off
				if n > 0 {
					return false, nil
				}
				lines = 0
				continue
			case bytes.HasPrefix(text, []byte(endTag)):
				total, reason, good := parseEnd(text[len(endTag):])
				if !good || lines > 0 || total != f.total {
					return false, rd.cut(fmt.Sprintf("line %d: an end record that does not close the blocks before it (corrupt)", rd.line))
				}
				f.ended, f.reason = true, reason
				f.good.line, f.good.off = rd.line, f.off
				continue
			case bytes.HasPrefix(text, []byte(magicV)):
				return false, rd.cut(fmt.Sprintf("line %d: a second header (two writers in one file?)", rd.line))
			}
		}
		sum = crc32.Update(sum, castagnoli, text)
		lines++
		ev, ok, msg := parseLine(text)
		if msg != "" {
			return false, rd.cut(fmt.Sprintf("line %d: %s (in a block not yet vouched for: torn or corrupt)", rd.line, msg))
		}
		if !ok {
			continue
		}
		if len(f.pend) == MaxBlockEvents {
			return false, rd.cut(fmt.Sprintf("line %d: a block of more than %d events (corrupt)", rd.line, MaxBlockEvents))
		}
		f.pend = append(f.pend, ev)
		f.pendLine = append(f.pendLine, rd.line)
	}
}

// parseSum parses "EVENTS HEX8\n".
func parseSum(b []byte) (n int, sum uint32, ok bool) {
	fs := strings.Fields(string(b))
	if len(fs) != 2 || len(fs[1]) != 8 {
		return 0, 0, false
	}
	e, err := strconv.ParseUint(fs[0], 10, 31)
	if err != nil {
		return 0, 0, false
	}
	s, err := strconv.ParseUint(fs[1], 16, 32)
	if err != nil {
		return 0, 0, false
	}
	return int(e), uint32(s), true
}

// parseEnd parses "TOTAL REASON\n".
func parseEnd(b []byte) (total int, reason string, ok bool) {
	fs := strings.Fields(string(b))
	if len(fs) != 2 {
		return 0, "", false
	}
	t, err := strconv.ParseUint(fs[0], 10, 62)
	if err != nil {
		return 0, "", false
	}
	return int(t), fs[1], true
}

// LogWriter writes the v2 format to w: events are buffered into a block, and Commit writes the block with
// its checksum line in one Write (for gzip, one complete gzip member), so that what reaches w is always
// whole blocks but for a torn write, which a reader detects. End writes an end record. Not safe for
// concurrent use.
type LogWriter struct {
	w      io.Writer
	gz     *gzip.Writer // nil for plain text
	member bytes.Buffer // the gzip member being built
	block  []byte       // the pending block's lines
	events int          // in block
	total  int          // events committed
}

// NewLogWriter writes the v2 header ("# gmlake-trace v2 NOTE", NOTE one line, e.g. "pid=123") to w and
// returns a LogWriter of it, gzip-compressed when compress is set.
func NewLogWriter(w io.Writer, compress bool, note string) (*LogWriter, error) {
	lw := &LogWriter{w: w, block: make([]byte, 0, 1<<16)}
	if compress {
		lw.gz = gzip.NewWriter(&lw.member)
	}
	head := magicV2
	if note = strings.Join(strings.Fields(note), " "); note != "" {
		head += " " + note
	}
	if err := lw.put([]byte(head + "\n")); err != nil {
		return nil, err
	}
	return lw, nil
}

// Add buffers e in the pending block.
func (lw *LogWriter) Add(e Event) {
	lw.block = appendEvent(lw.block, e)
	lw.events++
}

// Buffered returns the events added since the last Commit.
func (lw *LogWriter) Buffered() int { return lw.events }

// Commit writes the pending block (nothing if it is empty).
func (lw *LogWriter) Commit() error { return lw.commit("") }

// End commits the pending block and writes an end record: everything added so far is written, for reason
// (one word: "close", "exit", "SIGTERM"). More events may follow an end record (a checkpoint); a trace is
// complete when its last record is one.
func (lw *LogWriter) End(reason string) error {
	if reason = strings.Join(strings.Fields(reason), "-"); reason == "" {
		reason = "close"
	}
	return lw.commit(reason)
}

func (lw *LogWriter) commit(endReason string) error {
	if lw.events == 0 && endReason == "" {
		return nil
	}
	out := lw.block
	if lw.events > 0 {
		sum := crc32.Checksum(out, castagnoli)
		out = append(out, sumTag...)
		out = strconv.AppendInt(out, int64(lw.events), 10)
		out = append(out, ' ')
		out = append(out, fmt.Sprintf("%08x", sum)...)
		out = append(out, '\n')
	}
	total := lw.total + lw.events
	if endReason != "" {
		out = append(out, endTag...)
		out = strconv.AppendInt(out, int64(total), 10)
		out = append(out, ' ')
		out = append(out, endReason...)
		out = append(out, '\n')
	}
	lw.block = out[:0]
	lw.events = 0
	lw.total = total
	return lw.put(out)
}

// put writes p in one Write to w (as one gzip member when compressing).
func (lw *LogWriter) put(p []byte) error {
	if lw.gz != nil {
		lw.member.Reset()
		lw.gz.Reset(&lw.member)
		if _, err := lw.gz.Write(p); err != nil {
			return err
		}
		if err := lw.gz.Close(); err != nil {
			return err
		}
		p = lw.member.Bytes()
	}
	_, err := lw.w.Write(p)
	return err
}

// appendEvent appends e's line to b.
func appendEvent(b []byte, e Event) []byte {
	b = append(b, byte(e.Op), ' ')
	b = strconv.AppendUint(b, e.ID, 10)
	if e.Op == OpAlloc {
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Size, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Stream), 10)
	}
	return append(b, '\n')
}
