package ops

// Operations as values that print as text and parse back (the pebble metamorphic style): a saved program
// is the reproducer. One op per line, one verb per op; '#' starts a comment line. Allocations are named by
// an id bound by the alloc that made them ("a3"); streams by their index in the environment ("s0" is the
// default stream); private memory pools by a number ("p1"; p0 is the default pool).
//
//	alloc a3 1048576 s1        Alloc(1048576, stream 1), binding the result to a3
//	alloc a4 4096 s0 p2        AllocPool(4096, stream 0, pool 2)
//	free a3                    Free(a3)
//	free-interior a3 +512      Free(a3+512): a pointer inside an allocation
//	record a3 s1               RecordStream(a3, stream 1) (and nothing else: no work is launched)
//	launch s1                  submit one unit of work to stream 1 (the device's clock)
//	complete s1                complete all work submitted to stream 1
//	completeall                complete all work on every stream
//	emptycache                 EmptyCache()
//	fail create 2 CUDA_ERROR_OUT_OF_MEMORY   the 2nd next cuMemCreate fails with that result
//	clearfaults                no injected fault pending any more
//	pool-create p2             CreateOrIncrefPool(pool 2)
//	pool-release p2            ReleasePool(pool 2)
//	capture-begin s1           SetCapturing(stream 1, true): stream 1 begins a CUDA graph capture
//	capture-end s1             SetCapturing(stream 1, false)
//	forget s1                  ForgetStream(stream 1): the caller is about to destroy stream 1 (it runs no
//	                           more work: the Env refuses a launch on it; its pending work still completes)
//	largest                    LargestCachedBlock() (PyTorch's cacheInfo), judged from the View (INV-LARGEST)
//	reset-peak                 ResetPeakStats() (torch.cuda.reset_peak_memory_stats; INV-TORCHSTATS)
//	reset-acc                  ResetAccumulatedStats() (torch.cuda.reset_accumulated_memory_stats)
//	snapshot                   Snapshot(), judged against the Env's record and the View (INV-SNAPSHOT)
//	limit 33554432             SetMemoryLimit(33554432) of the serving layer (0: no cap), at run time
//	fraction 0.5               the C library's SetMemoryFraction(0.5) (PyTorch's set_per_process_memory_fraction)
//	stats                      the C library's statistics as JSON and its snapshot JSON, parsed back and judged
//	fail-sync 2                the 2nd next stream synchronisation fails (the serving layer's, or the bare engine's
//	                           wait on its out-of-memory path): its work stays pending
//	replay p1 s1               a CUDA graph of pool 1 replays on stream 1: one unit of work on stream 1 that may
//	                           use every byte pool 1 handed out, live or freed, and that the engine is not told of
//	close                      Close()
//
// Misuse is not a separate kind: it is an op whose arguments the engine must refuse. A free of an id no
// alloc bound (`free a99`) frees a pointer no allocation returned; a second `free a3` is a double free;
// `alloc a5 4096 s9` in an environment of 2 streams asks on a stream the device does not know; `alloc a5 0
// s0` asks for zero bytes; `record a99 s0` records a pointer no allocation returned.
//
// The trace format of real training runs (trace) is a subset: `a ID SIZE STREAM` parses as
// `alloc aID SIZE sSTREAM` and `f ID` as `free aID`; `r ID` (free requested, the block stays allocated
// until its `f`) is no op, as in `gmlake replay`. So every trace file is a program.
//
// A program starts with its setup line (Config.Header: `# policy=gmlake capacity=... streams=...`); a
// file without one is a trace: an H200 with as many streams as it uses. A history (Env.History) is the
// same list with each op's outcome after "//" (`free a3 // error: double free`); the parser ignores the
// outcomes, so a history replays as it is.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
	"github.com/gmlake/gmlake/vmm"
)

// OpKind is the kind of an operation.
type OpKind uint8

// Operation kinds.
const (
	OpAlloc OpKind = iota
	OpFree
	OpFreeInterior
	OpRecord
	OpLaunch
	OpComplete
	OpCompleteAll
	OpEmptyCache
	OpFail
	OpClearFaults
	OpClose
	OpPoolCreate
	OpPoolRelease
	OpCaptureBegin
	OpCaptureEnd
	OpForget
	OpLargest
	OpResetPeak
	OpResetAcc
	OpSnapshot
	OpLimit    // the serving layer's op (judge_serve.go): refused without Config.Serve
	OpFraction // the C library's ops (judge_serve.go): refused without Config.CLib
	OpStats
	OpSyncFail // the Env's synchroniser (the serving layer's, or the bare engine's wait: clockSync)
	OpReplay   // a graph of a private pool replays on a stream (INV-RELEASESAFE: spec.History.Replay)
	numOpKinds
)

