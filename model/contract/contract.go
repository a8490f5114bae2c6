package contract

// The allocator contract: what ANY correct allocator must do, as a pure, deterministic state machine over
// what a caller can observe (pointers, sizes, streams, errors), with no knowledge of chunks, blocks or
// policies. It is the oracle of the harness: rapid runs it beside the engine step by step, porcupine checks
// concurrent histories against it, the explorer and the fuzzers replay it.
//
// ContractState is a value: Step never mutates its receiver or its inputs, so a checker may keep any state
// and branch from it (porcupine's requirement).
//
// The rules, by call (errors are matched with errors.Is against the kinds the engine exports; the contract
// takes them as parameters, ContractErrors, so that model does not import impl):
//   - Alloc(size, s): s must be a known stream, else ErrUnknownStream and nothing changes (or
//     ErrInvalidSize when the size is bad too: either error may be checked first). On success the
//     returned range [p, p+max(size,1)) is non-zero, lies within no live allocation (C-NOOVERLAP), and
//     reuses no virtual byte of a freed allocation that still waits for work on a stream other than s
//     (C-STREAM). A request larger than the device fails (out of memory or invalid size). Out of memory
//     is legal only if it is not spurious by the contract's own accounting (C-OOM): with nothing live and
//     nothing waiting for stream work, any request whose Footprint fits the device must succeed. Size 0 may
//     succeed (a unique pointer) or fail with ErrInvalidSize. Any other error only under an injected
//     driver fault.
//   - Free(p): p live: succeeds (under an injected fault it may fail, changing nothing); the freed range then
//     waits for the work launched so far on its stream and its RecordStream streams before another stream
//     may reuse it. p not live: fails with ErrUnknownPointer, ErrInteriorPtr or ErrDoubleFree, changing
//     nothing (C-FREE).
//   - RecordStream(p, s): p live and s known: succeeds and adds s to p's uses; otherwise an error, no change.
//   - EmptyCache: succeeds (fails only under an injected fault), changes nothing observable.
//   - Close: succeeds (under an injected fault it may fail); afterwards every call fails with ErrClosed.
//     C-CLOSE, that a Close returning no error left nothing on the device, needs the device's leak report:
//     harness/ops judges it.
//   - ForgetStream(s) (C-FORGET): the caller is about to destroy stream s. The default stream, or a stream
//     already forgotten: exactly ErrUnknownStream, nothing changes. A known stream: succeeds (under an
//     injected fault it may fail, changing nothing); from then on s is unknown (Alloc and RecordStream on it
//     are ErrUnknownStream), while the ranges freed before still wait for the work s had been given (the
//     caller gives it no more: Launch(s) is not called after it; Complete(s) still completes what it had).
//     A stream the device does not know: succeeds (the engine need not check it: destroying it is the
//     caller's business) or fails with ErrUnknownStream; it stays unknown. A stream that captures a CUDA
//     graph is refused with ErrStreamCapturing, changing nothing: the contract has no captures, so
//     harness/ops judges that clause (and does not step the contract).
//   - Launch(s), Complete(s), CompleteAll: the test's clock (work on streams); InjectFault, ClearFaults:
//     whether a driver fault may be pending. They always "succeed".

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gmlake/gmlake/vmm"
)

// ContractOp is the kind of a contract input.
type ContractOp uint8

// Contract operations.
const (
	COpAlloc ContractOp = iota
	COpFree
	COpRecordStream
	COpEmptyCache
	COpClose
	COpLaunch
	COpComplete
	COpCompleteAll
	COpInjectFault
	COpClearFaults
	COpForgetStream
)

var contractOpNames = []string{"alloc", "free", "record", "emptycache", "close", "launch", "complete",
	"completeall", "inject", "clearfaults", "forget"}

func (o ContractOp) String() string {
	if int(o) < len(contractOpNames) {
		return contractOpNames[o]
	}
	return fmt.Sprintf("ContractOp(%d)", o)
}

// ContractInput is one call.
type ContractInput struct {
	Op     ContractOp
	Size   uint64        // Alloc
	Stream vmm.Stream    // Alloc, RecordStream, Launch, Complete, ForgetStream
	Ptr    vmm.DevicePtr // Free, RecordStream
}

// ContractOutput is what the call returned.
type ContractOutput struct {
	Ptr vmm.DevicePtr // Alloc
	Err error
}

