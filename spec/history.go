package spec

import (
	"fmt"
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// History is what INV-STREAM, INV-RELEASESAFE and INV-NOSPURIOUSOOM need beyond one View: the stream
// clock as the test drives it, and, for each physical byte freed while stream work that may still touch
// it was pending, the work that must complete before it is reused on another stream or unmapped.
//
// The harness owns the clock (it alone calls Launch and Complete on the simulated device) and tells the
// History: Launch(s) when it submits a unit of work to s, Completed(s) when all of s's work has completed.
// Around each allocator call it calls OnFree (before a Free, with the View before it) and OnAlloc (after a
// successful Alloc, with the View after it), and CheckRelease after every step.
//
// The clock counts only the test's own Launch units. Work the allocator itself submits (a wait on an event)
// is not counted; Completed(s) marks all of s's work done. So a checker never believes work completed that
// has not; it may believe work pending that a cross-stream wait completed (the engine does not use waits).
//
// A History is not safe for concurrent use. Its zero value is not usable; call NewHistory.
type History struct {
	launched map[vmm.Stream]uint64 // units launched on each stream, ever
	done     map[vmm.Stream]uint64 // units known completed. Invariant: done[s] <= launched[s]
	marks    []Mark                // physical byte ranges freed while work was pending
	// lazy are what INV-NOSPURIOUSOOM alone also counts as waiting: the frees made while a stream captured.
	// CUDA lets no event be recorded or queried then, so the engine (impl: SetCapturing) records such a
	// free's fence when it flushes the capture's deferred frees, and the block then waits for the work
	// launched on its streams up to the flush, not only up to the free. Until Flush a lazy mark is Deferred
	// (it waits for every stream in its Clock); Flush stamps it with the streams' launched units. INV-STREAM
	// and INV-RELEASESAFE never read them: they judge what the work at the free requires (marks).
	// Invariant: a Deferred lazy mark was made while capturing was true, and Flush ran with capturing false.
	lazy []Mark
	// replays are the physical bytes a CUDA graph's replay may still touch (Replay): the memory its pool
	// handed out, used by work on the replay's stream that the engine is never told of. Only INV-RELEASESAFE
	// reads them: within the living pool, reusing that memory is the graph owner's business (PyTorch's
	// graph pools are the same), but no release may take it from under the replay.
	replays   []Mark
	capturing bool // some stream captures (SetCapturing)
}

// Mark is a physical byte range freed while work that may use it was pending: it may be reused by an
// allocation on stream S only once, for every stream T != S in Clock, done[T] >= Clock[T]; it may be
// unmapped or released only once that holds for every T in Clock.
type Mark struct {
	Phys    PhysRange
	FreedOn vmm.Stream            // the allocation stream of the freed block
	Clock   map[vmm.Stream]uint64 // stream -> units launched on it at the free
	VA      vmm.Range             // the virtual range through which it was in use
	// Deferred (lazy marks only): freed during a capture and not flushed yet; Clock's values are not
	// stamped, and every stream in it counts as waited for.
	Deferred bool
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{launched: map[vmm.Stream]uint64{}, done: map[vmm.Stream]uint64{}}
}

// Launch records one unit of work submitted to s.
func (h *History) Launch(s vmm.Stream) { h.launched[s]++ }

// Completed records that every unit submitted to s so far has completed.
func (h *History) Completed(s vmm.Stream) {
	h.done[s] = h.launched[s]
	h.prune()
}

// CompletedAll records that all work on every stream has completed.
func (h *History) CompletedAll() {
	for s := range h.launched {
		h.done[s] = h.launched[s]
	}
	h.prune()
}

// SetCapturing tells the history whether some stream captures (a CUDA graph) now.
func (h *History) SetCapturing(on bool) { h.capturing = on }

// Flush tells the history that the engine has recorded the fences of the frees deferred during a capture
// (the capture ended, or an Alloc or EmptyCache ran with no stream capturing): each Deferred lazy mark now
// waits for the units launched on its streams so far. Without a capture it is a no-op for new frees.
func (h *History) Flush() {
	if h.capturing {
		return
	}
	for i := range h.lazy {
		m := &h.lazy[i]
		if !m.Deferred {
			continue
		}
		m.Deferred = false
		clock := map[vmm.Stream]uint64{}
		for st := range m.Clock {
			if h.Pending(st) > 0 {
				clock[st] = h.launched[st]
			}
		}
		m.Clock = clock
	}
	h.prune()
}

// LazyWaiting reports whether a block freed during a capture may still wait for work launched after its
// free (a lazy mark waits): the contract's "nothing live or waiting" then says nothing about an out of
// memory, and INV-NOSPURIOUSOOM, which counts the lazy marks, judges it alone.
func (h *History) LazyWaiting() bool { return len(h.lazy) > 0 }

// Replay records that the work just launched on s (Launch(s) came first) is a CUDA graph's replay: it may
// use every byte behind the virtual ranges its pool handed out (v is the View now), whatever the engine was
// told. INV-RELEASESAFE keeps those bytes backed until the work completes.
func (h *History) Replay(v View, ranges []vmm.Range, s vmm.Stream) {
	if h.Pending(s) == 0 {
		return
	}
	for _, r := range ranges {
		phys, _ := v.Device.Backing(r)
		for _, p := range phys {
			h.replays = append(h.replays, Mark{Phys: p, FreedOn: s, Clock: map[vmm.Stream]uint64{s: h.launched[s]},
				VA: vmm.Range{Base: p.VA, Size: p.Hi - p.Lo}})
		}
	}
}

// Pending returns the units launched on s not known to have completed.
func (h *History) Pending(s vmm.Stream) uint64 { return h.launched[s] - h.done[s] }

// Marks returns the outstanding marks (for reports and tests).
func (h *History) Marks() []Mark { return h.marks }

// OnFree records the free of the live allocation at ptr, given the View before the Free. It returns false
// if ptr is not live in before (nothing recorded).
func (h *History) OnFree(before View, ptr vmm.DevicePtr) bool {
	var a *Alloc
	for i := range before.Live {
		if before.Live[i].Ptr == ptr {
			a = &before.Live[i]
		}
	}
	if a == nil {
		return false
	}
	clock := map[vmm.Stream]uint64{}
	streams := append([]vmm.Stream{a.Stream}, a.Uses...)
	for _, s := range streams {
		if h.Pending(s) > 0 {
			clock[s] = h.launched[s]
		}
	}
	phys, _ := before.Device.Backing(a.Range())
	if h.capturing {
		all := map[vmm.Stream]uint64{}
		for _, s := range streams {
			all[s] = 0
		}
		for _, p := range phys {
			h.lazy = append(h.lazy, Mark{Phys: p, FreedOn: a.Stream, Clock: all, Deferred: true,
				VA: vmm.Range{Base: p.VA, Size: p.Hi - p.Lo}})
		}
	}
	if len(clock) == 0 {
		return true
	}
	for _, p := range phys {
		h.marks = append(h.marks, Mark{Phys: p, FreedOn: a.Stream, Clock: clock,
			VA: vmm.Range{Base: p.VA, Size: p.Hi - p.Lo}})
	}
	return true
}

// waitingFor returns the streams in m.Clock, other than except, whose work at the free has not completed.
func (h *History) waitingFor(m Mark, except vmm.Stream, exceptOK bool) []vmm.Stream {
	var ss []vmm.Stream
	for s, n := range m.Clock {
		if exceptOK && s == except {
			continue
		}
		if m.Deferred || h.done[s] < n {
			ss = append(ss, s)
		}
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
	return ss
}

// OnAlloc checks INV-STREAM for the allocation at ptr just made on stream s (after is the View after the
// Alloc): none of its physical bytes may be under a mark still waiting for work on a stream other than s.
// The marks it covers are then consumed (the new owner's own free will make new ones).
func (h *History) OnAlloc(after View, ptr vmm.DevicePtr, s vmm.Stream) []Violation {
	var a *Alloc
	for i := range after.Live {
		if after.Live[i].Ptr == ptr {
			a = &after.Live[i]
		}
	}
	if a == nil {
		return nil
	}
	phys, _ := after.Device.Backing(a.Range())
	var out []Violation
	for _, m := range h.marks {
		for _, p := range phys {
			if p.Handle == m.Phys.Handle && p.Lo < m.Phys.Hi && m.Phys.Lo < p.Hi {
				if w := h.waitingFor(m, s, true); len(w) > 0 {
					out = append(out, violation(InvStream,
						"allocation %v on stream %d reuses handle %d bytes [%#x, %#x) freed on stream %d while work on streams %v launched before the free has not completed",
						a.Range(), s, m.Phys.Handle, max(p.Lo, m.Phys.Lo), min(p.Hi, m.Phys.Hi), m.FreedOn, w))
				}
				break // one report a mark
			}
		}
	}
	h.marks = consumed(h.marks, phys)
	h.lazy = consumed(h.lazy, phys)
	return dedupe(out)
}

// consumed returns the marks of ms less the bytes of phys (a new allocation's backing: its owner's own free
// makes new marks).
func consumed(ms []Mark, phys []PhysRange) []Mark {
	var keep []Mark
	for _, m := range ms {
		parts := []Mark{m}
		for _, p := range phys {
			var next []Mark
			for _, q := range parts {
				if p.Handle != q.Phys.Handle || p.Hi <= q.Phys.Lo || q.Phys.Hi <= p.Lo {
					next = append(next, q)
					continue
				}
				if q.Phys.Lo < p.Lo {
					left := q
					left.Phys.Hi, left.VA.Size = p.Lo, p.Lo-q.Phys.Lo
					next = append(next, left)
				}
				if p.Hi < q.Phys.Hi {
					right := q
					right.Phys.Lo = p.Hi
					right.VA = vmm.Range{Base: q.VA.Base.Add(p.Hi - q.Phys.Lo), Size: q.Phys.Hi - p.Hi}
					next = append(next, right)
				}
			}
			parts = next
		}
		keep = append(keep, parts...)
	}
	return keep
}

// CheckRelease is INV-RELEASESAFE: a physical byte freed while work was pending stays backed (its handle
// alive, its virtual range still mapped to the same handle) until that work has completed: unmap and release
// do not wait for in-flight work (vmm rule 9).
func (h *History) CheckRelease(v View) []Violation {
	alive := map[vmm.Handle]bool{}
	for _, d := range v.Device.Handles {
		alive[d.Handle] = true
	}
	var out []Violation
	check := func(ms []Mark, what string) []Mark {
		var keep []Mark
		for _, m := range ms {
			w := h.waitingFor(m, 0, false)
			if len(w) == 0 {
				continue
			}
			switch {
			case !alive[m.Phys.Handle]:
				out = append(out, violation(InvReleaseSafe, "handle %d was released while work on streams %v that may use bytes [%#x, %#x) (%s stream %d) is pending",
					m.Phys.Handle, w, m.Phys.Lo, m.Phys.Hi, what, m.FreedOn))
				continue // report once
			case !mappedTo(v.Device, m.VA, m.Phys.Handle):
				out = append(out, violation(InvReleaseSafe, "%v (handle %d) was unmapped while work on streams %v that may use it (%s stream %d) is pending",
					m.VA, m.Phys.Handle, w, what, m.FreedOn))
				continue
			}
			keep = append(keep, m)
		}
		return keep
	}
	h.marks = check(h.marks, "freed on")
	h.replays = check(h.replays, "a graph replay on")
	return dedupe(out)
}

// prune drops marks (and lazy marks) whose work has all completed.
func (h *History) prune() {
	h.marks = h.pruned(h.marks)
	h.lazy = h.pruned(h.lazy)
	h.replays = h.pruned(h.replays)
}

func (h *History) pruned(ms []Mark) []Mark {
	keep := ms[:0]
	for _, m := range ms {
		if len(h.waitingFor(m, 0, false)) > 0 {
			keep = append(keep, m)
		}
	}
	return keep
}

// oomMarks are the marks INV-NOSPURIOUSOOM counts as waiting: the marks and the lazy marks.
func (h *History) oomMarks() [][]Mark { return [][]Mark{h.marks, h.lazy} }

// blockedFor reports whether any byte of handle hd is under a mark still waiting for work on a stream other
// than s.
func (h *History) blockedFor(hd vmm.Handle, s vmm.Stream) bool {
	for _, ms := range h.oomMarks() {
		for _, m := range ms {
			if m.Phys.Handle == hd && len(h.waitingFor(m, s, true)) > 0 {
				return true
			}
		}
	}
	return false
}

// blockedForeign reports whether any byte of handle hd is under a mark still waiting for some stream
// whose block was allocated on a stream other than s: that block lies in another stream's pool, which a
// stitch for s may take only once its work completed (a stream-ordered reuse on s needs s's own pool).
func (h *History) blockedForeign(hd vmm.Handle, s vmm.Stream) bool {
	for _, ms := range h.oomMarks() {
		for _, m := range ms {
			if m.Phys.Handle == hd && m.FreedOn != s && len(h.waitingFor(m, 0, false)) > 0 {
				return true
			}
		}
	}
	return false
}

// blockedAt reports whether any byte of handle hd is under a mark still waiting for any stream.
func (h *History) blockedAt(hd vmm.Handle) bool {
	for _, ms := range h.oomMarks() {
		for _, m := range ms {
			if m.Phys.Handle == hd && len(h.waitingFor(m, 0, false)) > 0 {
				return true
			}
		}
	}
	return false
}

func mappedTo(d Device, va vmm.Range, hd vmm.Handle) bool {
	for _, m := range overlappingDev(d.Mappings, va) {
		if m.Handle != hd || m.VA.Base > va.Base || m.VA.Limit() < va.Limit() {
			return false
		}
		return true
	}
	return false
}

func dedupe(vs []Violation) []Violation {
	seen := map[string]bool{}
	out := vs[:0]
	for _, v := range vs {
		if !seen[v.String()] {
			seen[v.String()] = true
			out = append(out, v)
		}
	}
	return out
}

// OOMRule says, for one policy, how much physical memory a request of size bytes may need beyond what it
// can take from the free cache; INV-NOSPURIOUSOOM flags an out-of-memory only when that much was available.
type OOMRule struct {
	// Need returns the physical bytes a request of size bytes needs (at least size rounded up to the
	// granularity; more for policies that must create whole segments of a fixed size).
	Need func(size uint64) uint64
	// WholeSegments: only chunks whose whole segment (every chunk mapped in the same reservation) is free
	// count as usable, for policies that release cached memory a segment at a time (the original GMLake
	// releases whole free pBlocks only).
	WholeSegments bool
	// GreedyStitch: the policy stitches only when cached free chunks alone cover the request (the original
	// GMLake: no growth mixed into a stitch). Chunks pending on the request's own stream then count only
	// when the usable cache alone covers the need; otherwise they would have to be released, which waits.
	GreedyStitch bool
	// StitchMin is the smallest request the policy may serve by stitching free chunks into a new view.
	// Chunks freed on the request's own stream with work still pending can serve only such requests
	// (stitched, stream-ordered on that stream); any other request would need them released, which must
	// wait for the work (INV-RELEASESAFE). 0 means no request stitches.
	StitchMin uint64
	_         struct{}
}

// GranularNeed is the rule for stitching policies: a request needs its size rounded up to the granularity;
// requests of at least stitchMin bytes may be stitched.
func GranularNeed(gran, stitchMin uint64) OOMRule {
	return OOMRule{Need: func(size uint64) uint64 { return vmm.AlignUp(max(size, 1), gran) }, StitchMin: stitchMin}
}

// SegmentNeed is the rule for the PyTorch policies: small requests (<= smallMax) need one small segment
// (smallSeg), medium requests (< largeMin) one large segment (largeSeg), larger ones their size rounded up
// to round (and, under expandable segments, to whole pages).
func SegmentNeed(smallMax, smallSeg, largeMin, largeSeg, round uint64) OOMRule {
	return OOMRule{Need: func(size uint64) uint64 {
		switch {
		case size <= smallMax:
			return smallSeg
		case size < largeMin:
			return max(largeSeg, vmm.AlignUp(size, round))
		}
		return vmm.AlignUp(size, round)
	}}
}

// CheckNoSpuriousOOM is INV-NOSPURIOUSOOM: Alloc(size, s) failed with out of memory, with no driver fault
// injected, in the state before. It was spurious if the device's free memory plus the usable free cache
// covered rule.Need(size): a chunk is usable for s when no live allocation is backed by any of its bytes
// and none of its bytes waits for work on a stream other than s (INV-STREAM forbids it; INV-RELEASESAFE
// forbids releasing it), nor, unless the request may be stitched (rule.StitchMin) and the block was
// allocated on s itself (so it lies in s's pool), on s itself.
func CheckNoSpuriousOOM(before View, h *History, rule OOMRule, size uint64, s vmm.Stream) []Violation {
	if size > before.Device.Capacity {
		return nil
	}
	busy := map[vmm.Handle]bool{}
	for _, a := range before.Live {
		phys, _ := before.Device.Backing(a.Range())
		for _, p := range phys {
			busy[p.Handle] = true
		}
	}
	stitch := rule.StitchMin > 0 && size >= rule.StitchMin
	need := rule.Need(size)
	usable, large, which := usableCache(before, h, rule, busy, s, stitch)
	free := before.Device.Free()
	spurious := need <= free+usable
	if stitch && rule.GreedyStitch && need > large {
		// Not a pure stitch from the large pool's cache: the policy grows, and chunks pending on s must
		// wait.
		usable, _, which = usableCache(before, h, rule, busy, s, false)
		spurious = need <= free+usable
	}
	if spurious {
		return []Violation{violation(InvNoSpuriousOOM,
			"Alloc(%d) on stream %d failed with out of memory, but it needs %s and the device had %s free plus %s of usable free cached chunks %v",
			size, s, vmm.FormatBytes(need), vmm.FormatBytes(free), vmm.FormatBytes(usable), which)}
	}
	return nil
}

// usableCache sums the chunks usable for a request on s (see CheckNoSpuriousOOM), in all and in the large
// pool alone; stitch says whether chunks of the large pool pending on s itself (freed from s's own pool)
// count (small-pool chunks are never stitched).
func usableCache(before View, h *History, rule OOMRule, busy map[vmm.Handle]bool, s vmm.Stream, stitch bool) (uint64, uint64, []string) {
	unusable := map[vmm.Handle]bool{}
	for _, c := range before.Chunks {
		st := stitch && !c.SmallPool
		unusable[c.Handle] = busy[c.Handle] || h != nil && (h.blockedFor(c.Handle, s) || !st && h.blockedAt(c.Handle) ||
			st && h.blockedForeign(c.Handle, s))
	}
	if rule.WholeSegments {
		// A segment is usable only as a whole: a chunk is unusable if any chunk mapped in the same
		// reservation is.
		res := before.Device.Reservations
		resOf := func(p vmm.DevicePtr) int {
			i := sort.Search(len(res), func(i int) bool { return res[i].Limit() > p })
			if i < len(res) && res[i].Contains(p) {
				return i
			}
			return -1
		}
		badRes := map[int]bool{}
		for _, m := range before.Device.Mappings {
			if unusable[m.Handle] || busy[m.Handle] {
				badRes[resOf(m.VA.Base)] = true
			}
		}
		for _, m := range before.Device.Mappings {
			if badRes[resOf(m.VA.Base)] {
				unusable[m.Handle] = true
			}
		}
	}
	var usable, large uint64
	var which []string
	for _, c := range before.Chunks {
		if !unusable[c.Handle] {
			usable += c.Size
			if !c.SmallPool {
				large += c.Size
			}
			if len(which) < 8 {
				which = append(which, fmt.Sprintf("handle %d (%s)", c.Handle, vmm.FormatBytes(c.Size)))
			}
		}
	}
	return usable, large, which
}

// String summarizes the history for failure reports.
func (h *History) String() string {
	return fmt.Sprintf("launched %v done %v, %d outstanding marks", h.launched, h.done, len(h.marks))
}
