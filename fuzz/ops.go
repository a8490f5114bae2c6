package fuzz

// Operations: the values the fuzz targets decode bytes into, the campaign logs, and the minimizer reduces.
// They print as lines of the trace format (harness/trace), so a saved sequence is a trace that `gmlake
// replay` reads: allocations are `a ID SIZE STREAM` lines, frees `f ID` lines, and everything the trace
// format cannot say (RecordStream, stream work and its completion, EmptyCache, injected driver failures,
// misuse) is a comment line starting with "#! " that the trace parser skips and ReadProgram reads:
//
//	#! config policy=gmlake capacity=1073741824 streams=3 seed=1   the setup (first line)
//	#! record ID STREAM      RecordStream(ptr of ID, STREAM), then one unit of work on STREAM
//	#! launch STREAM         one unit of pending work (a kernel) on STREAM
//	#! complete STREAM|all   complete the work submitted to STREAM (or to every stream)
//	#! empty_cache           EmptyCache
//	#! fail CALL N RESULT    the N-th next driver call of kind CALL (vmm.CallKind.Short) fails with RESULT
//	#! misuse WHAT ID        a call the allocator must refuse, changing nothing (see Misuse)
//	#! close_live            end with Close while allocations are live (instead of freeing them first)
//
// Streams are indexes: 0 is the device's default stream, 1..streams-1 are created by the executor.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gmlake/gmlake/harness/trace"
	"github.com/gmlake/gmlake/vmm"
)

// OpKind is the kind of an operation.
type OpKind uint8

// The operations.
const (
	OpAlloc      OpKind = iota // Alloc(Size) on Stream; the result is named ID
	OpFree                     // Free(ptr of ID) after verifying its pattern
	OpRecord                   // RecordStream(ptr of ID, Stream), then one unit of work on Stream
	OpLaunch                   // one unit of pending work on Stream
	OpComplete                 // complete Stream's work (AllStreams: every stream's)
	OpEmptyCache               // EmptyCache
	OpFail                     // the N-th next driver call of kind Call fails with Result
	OpMisuse                   // a call the allocator must refuse (Misuse), about ID
	numOpKinds
)

// AllStreams is the Stream of an OpComplete that completes every stream.
const AllStreams = -1

// Misuse is a call the allocator must refuse with an error, changing nothing.
type Misuse uint8

// The misuses.
const (
	MisuseDoubleFree    Misuse = iota // Free of ID's pointer after ID was freed (and not reused)
	MisuseInterior                    // Free of ID's pointer + 1 while ID is live
	MisuseUnknownPtr                  // Free of a pointer no allocation returned
	MisuseUnknownStream               // Alloc on a stream the device does not know
	MisuseZeroSize                    // Alloc of 0 bytes (either refused, or a valid allocation)
	MisuseRecordUnknown               // RecordStream of a pointer no allocation returned
	numMisuses
)

var misuseNames = [numMisuses]string{"double_free", "interior", "unknown_ptr", "unknown_stream", "zero_size", "record_unknown"}

func (m Misuse) String() string {
	if m < numMisuses {
		return misuseNames[m]
	}
	return fmt.Sprintf("misuse(%d)", uint8(m))
}

// Op is one operation. Which fields matter depends on Kind.
type Op struct {
	Kind   OpKind
	ID     uint64       // OpAlloc (names the result), OpFree, OpRecord, OpMisuse
	Size   uint64       // OpAlloc: bytes requested (>= 1)
	Stream int          // OpAlloc, OpRecord, OpLaunch, OpComplete: stream index (AllStreams for OpComplete)
	Call   vmm.CallKind // OpFail
	N      int          // OpFail: >= 1
	Result vmm.Result   // OpFail
	Misuse Misuse       // OpMisuse
}

// String prints the op as one line of the (extended) trace format.
func (o Op) String() string {
	switch o.Kind {
	case OpAlloc:
		return fmt.Sprintf("a %d %d %d", o.ID, o.Size, o.Stream)
	case OpFree:
		return fmt.Sprintf("f %d", o.ID)
	case OpRecord:
		return fmt.Sprintf("#! record %d %d", o.ID, o.Stream)
	case OpLaunch:
		return fmt.Sprintf("#! launch %d", o.Stream)
	case OpComplete:
		if o.Stream == AllStreams {
			return "#! complete all"
		}
		return fmt.Sprintf("#! complete %d", o.Stream)
	case OpEmptyCache:
		return "#! empty_cache"
	case OpFail:
		return fmt.Sprintf("#! fail %s %d %d", o.Call.Short(), o.N, int32(o.Result))
	case OpMisuse:
		return fmt.Sprintf("#! misuse %s %d", o.Misuse, o.ID)
	}
	return fmt.Sprintf("#! unknown op %d", o.Kind)
}