func (in ContractInput) String() string {
	switch in.Op {
	case COpAlloc:
		return fmt.Sprintf("alloc(%d, s%d)", in.Size, in.Stream)
	case COpFree:
		return fmt.Sprintf("free(%v)", in.Ptr)
	case COpRecordStream:
		return fmt.Sprintf("record(%v, s%d)", in.Ptr, in.Stream)
	case COpLaunch, COpComplete, COpForgetStream:
		return fmt.Sprintf("%v(s%d)", in.Op, in.Stream)
	}
	return in.Op.String() + "()"
}

func (out ContractOutput) String() string {
	if out.Err != nil {
		return "err: " + out.Err.Error()
	}
	if out.Ptr != 0 {
		return out.Ptr.String()
	}
	return "ok"
}

// ContractErrors are the error kinds the contract expects (the engine's sentinels, impl.Err...).
type ContractErrors struct {
	InvalidSize, UnknownPointer, InteriorPtr, DoubleFree, UnknownStream, Closed error
}

// ContractConfig parameterizes the contract. It is shared, read-only, by every state.
type ContractConfig struct {
	Capacity    uint64       // the device's physical bytes
	Granularity uint64       // the device's granularity
	Streams     []vmm.Stream // the streams that exist (DefaultStream is always known)
	Errors      ContractErrors
	// Footprint bounds the physical bytes a request of size bytes needs from an empty allocator; nil means
	// size rounded up to the granularity. Policies that create fixed-size segments pass a larger bound.
	Footprint func(size uint64) uint64
	_         struct{}

	_ struct{}
}

// ContractLive is one live allocation as the contract sees it.
type ContractLive struct {
	Ptr    vmm.DevicePtr
	Size   uint64
	Stream vmm.Stream
	Uses   []vmm.Stream // sorted, without Stream
}

func (l ContractLive) rng() vmm.Range { return vmm.Range{Base: l.Ptr, Size: max(l.Size, 1)} }

// ContractFreed is a freed virtual range still waiting for stream work: reusable on stream s only when
// every stream T != s in Wait has completed Wait[T] units.
type ContractFreed struct {
	Range vmm.Range
	Wait  []StreamPos // sorted by Stream
}

// StreamPos is a position in a stream's work: the first N units.
type StreamPos struct {
	Stream vmm.Stream
	N      uint64
}

// ContractState is the contract's state, a value. The zero value is not usable: call NewContract.
type ContractState struct {
	cfg      *ContractConfig
	Live     []ContractLive  // sorted by Ptr
	Freed    []ContractFreed // sorted by Range.Base
	Launched []StreamPos     // sorted by Stream
	Done     []StreamPos     // sorted by Stream
	Faulty   bool            // a driver fault may be pending
	Closed   bool
	// Gone are the streams ForgetStream forgot, sorted (C-FORGET): unknown from then on.
	Gone []vmm.Stream
}

// NewContract returns the initial state: nothing live, every stream idle.
func NewContract(cfg *ContractConfig) ContractState {
	return ContractState{cfg: cfg}
}

// Config returns the state's configuration.
func (s ContractState) Config() *ContractConfig { return s.cfg }

// ContractStep is Step as a function: porcupine's Step(state, input, output) (ok, next).
func ContractStep(s ContractState, in ContractInput, out ContractOutput) (bool, ContractState) {
	ok, next, _ := s.Explain(in, out)
	return ok, next
}

// Step returns whether out is a legal answer to in from s, and the state after it. s is not changed.
func (s ContractState) Step(in ContractInput, out ContractOutput) (bool, ContractState) {
	ok, next, _ := s.Explain(in, out)
	return ok, next
}

