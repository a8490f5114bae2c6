package ops

// Operations as values that print as text and parse back (the pebble metamorphic style): a saved op list
// is the reproducer. One op per line; '#' starts a comment line. Allocations are named by an id bound by
// the alloc that made them ("a3"); streams by their index in the environment ("s0" is the default stream).
//
//	alloc a3 1048576 s1        Alloc(1048576, stream 1), binding the result to a3
//	free a3                    Free(a3) (a3 may already be freed: a double free)
//	free-interior a3 +512      Free(a3+512): a pointer inside an allocation
//	record a3 s1               RecordStream(a3, stream 1)
//	launch s1                  submit one unit of work to stream 1 (the device's clock)
//	complete s1                complete all work submitted to stream 1
//	completeall                complete all work on every stream
//	emptycache                 EmptyCache()
//	fail create 2 CUDA_ERROR_OUT_OF_MEMORY   the 2nd next cuMemCreate fails with that result
//	clearfaults                no injected fault pending any more
//	close                      Close()
//
// A history (Env.History) is the same list with each op's outcome after "//" (`free a3 // error: double
// free`); ParseOp ignores it, so a history replays as it is.

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

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
	numOpKinds
)

var opNames = [numOpKinds]string{"alloc", "free", "free-interior", "record", "launch", "complete", "completeall",
	"emptycache", "fail", "clearfaults", "close"}

func (k OpKind) String() string {
	if k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// Op is one operation of a test sequence.
type Op struct {
	Kind   OpKind
	ID     int          // alloc, free, free-interior, record: the allocation id
	Size   uint64       // alloc
	Stream int          // alloc, record, launch, complete: index into the environment's streams
	Offset uint64       // free-interior
	Call   vmm.CallKind // fail
	N      int          // fail: the N-th next call of kind Call fails (N >= 1)
	Result vmm.Result   // fail
}

// String prints the op in the text format.
func (o Op) String() string {
	switch o.Kind {
	case OpAlloc:
		return fmt.Sprintf("alloc a%d %d s%d", o.ID, o.Size, o.Stream)
	case OpFree:
		return fmt.Sprintf("free a%d", o.ID)
	case OpFreeInterior:
		return fmt.Sprintf("free-interior a%d +%d", o.ID, o.Offset)
	case OpRecord:
		return fmt.Sprintf("record a%d s%d", o.ID, o.Stream)
	case OpLaunch, OpComplete:
		return fmt.Sprintf("%v s%d", o.Kind, o.Stream)
	case OpFail:
		return fmt.Sprintf("fail %s %d %s", o.Call.Short(), o.N, o.Result.Name())
	}
	return o.Kind.String()
}

// Format prints ops one per line.
func Format(ops []Op) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseOp parses one line of the text format.
func ParseOp(line string) (Op, error) {
	if i := strings.Index(line, "//"); i >= 0 {
		line = line[:i] // a history's outcome
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return Op{}, fmt.Errorf("harness: empty op")
	}
	kind := OpKind(255)
	for k, n := range opNames {
		if n == f[0] {
			kind = OpKind(k)
		}
	}
	want := map[OpKind]int{OpAlloc: 4, OpFree: 2, OpFreeInterior: 3, OpRecord: 3, OpLaunch: 2, OpComplete: 2,
		OpCompleteAll: 1, OpEmptyCache: 1, OpFail: 4, OpClearFaults: 1, OpClose: 1}
	n, ok := want[kind]
	if !ok {
		return Op{}, fmt.Errorf("harness: unknown op %q in %q", f[0], line)
	}
	if len(f) != n {
		return Op{}, fmt.Errorf("harness: op %q takes %d fields, got %d: %q", f[0], n-1, len(f)-1, line)
	}
	o := Op{Kind: kind}
	var err error
	num := func(s, prefix string) int {
		if err != nil {
			return 0
		}
		if !strings.HasPrefix(s, prefix) {
			err = fmt.Errorf("harness: %q should start with %q in %q", s, prefix, line)
			return 0
		}
		v, e := strconv.Atoi(s[len(prefix):])
		if e != nil || v < 0 {
			err = fmt.Errorf("harness: bad number %q in %q", s, line)
		}
		return v
	}
	u64 := func(s, prefix string) uint64 {
		if err != nil {
			return 0
		}
		v, e := strconv.ParseUint(strings.TrimPrefix(s, prefix), 10, 64)
		if e != nil || !strings.HasPrefix(s, prefix) {
			err = fmt.Errorf("harness: bad size %q in %q", s, line)
		}
		return v
	}
	switch kind {
	case OpAlloc:
		o.ID, o.Size, o.Stream = num(f[1], "a"), u64(f[2], ""), num(f[3], "s")
	case OpFree:
		o.ID = num(f[1], "a")
	case OpFreeInterior:
		o.ID, o.Offset = num(f[1], "a"), u64(f[2], "+")
	case OpRecord:
		o.ID, o.Stream = num(f[1], "a"), num(f[2], "s")
	case OpLaunch, OpComplete:
		o.Stream = num(f[1], "s")
	case OpFail:
		k, ok := vmm.ParseCallKind(f[1])
		if !ok {
			return Op{}, fmt.Errorf("harness: unknown driver call %q in %q", f[1], line)
		}
		o.Call, o.N = k, num(f[2], "")
		r, ok := parseResult(f[3])
		if !ok {
			return Op{}, fmt.Errorf("harness: unknown CUDA result %q in %q", f[3], line)
		}
		o.Result = r
		if o.N < 1 && err == nil {
			err = fmt.Errorf("harness: fail needs N >= 1 in %q", line)
		}
	}
	if err != nil {
		return Op{}, err
	}
	return o, nil
}

// IsOpList reports whether text is an op list of this format (rather than a fuzz program or a trace): its
// first line that is not blank is the "# policy=" header, or parses as an op.
func IsOpList(text string) bool {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
			continue
		case strings.HasPrefix(l, "# policy="):
			return true
		case strings.HasPrefix(l, "#"):
			continue
		}
		_, err := ParseOp(l)
		return err == nil
	}
	return false
}

