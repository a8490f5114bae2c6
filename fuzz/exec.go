package fuzz

// The executor: runs a program single-threaded through one policy of the engine on a fresh simulated
// device, checking after every step. The fuzz targets, the corpus tests, the reproducer of saved campaign
// failures and the minimizer all run programs through it.
//
// The judging is the harness's (ops.Env): each op is one Env step, which checks the answer against the
// allocator contract (contract.ContractState), every state invariant of the spec on the View after the step,
// and the history invariants (INV-STREAM, INV-RELEASESAFE, INV-NOSPURIOUSOOM). On top the executor adds
// what only the device's data can show: a pattern written into every allocation and verified before its
// free (pattern.go), and the device's own leak report after Close.
//
// It is tolerant: an operation about an ID that is not live (its allocation failed, or the minimizer removed
// it) is skipped, so any subsequence of a program is a program.

import (
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// ExecOptions tune the executor.
type ExecOptions struct {
	// Mutations switches on seeded engine bugs (tests proving the fuzzer bites).
	Mutations impl.Mutation
	// Probes is how many granules of a large allocation are probed when its pattern is verified; 0: 512.
	Probes int

	_ struct{}
}

// Failure is what went wrong running a program: where, and which check.
type Failure struct {
	Policy     string
	Step       int // index of the op in Program.Ops; -1 during setup; len(Ops) at the end (freeing, Close)
	Op         string
	Violations []Violation
}

// Inv returns the name of the first violated check (for comparing failures).
func (f *Failure) Inv() string {
	if len(f.Violations) == 0 {
		return ""
	}
	return f.Violations[0].Inv
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s, step %d (%s): ", f.Policy, f.Step, f.Op)
	for i, v := range f.Violations {
		if i == 8 {
			fmt.Fprintf(&b, "\n  ... %d more", len(f.Violations)-i)
			break
		}
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(v.String())
	}
	return b.String()
}

// ExecReport counts what a run did.
type ExecReport struct {
	Steps, Allocs, Frees, Errors int
}

// executor is the state of one run.
type executor struct {
	p       *Program
	opts    ExecOptions
	env     *ops.Env
	checker vmm.Stream // the stream the executor writes and reads patterns on (never the allocator's)
	live    map[uint64]*liveAlloc
	freed   map[uint64]vmm.DevicePtr
	nextBad int // ids for misuse calls, never bound by an alloc of the program
	rep     ExecReport
	buf     []byte
}

// Exec runs program p through policy on a fresh simulated device of p.Capacity bytes (0: an H200).
// It returns what it did and the first failure, if any.
func Exec(p *Program, policy string, opts ExecOptions) (rep ExecReport, fail *Failure) {
	if opts.Probes == 0 {
		opts.Probes = 512
	}
	x := &executor{p: p, opts: opts, live: make(map[uint64]*liveAlloc), freed: make(map[uint64]vmm.DevicePtr),
		nextBad: 1 << 40}
	step := -1
	defer func() {
		if r := recover(); r != nil {
			op := "setup"
			if step >= 0 && step < len(p.Ops) {
				op = p.Ops[step].String()
			}
			fail = &Failure{Policy: policy, Step: step, Op: op, Violations: []Violation{{CheckPanic,
				fmt.Sprintf("%v\n%s", r, debug.Stack())}}}
		}
		rep = x.rep
	}()
	if v := x.setup(policy); v != nil {
		return x.rep, &Failure{Policy: policy, Step: -1, Op: "setup", Violations: v}
	}
	for i, o := range p.Ops {
		step = i
		x.rep.Steps++
		if v := x.step(o); len(v) > 0 {
			return x.rep, &Failure{Policy: policy, Step: i, Op: o.String(), Violations: v}
		}
	}
	step = len(p.Ops)
	if v := x.finish(); len(v) > 0 {
		return x.rep, &Failure{Policy: policy, Step: step, Op: "end (free all, Close, leak check)", Violations: v}
	}
	return x.rep, nil
}

func (x *executor) setup(policy string) []Violation {
	capacity := x.p.Capacity
	if capacity == 0 {
		capacity = sim.H200Capacity
	}
	env, err := ops.NewEnv(ops.Config{Policy: policy, Capacity: capacity, Streams: max(x.p.Streams, 1),
		Mutations: x.opts.Mutations, Seed: x.p.Seed})
	if err != nil {
		return []Violation{{CheckError, err.Error()}}
	}
	x.env = env
	if x.checker, err = env.Dev.CreateStream(); err != nil {
		return []Violation{{CheckError, "creating the checker's stream: " + err.Error()}}
	}
	return nil
}

// run steps the harness environment and converts its violations.
func (x *executor) run(o ops.Op) ops.StepResult {
	r := x.env.Step(o)
	if r.Err != nil {
		x.rep.Errors++
	}
	return r
}

func violations(vs []spec.Violation) []Violation {
	out := make([]Violation, len(vs))
	for i, v := range vs {
		out[i] = Violation{Inv: v.Inv, Msg: v.Msg}
	}
	return out
}

func (x *executor) stream(i int) int { return i % max(x.p.Streams, 1) }

func (x *executor) ptrLive(p vmm.DevicePtr) bool {
	for _, l := range x.live {
		if l.ptr == p {
			return true
		}
	}
	return false
}

func (x *executor) step(o Op) []Violation {
	switch o.Kind {
	case OpAlloc:
		if _, dup := x.live[o.ID]; dup || o.Size == 0 || o.ID >= 1<<40 {
			return nil
		}
		if _, dup := x.freed[o.ID]; dup {
			return nil
		}
		si := x.stream(o.Stream)
		r := x.run(ops.Op{Kind: ops.OpAlloc, ID: int(o.ID), Size: o.Size, Stream: si})
		if len(r.Violations) > 0 || r.Err != nil {
			return violations(r.Violations)
		}
		x.rep.Allocs++
		l := &liveAlloc{id: o.ID, ptr: r.Ptr, size: o.Size, stream: x.env.Streams[si], val: patternByte(o.ID)}
		x.live[o.ID] = l
		if err := fill(x.env.Dev, r.Ptr, o.Size, l.val, x.checker); err != nil {
			return []Violation{{CheckIntegrity, fmt.Sprintf("allocation %d: %v", o.ID, err)}}
		}
	case OpFree:
		l := x.live[o.ID]
		if l == nil {
			return nil
		}
		if err := verify(x.env.Dev, l.ptr, l.size, l.val, x.checker, x.env.Dev.Granularity(), x.opts.Probes, x.buf); err != nil {
			return []Violation{{CheckIntegrity, fmt.Sprintf("allocation %d before its free: %v", o.ID, err)}}
		}
		r := x.run(ops.Op{Kind: ops.OpFree, ID: int(o.ID)})
		if len(r.Violations) > 0 {
			return violations(r.Violations)
		}
		if r.Err == nil {
			x.rep.Frees++
			delete(x.live, o.ID)
			x.freed[o.ID] = l.ptr
		}
	case OpRecord:
		if x.live[o.ID] == nil {
			return nil
		}
		si := x.stream(o.Stream)
		r := x.run(ops.Op{Kind: ops.OpRecord, ID: int(o.ID), Stream: si})
		if len(r.Violations) > 0 || r.Err != nil {
			return violations(r.Violations)
		}
		// The other stream's use of the block: pending work there.
		return violations(x.run(ops.Op{Kind: ops.OpLaunch, Stream: si}).Violations)
	case OpLaunch:
		return violations(x.run(ops.Op{Kind: ops.OpLaunch, Stream: x.stream(o.Stream)}).Violations)
	case OpComplete:
		if o.Stream == AllStreams {
			return violations(x.run(ops.Op{Kind: ops.OpCompleteAll}).Violations)
		}
		return violations(x.run(ops.Op{Kind: ops.OpComplete, Stream: x.stream(o.Stream)}).Violations)
	case OpEmptyCache:
		return violations(x.run(ops.Op{Kind: ops.OpEmptyCache}).Violations)
	case OpFail:
		if o.Call < 0 || o.Call >= vmm.NumCallKinds || o.Call == vmm.CallMemset || o.Call == vmm.CallRead ||
			o.N < 1 || o.Result == vmm.Success {
			return nil
		}
		return violations(x.run(ops.Op{Kind: ops.OpFail, Call: o.Call, N: o.N, Result: o.Result}).Violations)
	case OpMisuse:
		return x.misuse(o)
	}
	return nil
}

// misuse makes a call the allocator must refuse, changing nothing: the contract judges the answer.
func (x *executor) misuse(o Op) []Violation {
	bad := func() int { x.nextBad++; return x.nextBad }
	var r ops.StepResult
	switch o.Misuse {
	case MisuseDoubleFree:
		p, ok := x.freed[o.ID]
		if !ok || x.ptrLive(p) {
			return nil // never freed, or the address was handed out again: not a double free
		}
		r = x.run(ops.Op{Kind: ops.OpFree, ID: int(o.ID)})
	case MisuseInterior:
		l := x.live[o.ID]
		if l == nil || l.size < 2 {
			return nil
		}
		r = x.run(ops.Op{Kind: ops.OpFreeInterior, ID: int(o.ID), Offset: 1 + (l.size-1)/2})
	case MisuseUnknownPtr:
		r = x.run(ops.Op{Kind: ops.OpFree, ID: bad()})
	case MisuseUnknownStream:
		id := bad()
		r = x.run(ops.Op{Kind: ops.OpAlloc, ID: id, Size: 4096, Stream: 1 << 20})
		if len(r.Violations) == 0 && r.Err == nil {
			r = x.run(ops.Op{Kind: ops.OpFree, ID: id})
		}
	case MisuseZeroSize:
		// Size 0 may be a valid allocation (the engine documents which); it must then free cleanly.
		id := bad()
		r = x.run(ops.Op{Kind: ops.OpAlloc, ID: id, Size: 0, Stream: 0})
		if len(r.Violations) == 0 && r.Err == nil {
			r = x.run(ops.Op{Kind: ops.OpFree, ID: id})
		}
	case MisuseRecordUnknown:
		r = x.run(ops.Op{Kind: ops.OpRecord, ID: bad(), Stream: 0})
	}
	return violations(r.Violations)
}

// finish frees what is live (unless CloseLive), then lets the harness complete all work, Close, and check
// INV-NOLEAK; then asks the device itself what it still holds.
func (x *executor) finish() []Violation {
	if v := x.run(ops.Op{Kind: ops.OpClearFaults}).Violations; len(v) > 0 {
		return violations(v)
	}
	if !x.p.CloseLive {
		ids := make([]uint64, 0, len(x.live))
		for id := range x.live {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			if v := x.step(Op{Kind: OpFree, ID: id}); len(v) > 0 {
				return v
			}
		}
	}
	out := violations(x.env.Finish())
	if lk := x.env.Dev.Leaks(); !lk.Empty() {
		out = append(out, Violation{CheckLeak, "after Close the device still holds memory: " + lk.String()})
	}
	if used := x.env.Dev.Used(); used != 0 {
		out = append(out, Violation{CheckLeak, fmt.Sprintf("after Close %d bytes are not returned to the device", used)})
	}
	return out
}