// Explain is Step with the reason an answer is illegal ("" when legal).
func (s ContractState) Explain(in ContractInput, out ContractOutput) (ok bool, next ContractState, why string) {
	fail := func(format string, args ...any) (bool, ContractState, string) {
		return false, s, fmt.Sprintf("%v -> %v: ", in, out) + fmt.Sprintf(format, args...)
	}
	e := s.cfg.Errors
	switch in.Op {
	case COpLaunch:
		n := s.clone()
		n.Launched = setPos(n.Launched, in.Stream, pos(s.Launched, in.Stream)+1)
		return true, n, ""
	case COpComplete:
		n := s.clone()
		n.Done = setPos(n.Done, in.Stream, pos(s.Launched, in.Stream))
		n.prune()
		return true, n, ""
	case COpCompleteAll:
		n := s.clone()
		n.Done = append([]StreamPos(nil), s.Launched...)
		n.prune()
		return true, n, ""
	case COpInjectFault, COpClearFaults:
		n := s.clone()
		n.Faulty = in.Op == COpInjectFault
		return true, n, ""
	}
	if s.Closed {
		if in.Op == COpClose {
			return true, s, "" // closing twice: any answer
		}
		if !errors.Is(out.Err, e.Closed) {
			return fail("every call after Close must fail with %v", e.Closed)
		}
		return true, s, ""
	}
	switch in.Op {
	case COpAlloc:
		if out.Err != nil && out.Ptr != 0 {
			return fail("C-FAILZERO: a failed Alloc returns the zero pointer (got %v with the error)", out.Ptr)
		}
		if !s.knownStream(in.Stream) {
			// Under an injected fault the engine may learn nothing about the stream (the stream check
			// itself may be the call that fails), so any error is legal then; success never is.
			badSize := (in.Size == 0 || in.Size > s.cfg.Capacity) && errors.Is(out.Err, e.InvalidSize) ||
				in.Size > s.cfg.Capacity && errors.Is(out.Err, vmm.ErrOutOfMemory) // as for a known stream
			if out.Err == nil {
				return fail("Alloc on stream %d, which does not exist, succeeded: want %v", in.Stream, e.UnknownStream)
			}
			if !errors.Is(out.Err, e.UnknownStream) && !badSize && !s.Faulty {
				return fail("stream %d does not exist: want %v, got %v", in.Stream, e.UnknownStream, out.Err)
			}
			return true, s, ""
		}
		if out.Err != nil {
			switch {
			case in.Size == 0 && errors.Is(out.Err, e.InvalidSize):
				return true, s, ""
			case in.Size > s.cfg.Capacity && (errors.Is(out.Err, e.InvalidSize) || errors.Is(out.Err, vmm.ErrOutOfMemory)):
				return true, s, ""
			case s.Faulty:
				return true, s, ""
			case errors.Is(out.Err, vmm.ErrOutOfMemory):
				if len(s.Live) == 0 && len(s.Freed) == 0 && s.footprint(in.Size) <= s.cfg.Capacity {
					return fail("C-OOM: out of memory with nothing live or waiting, for a request of %s (footprint %s) on a device of %s",
						vmm.FormatBytes(in.Size), vmm.FormatBytes(s.footprint(in.Size)), vmm.FormatBytes(s.cfg.Capacity))
				}
				return true, s, ""
			}
			return fail("Alloc of a valid size on a known stream may fail only with out of memory (or under an injected fault)")
		}
		r := vmm.Range{Base: out.Ptr, Size: max(in.Size, 1)}
		if out.Ptr == 0 {
			return fail("Alloc returned the null pointer without an error")
		}
		if in.Size > s.cfg.Capacity {
			return fail("Alloc of %d bytes succeeded on a device of %d", in.Size, s.cfg.Capacity)
		}
		for _, l := range s.Live {
			if l.rng().Overlaps(r) {
				return fail("C-NOOVERLAP: %v overlaps live %v (stream %d)", r, l.rng(), l.Stream)
			}
		}
		n := s.clone()
		n.Freed = nil
		for _, f := range s.Freed {
			if f.Range.Overlaps(r) {
				for _, w := range f.Wait {
					if w.Stream != in.Stream && pos(s.Done, w.Stream) < w.N {
						return fail("C-STREAM: %v on stream %d reuses freed %v while stream %d has completed %d of the %d units launched before the free",
							r, in.Stream, f.Range, w.Stream, pos(s.Done, w.Stream), w.N)
					}
				}
				// Keep the parts outside r.
				if f.Range.Base < r.Base {
					n.Freed = append(n.Freed, ContractFreed{Range: vmm.Range{Base: f.Range.Base, Size: uint64(r.Base - f.Range.Base)}, Wait: f.Wait})
				}
				if r.Limit() < f.Range.Limit() {
					n.Freed = append(n.Freed, ContractFreed{Range: vmm.Range{Base: r.Limit(), Size: uint64(f.Range.Limit() - r.Limit())}, Wait: f.Wait})
				}
				continue
			}
			n.Freed = append(n.Freed, f)
		}
		sort.Slice(n.Freed, func(i, j int) bool { return n.Freed[i].Range.Base < n.Freed[j].Range.Base })
		n.Live = insertLive(n.Live, ContractLive{Ptr: out.Ptr, Size: in.Size, Stream: in.Stream})
		return true, n, ""

	case COpFree:
		i := s.liveIndex(in.Ptr)
		if i < 0 {
			// C-FREE-KIND: a pointer strictly inside a live allocation is an interior free, exactly; any
			// other pointer is unknown or freed before (the engine may have forgotten which).
			if l, ok := s.liveContaining(in.Ptr); ok {
				if !errors.Is(out.Err, e.InteriorPtr) {
					return fail("C-FREE: %v lies inside live %v (stream %d): want %v, got %v", in.Ptr, l.rng(), l.Stream, e.InteriorPtr, out.Err)
				}
				return true, s, ""
			}
			if out.Err == nil || !(errors.Is(out.Err, e.UnknownPointer) || errors.Is(out.Err, e.InteriorPtr) || errors.Is(out.Err, e.DoubleFree)) {
				return fail("C-FREE: %v is not live: want %v, %v or %v", in.Ptr, e.UnknownPointer, e.InteriorPtr, e.DoubleFree)
			}
			return true, s, ""
		}
		if out.Err != nil {
			if s.Faulty {
				return true, s, ""
			}
			return fail("C-FREE: Free of live %v failed", in.Ptr)
		}
		l := s.Live[i]
		n := s.clone()
		n.Live = append(append([]ContractLive(nil), s.Live[:i]...), s.Live[i+1:]...)
		var wait []StreamPos
		for _, st := range append([]vmm.Stream{l.Stream}, l.Uses...) {
			if lp := pos(s.Launched, st); lp > pos(s.Done, st) {
				wait = setPos(wait, st, lp)
			}
		}
		if len(wait) > 0 {
			// A fresh slice: s.Freed's backing array is shared with s and every other state derived from
			// it, so appending to it (or sorting it in place) would change them (Step must be pure).
			freed := make([]ContractFreed, 0, len(s.Freed)+1)
			freed = append(append(freed, s.Freed...), ContractFreed{Range: l.rng(), Wait: wait})
			sort.Slice(freed, func(i, j int) bool { return freed[i].Range.Base < freed[j].Range.Base })
			n.Freed = freed
		}
		return true, n, ""

	case COpRecordStream:
		i := s.liveIndex(in.Ptr)
		if i < 0 || !s.knownStream(in.Stream) {
			if out.Err == nil {
				return fail("RecordStream of a pointer that is not live, or on an unknown stream, must fail")
			}
			return true, s, ""
		}
		if out.Err != nil {
			if s.Faulty {
				return true, s, ""
			}
			return fail("RecordStream of live %v on known stream %d failed", in.Ptr, in.Stream)
		}
		n := s.clone()
		n.Live = append([]ContractLive(nil), s.Live...)
		l := n.Live[i]
		if in.Stream != l.Stream {
			l.Uses = addStream(l.Uses, in.Stream)
		}
		n.Live[i] = l
		return true, n, ""

	case COpEmptyCache:
		if out.Err != nil && !s.Faulty {
			return fail("EmptyCache failed without an injected fault")
		}
		return true, s, ""

	case COpForgetStream:
		switch {
		case in.Stream == vmm.DefaultStream || s.gone(in.Stream):
			if !errors.Is(out.Err, e.UnknownStream) {
				return fail("C-FORGET: stream %d is the default stream or forgotten already: want exactly %v", in.Stream, e.UnknownStream)
			}
			return true, s, ""
		case !s.knownStream(in.Stream):
			if out.Err != nil && !errors.Is(out.Err, e.UnknownStream) && !s.Faulty {
				return fail("C-FORGET: stream %d does not exist: want success or %v", in.Stream, e.UnknownStream)
			}
		case out.Err != nil:
			if !s.Faulty {
				return fail("C-FORGET: ForgetStream of known stream %d failed without an injected fault", in.Stream)
			}
			return true, s, ""
		}
		if out.Err != nil {
			return true, s, ""
		}
		n := s.clone()
		n.Gone = addStream(s.Gone, in.Stream)
		return true, n, ""

	case COpClose:
		if out.Err != nil && !s.Faulty {
			return fail("Close failed without an injected fault")
		}
		n := s.clone()
		n.Closed = true
		n.Live = nil
		n.Freed = nil
		return true, n, ""
	}
	return fail("unknown operation")
}

