package snapshot

// This file reads PyTorch memory snapshots: the pickle that torch.cuda.memory._dump_snapshot writes after
// torch.cuda.memory._record_memory_history. The snapshot is a dict:
//
//	{"segments": [...],                      # the allocator's segments at dump time (not needed here)
//	 "device_traces": [[entry, ...], ...],   # one list per device, oldest entry first
//	 ...}
//	entry = {"action": "alloc" | "free_requested" | "free_completed" | "segment_alloc" | "segment_free" |
//	                   "segment_map" | "segment_unmap" | "snapshot" | "oom" | ...,
//	         "addr": int, "size": int, "stream": int, "time_us": int, "frames": [...], ...}
//
// For "alloc" the size is the requested size (PyTorch records orig_size), as it is for the free actions
// (block->requested_size). Conversion to a trace.Trace keeps the allocation events of one device:
//
//   - alloc            -> a ID SIZE STREAM (a fresh ID per allocation; streams numbered 0, 1, 2 in order of first
//     use, whatever cudaStream_t value PyTorch recorded)
//   - free_requested   -> r ID, unless the entry right after it is the free_completed of the same address, in
//     which case the pair becomes a single f ID (no other stream held the block)
//   - free_completed   -> f ID ("free", the single free action of older PyTorch versions, likewise)
//   - everything else (segment and snapshot actions, oom, user annotations) is skipped.
//
// The trace is a ring buffer: blocks allocated before its window show up only as frees. Those blocks were
// live from the start of the window, so each becomes an allocation (of the size its free records) placed
// before the first event, in the order their frees appear.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"

	"github.com/nlpodyssey/gopickle/types"

	"github.com/gmlake/gmlake/trace"
)

// ErrInvalid is wrapped by every error about a malformed or unusable snapshot.
var ErrInvalid = errors.New("bad PyTorch memory snapshot")

// Error says where a snapshot is bad: the byte offset for a pickle that does not decode, or the
// entry (device_traces[Device][Entry]) for one that decodes to something unexpected.
type Error struct {
	File   string
	Offset int64 // byte offset reached when decoding failed; -1 when the pickle decoded
	Device int   // device index in device_traces; -1 when not about an entry
	Entry  int   // entry index in that device's list; -1 when not about an entry
	Msg    string
	Err    error // the decoder's error, if any
}

func (e *Error) Error() string {
	var where string
	switch {
	case e.Offset >= 0:
		where = fmt.Sprintf("%s: offset %d", e.File, e.Offset)
	case e.Entry >= 0:
		where = fmt.Sprintf("%s: device_traces[%d][%d]", e.File, e.Device, e.Entry)
	default:
		where = e.File
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", where, e.Msg, e.Err)
	}
	return where + ": " + e.Msg
}

func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// IsPickle reports whether the bytes start like a pickle of protocol 2 or later (what torch writes).
func IsPickle(head []byte) bool {
	return len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5
}

// LoadTrace reads a trace file of either kind: a PyTorch memory snapshot pickle (detected by its first
// bytes; the busiest device is taken) or the text trace format, gzip-compressed or plain.
func LoadTrace(path string) (*trace.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	head, _ := br.Peek(2)
	if IsPickle(head) {
		return Read(br, path, -1)
	}
	t, err := trace.Read(br, path)
	if err != nil {
		return nil, err
	}
	t.Name = trace.Name(path)
	return t, nil
}

// Name derives a trace name from a snapshot path: the base name without .pickle / .pkl.
func Name(path string) string {
	n := filepath.Base(path)
	for _, suf := range []string{".pickle", ".pkl"} {
		n = strings.TrimSuffix(n, suf)
	}
	return n
}

