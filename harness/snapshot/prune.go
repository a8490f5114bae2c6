package snapshot

// This file is the pickle machine that decodes a snapshot in memory proportional to what a replay keeps,
// not to the snapshot (issue 36 item 9: a 20 MB snapshot took 1.85 GB to read through gopickle's
// unpickler, which builds every stack frame of every entry as a dict, all of them held by the memo).
//
// It runs the pickle's opcodes (protocols 0-5) on a stack as the unpickler does, into gopickle's value
// types (types.Dict, types.List, types.Tuple, strings, int64 or *big.Int), with two differences:
//
//   - A dict keeps only the keys the conversion reads (keepKeys): "device_traces" at the root, "action",
//     "addr", "size", "stream" in an entry. Every other value ("segments", "frames", "time_us", ...) is
//     dropped when its dict takes it (SETITEM, SETITEMS), so a stack frame's dict lives only until its
//     entry's dict is filled.
//   - The memo keeps only the values some GET fetches later (a first walk over the opcodes lists them): a
//     pickler memoizes every container and string, and holding them all is what kept every frame alive.
//
// Nothing is imported or called: GLOBAL, REDUCE, BUILD, NEWOBJ and their kin make an opaque value (a
// snapshot has none; a malicious pickle runs nothing). The opcodes and their lengths were checked by
// scanPickle first, so the walk trusts them.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/nlpodyssey/gopickle/types"
)

// keepKeys are the dict keys snapshotToTrace reads; a dict drops every other.
var keepKeys = map[string]bool{"device_traces": true, "action": true, "addr": true, "size": true, "stream": true}

// opaque is what an object the machine does not build (a class, a call's result) decodes to.
type opaque struct{}

// mark is the stack's MARK.
type mark struct{}

// pickleOp is one opcode of a walk: its byte, its offset, its fixed or length-prefixed argument and its text
// lines (protocol 0 opcodes).
type pickleOp struct {
	op    byte
	at    int
	arg   []byte
	lines [][]byte
}

// walkPickle calls fn for each opcode of data up to STOP (included), with its argument. data has passed
// scanPickle.
func walkPickle(data []byte, fn func(o *pickleOp) error) error {
	var o pickleOp
	for i := 0; i < len(data); {
		o = pickleOp{op: data[i], at: i}
		i++
		fixed, lenBytes, lines := 0, 0, 0
		switch o.op {
		case 0x80, 'K', 'h', 'q', 0x82:
			fixed = 1
		case 'M', 0x83:
			fixed = 2
		case 'J', 'j', 'r', 0x84:
			fixed = 4
		case 'G', 0x95:
			fixed = 8
		case 'I', 'L', 'F', 'S', 'V', 'g', 'p', 'P':
			lines = 1
		case 'c', 'i':
			lines = 2
		case 'U', 0x8c, 'C', 0x8a:
			lenBytes = 1
		case 'T', 'X', 'B', 0x8b:
			lenBytes = 4
		case 0x8d, 0x8e, 0x96:
			lenBytes = 8
		}
		if lenBytes > 0 {
			var k uint64
			for j := lenBytes - 1; j >= 0; j-- {
				k = k<<8 | uint64(data[i+j])
			}
			i += lenBytes
			o.arg = data[i : i+int(k)]
			i += int(k)
		} else {
			o.arg = data[i : i+fixed]
			i += fixed
		}
		for ; lines > 0; lines-- {
			nl := bytes.IndexByte(data[i:], '\n')
			o.lines = append(o.lines, data[i:i+nl])
			i += nl + 1
		}
		if err := fn(&o); err != nil {
			return err
		}
		if o.op == '.' {
			return nil
		}
	}
	return fmt.Errorf("no STOP opcode")
}

// memoKeys is a set of memo keys (small integers: a pickler numbers them 0, 1, 2, ...).
type memoKeys []uint64

func (s *memoKeys) add(k uint64) bool {
	w := k / 64
	for uint64(len(*s)) <= w {
		*s = append(*s, 0)
	}
	had := (*s)[w]&(1<<(k%64)) != 0
	(*s)[w] |= 1 << (k % 64)
	return !had
}

func (s memoKeys) has(k uint64) bool { return k/64 < uint64(len(s)) && s[k/64]&(1<<(k%64)) != 0 }