// Parse parses a whole op list (one op a line, blank lines and '#' comments skipped).
func Parse(text string) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		o, err := ParseOp(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ops = append(ops, o)
	}
	return ops, sc.Err()
}

// faultResults are the results fault injection uses (and the text format accepts).
var faultResults = []vmm.Result{vmm.OutOfMemory, vmm.InvalidValue, vmm.UnknownCUDAError, vmm.NotPermitted,
	vmm.InvalidHandle, vmm.IllegalAddress, vmm.NotSupported, vmm.InvalidContext}

func parseResult(s string) (vmm.Result, bool) {
	for _, r := range faultResults {
		if r.Name() == s {
			return r, true
		}
	}
	if v, err := strconv.Atoi(s); err == nil {
		return vmm.Result(v), true
	}
	return 0, false
}

// OpsFromBytes decodes arbitrary bytes into a legal op sequence (for go test -fuzz targets): each op takes
// a kind byte and a few argument bytes; sizes come from a table of small, chunk-sized, trace-like and huge
// values plus a free-form 24-bit size, ids refer to allocations made earlier in the sequence. Decoding
// never fails; a short input gives a short sequence.
func OpsFromBytes(b []byte, streams int) []Op {
	if streams < 1 {
		streams = 1
	}
	sizes := []uint64{1, 512, 4096, vmm.MiB, 2 * vmm.MiB, 3 * vmm.MiB, 20 * vmm.MiB, 22020096, 62521344,
		125042688, 512 * vmm.MiB, 2 * vmm.GiB}
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	var ops []Op
	nid := 0
	for len(b) > 0 {
		switch k := next() % 16; {
		case k < 6:
			var size uint64
			if s := next(); s < 200 {
				size = sizes[int(s)%len(sizes)]
			} else {
				size = uint64(next())<<16 | uint64(next())<<8 | uint64(next()) + 1
			}
			ops = append(ops, Op{Kind: OpAlloc, ID: nid, Size: size, Stream: int(next()) % streams})
			nid++
		case k < 10:
			if nid > 0 {
				ops = append(ops, Op{Kind: OpFree, ID: int(next()) % nid})
			}
		case k == 10:
			if nid > 0 {
				ops = append(ops, Op{Kind: OpRecord, ID: int(next()) % nid, Stream: int(next()) % streams})
			}
		case k == 11:
			ops = append(ops, Op{Kind: OpLaunch, Stream: int(next()) % streams})
		case k == 12:
			ops = append(ops, Op{Kind: OpComplete, Stream: int(next()) % streams})
		case k == 13:
			ops = append(ops, Op{Kind: OpEmptyCache})
		case k == 14:
			call := FaultCalls[int(next())%len(FaultCalls)]
			ops = append(ops, Op{Kind: OpFail, Call: call, N: 1 + int(next())%3, Result: faultResults[int(next())%3]})
		default:
			if nid > 0 && next()%2 == 0 {
				ops = append(ops, Op{Kind: OpFreeInterior, ID: int(next()) % nid, Offset: 1 + uint64(next())})
			} else {
				ops = append(ops, Op{Kind: OpClearFaults})
			}
		}
	}
	return ops
}

// FaultCalls are the driver calls fault injection targets.
var FaultCalls = []vmm.CallKind{vmm.CallCreate, vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess, vmm.CallUnmap,
	vmm.CallRelease, vmm.CallFreeAddress, vmm.CallRecordEvent, vmm.CallCreateEvent, vmm.CallQueryEvent}

// ParseHeader reads the "# policy=... capacity=..." header Describe writes into a Config.
func ParseHeader(text string, cfg *Config) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "# policy=") {
			continue
		}
		for _, kv := range strings.Fields(strings.TrimPrefix(line, "#")) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "policy":
				cfg.Policy = v
			case "capacity":
				fmt.Sscan(v, &cfg.Capacity)
			case "granularity":
				fmt.Sscan(v, &cfg.Granularity)
			case "streams":
				fmt.Sscan(v, &cfg.Streams)
			case "sync":
				cfg.SyncStreams = v == "true"
			case "chunk":
				fmt.Sscan(v, &cfg.Knobs.ChunkSize)
			case "stitchmin":
				fmt.Sscan(v, &cfg.Knobs.StitchMin)
			case "sblockcache":
				fmt.Sscan(v, &cfg.Knobs.SBlockCache)
			case "nocross":
				cfg.Knobs.NoCrossStream = v == "true"
			case "serve":
				cfg.Serve = v == "true"
			case "limit":
				fmt.Sscan(v, &cfg.MemoryLimit)
			}
		}
		return
	}
}
