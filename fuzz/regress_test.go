package fuzz

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
)

// Property (issue 14 item 7, found by FuzzOps): with an injected fault on the stream check, an Alloc on an
// unknown stream may fail with the driver's error; the contract allows any error under an injected fault and
// must not insist on ErrUnknownStream. The program is the fuzzer's, verbatim.
func TestUnknownStreamUnderStreamQueryFault(t *testing.T) {
	const prog = "#! config policy= capacity=67108864 streams=1 seed=0\n" +
		"#! fail stream_query 1 2\n" +
		"#! misuse unknown_stream 0\n"
	p, err := ReadProgram(strings.NewReader(prog), "issue14-item7")
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range impl.Policies {
		if _, f := Exec(p, policy, ExecOptions{}); f != nil {
			t.Errorf("%s: %v", policy, f)
		}
	}
}
