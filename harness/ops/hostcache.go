package ops

// The host cache's stand-in (Config.HostCache): capi/hostcache.c is C, in front of the crossing into Go, so
// the Env plays its part over the C library's Go surface, with its rules: a free of an allocation the
// engine classed as cacheable (HostClass, from AllocHost's answer) is kept in a log instead of reaching the
// engine, a later request on the same stream whose size lies in its class takes it back (newest first)
// without the engine, and the next call that reaches the engine hands the log over first (Replay) before it
// runs. While a stream captures the cache stands aside; RecordStream takes the block out of it; Close
// forgets it. So the engine is judged as it is driven under libgmlake: lagging behind the frees the cache
// holds, and answering every op that reaches it with the log applied.

import (
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/vmm"
)

// Bounds of hostcache.c (HC_FREED, HC_LOG): past them a free replays the log first.
const (
	hostFreed = 32
	hostLog   = 256
)

type hostEnt struct {
	p      vmm.DevicePtr
	s      vmm.Stream
	lo, hi uint64
}

// hostStandIn is the cache's state. Invariants (hostcache.c's): every key of live was returned by an
// allocation with a nonempty class and not freed since; every entry of freed was freed after it was in
// live, and its free is in log; log holds what the cache served since the last replay, in order.
type hostStandIn struct {
	live  map[vmm.DevicePtr]hostEnt
	freed []hostEnt // oldest first
	log   []clib.HostOp
	// req: what the engine was last told each cacheable block was asked for (its allocation, or the last
	// hit replayed): a kept free is live there with it, and a hit not yet replayed still has it.
	req map[vmm.DevicePtr]uint64
}

func newHostStandIn() *hostStandIn {
	return &hostStandIn{live: map[vmm.DevicePtr]hostEnt{}, req: map[vmm.DevicePtr]uint64{}}
}

// applied notes that the engine applied the first n entries of log.
func (h *hostStandIn) applied(log []clib.HostOp, n int) {
	for _, l := range log[:min(n, len(log))] {
		if l.Size > 0 {
			h.req[l.Ptr] = l.Size
		} else {
			delete(h.req, l.Ptr)
		}
	}
}

// engineHeld maps each pointer the engine holds live to the size it was asked for, as the engine knows them:
// the ops' live allocations and, under Config.HostCache, what the log not yet handed over changes (a kept
// free is still live there, a hit still has its earlier request). What a caller reads from the engine
// (statistics, snapshots) comes after a replay in libgmlake; the judges that read the engine directly
// compare it with this.
func (e *Env) engineHeld() map[vmm.DevicePtr]uint64 {
	m := make(map[vmm.DevicePtr]uint64, len(e.live))
	if e.closed { // Close lets go of everything, even when a fault made it report an error
		return m
	}
	for id := range e.live {
		m[e.ptrs[id]] = e.size[id]
	}
	if h := e.hc; h != nil {
		for _, l := range h.log {
			if r, ok := h.req[l.Ptr]; ok {
				m[l.Ptr] = r
			}
		}
	}
	return m
}

// bypassed reports whether the cache stands aside now (a capture underway).
func (e *Env) hostBypassed() bool { return len(e.capturing) > 0 }

// hostServes reports whether op is one the cache answers without the engine: a free of a block it may keep
// (with room in its tables), or a default-pool allocation a kept block serves.
func (e *Env) hostServes(op Op) bool {
	h := e.hc
	if h == nil || e.hostBypassed() {
		return false
	}
	switch op.Kind {
	case OpFree:
		_, ok := h.live[e.Ptr(op.ID)]
		return ok && len(h.freed) < hostFreed && len(h.log) < hostLog
	case OpAlloc:
		return op.Pool == 0 && e.hostHit(op.Size, e.caller(op.Stream)) >= 0 && len(h.log) < hostLog
	}
	return false
}

// hostOwnsStep reports whether op leaves the cache alone: it makes no engine call (launch, complete, faults),
// or the cache serves it.
func (e *Env) hostOwnsStep(op Op) bool {
	switch op.Kind {
	case OpFail, OpClearFaults, OpLaunch, OpComplete, OpCompleteAll:
		return true
	}
	// A miss is handed the log before it runs (Replay, then AllocHost with none): libgmlake hands it over
	// inside AllocHost, in one call, but the judges of an allocation (best fit, stitching) compare it with
	// the engine's View from before it, which must show the cached frees applied. FuzzABI drives the C
	// cache's own AllocHost with a log.
	return e.hostServes(op)
}

// hostHit returns the index in freed of the newest kept block that serves size on s, -1 if none.
func (e *Env) hostHit(size uint64, s vmm.Stream) int {
	if size == 0 {
		return -1
	}
	for i := len(e.hc.freed) - 1; i >= 0; i-- {
		if f := e.hc.freed[i]; f.s == s && size >= f.lo && size <= f.hi {
			return i
		}
	}
	return -1
}

// hostFlush hands the log over (Replay) and forgets the kept frees, which are the engine's free blocks now.
func (e *Env) hostFlush() error {
	h := e.hc
	if h == nil || len(h.log) == 0 {
		return nil
	}
	log := h.log
	h.log, h.freed = nil, nil
	n, err := e.C.Replay(log)
	h.applied(log, n)
	if err != nil {
		clear(h.live) // as hostcache.c after a failed replay: the cache gives up its table
		return hostReplayError{n, len(log), err}
	}
	return nil
}

type hostReplayError struct {
	applied, of int
	err         error
}

func (r hostReplayError) Error() string {
	return fmt.Sprintf("the host cache's replay applied %d of %d entries: %v", r.applied, r.of, r.err)
}

func (r hostReplayError) Unwrap() error { return r.err }

// hostAlloc is an allocation on the default pool through the cache: a hit, or AllocHost with the log.
func (e *Env) hostAlloc(size uint64, i int) (vmm.DevicePtr, error) {
	h, s := e.hc, e.caller(i)
	if !e.hostBypassed() && len(h.log) < hostLog {
		if k := e.hostHit(size, s); k >= 0 {
			f := h.freed[k]
			h.freed = slices.Delete(h.freed, k, k+1)
			h.log = append(h.log, clib.HostOp{Ptr: f.p, Size: size})
			h.live[f.p] = f
			return f.p, nil
		}
	}
	log := h.log
	h.log, h.freed = nil, nil
	r, err := e.C.AllocHost(log, size, uintptr(s))
	h.applied(log, r.Replayed)
	if r.ReplayErr != nil {
		clear(h.live)
		return 0, hostReplayError{r.Replayed, len(log), r.ReplayErr}
	}
	if err == nil {
		h.req[r.Ptr] = size
	}
	if err == nil && r.Hi != 0 && !e.hostBypassed() {
		h.live[r.Ptr] = hostEnt{p: r.Ptr, s: s, lo: r.Lo, hi: r.Hi}
	}
	return r.Ptr, err
}

// hostFree is a free through the cache: kept, or handed to the engine.
func (e *Env) hostFree(p vmm.DevicePtr) (handled bool) {
	h := e.hc
	f, ok := h.live[p]
	delete(h.live, p)
	if !ok || e.hostBypassed() || len(h.freed) >= hostFreed || len(h.log) >= hostLog {
		return false
	}
	h.freed = append(h.freed, f)
	h.log = append(h.log, clib.HostOp{Ptr: p})
	return true
}
