package fuzz

import (
	"bytes"
	"compress/gzip"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/trace"
)

// programText prints a program for a failure message: the reproducer to save as a file and run with
// `gmlake fuzz --replay FILE --minimize` (long programs are cut in the middle).
func programText(p *ops.Program) string {
	q := *p
	if len(p.Ops) > 400 {
		q.Ops = append(p.Ops[:200:200], p.Ops[len(p.Ops)-200:]...)
	}
	return q.String()
}

// runProgram runs p under policy through ops.Env and describes the first failure ("" if none).
func runProgram(p *ops.Program, policy string) string {
	f, _, _ := runMutated(p, policy, 0)
	return f
}

// runMutated runs p under policy with seeded bugs m and returns the first failure ("" if none), the
// invariant it broke and the step.
func runMutated(p *ops.Program, policy string, m impl.Mutation) (fail, inv string, step int) {
	cfg := p.Cfg
	cfg.Policy, cfg.Mutations = policy, m
	i, vs, _, err := ops.Run(cfg, p.Ops)
	switch {
	case err != nil:
		return err.Error(), "ERROR", -1
	case i >= 0:
		return describeRun(p.Ops, i, vs), vs[0].Inv, i
	}
	return "", "", -1
}

// FuzzOps decodes bytes into an operation sequence (Decode: alloc with sizes from 1 B to GBs, free, record
// stream, stream work and its completion, empty cache, injected driver failures, misuse; through the serving
// layer, impl/serve, under a memory cap for half the inputs, as libgmlake runs the engine) and runs it through
// every policy on a small simulated device, checking every spec invariant (INV-NOOVERLAP, INV-MAPPED,
// INV-NOALIAS, INV-REFCOUNT, INV-STATS, INV-MIRROR, INV-BLOCKS, INV-NOLEAK) and the live set after each
// step, the data pattern of every allocation before its free, and that Close leaves nothing on the device.
func FuzzOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0x00, 4, 0, 1, 6, 0})                             // alloc small, free
	f.Add([]byte{2, 1, 0, 0x10, 9, 0xff, 0xff, 0x08, 0, 1, 6, 0, 0x1a, 11}) // huge alloc on stream 1, record, free, complete
	f.Add([]byte{0, 3, 0, 0, 10, 5, 0, 10, 6, 0, 10, 7, 7, 1, 12, 0, 10, 8, 6, 0, 6, 0})
	f.Add([]byte{1, 0, 0, 13, 0, 0, 0, 0, 4, 0, 0, 13, 6, 1, 1, 0, 9, 0, 0, 6, 0}) // create fails, then set_access fails
	f.Add([]byte{0x81, 1, 0, 0, 12, 3, 1, 0x10, 12, 5, 2, 0x0e, 0, 0x1e, 0, 0x2e, 0, 0x3e, 0, 0x4e, 0, 0x5e, 0})
	f.Add([]byte{0, 3, 3, 0, 10, 5, 0, 10, 6, 0, 10, 7, 7, 1, 12, 0, 10, 8, 6, 0, 6, 0}) // the same through the serving layer under half the device
	f.Fuzz(func(t *testing.T, data []byte) {
		p := Decode(data)
		for _, policy := range impl.Policies {
			if fail := runProgram(p, policy); fail != "" {
				t.Fatalf("%s: %s\n\nprogram (save it, or take the corpus file, and run `gmlake fuzz --replay FILE --policy %s --minimize`):\n%s", policy, fail, policy, programText(p))
			}
		}
	})
}

// FuzzTraceRead feeds malformed input to the trace parser: it never panics, every error says where (the
// file and line), and whatever it accepts writes back and reads back to the same events.
func FuzzTraceRead(f *testing.F) {
	f.Add([]byte("a 1 4096 0\nf 1\n"))
	f.Add([]byte("a 1 4096 0\nr 1\nf 1\n"))
	f.Add([]byte("# comment\n\na 0 131072000 0\na 1 8388608 2\nf 0\n"))
	f.Add([]byte("a 1 0 0\n"))
	f.Add([]byte("f 7\n"))
	f.Add([]byte("a 1 1 99999\n"))
	f.Add([]byte("a 1 18446744073709551616 0\n"))
	f.Add(gzipBytes([]byte("a 1 4096 0\nf 1\n")))
	f.Add(gzipBytes([]byte("a 1 4096 0\nf 1\n"))[:20]) // truncated gzip
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "fuzz-input"
		tr, err := trace.Read(bytes.NewReader(data), name)
		if err != nil {
			var pe *trace.ParseError
			if errors.As(err, &pe) {
				if pe.File != name || pe.Line < 1 {
					t.Fatalf("parse error does not say where: %#v", pe)
				}
				if !errors.Is(err, trace.ErrSyntax) {
					t.Fatalf("parse error does not wrap trace.ErrSyntax: %v", err)
				}
			} else if !strings.HasPrefix(err.Error(), name+":") {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := trace.Write(&b, tr.Events); err != nil {
			t.Fatal(err)
		}
		back, err := trace.Read(&b, name)
		if err != nil {
			t.Fatalf("an accepted trace does not read back after writing: %v\n%s", err, b.String())
		}
		if !eventsEqual(back.Events, tr.Events) || back.Streams != tr.Streams {
			t.Fatalf("trace changed on write and read back:\n%v\n%v", tr.Events, back.Events)
		}
	})
}

// FuzzProgramRead feeds malformed input to the program reader (harness/ops: programs, histories, traces):
// it never panics, every error is a *trace.ParseError that says where, and whatever it accepts prints and
// parses back to the same program.
func FuzzProgramRead(f *testing.F) {
	f.Add([]byte("# policy=gmlake capacity=1073741824 granularity=0 streams=2 sync=false seed=1\na 1 4096 0\nrecord a1 s1\nlaunch s1\nf 1\n"))
	f.Add([]byte("a 1 4096 0\nr 1\nf 1\n"))
	f.Add([]byte("fail create 1 2\nfree a3\nfree a3\ncompleteall\nemptycache\nlaunch s0 // ok\n"))
	f.Add([]byte("# policy=caching streams=x\n"))
	f.Add([]byte("fail nosuchcall 1 2\n"))
	f.Add([]byte("pool-create p1\nalloc a5 1 s3 p1\ncapture-begin s0\ncapture-end s0\npool-release p1\nclose\n"))
	f.Add(gzipBytes([]byte("alloc a0 0 s9\nfree-interior a0 +1\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "fuzz-input"
		p, err := ops.Parse(string(data), name)
		if err != nil {
			var pe *trace.ParseError
			if errors.As(err, &pe) {
				if pe.File != name || pe.Line < 1 || !errors.Is(err, trace.ErrSyntax) {
					t.Fatalf("program error does not say where: %#v", pe)
				}
			} else if !strings.HasPrefix(err.Error(), name+":") {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		text := p.String()
		back, err := ops.Parse(text, name)
		if err != nil {
			t.Fatalf("an accepted program does not read back after printing: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("program changed on print and read back:\n%+v\n%+v", p, back)
		}
	})
}

func eventsEqual(a, b []trace.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}
