package fuzz

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/harness/itf"
)

// itfSeed is a small ITF trace using every encoding (bigint, tuple, set, map, record, variant, list,
// unserializable) and the mbt fields, in the shape `quint run --mbt --out-itf` writes.
const itfSeed = `{"#meta":{"format":"ITF","source":"vms.qnt","status":"ok"},"params":[],"vars":["live","chunks","mbt::actionTaken","mbt::nondetPicks"],
"states":[
 {"#meta":{"index":0},"live":{"#map":[]},"chunks":{"#set":[]},"mbt::actionTaken":"init","mbt::nondetPicks":{"size":{"tag":"None","value":{"#tup":[]}}}},
 {"#meta":{"index":1},"live":{"#map":[[{"#bigint":"1"},{"size":{"#bigint":"4096"},"stream":0,"parts":[1,2],"ok":true}]]},
  "chunks":{"#set":[{"#tup":[{"#bigint":"7"},"pBlock"]}]},"mbt::actionTaken":"alloc",
  "mbt::nondetPicks":{"size":{"tag":"Some","value":{"#bigint":"-12345678901234567890"}},"f":{"#unserializable":"(x) => x"}}}
],"loop":1}`

// FuzzITF feeds malformed input to the ITF decoder (itf.Decode, which drives the engine from the
// Quint spec's traces): it never panics, every error names the decoder and, where it can, the place in the
// document; a decoded trace's values all print (String) and equal themselves (Equal).
func FuzzITF(f *testing.F) {
	f.Add([]byte(itfSeed))
	f.Add([]byte(`{"states":[]}`))
	f.Add([]byte(`{"states":[{"x":{"#bigint":"1e9"}}]}`))
	f.Add([]byte(`{"states":[{"x":{"#map":[[1]]}}]}`))
	f.Add([]byte(`{"states":[{"x":{"tag":"A"}}]}`))
	f.Add([]byte(`{"states":[{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}`))
	f.Add([]byte(`{"states":[{"x":1.5}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"states":[{"#meta":{"index":"zero"}}]} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := itf.Decode(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "itf") {
				t.Fatalf("error does not say it is about the ITF input: %v", err)
			}
			return
		}
		for i, s := range tr.States {
			for name, v := range s.Vars {
				_ = v.String()
				if !v.Equal(v) {
					t.Fatalf("state %d: variable %s does not equal itself: %s", i, name, v.String())
				}
			}
		}
	})
}
