package itf

// This file decodes the Informal Trace Format (ITF, Apalache ADR-015), the JSON that `quint run --out-itf`
// writes: a trace is a list of states, each a record of variable values. Values are encoded as
//
//	JSON boolean, string           a Quint bool, str
//	JSON number or {"#bigint":"-12"} an int (arbitrary precision)
//	JSON array                     a list
//	{"#tup": [...]}                a tuple
//	{"#set": [...]}                a set
//	{"#map": [[k, v], ...]}        a map
//	{"tag": "T", "value": v}       a variant of a sum type (an object with exactly these two keys)
//	{"#unserializable": "..."}     a value ITF cannot carry (an operator, an infinite set)
//	any other object               a record
//
// With `quint run --mbt`, every state also has "mbt::actionTaken" (the name of the action that led to it)
// and "mbt::nondetPicks" (a record: each nondet name -> Some(value) or None). Variables of an instantiated
// module are qualified ("vms_ci::vms::live"); State.Get finds a variable by its bare name.
// The ITF conformance test that drives the engine with these traces is itf_test.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"sort"
	"strings"
)

// Kind is the kind of a decoded ITF value.
type Kind uint8

// The ITF value kinds.
const (
	KindBool Kind = iota
	KindInt
	KindString
	KindList
	KindTuple
	KindSet
	KindMap
	KindRecord
	KindVariant
	KindUnserializable
)

var itfKindNames = [...]string{"bool", "int", "string", "list", "tuple", "set", "map", "record", "variant", "unserializable"}

func (k Kind) String() string {
	if int(k) < len(itfKindNames) {
		return itfKindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Value is one decoded value. Which fields are set depends on Kind: Bool (KindBool); Int (KindInt); Str
// (KindString, the tag of an KindVariant, the text of KindUnserializable); Elems (KindList, KindTuple, KindSet,
// in the order of the file); Entries (KindMap, in the order of the file); Fields (KindRecord); Payload
// (KindVariant).
type Value struct {
	Kind    Kind
	Bool    bool
	Int     *big.Int
	Str     string
	Elems   []Value
	Entries []Entry
	Fields  map[string]Value
	Payload *Value
}

// Entry is one key-value pair of an ITF map.
type Entry struct {
	Key, Value Value
}

// State is one state of a trace: its index and its variables by (qualified) name.
type State struct {
	Index int
	Vars  map[string]Value
}

// Trace is a decoded trace.
type Trace struct {
	Meta   map[string]any // "#meta" of the trace (format, source, status, ...), as plain JSON
	Params []string
	Vars   []string
	States []State
	Loop   int // the index the trace loops back to, or -1
}

// itfMaxDepth bounds the nesting of values, so that hostile input cannot exhaust the stack.
const itfMaxDepth = 200

// ReadFile reads and decodes the ITF trace in file path.
func ReadFile(path string) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("itf: %w", err)
	}
	t, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Decode decodes one ITF trace. Errors say where in the document the problem is (a path such as
// states[3].live).
func Decode(data []byte) (*Trace, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("itf: not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("itf: trailing data after the trace object")
	}
	t := &Trace{Loop: -1}
	if m, ok := raw["#meta"]; ok {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("itf: #meta is %T, want an object", m)
		}
		t.Meta = mm
	}
	var err error
	if t.Params, err = itfStrings(raw, "params"); err != nil {
		return nil, err
	}
	if t.Vars, err = itfStrings(raw, "vars"); err != nil {
		return nil, err
	}
	if l, ok := raw["loop"]; ok && l != nil {
		n, ok := l.(json.Number)
		i, ierr := n.Int64()
		if !ok || ierr != nil || i < 0 {
			return nil, fmt.Errorf("itf: loop is %v, want a state index", l)
		}
		t.Loop = int(i)
	}
	sts, ok := raw["states"]
	if !ok {
		return nil, fmt.Errorf("itf: no states")
	}
	arr, ok := sts.([]any)
	if !ok {
		return nil, fmt.Errorf("itf: states is %T, want an array", sts)
	}
	for i, s := range arr {
		obj, ok := s.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("itf: states[%d] is %T, want an object", i, s)
		}
		st := State{Index: i, Vars: make(map[string]Value, len(obj))}
		for name, v := range obj {
			if name == "#meta" {
				if mm, ok := v.(map[string]any); ok {
					if n, ok := mm["index"].(json.Number); ok {
						if x, err := n.Int64(); err == nil {
							st.Index = int(x)
						}
					}
				}
				continue
			}
			val, err := decodeITFValue(v, 0)
			if err != nil {
				return nil, fmt.Errorf("itf: states[%d].%s: %w", i, name, err)
			}
			st.Vars[name] = val
		}
		t.States = append(t.States, st)
	}
	if t.Loop >= len(t.States) && len(t.States) > 0 {
		return nil, fmt.Errorf("itf: loop %d beyond the %d states", t.Loop, len(t.States))
	}
	return t, nil
}