// Read decodes a PyTorch memory snapshot pickle from r and converts one device's trace (device < 0:
// the device with the most allocations) to a trace.Trace. file names the input in errors and the trace.
// The input is read whole and its opcodes checked (scanPickle) before it is decoded, so a truncated or
// corrupt file is an error at the offset where it goes wrong, never a huge allocation. It is decoded by
// loadPruned (prune.go), which keeps only what the conversion reads: the memory is that of the input and
// of the events, not of the stack frames a snapshot records with every entry.
func Read(r io.Reader, file string, device int) (t *trace.Trace, err error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &Error{File: file, Offset: int64(len(data)), Device: -1, Entry: -1, Msg: "read", Err: err}
	}
	if off, msg := scanPickle(data); msg != "" {
		return nil, &Error{File: file, Offset: int64(off), Device: -1, Entry: -1, Msg: msg}
	}
	var root any
	at := 0
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = &Error{File: file, Offset: int64(at), Device: -1, Entry: -1, Msg: "pickle does not decode",
					Err: fmt.Errorf("%v", p)}
			}
		}()
		root, at, err = loadPruned(data)
	}()
	if err != nil {
		if _, ok := err.(*Error); ok {
			return nil, err
		}
		return nil, &Error{File: file, Offset: int64(at), Device: -1, Entry: -1,
			Msg: "pickle does not decode (truncated or not a snapshot?)", Err: err}
	}
	data = nil // the decoded values hold no part of it but bytes, which a snapshot does not have
	return snapshotToTrace(root, file, device)
}

// scanPickle walks the opcodes of a pickle (protocols 0-5) up to its STOP without building anything, and
// returns the offset and a message for the first opcode that is unknown or whose argument runs past the end
// of data. It guards the decoder, which allocates whatever length an opcode declares.
func scanPickle(data []byte) (int, string) {
	n := len(data)
	le := func(b []byte) uint64 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	for i := 0; i < n; {
		op := data[i]
		at := i
		i++
		need := func(k uint64) string {
			if k > uint64(n-i) {
				return fmt.Sprintf("opcode %#02x needs %d bytes, only %d remain (truncated file?)", op, k, n-i)
			}
			return ""
		}
		var fixed, lenBytes int
		lines := 0
		switch op {
		case '.': // STOP
			return 0, ""
		case '(', '0', '1', '2', 'N', 'R', 'a', 'b', 'd', '}', 'e', 'l', ']', 'o', 's', 't', ')', 'u', 'Q',
			0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98:
		case 0x80, 'K', 'h', 'q', 0x82: // PROTO, BININT1, BINGET, BINPUT, EXT1
			fixed = 1
		case 'M', 0x83: // BININT2, EXT2
			fixed = 2
		case 'J', 'j', 'r', 0x84: // BININT, LONG_BINGET, LONG_BINPUT, EXT4
			fixed = 4
		case 'G', 0x95: // BINFLOAT; FRAME (its length, then opcodes that this loop walks on)
			fixed = 8
		case 'I', 'L', 'F', 'S', 'V', 'g', 'p', 'P':
			lines = 1
		case 'c', 'i': // GLOBAL, INST: module and name lines
			lines = 2
		case 'U', 0x8c, 'C', 0x8a: // SHORT_BINSTRING, SHORT_BINUNICODE, SHORT_BINBYTES, LONG1
			lenBytes = 1
		case 'T', 'X', 'B', 0x8b: // BINSTRING, BINUNICODE, BINBYTES, LONG4
			lenBytes = 4
		case 0x8d, 0x8e, 0x96: // BINUNICODE8, BINBYTES8, BYTEARRAY8
			lenBytes = 8
		default:
			return at, fmt.Sprintf("unknown pickle opcode %#02x", op)
		}
		if msg := need(uint64(fixed + lenBytes)); msg != "" {
			return at, msg
		}
		if op == 0x95 {
			if msg := need(8 + le(data[i:i+8])); msg != "" {
				return at, "frame: " + msg
			}
		}
		if lenBytes > 0 {
			k := le(data[i : i+lenBytes])
			i += lenBytes
			if lenBytes == 4 && (op == 'T' || op == 0x8b) && k >= 1<<31 {
				return at, fmt.Sprintf("opcode %#02x has a negative length", op)
			}
			if msg := need(k); msg != "" {
				return at, msg
			}
			i += int(k)
		}
		i += fixed
		for ; lines > 0; lines-- {
			nl := bytes.IndexByte(data[i:], '\n')
			if nl < 0 {
				return at, fmt.Sprintf("opcode %q has no end of line (truncated file?)", op)
			}
			i += nl + 1
		}
	}
	return n, "no STOP opcode at the end (truncated file?)"
}

