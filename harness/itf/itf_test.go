package itf

import (
	"math/big"
	"strings"
	"testing"
)

// A trace in the shape quint run --mbt --out-itf writes, with every ITF encoding.
const itfSample = `{"#meta":{"format":"ITF","source":"vms.qnt","status":"ok"},
"params":[],"vars":["m::x","m::s","m::mp","m::r","m::t","mbt::actionTaken","mbt::nondetPicks"],
"states":[
 {"#meta":{"index":0},"m::x":{"#bigint":"0"},"m::s":{"#set":[]},"m::mp":{"#map":[]},
  "m::r":{"tag":"Ok","value":{"#tup":[]}},"m::t":{"a":true,"b":"x","l":[1,{"#bigint":"-2"}]},
  "mbt::actionTaken":"init","mbt::nondetPicks":{"n":{"tag":"None","value":{"#tup":[]}}}},
 {"#meta":{"index":1},"m::x":{"#bigint":"123456789012345678901234567890"},
  "m::s":{"#set":[{"#bigint":"2"},{"#bigint":"1"}]},
  "m::mp":{"#map":[[{"#bigint":"2"},[{"#bigint":"2"},{"#bigint":"-1"}]],[{"#bigint":"1"},[]]]},
  "m::r":{"tag":"Err","value":"e"},"m::t":{"a":false,"b":"","l":[]},
  "mbt::actionTaken":"inc","mbt::nondetPicks":{"n":{"tag":"Some","value":{"#bigint":"2"}}}}
]}`

// TestITFDecode checks the decoder on every encoding ITF uses: big integers, sets, maps, tuples, variants,
// records, lists, and the mbt metadata.
func TestITFDecode(t *testing.T) {
	tr, err := Decode([]byte(itfSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.States) != 2 || len(tr.Vars) != 7 || tr.Meta["status"] != "ok" || tr.Loop != -1 {
		t.Fatalf("trace: %d states, vars %v, meta %v, loop %d", len(tr.States), tr.Vars, tr.Meta, tr.Loop)
	}
	s0, s1 := tr.States[0], tr.States[1]
	if x, ok := s0.Get("x"); !ok || x.Kind != KindInt || x.Int.Sign() != 0 {
		t.Errorf("x in state 0: %v %v", x, ok)
	}
	want, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	if x, _ := s1.Get("x"); x.Int.Cmp(want) != 0 {
		t.Errorf("big x = %v", x)
	}
	if x, _ := s1.Get("x"); func() error { _, err := x.Int64(); return err }() == nil {
		t.Error("Int64 of a 97-bit integer did not fail")
	}
	s, _ := s1.Get("s")
	if s.Kind != KindSet || !s.Equal(Value{Kind: KindSet, Elems: []Value{NewInt(1), NewInt(2)}}) {
		t.Errorf("set = %v", s)
	}
	mp, _ := s1.Get("mp")
	v, ok := mp.Lookup(NewInt(2))
	if !ok || v.Kind != KindList || len(v.Elems) != 2 || v.Elems[1].Int.Int64() != -1 {
		t.Errorf("mp[2] = %v %v", v, ok)
	}
	if _, ok := mp.Lookup(NewInt(3)); ok {
		t.Error("mp[3] found")
	}
	r0, _ := s0.Get("r")
	r1, _ := s1.Get("r")
	if r0.Kind != KindVariant || r0.Str != "Ok" || r0.Payload.Kind != KindTuple || r1.Str != "Err" || r1.Payload.Str != "e" {
		t.Errorf("variants: %v, %v", r0, r1)
	}
	rec, _ := s0.Get("t")
	if a, err := rec.Field("a"); err != nil || a.Kind != KindBool || !a.Bool {
		t.Errorf("t.a = %v %v", a, err)
	}
	if _, err := rec.Field("zz"); err == nil {
		t.Error("missing field did not fail")
	}
	if l, _ := rec.Field("l"); l.Kind != KindList || l.Elems[0].Int.Int64() != 1 || l.Elems[1].Int.Int64() != -2 {
		t.Errorf("t.l = %v", l)
	}
	if s0.ActionTaken() != "init" || s1.ActionTaken() != "inc" {
		t.Errorf("actions %q %q", s0.ActionTaken(), s1.ActionTaken())
	}
	if _, ok := s0.NondetPick("n"); ok {
		t.Error("None pick reported as picked")
	}
	if n, ok := s1.NondetPick("n"); !ok || n.Int.Int64() != 2 {
		t.Errorf("pick n = %v %v", n, ok)
	}
	if got := r1.String(); got != `Err("e")` {
		t.Errorf("String = %s", got)
	}
	if got := mp.String(); got != "Map(2 -> [2, -1], 1 -> [])" {
		t.Errorf("String = %s", got)
	}
}

// TestITFDecodeErrors checks that malformed input is an error that says where, never a panic.
func TestITFDecodeErrors(t *testing.T) {
	deep := `{"states":[{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}]}`
	for name, doc := range map[string]string{
		"not json":        `{"states":`,
		"not an object":   `[1,2]`,
		"no states":       `{"vars":[]}`,
		"states not list": `{"states":{}}`,
		"state not obj":   `{"states":[1]}`,
		"bad bigint":      `{"states":[{"x":{"#bigint":"1.5"}}]}`,
		"bigint not str":  `{"states":[{"x":{"#bigint":1}}]}`,
		"float":           `{"states":[{"x":1.5}]}`,
		"null":            `{"states":[{"x":null}]}`,
		"bad map pair":    `{"states":[{"x":{"#map":[[1]]}}]}`,
		"map not list":    `{"states":[{"x":{"#map":{}}}]}`,
		"set not list":    `{"states":[{"x":{"#set":1}}]}`,
		"unknown #":       `{"states":[{"x":{"#foo":1,"a":2}}]}`,
		"vars not str":    `{"vars":[1],"states":[]}`,
		"loop too far":    `{"loop":3,"states":[{}]}`,
		"trailing":        `{"states":[]} {}`,
		"too deep":        deep,
	} {
		if _, err := Decode([]byte(doc)); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "bad bigint" && !strings.Contains(err.Error(), "states[0].x") {
			t.Errorf("%s: error does not say where: %v", name, err)
		}
	}
}