func itfStrings(raw map[string]any, key string) ([]string, error) {
	v, ok := raw[key]
	if !ok || v == nil {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("itf: %s is %T, want an array of strings", key, v)
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("itf: %s[%d] is %T, want a string", key, i, x)
		}
		out[i] = s
	}
	return out, nil
}

func decodeITFValue(v any, depth int) (Value, error) {
	if depth > itfMaxDepth {
		return Value{}, fmt.Errorf("values nested deeper than %d", itfMaxDepth)
	}
	switch x := v.(type) {
	case bool:
		return Value{Kind: KindBool, Bool: x}, nil
	case string:
		return Value{Kind: KindString, Str: x}, nil
	case json.Number:
		n, ok := new(big.Int).SetString(x.String(), 10)
		if !ok {
			return Value{}, fmt.Errorf("number %s is not an integer", x)
		}
		return Value{Kind: KindInt, Int: n}, nil
	case []any:
		el, err := decodeITFElems(x, depth)
		return Value{Kind: KindList, Elems: el}, err
	case map[string]any:
		return decodeITFObject(x, depth)
	case nil:
		return Value{}, fmt.Errorf("null is not an ITF value")
	}
	return Value{}, fmt.Errorf("unexpected JSON value %T", v)
}

func decodeITFElems(arr []any, depth int) ([]Value, error) {
	out := make([]Value, len(arr))
	for i, e := range arr {
		val, err := decodeITFValue(e, depth+1)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = val
	}
	return out, nil
}

func decodeITFObject(x map[string]any, depth int) (Value, error) {
	if len(x) == 1 {
		for k, v := range x {
			switch k {
			case "#bigint":
				s, ok := v.(string)
				if !ok {
					return Value{}, fmt.Errorf("#bigint is %T, want a string", v)
				}
				n, ok := new(big.Int).SetString(s, 10)
				if !ok {
					return Value{}, fmt.Errorf("#bigint %q is not a decimal integer", s)
				}
				return Value{Kind: KindInt, Int: n}, nil
			case "#tup", "#set":
				arr, ok := v.([]any)
				if !ok {
					return Value{}, fmt.Errorf("%s is %T, want an array", k, v)
				}
				el, err := decodeITFElems(arr, depth)
				if err != nil {
					return Value{}, fmt.Errorf("%s%w", k, err)
				}
				kind := KindTuple
				if k == "#set" {
					kind = KindSet
				}
				return Value{Kind: kind, Elems: el}, nil
			case "#map":
				arr, ok := v.([]any)
				if !ok {
					return Value{}, fmt.Errorf("#map is %T, want an array of pairs", v)
				}
				out := Value{Kind: KindMap, Entries: make([]Entry, len(arr))}
				for i, p := range arr {
					pair, ok := p.([]any)
					if !ok || len(pair) != 2 {
						return Value{}, fmt.Errorf("#map[%d] is not a [key, value] pair", i)
					}
					key, err := decodeITFValue(pair[0], depth+1)
					if err != nil {
						return Value{}, fmt.Errorf("#map[%d] key: %w", i, err)
					}
					val, err := decodeITFValue(pair[1], depth+1)
					if err != nil {
						return Value{}, fmt.Errorf("#map[%d] value: %w", i, err)
					}
					out.Entries[i] = Entry{Key: key, Value: val}
				}
				return out, nil
			case "#unserializable":
				s, _ := v.(string)
				return Value{Kind: KindUnserializable, Str: s}, nil
			}
		}
	}
	if len(x) == 2 {
		tag, hasTag := x["tag"]
		val, hasVal := x["value"]
		if ts, ok := tag.(string); ok && hasTag && hasVal {
			p, err := decodeITFValue(val, depth+1)
			if err != nil {
				return Value{}, fmt.Errorf("variant %s: %w", ts, err)
			}
			return Value{Kind: KindVariant, Str: ts, Payload: &p}, nil
		}
	}
	out := Value{Kind: KindRecord, Fields: make(map[string]Value, len(x))}
	for k, v := range x {
		if strings.HasPrefix(k, "#") {
			return Value{}, fmt.Errorf("unknown ITF encoding %q", k)
		}
		val, err := decodeITFValue(v, depth+1)
		if err != nil {
			return Value{}, fmt.Errorf(".%s: %w", k, err)
		}
		out.Fields[k] = val
	}
	return out, nil
}

// Get returns the variable called name: an exact match, or else the one whose qualified name ends in
// "::name" (instances qualify their variables: "vms_ci::vms::live").
func (s State) Get(name string) (Value, bool) {
	if v, ok := s.Vars[name]; ok {
		return v, true
	}
	var found []string
	for k := range s.Vars {
		if strings.HasSuffix(k, "::"+name) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return Value{}, false
	}
	return s.Vars[found[0]], true
}

// ActionTaken returns mbt::actionTaken ("" when the trace was written without --mbt).
func (s State) ActionTaken() string {
	v, ok := s.Vars["mbt::actionTaken"]
	if !ok || v.Kind != KindString {
		return ""
	}
	return v.Str
}