// Setup is what a program runs on: the policy, the simulated device's capacity, the number of streams.
type Setup struct {
	Policy    string // "" means every policy (fuzz targets) or the caller's choice
	Capacity  uint64 // simulated device capacity in bytes (rounded down to 2 MiB by the device)
	Streams   int    // stream indexes 0..Streams-1 are usable; at least 1
	Seed      int64  // the campaign seed, for humans (the executor is deterministic without it)
	CloseLive bool   // end with Close while allocations are live instead of freeing them first
}

// Program is a setup and an operation sequence: the unit the fuzz targets run, the campaign saves and the
// minimizer reduces.
type Program struct {
	Setup
	Ops []Op
}

// Clone returns a copy whose Ops can be changed freely.
func (p *Program) Clone() *Program {
	q := *p
	q.Ops = append([]Op(nil), p.Ops...)
	return &q
}

// Write writes the program in the extended trace format (see the top of this file). Comments in header are
// written first, one "# " line each.
func (p *Program) Write(w io.Writer, header ...string) error {
	bw := bufio.NewWriter(w)
	for _, h := range header {
		for _, l := range strings.Split(h, "\n") {
			fmt.Fprintf(bw, "# %s\n", l)
		}
	}
	fmt.Fprintf(bw, "#! config policy=%s capacity=%d streams=%d seed=%d\n", p.Policy, p.Capacity, p.Streams, p.Seed)
	if p.CloseLive {
		fmt.Fprintln(bw, "#! close_live")
	}
	for _, o := range p.Ops {
		fmt.Fprintln(bw, o.String())
	}
	return bw.Flush()
}

// WriteFile writes the program to path (plain text; the trace parser and ReadProgramFile read it).
func (p *Program) WriteFile(path string, header ...string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Write(f, header...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Events returns the program's allocations and frees as trace events (what `gmlake replay` sees).
func (p *Program) Events() []trace.Event {
	var ev []trace.Event
	for _, o := range p.Ops {
		switch o.Kind {
		case OpAlloc:
			ev = append(ev, trace.Event{Op: trace.OpAlloc, ID: o.ID, Size: o.Size, Stream: o.Stream})
		case OpFree:
			ev = append(ev, trace.Event{Op: trace.OpFree, ID: o.ID})
		}
	}
	return ev
}

// ProgramError says where a program file is malformed.
type ProgramError struct {
	File string
	Line int
	Text string
	Msg  string
}

func (e *ProgramError) Error() string {
	return fmt.Sprintf("%s:%d: %s: %q", e.File, e.Line, e.Msg, e.Text)
}

// Unwrap makes errors.Is(err, trace.ErrSyntax) hold, as for the trace parser.
func (e *ProgramError) Unwrap() error { return trace.ErrSyntax }

// ReadProgramFile reads a program (or any trace, gzip or plain) from path. A FuzzOps corpus file (go's
// "go test fuzz v1" format, as in testdata/fuzz/FuzzOps or a new failing input the fuzzer wrote) is
// decoded into the program the fuzz target ran.
func ReadProgramFile(path string) (*Program, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(data, []byte(corpusHeader)) {
		b, err := readCorpusFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return Decode(b), nil
	}
	return ReadProgram(bytes.NewReader(data), path)
}

const corpusHeader = "go test fuzz v1\n"

// corpusFile returns the content of a corpus file for one []byte argument (go's "go test fuzz v1" format).
func corpusFile(b []byte) []byte {
	return []byte(corpusHeader + "[]byte(" + strconv.Quote(string(b)) + ")\n")
}

// readCorpusFile parses a corpus file of one []byte argument.
func readCorpusFile(data []byte) ([]byte, error) {
	text := strings.TrimSpace(string(data))
	_, body, _ := strings.Cut(text, "\n")
	body = strings.TrimSpace(body)
	if !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
		return nil, fmt.Errorf("not a corpus file of one []byte argument")
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(body, "[]byte("), ")"))
	if err != nil {
		return nil, fmt.Errorf("corpus file: %w", err)
	}
	return []byte(s), nil
}