func snapErr(file string, dev, entry int, format string, args ...any) error {
	return &Error{File: file, Offset: -1, Device: dev, Entry: entry, Msg: fmt.Sprintf(format, args...)}
}

// pyKind names the Python kind of a decoded value, for errors in the user's words (never a Go type name).
func pyKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case int, int32, int64:
		return "an integer"
	case *big.Int:
		if x.IsInt64() || x.IsUint64() {
			return "an integer"
		}
		return "an integer wider than 64 bits"
	case float32, float64:
		return "a float"
	case *types.Dict, *types.OrderedDict, map[any]any:
		return "a dict"
	case *types.List, []any:
		return "a list"
	case *types.Tuple:
		return "a tuple"
	case []byte:
		return "bytes"
	}
	return "an object of a kind a snapshot does not hold"
}

// pyDictGet looks a string key up in a decoded dict.
func pyDictGet(v any, key string) (any, bool) {
	switch d := v.(type) {
	case *types.Dict:
		for _, e := range *d {
			if k, ok := e.Key.(string); ok && k == key {
				return e.Value, true
			}
		}
	case *types.OrderedDict:
		return d.Get(key)
	case map[any]any:
		x, ok := d[key]
		return x, ok
	}
	return nil, false
}

func pyListItems(v any) ([]any, bool) {
	switch l := v.(type) {
	case *types.List:
		return *l, true
	case *types.Tuple:
		return *l, true
	case []any:
		return l, true
	}
	return nil, false
}

func pyInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case *big.Int:
		if x.IsInt64() {
			return x.Int64(), true
		}
		if x.IsUint64() { // an address above 2^63 cannot be a device pointer, but keep the bits
			return int64(x.Uint64()), true
		}
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// maxSnapshotSize bounds a snapshot entry's size: 1 PiB, beyond any GPU (an H200 has 141 GB).
const maxSnapshotSize = 1 << 50

// pyUint reads a non-negative integer of any width up to 2^64-1.
func pyUint(v any) (uint64, bool) {
	if x, ok := v.(*big.Int); ok {
		return x.Uint64(), x.IsUint64()
	}
	n, ok := pyInt(v)
	return uint64(n), ok && n >= 0
}

// snapEvent is a converted event before stream numbering.
type snapEvent struct {
	op     trace.Op
	id     uint64
	size   uint64
	stream int64 // cudaStream_t value as recorded
}