func (s ContractState) footprint(size uint64) uint64 {
	if s.cfg.Footprint != nil {
		return s.cfg.Footprint(size)
	}
	g := s.cfg.Granularity
	if g == 0 {
		g = 2 * vmm.MiB
	}
	return vmm.AlignUp(max(size, 1), g)
}

func (s ContractState) knownStream(st vmm.Stream) bool {
	if st == vmm.DefaultStream {
		return true
	}
	if s.gone(st) {
		return false
	}
	for _, k := range s.cfg.Streams {
		if k == st {
			return true
		}
	}
	return false
}

// gone reports whether ForgetStream forgot st.
func (s ContractState) gone(st vmm.Stream) bool {
	for _, g := range s.Gone {
		if g == st {
			return true
		}
	}
	return false
}

// liveContaining returns the live allocation whose bytes [Ptr, Ptr+max(Size,1)) contain p, if any.
func (s ContractState) liveContaining(p vmm.DevicePtr) (ContractLive, bool) {
	for _, l := range s.Live {
		if l.rng().Contains(p) {
			return l, true
		}
	}
	return ContractLive{}, false
}

func (s ContractState) liveIndex(p vmm.DevicePtr) int {
	i := sort.Search(len(s.Live), func(i int) bool { return s.Live[i].Ptr >= p })
	if i < len(s.Live) && s.Live[i].Ptr == p {
		return i
	}
	return -1
}

