package contract

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

var (
	errSize    = errors.New("size")
	errUnknown = errors.New("unknown")
	errInter   = errors.New("interior")
	errDouble  = errors.New("double")
	errStream  = errors.New("stream")
	errClosed  = errors.New("closed")
)

func testContract() ContractState {
	return NewContract(&ContractConfig{Capacity: 16 * vmm.MiB, Granularity: 2 * vmm.MiB, Streams: []vmm.Stream{1},
		Errors: ContractErrors{InvalidSize: errSize, UnknownPointer: errUnknown, InteriorPtr: errInter,
			DoubleFree: errDouble, UnknownStream: errStream, Closed: errClosed}})
}

type cstep struct {
	in   ContractInput
	out  ContractOutput
	want bool
}

func runSteps(t *testing.T, s ContractState, steps []cstep) ContractState {
	t.Helper()
	for i, st := range steps {
		key := s.Key()
		ok, next, why := s.Explain(st.in, st.out)
		if s.Key() != key {
			t.Fatalf("step %d: Step mutated its input state", i)
		}
		if ok != st.want {
			t.Fatalf("step %d: %v -> %v: legal=%v, want %v (%s)", i, st.in, st.out, ok, st.want, why)
		}
		if ok {
			s = next
		}
	}
	return s
}

const p1, p2 = vmm.DevicePtr(0x10000), vmm.DevicePtr(0x20000)

func alloc(size uint64, s vmm.Stream) ContractInput {
	return ContractInput{Op: COpAlloc, Size: size, Stream: s}
}
func free(p vmm.DevicePtr) ContractInput { return ContractInput{Op: COpFree, Ptr: p} }

// C-NOOVERLAP (INV-NOOVERLAP at the API)
func TestContractNoOverlap(t *testing.T) {
	runSteps(t, testContract(), []cstep{
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true},
		{alloc(0x100, 0), ContractOutput{Ptr: p1 + 0x80}, false},
		{alloc(0x100, 0), ContractOutput{Ptr: p1 + 0x100}, true},
		{alloc(0x100, 0), ContractOutput{}, false}, // null pointer
		{alloc(0x100, 0), ContractOutput{Err: errors.New("driver")}, false},
		{alloc(0x100, 7), ContractOutput{Err: errStream}, true},
		{alloc(0x100, 7), ContractOutput{Ptr: p2}, false},
		{alloc(0, 0), ContractOutput{Err: errSize}, true},
		{alloc(32*vmm.MiB, 0), ContractOutput{Ptr: p2}, false},
		{alloc(32*vmm.MiB, 0), ContractOutput{Err: vmm.ErrOutOfMemory}, true},
	})
}

// C-FREE
func TestContractFree(t *testing.T) {
	s := runSteps(t, testContract(), []cstep{
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true},
		{free(p1 + 8), ContractOutput{Err: errInter}, true},
		{free(p1 + 8), ContractOutput{}, false},
		{free(p1), ContractOutput{Err: errUnknown}, false},
		{free(p1), ContractOutput{}, true},
		{free(p1), ContractOutput{Err: errDouble}, true},
		{free(p1), ContractOutput{}, false},
		{ContractInput{Op: COpRecordStream, Ptr: p1, Stream: 1}, ContractOutput{}, false},
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true}, // reuse
	})
	if len(s.Live) != 1 {
		t.Fatalf("want 1 live, got %v", s)
	}
}

// C-STREAM (INV-STREAM at the API): a range freed on stream 0 with work pending, recorded on stream 1.
func TestContractStream(t *testing.T) {
	base := []cstep{
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true},
		{ContractInput{Op: COpLaunch, Stream: 0}, ContractOutput{}, true},
		{free(p1), ContractOutput{}, true},
	}
	s := runSteps(t, testContract(), base)
	runSteps(t, s, []cstep{
		{alloc(0x100, 1), ContractOutput{Ptr: p1}, false},
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true},
	})
	runSteps(t, s, []cstep{
		{ContractInput{Op: COpComplete, Stream: 0}, ContractOutput{}, true},
		{alloc(0x100, 1), ContractOutput{Ptr: p1}, true},
	})
	// RecordStream: the free also waits for stream 1's work, even for reuse on stream 0.
	s = runSteps(t, testContract(), []cstep{
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true},
		{ContractInput{Op: COpRecordStream, Ptr: p1, Stream: 1}, ContractOutput{}, true},
		{ContractInput{Op: COpLaunch, Stream: 1}, ContractOutput{}, true},
		{free(p1), ContractOutput{}, true},
		{alloc(0x100, 0), ContractOutput{Ptr: p1 + 0x80}, false},
		{alloc(0x100, 0), ContractOutput{Ptr: p1 + 0x100}, true},
		{ContractInput{Op: COpCompleteAll}, ContractOutput{}, true},
		{alloc(0x100, 0), ContractOutput{Ptr: p1 + 0x80}, false}, // overlaps the live one at p1+0x100
		{alloc(0x80, 0), ContractOutput{Ptr: p1 + 0x80}, true},
	})
	if len(s.Freed) != 0 {
		t.Fatalf("freed ranges should be pruned after completion: %v", s)
	}
}