// NondetPick returns the value the action picked for the nondet binding name (mbt::nondetPicks: Some(v)).
func (s State) NondetPick(name string) (Value, bool) {
	picks, ok := s.Vars["mbt::nondetPicks"]
	if !ok || picks.Kind != KindRecord {
		return Value{}, false
	}
	v, ok := picks.Fields[name]
	if !ok || v.Kind != KindVariant || v.Str != "Some" || v.Payload == nil {
		return Value{}, false
	}
	return *v.Payload, true
}

// Int64 returns an integer value that fits in 64 bits.
func (v Value) Int64() (int64, error) {
	if v.Kind != KindInt || v.Int == nil {
		return 0, fmt.Errorf("itf: %v is a %v, not an int", v, v.Kind)
	}
	if !v.Int.IsInt64() {
		return 0, fmt.Errorf("itf: %v does not fit in 64 bits", v.Int)
	}
	return v.Int.Int64(), nil
}

// Field returns a record's field.
func (v Value) Field(name string) (Value, error) {
	if v.Kind != KindRecord {
		return Value{}, fmt.Errorf("itf: field %s of a %v", name, v.Kind)
	}
	f, ok := v.Fields[name]
	if !ok {
		return Value{}, fmt.Errorf("itf: record has no field %s (has %s)", name, strings.Join(v.fieldNames(), ", "))
	}
	return f, nil
}

func (v Value) fieldNames() []string {
	out := make([]string, 0, len(v.Fields))
	for k := range v.Fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the value a map holds for key (compared with Equal).
func (v Value) Lookup(key Value) (Value, bool) {
	if v.Kind != KindMap {
		return Value{}, false
	}
	for _, e := range v.Entries {
		if e.Key.Equal(key) {
			return e.Value, true
		}
	}
	return Value{}, false
}

// NewInt makes an int value, for lookups.
func NewInt(n int64) Value { return Value{Kind: KindInt, Int: big.NewInt(n)} }

// Equal reports whether two values are the same Quint value (sets and maps regardless of order).
func (v Value) Equal(o Value) bool {
	if v.Kind != o.Kind {
		return false
	}
	switch v.Kind {
	case KindBool:
		return v.Bool == o.Bool
	case KindInt:
		return v.Int != nil && o.Int != nil && v.Int.Cmp(o.Int) == 0
	case KindString, KindUnserializable:
		return v.Str == o.Str
	case KindList, KindTuple:
		if len(v.Elems) != len(o.Elems) {
			return false
		}
		for i := range v.Elems {
			if !v.Elems[i].Equal(o.Elems[i]) {
				return false
			}
		}
		return true
	case KindSet:
		return subsetITF(v.Elems, o.Elems) && subsetITF(o.Elems, v.Elems)
	case KindMap:
		if len(v.Entries) != len(o.Entries) {
			return false
		}
		for _, e := range v.Entries {
			w, ok := o.Lookup(e.Key)
			if !ok || !w.Equal(e.Value) {
				return false
			}
		}
		return true
	case KindRecord:
		if len(v.Fields) != len(o.Fields) {
			return false
		}
		for k, f := range v.Fields {
			g, ok := o.Fields[k]
			if !ok || !f.Equal(g) {
				return false
			}
		}
		return true
	case KindVariant:
		return v.Str == o.Str && v.Payload != nil && o.Payload != nil && v.Payload.Equal(*o.Payload)
	}
	return false
}

func subsetITF(a, b []Value) bool {
	for _, x := range a {
		found := false
		for _, y := range b {
			if x.Equal(y) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// String prints the value in Quint syntax.
func (v Value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v Value) write(b *strings.Builder) {
	list := func(open, close string, el []Value) {
		b.WriteString(open)
		for i, e := range el {
			if i > 0 {
				b.WriteString(", ")
			}
			e.write(b)
		}
		b.WriteString(close)
	}
	switch v.Kind {
	case KindBool:
		fmt.Fprint(b, v.Bool)
	case KindInt:
		if v.Int == nil {
			b.WriteString("<nil int>")
		} else {
			b.WriteString(v.Int.String())
		}
	case KindString:
		fmt.Fprintf(b, "%q", v.Str)
	case KindList:
		list("[", "]", v.Elems)
	case KindTuple:
		list("(", ")", v.Elems)
	case KindSet:
		list("Set(", ")", v.Elems)
	case KindMap:
		b.WriteString("Map(")
		for i, e := range v.Entries {
			if i > 0 {
				b.WriteString(", ")
			}
			e.Key.write(b)
			b.WriteString(" -> ")
			e.Value.write(b)
		}
		b.WriteString(")")
	case KindRecord:
		b.WriteString("{ ")
		for i, k := range v.fieldNames() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k + ": ")
			v.Fields[k].write(b)
		}
		b.WriteString(" }")
	case KindVariant:
		b.WriteString(v.Str)
		if v.Payload != nil && !(v.Payload.Kind == KindTuple && len(v.Payload.Elems) == 0) {
			b.WriteString("(")
			v.Payload.write(b)
			b.WriteString(")")
		}
	case KindUnserializable:
		fmt.Fprintf(b, "<unserializable %s>", v.Str)
	}
}