// ReadProgram reads a program in the extended trace format from r (gzip or plain); file names the input in
// errors. A plain trace is a program too: `r ID` (free requested while another stream may still use the
// block) becomes RecordStream on the next stream, one unit of work there, and Free; the `f ID` that
// follows completes that stream. Without a config line the setup is an H200 with as many streams as the
// trace uses.
func ReadProgram(r io.Reader, file string) (*Program, error) {
	br, closeFn, err := maybeGunzip(r, file)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	p := &Program{}
	var (
		line      int
		sawConfig bool
		state     = make(map[uint64]byte) // 'a' live, 'r' free requested, 'f' freed
		streamOf  = make(map[uint64]int)
		pending   []int // ops index of the OpRecord for each 'r', patched once streams are known
		maxStream int
	)
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line++
		text := sc.Text()
		bad := func(msg string) error { return &ProgramError{File: file, Line: line, Text: text, Msg: msg} }
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if f[0] == "#!" {
			op, cfg, err := parseExt(f[1:], p)
			if err != "" {
				return nil, bad(err)
			}
			if cfg {
				if sawConfig || len(p.Ops) > 0 {
					return nil, bad("config must be the first operation line, once")
				}
				sawConfig = true
				continue
			}
			if op == nil {
				continue
			}
			if op.Stream > maxStream {
				maxStream = op.Stream
			}
			p.Ops = append(p.Ops, *op)
			continue
		}
		if strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f[0]) != 1 {
			return nil, bad("unknown event (want a, r, f or a #! line)")
		}
		switch f[0][0] {
		case 'a':
			if len(f) != 4 {
				return nil, bad("alloc wants 'a ID SIZE STREAM'")
			}
			id, e1 := strconv.ParseUint(f[1], 10, 64)
			size, e2 := strconv.ParseUint(f[2], 10, 64)
			s, e3 := strconv.ParseUint(f[3], 10, 16)
			switch {
			case e1 != nil:
				return nil, bad("bad id")
			case e2 != nil || size == 0:
				return nil, bad("bad size (want a positive integer)")
			case e3 != nil:
				return nil, bad("bad stream (want 0..65535)")
			}
			if _, seen := state[id]; seen {
				return nil, bad("id allocated twice")
			}
			state[id], streamOf[id] = 'a', int(s)
			maxStream = max(maxStream, int(s))
			p.Ops = append(p.Ops, Op{Kind: OpAlloc, ID: id, Size: size, Stream: int(s)})
		case 'r', 'f':
			if len(f) != 2 {
				return nil, bad("free wants '" + f[0] + " ID'")
			}
			id, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, bad("bad id")
			}
			st := state[id]
			if f[0][0] == 'r' {
				if st != 'a' {
					return nil, bad("free requested of an id that is not live")
				}
				state[id] = 'r'
				pending = append(pending, len(p.Ops))
				p.Ops = append(p.Ops, Op{Kind: OpRecord, ID: id, Stream: streamOf[id]},
					Op{Kind: OpLaunch, Stream: streamOf[id]}, Op{Kind: OpFree, ID: id})
				continue
			}
			switch st {
			case 'a':
				p.Ops = append(p.Ops, Op{Kind: OpFree, ID: id})
			case 'r':
				p.Ops = append(p.Ops, Op{Kind: OpComplete, Stream: streamOf[id]}) // patched below
				pending = append(pending, -len(p.Ops))
			default:
				return nil, bad("free of an id that is not live")
			}
			state[id] = 'f'
		default:
			return nil, bad("unknown event (want a, r, f or a #! line)")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w (truncated or corrupt input)", file, line+1, err)
	}
	if !sawConfig || p.Streams == 0 {
		p.Streams = maxStream + 1
	}
	if p.Streams <= maxStream {
		return nil, &ProgramError{File: file, Line: line, Msg: fmt.Sprintf("stream %d used but config says streams=%d", maxStream, p.Streams)}
	}
	// A plain trace's 'r' moves the block to the next stream (the "other stream that may still use it").
	for _, i := range pending {
		var o *Op
		if i >= 0 {
			o = &p.Ops[i]
		} else {
			o = &p.Ops[-i-1]
		}
		if p.Streams > 1 {
			o.Stream = (o.Stream + 1) % p.Streams
		}
		if i >= 0 {
			p.Ops[i+1].Stream = o.Stream
		}
	}
	return p, nil
}