var opNames = [numOpKinds]string{"alloc", "free", "free-interior", "record", "launch", "complete", "completeall",
	"emptycache", "fail", "clearfaults", "close", "pool-create", "pool-release", "capture-begin", "capture-end",
	"forget", "largest", "reset-peak", "reset-acc", "snapshot", "limit", "fraction", "stats", "fail-sync",
	"replay"}

// opFields is the number of fields after the verb each kind takes (alloc: 3, or 4 with a pool).
var opFields = [numOpKinds]int{3, 1, 2, 2, 1, 1, 0, 0, 3, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 2}

func (k OpKind) String() string {
	if k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// Op is one operation of a program. Which fields matter depends on Kind.
type Op struct {
	Kind   OpKind
	ID     int          // alloc, free, free-interior, record: the allocation id (>= 0)
	Size   uint64       // alloc: bytes requested (0 is a request the engine must refuse or serve); limit: the cap
	Stream int          // alloc, record, launch, complete, capture-begin/end, forget, replay: index into the environment's streams
	Pool   int          // alloc (0: the default pool), pool-create, pool-release, replay: the private pool's number
	Offset uint64       // free-interior
	Call   vmm.CallKind // fail
	N      int          // fail, fail-sync: the N-th next call of kind Call (the N-th next synchronisation) fails (N >= 1)
	Result vmm.Result   // fail: not vmm.Success
	Frac   float64      // fraction: any number, misuse included (the C library refuses all but [0, 1])
}

// String prints the op in the text format.
func (o Op) String() string {
	switch o.Kind {
	case OpAlloc:
		if o.Pool != 0 {
			return fmt.Sprintf("alloc a%d %d s%d p%d", o.ID, o.Size, o.Stream, o.Pool)
		}
		return fmt.Sprintf("alloc a%d %d s%d", o.ID, o.Size, o.Stream)
	case OpFree:
		return fmt.Sprintf("free a%d", o.ID)
	case OpFreeInterior:
		return fmt.Sprintf("free-interior a%d +%d", o.ID, o.Offset)
	case OpRecord:
		return fmt.Sprintf("record a%d s%d", o.ID, o.Stream)
	case OpLaunch, OpComplete, OpCaptureBegin, OpCaptureEnd, OpForget:
		return fmt.Sprintf("%v s%d", o.Kind, o.Stream)
	case OpPoolCreate, OpPoolRelease:
		return fmt.Sprintf("%v p%d", o.Kind, o.Pool)
	case OpFail:
		return fmt.Sprintf("fail %s %d %s", o.Call.Short(), o.N, resultText(o.Result))
	case OpLimit:
		return fmt.Sprintf("limit %d", o.Size)
	case OpFraction:
		return "fraction " + strconv.FormatFloat(o.Frac, 'g', -1, 64)
	case OpSyncFail:
		return fmt.Sprintf("fail-sync %d", o.N)
	case OpReplay:
		return fmt.Sprintf("replay p%d s%d", o.Pool, o.Stream)
	}
	return o.Kind.String()
}

// Format prints ops one per line.
func Format(seq []Op) string {
	var b strings.Builder
	for _, o := range seq {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseOp parses one op line of the text format (a history's "// outcome" is ignored). Trace lines are
// read by Parse, not here.
func ParseOp(line string) (Op, error) {
	if i := strings.Index(line, "//"); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return Op{}, fmt.Errorf("empty op")
	}
	kind := numOpKinds
	for k, n := range opNames {
		if n == f[0] {
			kind = OpKind(k)
		}
	}
	if kind == numOpKinds {
		return Op{}, fmt.Errorf("unknown op %q", f[0])
	}
	if n := opFields[kind]; len(f)-1 != n && !(kind == OpAlloc && len(f)-1 == n+1) {
		return Op{}, fmt.Errorf("op %q takes %d fields, got %d", f[0], n, len(f)-1)
	}
	o := Op{Kind: kind}
	var err error
	num := func(s, prefix string) int {
		if err != nil {
			return 0
		}
		v, e := strconv.ParseInt(strings.TrimPrefix(s, prefix), 10, 64)
		if !strings.HasPrefix(s, prefix) || e != nil || v < 0 {
			err = fmt.Errorf("bad %q (want %sN, N >= 0)", s, prefix)
		}
		return int(v)
	}
	u64 := func(s, prefix string) uint64 {
		if err != nil {
			return 0
		}
		v, e := strconv.ParseUint(strings.TrimPrefix(s, prefix), 10, 64)
		if !strings.HasPrefix(s, prefix) || e != nil {
			err = fmt.Errorf("bad size %q (want %sN, N in bytes)", s, prefix)
		}
		return v
	}
	switch kind {
	case OpAlloc:
		o.ID, o.Size, o.Stream = num(f[1], "a"), u64(f[2], ""), num(f[3], "s")
		if len(f) == 5 {
			o.Pool = num(f[4], "p")
		}
	case OpFree:
		o.ID = num(f[1], "a")
	case OpFreeInterior:
		o.ID, o.Offset = num(f[1], "a"), u64(f[2], "+")
	case OpRecord:
		o.ID, o.Stream = num(f[1], "a"), num(f[2], "s")
	case OpLaunch, OpComplete, OpCaptureBegin, OpCaptureEnd, OpForget:
		o.Stream = num(f[1], "s")
	case OpPoolCreate, OpPoolRelease:
		o.Pool = num(f[1], "p")
	case OpReplay:
		o.Pool, o.Stream = num(f[1], "p"), num(f[2], "s")
	case OpFail:
		k, ok := vmm.ParseCallKind(f[1])
		if !ok {
			return Op{}, fmt.Errorf("unknown driver call %q", f[1])
		}
		o.Call, o.N = k, num(f[2], "")
		r, ok := parseResult(f[3])
		if !ok {
			return Op{}, fmt.Errorf("unknown CUDA result %q (want a name such as CUDA_ERROR_OUT_OF_MEMORY, or a non-zero code)", f[3])
		}
		o.Result = r
		if err == nil && o.N < 1 {
			err = fmt.Errorf("fail needs N >= 1")
		}
	case OpLimit:
		o.Size = u64(f[1], "")
	case OpFraction:
		x, e := strconv.ParseFloat(f[1], 64)
		if e != nil {
			err = fmt.Errorf("bad fraction %q (want a number)", f[1])
		}
		o.Frac = x
	case OpSyncFail:
		if o.N = num(f[1], ""); err == nil && o.N < 1 {
			err = fmt.Errorf("fail-sync needs N >= 1")
		}
	}
	if err != nil {
		return Op{}, err
	}
	return o, nil
}

// Program is a setup and an op sequence: what every checker runs, saves and shrinks. Cfg.Policy "" means
// the reader's choice (the fuzz targets run every policy).
type Program struct {
	Cfg Config
	Ops []Op
}

// String prints the program: its setup line, then one op a line. Parse reads it back.
func (p *Program) String() string { return p.Cfg.Header() + "\n" + Format(p.Ops) }

// WriteFile writes the program to path, after comment lines (one "# " line per line of comment).
func (p *Program) WriteFile(path string, comment ...string) error {
	var b strings.Builder
	for _, c := range comment {
		for _, l := range strings.Split(c, "\n") {
			b.WriteString("# " + l + "\n")
		}
	}
	b.WriteString(p.String())
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Parse parses a program: the setup line (optional), op lines, trace lines; blank lines and other '#'
// lines are skipped. file names the input in errors, which are *trace.ParseError (errors.Is
// trace.ErrSyntax) naming the line. Without a setup line the program is a trace: an H200 with as many
// streams as the ops use.
func Parse(text, file string) (*Program, error) {
	return read(strings.NewReader(text), file)
}

// ParseOps parses an op list (a program without caring about its setup).
func ParseOps(text string) ([]Op, error) {
	p, err := Parse(text, "ops")
	if err != nil {
		return nil, err
	}
	return p.Ops, nil
}

// ReadFile reads a program, a history or a trace (gzip or plain) from path.
func ReadFile(path string) (*Program, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return read(bytes.NewReader(data), path)
}

func read(r io.Reader, file string) (*Program, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", file, err)
		}
		defer zr.Close()
		in = zr
	}
	p := &Program{}
	header, maxStream := false, 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		bad := func(err error) error {
			return &trace.ParseError{File: file, Line: line, Text: text, Msg: err.Error()}
		}
		switch {
		case text == "":
			continue
		case strings.HasPrefix(text, headerPrefix):
			if header || len(p.Ops) > 0 {
				return nil, bad(fmt.Errorf("the setup line comes once, before the ops"))
			}
			if err := ParseHeader(text, &p.Cfg); err != nil {
				return nil, bad(err)
			}
			header = true
			continue
		case text[0] == '#':
			continue
		}
		o, ok, err := parseLine(text)
		if err != nil {
			return nil, bad(err)
		}
		if !ok {
			continue
		}
		if o.Kind == OpAlloc || o.Kind == OpRecord || o.Kind == OpLaunch || o.Kind == OpComplete || o.Kind == OpForget {
			maxStream = max(maxStream, o.Stream)
			if !header && maxStream >= MaxSetupStreams {
				// Without a setup line the streams are the ops' (streams=maxStream+1): within its range.
				return nil, bad(fmt.Errorf("%w: stream %d: a program without a setup line has as many streams as its ops use, at most %d",
					ErrBadSetup, o.Stream, MaxSetupStreams))
			}
		}
		p.Ops = append(p.Ops, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w (truncated or corrupt input)", file, line+1, err)
	}
	if !header {
		p.Cfg.Capacity, p.Cfg.Streams = sim.H200Capacity, maxStream+1
	}
	return p, nil
}

// parseLine parses an op line or a trace line; ok is false for a line that is no op (a trace's `r ID`).
func parseLine(text string) (o Op, ok bool, err error) {
	f := strings.Fields(text)
	if len(f[0]) != 1 {
		o, err = ParseOp(text)
		return o, err == nil, err
	}
	if i := strings.Index(text, "//"); i >= 0 {
		f = strings.Fields(text[:i])
	}
	id := func(s string) int {
		v, e := strconv.ParseInt(s, 10, 64)
		if e != nil || v < 0 {
			err = fmt.Errorf("bad id %q (want an integer >= 0)", s)
		}
		return int(v)
	}
	switch ev := trace.Op(f[0][0]); {
	case ev == trace.OpAlloc && len(f) == 4:
		o = Op{Kind: OpAlloc, ID: id(f[1])}
		var e1, e2 error
		o.Size, e1 = strconv.ParseUint(f[2], 10, 64)
		s, e2 := strconv.ParseUint(f[3], 10, 16)
		if e1 != nil || e2 != nil {
			return Op{}, false, fmt.Errorf("trace alloc wants 'a ID SIZE STREAM' with numbers")
		}
		o.Stream = int(s)
	case ev == trace.OpFree && len(f) == 2:
		o = Op{Kind: OpFree, ID: id(f[1])}
	case ev == trace.OpFreeRequest && len(f) == 2:
		id(f[1])
		return Op{}, false, err
	default:
		return Op{}, false, fmt.Errorf("unknown trace event (want 'a ID SIZE STREAM', 'r ID' or 'f ID', or an op)")
	}
	return o, err == nil, err
}

// Events returns the program's allocations and frees as trace events (what `gmlake replay` sees of it).
func (p *Program) Events() []trace.Event {
	var ev []trace.Event
	for _, o := range p.Ops {
		switch o.Kind {
		case OpAlloc:
			ev = append(ev, trace.Event{Op: trace.OpAlloc, ID: uint64(o.ID), Size: o.Size, Stream: o.Stream})
		case OpFree:
			ev = append(ev, trace.Event{Op: trace.OpFree, ID: uint64(o.ID)})
		}
	}
	return ev
}

// FaultResults are the results fault injection uses; the text format prints them by name.
var FaultResults = []vmm.Result{vmm.OutOfMemory, vmm.InvalidValue, vmm.UnknownCUDAError, vmm.NotPermitted,
	vmm.InvalidHandle, vmm.IllegalAddress, vmm.NotSupported, vmm.InvalidContext}

func resultText(r vmm.Result) string {
	for _, x := range FaultResults {
		if x == r {
			return r.Name()
		}
	}
	return strconv.Itoa(int(int32(r)))
}

func parseResult(s string) (vmm.Result, bool) {
	for _, r := range FaultResults {
		if r.Name() == s {
			return r, true
		}
	}
	if v, err := strconv.ParseInt(s, 10, 32); err == nil && v != 0 {
		return vmm.Result(v), true
	}
	return 0, false
}

// FaultCalls are the driver calls fault injection targets.
var FaultCalls = []vmm.CallKind{vmm.CallCreate, vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess, vmm.CallUnmap,
	vmm.CallRelease, vmm.CallFreeAddress, vmm.CallRecordEvent, vmm.CallCreateEvent, vmm.CallQueryEvent}