// C-OOM (INV-NOSPURIOUSOOM at the API)
func TestContractOOM(t *testing.T) {
	runSteps(t, testContract(), []cstep{
		{alloc(8*vmm.MiB, 0), ContractOutput{Err: vmm.ErrOutOfMemory}, false}, // empty allocator, fits
		{alloc(8*vmm.MiB, 0), ContractOutput{Ptr: p1}, true},
		{alloc(8*vmm.MiB, 0), ContractOutput{Err: vmm.ErrOutOfMemory}, true}, // something live: may fail
		{ContractInput{Op: COpInjectFault}, ContractOutput{}, true},
		{free(p1), ContractOutput{Err: errors.New("driver")}, true},
		{ContractInput{Op: COpClearFaults}, ContractOutput{}, true},
		{free(p1), ContractOutput{}, true},
		{alloc(16*vmm.MiB, 0), ContractOutput{Err: vmm.ErrOutOfMemory}, false},
	})
}

func TestContractClose(t *testing.T) {
	runSteps(t, testContract(), []cstep{
		{alloc(0x100, 0), ContractOutput{Ptr: p1}, true},
		{ContractInput{Op: COpClose}, ContractOutput{}, true},
		{alloc(0x100, 0), ContractOutput{Ptr: p2}, false},
		{alloc(0x100, 0), ContractOutput{Err: errClosed}, true},
		{free(p1), ContractOutput{Err: errClosed}, true},
	})
}

// Step is pure: branching twice from one state (as porcupine does) leaves the state and the first branch
// unchanged, also when the freed list has spare capacity that an append could write into.
func TestContractStepIsPure(t *testing.T) {
	s := testContract()
	var ptrs []vmm.DevicePtr
	for i := 0; i < 6; i++ {
		p := vmm.DevicePtr(0x10000 * (i + 1))
		ptrs = append(ptrs, p)
		_, s = s.Step(alloc(0x100, 0), ContractOutput{Ptr: p})
	}
	_, s = s.Step(ContractInput{Op: COpLaunch, Stream: 0}, ContractOutput{})
	for _, p := range ptrs[:3] {
		_, s = s.Step(free(p), ContractOutput{})
	}
	base := s.Key()
	_, a := s.Step(free(ptrs[5]), ContractOutput{})
	keyA := a.Key()
	_, b := s.Step(free(ptrs[3]), ContractOutput{})
	_, _ = b.Step(free(ptrs[4]), ContractOutput{})
	if s.Key() != base {
		t.Fatalf("Step changed its input state:\n%s\n%s", base, s.Key())
	}
	if a.Key() != keyA {
		t.Fatalf("a sibling branch changed a state derived earlier:\n%s\n%s", keyA, a.Key())
	}
}

// Property (issue 14 item 7): an Alloc on an unknown stream must fail with ErrUnknownStream, except that
// under an injected driver fault any error is legal (the stream check itself may be the faulted call); it
// never succeeds.
func TestContractUnknownStreamUnderFault(t *testing.T) {
	errDriver := errors.New("driver")
	const unknown = vmm.Stream(99)
	runSteps(t, testContract(), []cstep{
		{alloc(4096, unknown), ContractOutput{Err: errDriver}, false},
		{alloc(4096, unknown), ContractOutput{Err: errStream}, true},
		{ContractInput{Op: COpInjectFault}, ContractOutput{}, true},
		{alloc(4096, unknown), ContractOutput{Err: errDriver}, true},
		{alloc(4096, unknown), ContractOutput{Ptr: p1}, false},
		{ContractInput{Op: COpClearFaults}, ContractOutput{}, true},
		{alloc(4096, unknown), ContractOutput{Err: errDriver}, false},
	})
}