// parseExt parses the fields after "#!". It returns the op, or cfg == true for a config line, or neither for
// a line that only changes the setup; msg says what is wrong.
func parseExt(f []string, p *Program) (op *Op, cfg bool, msg string) {
	if len(f) == 0 {
		return nil, false, "empty #! line"
	}
	num := func(s string) (uint64, bool) {
		v, err := strconv.ParseUint(s, 10, 64)
		return v, err == nil
	}
	stream := func(s string) (int, bool) {
		v, err := strconv.ParseUint(s, 10, 16)
		return int(v), err == nil
	}
	want := func(n int, usage string) string {
		if len(f) != n {
			return "want '#! " + usage + "'"
		}
		return ""
	}
	switch f[0] {
	case "config":
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, false, "config wants key=value pairs"
			}
			var err error
			switch k {
			case "policy":
				p.Policy = v
			case "capacity":
				p.Capacity, err = strconv.ParseUint(v, 10, 64)
			case "streams":
				var n uint64
				n, err = strconv.ParseUint(v, 10, 16)
				if err == nil && n == 0 {
					return nil, false, "streams must be at least 1"
				}
				p.Streams = int(n)
			case "seed":
				p.Seed, err = strconv.ParseInt(v, 10, 64)
			default:
				// Unknown keys are ignored: later versions may add some.
			}
			if err != nil {
				return nil, false, "bad value for config key " + k
			}
		}
		return nil, true, ""
	case "close_live":
		p.CloseLive = true
		return nil, false, ""
	case "record":
		if m := want(3, "record ID STREAM"); m != "" {
			return nil, false, m
		}
		id, ok1 := num(f[1])
		s, ok2 := stream(f[2])
		if !ok1 || !ok2 {
			return nil, false, "bad id or stream"
		}
		return &Op{Kind: OpRecord, ID: id, Stream: s}, false, ""
	case "launch":
		if m := want(2, "launch STREAM"); m != "" {
			return nil, false, m
		}
		s, ok := stream(f[1])
		if !ok {
			return nil, false, "bad stream"
		}
		return &Op{Kind: OpLaunch, Stream: s}, false, ""
	case "complete":
		if m := want(2, "complete STREAM|all"); m != "" {
			return nil, false, m
		}
		if f[1] == "all" {
			return &Op{Kind: OpComplete, Stream: AllStreams}, false, ""
		}
		s, ok := stream(f[1])
		if !ok {
			return nil, false, "bad stream"
		}
		return &Op{Kind: OpComplete, Stream: s}, false, ""
	case "empty_cache":
		if m := want(1, "empty_cache"); m != "" {
			return nil, false, m
		}
		return &Op{Kind: OpEmptyCache}, false, ""
	case "fail":
		if m := want(4, "fail CALL N RESULT"); m != "" {
			return nil, false, m
		}
		k, ok := vmm.ParseCallKind(f[1])
		if !ok {
			return nil, false, "unknown driver call " + f[1]
		}
		n, err := strconv.ParseUint(f[2], 10, 31)
		if err != nil || n == 0 {
			return nil, false, "bad N (want a positive integer)"
		}
		r, err := strconv.ParseInt(f[3], 10, 32)
		if err != nil || r == 0 {
			return nil, false, "bad RESULT (want a non-zero CUDA result code)"
		}
		return &Op{Kind: OpFail, Call: k, N: int(n), Result: vmm.Result(r)}, false, ""
	case "misuse":
		if m := want(3, "misuse WHAT ID"); m != "" {
			return nil, false, m
		}
		id, ok := num(f[2])
		if !ok {
			return nil, false, "bad id"
		}
		for m := Misuse(0); m < numMisuses; m++ {
			if m.String() == f[1] {
				return &Op{Kind: OpMisuse, Misuse: m, ID: id}, false, ""
			}
		}
		return nil, false, "unknown misuse " + f[1]
	}
	return nil, false, "unknown #! operation " + f[0]
}

// maybeGunzip returns a reader of r's content, decompressed if it starts with the gzip magic.
func maybeGunzip(r io.Reader, file string) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: gzip: %w", file, err)
		}
		return zr, func() { zr.Close() }, nil
	}
	return br, func() {}, nil
}
