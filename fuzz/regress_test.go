package fuzz

import (
	"testing"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
)

// Property (issue 14 item 7, found by FuzzOps): with an injected fault on the stream check, an Alloc on an
// unknown stream may fail with the driver's error; the contract allows any error under an injected fault and
// must not insist on ErrUnknownStream. The program is the fuzzer's (its misuse written as plain ops).
func TestUnknownStreamUnderStreamQueryFault(t *testing.T) {
	const prog = "# policy= capacity=67108864 granularity=0 streams=1 sync=false patterns=true\n" +
		"fail stream_query 1 CUDA_ERROR_OUT_OF_MEMORY\n" +
		"alloc a1099511627776 4096 s1048576\n" +
		"free a1099511627776\n"
	p, err := ops.Parse(prog, "issue14-item7")
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range impl.Policies {
		if f := runProgram(p, policy); f != "" {
			t.Errorf("%s: %s", policy, f)
		}
	}
}
