package sim

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"

	"github.com/gmlake/gmlake/vmm"
)

// faults is the fault-injection schedule. It is deterministic: given the seed and the sequence of calls,
// the same calls fail. The random source is drawn only by calls of a kind with a probability set.
type faults struct {
	seen [vmm.NumCallKinds]uint64     // calls of each kind ever made (ResetCounters does not touch it)
	nth  [vmm.NumCallKinds][]nthFault // pending FailNth entries
	prob [vmm.NumCallKinds]probFault  // FailProb settings
	rng  *rand.Rand
}

type nthFault struct {
	at uint64 // fail the call whose seen count reaches at
	r  vmm.Result
}

type probFault struct {
	p float64
	r vmm.Result
}

func (f *faults) init(seed int64) { f.rng = rand.New(rand.NewSource(seed)) }

// check records one call of kind k and returns the result it must fail with, if any.
func (f *faults) check(k vmm.CallKind) (vmm.Result, bool) {
	f.seen[k]++
	for i, x := range f.nth[k] {
		if x.at == f.seen[k] {
			f.nth[k] = append(f.nth[k][:i:i], f.nth[k][i+1:]...)
			return x.r, true
		}
	}
	if p := f.prob[k]; p.p > 0 && f.rng.Float64() < p.p {
		return p.r, true
	}
	return vmm.Success, false
}

// injectedDetail is the Detail of the CallError an injected fault answers with.
const injectedDetail = "injected fault"

// Injected reports whether err is the answer of an injected fault (FailNth, FailProb), not the device's
// own: a judge may not hold the engine to what the device could have done (the engine cannot tell).
func Injected(err error) bool {
	var ce *vmm.CallError
	return errors.As(err, &ce) && ce.Detail == injectedDetail
}

// NoSuchEvent reports whether err is the device's refusal of an event call on an event that does not exist
// (never created, or destroyed already): the caller's misuse, unlike a stream the caller destroyed.
func NoSuchEvent(err error) bool {
	var ce *vmm.CallError
	return errors.As(err, &ce) && !Injected(err) && ce.Result == vmm.InvalidHandle &&
		strings.HasPrefix(ce.Detail, "event ") && strings.HasSuffix(ce.Detail, noSuchEvent)
}

func checkFault(k vmm.CallKind, r vmm.Result) {
	if k < 0 || k >= vmm.NumCallKinds {
		panic(fmt.Sprintf("model: fault on unknown call kind %d", k))
	}
	if r == vmm.Success {
		panic("model: a fault must fail with a Result other than Success")
	}
}

// FailNth makes the n-th next call of kind k (n >= 1; n == 1 is the very next one) fail with r, changing
// nothing. Several FailNth may be pending for one kind.
func (d *Device) FailNth(k vmm.CallKind, n int, r vmm.Result) {
	checkFault(k, r)
	if n < 1 {
		panic(fmt.Sprintf("model: FailNth(%v, %d): n must be >= 1", k, n))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f := &d.mu.faults
	f.nth[k] = append(f.nth[k], nthFault{at: f.seen[k] + uint64(n), r: r})
}

// FailProb makes every later call of kind k fail with r, changing nothing, with probability p (drawn from
// the random source seeded by DeviceConfig.Seed). p <= 0 turns it off.
func (d *Device) FailProb(k vmm.CallKind, p float64, r vmm.Result) {
	checkFault(k, r)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.faults.prob[k] = probFault{p: p, r: r}
}

// ClearFaults cancels every FailNth and FailProb. The random source keeps its position.
func (d *Device) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.faults.nth = [vmm.NumCallKinds][]nthFault{}
	d.mu.faults.prob = [vmm.NumCallKinds]probFault{}
}