// loadPruned decodes data (checked by scanPickle) into the root value, keeping only keepKeys in dicts and
// in the memo only what is fetched again. at reports the offset of the opcode an error is at.
func loadPruned(data []byte) (root any, at int, err error) {
	// First walk: the memo keys some GET fetches, and nothing else is kept in the memo. A key is memo
	// numbered at its PUT, or at MEMOIZE the next one: the number of keys put so far.
	var fetched, put memoKeys
	var n uint64
	_ = walkPickle(data, func(o *pickleOp) error {
		switch o.op {
		case 'h', 'j', 'g':
			if k, ok := memoKey(o); ok {
				fetched.add(k)
			}
		case 'q', 'r', 'p':
			if k, ok := memoKey(o); ok && put.add(k) {
				n++
			}
		case 0x94:
			if put.add(n) {
				n++
			}
		}
		return nil
	})

	var stack []any
	var marks []int
	memo := map[uint64]any{}
	put = nil
	n = 0
	pop := func() (any, error) {
		if len(stack) == 0 || len(marks) > 0 && marks[len(marks)-1] == len(stack) {
			return nil, fmt.Errorf("stack underflow")
		}
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return v, nil
	}
	popMark := func() ([]any, error) {
		if len(marks) == 0 {
			return nil, fmt.Errorf("no MARK")
		}
		m := marks[len(marks)-1]
		marks = marks[:len(marks)-1]
		items := stack[m:]
		stack = stack[:m]
		return items, nil
	}
	top := func() (any, error) {
		if len(stack) == 0 || len(marks) > 0 && marks[len(marks)-1] == len(stack) {
			return nil, fmt.Errorf("stack underflow")
		}
		return stack[len(stack)-1], nil
	}
	setItems := func(d any, kv []any) error {
		dict, ok := d.(*types.Dict)
		if !ok {
			if _, ok := d.(opaque); ok {
				return nil
			}
			return fmt.Errorf("SETITEMS on %s", pyKind(d))
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if k, ok := kv[i].(string); ok && keepKeys[k] {
				dict.Set(k, kv[i+1])
			}
		}
		return nil
	}
	appendItems := func(l any, items []any) error {
		switch x := l.(type) {
		case *types.List:
			*x = append(*x, items...)
			return nil
		case opaque:
			return nil
		}
		return fmt.Errorf("APPENDS on %s", pyKind(l))
	}
	memoize := func(k uint64) error {
		v, err := top()
		if err != nil {
			return err
		}
		if put.add(k) {
			n++
		}
		if fetched.has(k) {
			memo[k] = v
		}
		return nil
	}
	var result any
	err = walkPickle(data, func(o *pickleOp) error {
		at = o.at
		var push any
		switch o.op {
		case 0x80, 0x95, 0x98: // PROTO, FRAME, READONLY_BUFFER
			return nil
		case '.':
			v, err := pop()
			result = v
			return err
		case '(':
			marks = append(marks, len(stack))
			return nil
		case '0':
			_, err := pop()
			return err
		case '1':
			_, err := popMark()
			return err
		case '2':
			v, err := top()
			if err != nil {
				return err
			}
			push = v
		case 'N':
			push = nil
		case 0x88:
			push = true
		case 0x89:
			push = false
		case 'J':
			push = int64(int32(binary.LittleEndian.Uint32(o.arg)))
		case 'K':
			push = int64(o.arg[0])
		case 'M':
			push = int64(binary.LittleEndian.Uint16(o.arg))
		case 0x8a, 0x8b: // LONG1, LONG4: little-endian two's complement
			push = decodeLong(o.arg)
		case 'I', 'L':
			s := string(bytes.TrimSuffix(o.lines[0], []byte("L")))
			switch s {
			case "00":
				push = false
			case "01":
				push = true
			default:
				b, ok := new(big.Int).SetString(s, 10)
				if !ok {
					return fmt.Errorf("bad integer %q", s)
				}
				push = fromBig(b)
			}
		case 'G':
			push = math.Float64frombits(binary.BigEndian.Uint64(o.arg))
		case 'F':
			f, err := strconv.ParseFloat(string(o.lines[0]), 64)
			if err != nil {
				return fmt.Errorf("bad float %q", o.lines[0])
			}
			push = f
		case 0x8c, 'X', 0x8d, 'T', 'U':
			push = string(o.arg)
		case 'V':
			push = string(o.lines[0])
		case 'S':
			s, err := strconv.Unquote(string(o.lines[0]))
			if err != nil {
				s = string(o.lines[0])
			}
			push = s
		case 'C', 'B', 0x8e, 0x96:
			push = o.arg
		case '}':
			d := types.Dict(nil) // grown only by the keys kept: a stack frame's dict allocates no entries
			push = &d
		case ']':
			push = types.NewList()
		case ')':
			push = types.NewTupleFromSlice(nil)
		case 0x8f: // EMPTY_SET
			push = opaque{}
		case 'd':
			items, err := popMark()
			if err != nil {
				return err
			}
			d := &types.Dict{}
			if err := setItems(d, items); err != nil {
				return err
			}
			push = d
		case 'l':
			items, err := popMark()
			if err != nil {
				return err
			}
			push = types.NewListFromSlice(append([]any(nil), items...))
		case 't':
			items, err := popMark()
			if err != nil {
				return err
			}
			push = types.NewTupleFromSlice(append([]any(nil), items...))
		case 0x85, 0x86, 0x87: // TUPLE1-3
			k := int(o.op - 0x84)
			if len(stack) < k || len(marks) > 0 && marks[len(marks)-1] > len(stack)-k {
				return fmt.Errorf("stack underflow")
			}
			t := types.NewTupleFromSlice(append([]any(nil), stack[len(stack)-k:]...))
			stack = stack[:len(stack)-k]
			push = t
		case 'a':
			v, err := pop()
			if err != nil {
				return err
			}
			l, err := top()
			if err != nil {
				return err
			}
			return appendItems(l, []any{v})
		case 'e':
			items, err := popMark()
			if err != nil {
				return err
			}
			l, err := top()
			if err != nil {
				return err
			}
			return appendItems(l, items)
		case 's':
			v, err := pop()
			if err != nil {
				return err
			}
			k, err := pop()
			if err != nil {
				return err
			}
			d, err := top()
			if err != nil {
				return err
			}
			return setItems(d, []any{k, v})
		case 'u':
			items, err := popMark()
			if err != nil {
				return err
			}
			d, err := top()
			if err != nil {
				return err
			}
			return setItems(d, items)
		case 0x90: // ADDITEMS
			_, err := popMark()
			return err
		case 0x91: // FROZENSET
			if _, err := popMark(); err != nil {
				return err
			}
			push = opaque{}
		case 'q', 'r', 'p':
			k, ok := memoKey(o)
			if !ok {
				return fmt.Errorf("bad memo key")
			}
			return memoize(k)
		case 0x94:
			return memoize(n)
		case 'h', 'j', 'g':
			k, ok := memoKey(o)
			if !ok {
				return fmt.Errorf("bad memo key")
			}
			v, ok := memo[k]
			if !ok {
				return fmt.Errorf("memo key %d fetched before it is put", k)
			}
			push = v
		case 'c', 0x82, 0x83, 0x84, 'P', 0x97: // GLOBAL, EXT1-4, PERSID, NEXT_BUFFER: nothing is imported
			push = opaque{}
		case 0x93, 'R', 0x81: // STACK_GLOBAL, REDUCE, NEWOBJ: two popped, nothing called
			if _, err := pop(); err != nil {
				return err
			}
			if _, err := pop(); err != nil {
				return err
			}
			push = opaque{}
		case 0x92: // NEWOBJ_EX
			for range 3 {
				if _, err := pop(); err != nil {
					return err
				}
			}
			push = opaque{}
		case 'Q': // BINPERSID
			if _, err := pop(); err != nil {
				return err
			}
			push = opaque{}
		case 'b': // BUILD: the state is dropped
			_, err := pop()
			return err
		case 'i', 'o': // INST, OBJ
			if _, err := popMark(); err != nil {
				return err
			}
			push = opaque{}
		default:
			return fmt.Errorf("unknown pickle opcode %#02x", o.op)
		}
		stack = append(stack, push)
		return nil
	})
	if err != nil {
		return nil, at, err
	}
	return result, at, nil
}

// memoKey reads the key of a PUT, BINPUT, LONG_BINPUT, GET, BINGET or LONG_BINGET.
func memoKey(o *pickleOp) (uint64, bool) {
	switch o.op {
	case 'h', 'q':
		return uint64(o.arg[0]), true
	case 'j', 'r':
		return uint64(binary.LittleEndian.Uint32(o.arg)), true
	}
	k, err := strconv.ParseUint(string(o.lines[0]), 10, 64)
	return k, err == nil
}

// decodeLong reads LONG1/LONG4's little-endian two's complement bytes: an int64 when it fits, else a
// *big.Int (as the unpickler gives it).
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	v := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return fromBig(v)
}

func fromBig(v *big.Int) any {
	if v.IsInt64() {
		return v.Int64()
	}
	return v
}