func snapshotToTrace(root any, file string, device int) (*trace.Trace, error) {
	dts, ok := pyDictGet(root, "device_traces")
	if !ok {
		return nil, snapErr(file, -1, -1, "no \"device_traces\" key: not a torch.cuda.memory._snapshot() dict "+
			"(was the history recorded with torch.cuda.memory._record_memory_history()?)")
	}
	devs, ok := pyListItems(dts)
	if !ok {
		return nil, snapErr(file, -1, -1, "\"device_traces\" is %s, want a list per device", pyKind(dts))
	}
	if len(devs) == 0 {
		return nil, snapErr(file, -1, -1, "\"device_traces\" is empty")
	}
	if device >= len(devs) {
		return nil, snapErr(file, -1, -1, "device %d asked for, the snapshot has %d", device, len(devs))
	}
	if device < 0 {
		best := -1
		for d, v := range devs {
			items, _ := pyListItems(v)
			n := 0
			for _, e := range items {
				if a, _ := pyDictGet(e, "action"); a == "alloc" {
					n++
				}
			}
			if n > best {
				best, device = n, d
			}
		}
	}
	entries, ok := pyListItems(devs[device])
	if !ok {
		return nil, snapErr(file, device, -1, "device_traces[%d] is %s, want a list of entries", device, pyKind(devs[device]))
	}

	type liveBlock struct {
		id        uint64
		requested bool
	}
	live := make(map[int64]liveBlock)
	var prelude, body []snapEvent
	var nextID uint64
	newID := func() uint64 { nextID++; return nextID - 1 }

	field := func(j int, e any, key string) (int64, error) {
		v, ok := pyDictGet(e, key)
		if !ok {
			return 0, snapErr(file, device, j, "entry has no %q", key)
		}
		n, ok := pyInt(v)
		if !ok {
			return 0, snapErr(file, device, j, "%q is %s, want an integer", key, pyKind(v))
		}
		return n, nil
	}
	for j, e := range entries {
		av, ok := pyDictGet(e, "action")
		if !ok {
			return nil, snapErr(file, device, j, "entry is %s without an \"action\"", pyKind(e))
		}
		action, ok := av.(string)
		if !ok {
			return nil, snapErr(file, device, j, "\"action\" is %s, want a string", pyKind(av))
		}
		if action != "alloc" && action != "free_requested" && action != "free_completed" && action != "free" {
			continue
		}
		addr, err := field(j, e, "addr")
		if err != nil {
			return nil, err
		}
		sv, ok := pyDictGet(e, "size")
		if !ok {
			return nil, snapErr(file, device, j, "entry has no %q", "size")
		}
		usize, ok := pyUint(sv)
		if !ok {
			return nil, snapErr(file, device, j, "\"size\" is %v, want a positive byte count", sv)
		}
		if usize > maxSnapshotSize {
			return nil, snapErr(file, device, j, "%s of %d bytes at %#x: more than any device (1 PiB at most)", action, usize, addr)
		}
		size := int64(usize)
		stream, err := field(j, e, "stream")
		if err != nil {
			return nil, err
		}
		if size <= 0 {
			return nil, snapErr(file, device, j, "%s of %d bytes at %#x: want a positive size", action, size, addr)
		}
		b, isLive := live[addr]
		if action != "alloc" && !isLive {
			// Allocated before the trace's window: live from the start.
			b = liveBlock{id: newID()}
			prelude = append(prelude, snapEvent{op: trace.OpAlloc, id: b.id, size: uint64(size), stream: stream})
			live[addr] = b
		}
		switch action {
		case "alloc":
			if isLive {
				return nil, snapErr(file, device, j, "alloc at %#x, which is already allocated (id %d) and not freed", addr, b.id)
			}
			id := newID()
			live[addr] = liveBlock{id: id}
			body = append(body, snapEvent{op: trace.OpAlloc, id: id, size: uint64(size), stream: stream})
		case "free_requested":
			if b.requested {
				return nil, snapErr(file, device, j, "second free_requested of the block at %#x", addr)
			}
			if j+1 < len(entries) && snapIsCompletionOf(entries[j+1], addr) {
				continue // the pair becomes one f at the free_completed
			}
			b.requested = true
			live[addr] = b
			body = append(body, snapEvent{op: trace.OpFreeRequest, id: b.id})
		default: // free_completed, free
			delete(live, addr)
			body = append(body, snapEvent{op: trace.OpFree, id: b.id})
		}
	}

	t := &trace.Trace{Name: Name(file), Events: make([]trace.Event, 0, len(prelude)+len(body))}
	streamNum := make(map[int64]int)
	for _, evs := range [][]snapEvent{prelude, body} {
		for _, r := range evs {
			ev := trace.Event{Op: r.op, ID: r.id}
			if r.op == trace.OpAlloc {
				n, ok := streamNum[r.stream]
				if !ok {
					n = len(streamNum)
					streamNum[r.stream] = n
				}
				ev.Size, ev.Stream = r.size, n
			}
			t.Events = append(t.Events, ev)
		}
	}
	t.Streams = len(streamNum)
	return t, nil
}

func snapIsCompletionOf(e any, addr int64) bool {
	a, _ := pyDictGet(e, "action")
	if a != "free_completed" {
		return false
	}
	v, _ := pyDictGet(e, "addr")
	n, ok := pyInt(v)
	return ok && n == addr
}