// Property (C-FREE-KIND): a Free of a pointer strictly inside a live allocation must fail with exactly
// ErrInteriorPtr; a pointer outside every live allocation may be unknown, interior or a double free.
func TestContractFreeKinds(t *testing.T) {
	runSteps(t, testContract(), []cstep{
		{alloc(0x1000, 0), ContractOutput{Ptr: p1}, true},
		{free(p1 + 0x10), ContractOutput{Err: errUnknown}, false},
		{free(p1 + 0x10), ContractOutput{Err: errDouble}, false},
		{free(p1 + 0x10), ContractOutput{Err: errInter}, true},
		{free(p2), ContractOutput{Err: errUnknown}, true},
		{free(p2), ContractOutput{Err: errDouble}, true},
		{free(p2), ContractOutput{}, false},
	})
}

// C-FORGET: ForgetStream of the default stream or of a forgotten one is exactly ErrUnknownStream; after a
// forget, Alloc and RecordStream on the stream are ErrUnknownStream, Free of its blocks works, and what was
// freed before still waits for the work the stream had been given.
func TestContractForgetStream(t *testing.T) {
	forget := func(s vmm.Stream) ContractInput { return ContractInput{Op: COpForgetStream, Stream: s} }
	s := runSteps(t, testContract(), []cstep{
		{alloc(4096, 1), ContractOutput{Ptr: p1}, true},
		{alloc(4096, 1), ContractOutput{Ptr: p2}, true},
		{ContractInput{Op: COpLaunch, Stream: 1}, ContractOutput{}, true},
		{free(p1), ContractOutput{}, true},
		{forget(0), ContractOutput{}, false},                   // the default stream cannot be forgotten
		{forget(0), ContractOutput{Err: errSize}, false},       // and exactly ErrUnknownStream says so
		{forget(0), ContractOutput{Err: errStream}, true},      //
		{forget(1), ContractOutput{Err: errSize}, false},       // a known stream, no fault: succeeds
		{forget(1), ContractOutput{}, true},                    //
		{forget(1), ContractOutput{}, false},                   // forgotten already
		{forget(1), ContractOutput{Err: errStream}, true},      //
		{alloc(4096, 1), ContractOutput{Ptr: 0x30000}, false},  // unknown from now on
		{alloc(4096, 1), ContractOutput{Err: errSize}, false},  // exactly ErrUnknownStream
		{alloc(4096, 1), ContractOutput{Err: errStream}, true}, //
		{ContractInput{Op: COpRecordStream, Ptr: p2, Stream: 1}, ContractOutput{}, false},
		{alloc(4096, 0), ContractOutput{Ptr: p1}, false},                    // p1 still waits for stream 1's work
		{free(p2), ContractOutput{}, true},                                  // its blocks free as before
		{forget(7), ContractOutput{}, true},                                 // a stream the device does not know
		{forget(7), ContractOutput{Err: errStream}, true},                   // (forgotten now, either way unknown)
		{ContractInput{Op: COpComplete, Stream: 1}, ContractOutput{}, true}, // its pending work completes
		{alloc(4096, 0), ContractOutput{Ptr: p1}, true},                     // and then its memory is reusable
	})
	if len(s.Gone) != 2 {
		t.Fatalf("forgotten streams %v, want [1 7]", s.Gone)
	}
	runSteps(t, s, []cstep{{ContractInput{Op: COpClose}, ContractOutput{}, true}, {forget(2), ContractOutput{Err: errStream}, false},
		{forget(2), ContractOutput{Err: errClosed}, true}})
}

// C-FAILZERO: a failed Alloc returns the zero pointer, whatever the error: out of memory, a bad size, an
// unknown stream, a driver fault.
func TestContractFailedAllocReturnsZero(t *testing.T) {
	runSteps(t, testContract(), []cstep{
		{alloc(8*vmm.MiB, 0), ContractOutput{Ptr: p1}, true},
		{alloc(8*vmm.MiB, 0), ContractOutput{Ptr: p2, Err: vmm.ErrOutOfMemory}, false},
		{alloc(8*vmm.MiB, 0), ContractOutput{Err: vmm.ErrOutOfMemory}, true},
		{alloc(0, 0), ContractOutput{Ptr: p2, Err: errSize}, false},
		{alloc(vmm.MiB, 9), ContractOutput{Ptr: p2, Err: errStream}, false},
		{ContractInput{Op: COpInjectFault}, ContractOutput{}, true},
		{alloc(vmm.MiB, 0), ContractOutput{Ptr: p2, Err: errors.New("driver")}, false},
		{alloc(vmm.MiB, 0), ContractOutput{Err: errors.New("driver")}, true},
	})
}