// LiveAt returns the live allocation at p, if any.
func (s ContractState) LiveAt(p vmm.DevicePtr) (ContractLive, bool) {
	if i := s.liveIndex(p); i >= 0 {
		return s.Live[i], true
	}
	return ContractLive{}, false
}

// clone copies the slice headers; slices are replaced, never written in place, by Step.
func (s ContractState) clone() ContractState { return s }

// prune drops freed ranges no longer waiting for anything.
func (s *ContractState) prune() {
	var keep []ContractFreed
	for _, f := range s.Freed {
		for _, w := range f.Wait {
			if pos(s.Done, w.Stream) < w.N {
				keep = append(keep, f)
				break
			}
		}
	}
	s.Freed = keep
}

func pos(ps []StreamPos, s vmm.Stream) uint64 {
	for _, p := range ps {
		if p.Stream == s {
			return p.N
		}
	}
	return 0
}

// setPos returns a copy of ps with s at n.
func setPos(ps []StreamPos, s vmm.Stream, n uint64) []StreamPos {
	out := make([]StreamPos, 0, len(ps)+1)
	done := false
	for _, p := range ps {
		if p.Stream == s {
			p.N = n
			done = true
		}
		out = append(out, p)
	}
	if !done {
		out = append(out, StreamPos{s, n})
		sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	}
	return out
}

func insertLive(ls []ContractLive, l ContractLive) []ContractLive {
	out := make([]ContractLive, 0, len(ls)+1)
	i := sort.Search(len(ls), func(i int) bool { return ls[i].Ptr >= l.Ptr })
	out = append(out, ls[:i]...)
	out = append(out, l)
	return append(out, ls[i:]...)
}

func addStream(ss []vmm.Stream, s vmm.Stream) []vmm.Stream {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	out := append(append([]vmm.Stream(nil), ss...), s)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Key is a canonical text of the state: equal states have equal keys (porcupine's Equal, dedupe).
func (s ContractState) Key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "c%v f%v|", s.Closed, s.Faulty)
	for _, l := range s.Live {
		fmt.Fprintf(&b, "L%x:%d:%d:%v;", uint64(l.Ptr), l.Size, l.Stream, l.Uses)
	}
	for _, f := range s.Freed {
		fmt.Fprintf(&b, "F%v:%v;", f.Range, f.Wait)
	}
	fmt.Fprintf(&b, "|%v|%v|g%v", s.Launched, s.Done, s.Gone)
	return b.String()
}

// Equal reports whether two states are the same.
func (s ContractState) Equal(o ContractState) bool { return s.Key() == o.Key() }

// String describes the state for humans (porcupine's DescribeState).
func (s ContractState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d live", len(s.Live))
	for _, l := range s.Live {
		fmt.Fprintf(&b, "\n  %v +%d s%d uses %v", l.Ptr, l.Size, l.Stream, l.Uses)
	}
	for _, f := range s.Freed {
		fmt.Fprintf(&b, "\n  freed %v waits %v", f.Range, f.Wait)
	}
	if len(s.Gone) > 0 {
		fmt.Fprintf(&b, "\n  forgotten streams %v", s.Gone)
	}
	if s.Closed {
		b.WriteString("\n  closed")
	}
	return b.String()
}
