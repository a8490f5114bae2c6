package conformance

// Driver conformance: the same random call sequences, legal and illegal, run on the reference device
// (sim.NewDevice) and on another vmm.Driver (the real GPU through impl/cudavmm), comparing every call's
// outcome (success or the CUDA result) and every byte read back. Any difference is a failure of the
// reference device, reported with the seed, the sequence, the call index, the call and both results.
//
// Handles, pointers, streams and events differ between devices, so a sequence names them symbolically
// ("handle #3", "reservation #2 + 4 MiB", "stream #1"); each device keeps its own table of concrete values.
//
// The generator is online: it draws the next call from its belief about the device state, which it
// updates from the observed outcome (a failed call changes nothing, vmm.Driver's contract). Each call also
// carries the outcome the vmm rules predict (Expect), so a sequence run on the model alone (CI) checks the
// model against the written rules, and a run on the GPU says which written rule the hardware contradicts.
//
// Each call carries the answer an H200 gives (Expect, measured; the comment after ConfOp says where that
// differs from vmm's package doc).
//
// Generator-side rules, kept so that the real GPU is never driven into undefined behaviour or a sticky
// fault that would kill its context:
//   - Memset and Read touch only whole mappings that SetAccess made accessible and whose handle was
//     initialised by a Memset (a fresh handle's bytes are undefined on the GPU; the model reads 0).
//   - Every illegal call breaks exactly one rule, so the expected error is unambiguous.
//   - Use of a released handle (rule 7) is undefined on the GPU, and on the H200 (driver 580) it crashes the
//     process: cuMemMap of a freed handle dereferences it (handles are driver pointers). Such calls (Op.UB)
//     run only with ModelOnlyFaults.
//   - Ranges never cross the end of a reservation (two reservations may be adjacent on the GPU).
//   - Before Unmap, Release, FreeAddress and Read, a driver that can (vmm.StreamSyncer) waits for all its streams,
//     which is what the model does with SyncStreams (and rule 9 asks of callers).
//   - Whether an event or stream has completed (QueryEvent, StreamQuery) is timing, not a rule: only the
//     error is compared.
//   - Calls that only the model survives (Memset without access: a GPU fault; use after release; destroying
//     the default stream) run only when
//     ConformanceConfig.ModelOnlyFaults is set, i.e. without a real device.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Op is one call of a conformance sequence, with symbolic operands.
type Op struct {
	Kind   vmm.CallKind
	Rule   string     // what the call exercises: "legal" or the rule it breaks
	H      int        // handle index (Create's result is the next index)
	R      int        // reservation index
	Off    uint64     // byte offset into reservation R (or, for FreeAddress, added to its base)
	Size   uint64     // bytes
	MapOff uint64     // Map's offset into the handle
	S      int        // stream index: 0 is the default stream, i > 0 the i-th created stream
	E      int        // event index
	Value  byte       // Memset's byte
	UB     bool       // undefined behaviour on the real driver: only failure vs success is compared
	Expect vmm.Result // what an H200 answers (measured; see below where that differs from vmm's doc)
}

// Where the H200 differs from vmm's package doc. Expect holds what the GPU answers; it differs from what vmm's package doc says (H200, driver
// 580.159.04, CUDA 13.0, 2026-11-29, TestConformanceRealRules over 12,000 calls; docs/gpu.md):
//   - cuMemMap with a size other than the handle's (smaller, larger, or not a granularity multiple) is
//     CUDA_ERROR_NOT_SUPPORTED, like a non-zero offset (the doc says INVALID_VALUE);
//   - cuMemUnmap of a range with unmapped holes succeeds and unmaps the whole mappings in it; of a range with
//     nothing mapped succeeds and does nothing (the doc says INVALID_VALUE); of part of a mapping is
//     INVALID_VALUE, as documented;
//   - cuMemSetAccess over part of one mapping is INVALID_VALUE: access is set on whole mappings only.

// String prints the call with its symbolic operands.
func (o Op) String() string {
	var a string
	switch o.Kind {
	case vmm.CallCreate, vmm.CallReserve:
		a = fmt.Sprintf("size=%s", sz(o.Size))
	case vmm.CallRelease:
		a = fmt.Sprintf("h#%d", o.H)
	case vmm.CallFreeAddress:
		a = fmt.Sprintf("r#%d+%s size=%s", o.R, sz(o.Off), sz(o.Size))
	case vmm.CallMap:
		a = fmt.Sprintf("r#%d+%s size=%s h#%d offset=%s", o.R, sz(o.Off), sz(o.Size), o.H, sz(o.MapOff))
	case vmm.CallUnmap, vmm.CallSetAccess:
		a = fmt.Sprintf("r#%d+%s size=%s", o.R, sz(o.Off), sz(o.Size))
	case vmm.CallMemset:
		a = fmt.Sprintf("r#%d+%d size=%d value=%#x s#%d", o.R, o.Off, o.Size, o.Value, o.S)
	case vmm.CallRead:
		a = fmt.Sprintf("r#%d+%d size=%d s#%d", o.R, o.Off, o.Size, o.S)
	case vmm.CallDestroyStream, vmm.CallStreamQuery:
		a = fmt.Sprintf("s#%d", o.S)
	case vmm.CallRecordEvent, vmm.CallStreamWaitEvent:
		a = fmt.Sprintf("e#%d s#%d", o.E, o.S)
	case vmm.CallQueryEvent, vmm.CallDestroyEvent:
		a = fmt.Sprintf("e#%d", o.E)
	}
	ub := ""
	if o.UB {
		ub = " (UB on GPU)"
	}
	return fmt.Sprintf("%s(%s) [%s%s; expect %s]", o.Kind.Short(), a, o.Rule, ub, o.Expect.Name())
}

func sz(n uint64) string {
	switch {
	case n == 0:
		return "0"
	case n%vmm.MiB == 0:
		return fmt.Sprintf("%dMiB", n/vmm.MiB)
	case n%vmm.KiB == 0:
		return fmt.Sprintf("%dKiB", n/vmm.KiB)
	}
	return fmt.Sprintf("%dB", n)
}

// Config sizes a conformance run.
type Config struct {
	Seed            int64
	Sequences       int    // default 20
	Calls           int    // calls per sequence, default 300
	MaxPhysical     uint64 // bound on live physical memory; default 2 GiB
	ModelOnlyFaults bool   // also calls that would fault a real GPU (only with no device under test)

	_ struct{}
}

// Outcome is what one device answered to one call.
type Outcome struct {
	Result vmm.Result
	Err    string // the error text, for the report
	Data   []byte // Read's bytes
}

func (o Outcome) String() string {
	if o.Err != "" {
		return o.Err
	}
	return o.Result.Name()
}

// Difference is a call where the two devices (or a device and the rules) disagree.
type Difference struct {
	Sequence int
	Seed     int64 // the sequence's seed: ConformanceConfig{Seed: Seed, Sequences: 1} replays it
	Index    int   // call index within the sequence
	Op       Op
	Ref, DUT Outcome // reference device, device under test (or the rules' prediction)
	What     string
	Prefix   []Op      // the calls before it, to reproduce
	Labels   [2]string // names of Ref and DUT when they are not the reference and the device under test
}

func (d Difference) String() string {
	l := d.Labels
	if l[0] == "" {
		l = [2]string{"reference", "device"}
	}
	return fmt.Sprintf("sequence %d (seed %d) call %d: %s: %s\n  %-9s: %v\n  %-9s: %v",
		d.Sequence, d.Seed, d.Index, d.Op, d.What, l[0], d.Ref, l[1], d.DUT)
}

// Report counts what ran and lists what differed.
type Report struct {
	Sequences, Calls, Skipped int
	Illegal                   int            // calls the rules predicted to fail
	ByKind                    map[string]int // calls per kind
	ByRule                    map[string]int // calls per rule exercised
	Differences               []Difference   // reference vs device under test (model failures)
	AgainstRules              []Difference   // reference vs the rules' prediction (with no device under test) or the device vs the rules
	UBOutcomes                map[string]int // "kind: reference result / device result" for UB calls
	Outcomes                  map[string]int // "rule: kind -> reference result [/ device result]": what each rule got
	CleanupErrors             []string
}

// Summary prints the counts in a few lines.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d sequences, %d calls (%d predicted illegal), %d skipped, %d differences, %d contradictions of the written rules\n",
		r.Sequences, r.Calls, r.Illegal, r.Skipped, len(r.Differences), len(r.AgainstRules))
	b.WriteString("by kind:")
	for _, k := range sortedKeys(r.ByKind) {
		fmt.Fprintf(&b, " %s=%d", k, r.ByKind[k])
	}
	b.WriteString("\nby rule:")
	for _, k := range sortedKeys(r.ByRule) {
		fmt.Fprintf(&b, " %s=%d", k, r.ByRule[k])
	}
	b.WriteString("\noutcomes (rule: call -> reference [/ device under test]):")
	for _, k := range sortedKeys(r.Outcomes) {
		if !strings.HasPrefix(k, "legal: ") || !strings.HasSuffix(k, "CUDA_SUCCESS / CUDA_SUCCESS") && !strings.HasSuffix(k, "-> CUDA_SUCCESS") {
			fmt.Fprintf(&b, "\n  %s: %d", k, r.Outcomes[k])
		}
	}
	if len(r.UBOutcomes) > 0 {
		b.WriteString("\nuse after release (UB on the GPU):")
		for _, k := range sortedKeys(r.UBOutcomes) {
			fmt.Fprintf(&b, " [%s]=%d", k, r.UBOutcomes[k])
		}
	}
	b.WriteString("\n")
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Belief: the generator's view of the device, in symbolic terms.
type cHandle struct {
	size     uint64
	released bool
	mappings int
	initDone bool // a Memset has covered the whole handle
	freedMem bool // released and unmapped: its memory is back
	content  []cRun
}

type cRun struct {
	lo, hi uint64
	v      byte
}

type cRes struct {
	size  uint64
	freed bool
}

type cMap struct {
	r         int
	off, size uint64
	h         int
	access    bool // the whole mapping is accessible
}

type belief struct {
	g       uint64
	handles []*cHandle
	res     []*cRes
	maps    []*cMap // live mappings
	streams []bool  // index i-1: stream #i alive
	events  []bool  // event #i alive (index i)
	phys    uint64  // live physical bytes
}

func (b *belief) mapsIn(r int) []*cMap {
	var out []*cMap
	for _, m := range b.maps {
		if m.r == r {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
}

// free reports whether [off, off+size) of reservation r has nothing mapped.
func (b *belief) free(r int, off, size uint64) bool {
	for _, m := range b.maps {
		if m.r == r && m.off < off+size && off < m.off+m.size {
			return false
		}
	}
	return true
}

func (b *belief) liveStreams() []int {
	out := []int{0}
	for i, ok := range b.streams {
		if ok {
			out = append(out, i+1)
		}
	}
	return out
}

func (b *belief) liveEvents() []int {
	var out []int
	for i, ok := range b.events {
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// accessibleRuns returns maximal runs of adjacent, accessible, initialised mappings: (r, off, size).
func (b *belief) accessibleRuns() [][3]uint64 {
	var out [][3]uint64
	for r, rs := range b.res {
		if rs.freed {
			continue
		}
		var cur *[3]uint64
		for _, m := range b.mapsIn(r) {
			ok := m.access && b.handles[m.h].initDone
			if ok && cur != nil && cur[1]+cur[2] == m.off {
				cur[2] += m.size
				continue
			}
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			if ok {
				cur = &[3]uint64{uint64(r), m.off, m.size}
			}
		}
		if cur != nil {
			out = append(out, *cur)
		}
	}
	return out
}

// paint writes v over [lo, hi) of h's believed contents.
func (h *cHandle) paint(lo, hi uint64, v byte) {
	var out []cRun
	for _, x := range h.content {
		if x.hi <= lo || x.lo >= hi {
			out = append(out, x)
			continue
		}
		if x.lo < lo {
			out = append(out, cRun{x.lo, lo, x.v})
		}
		if x.hi > hi {
			out = append(out, cRun{hi, x.hi, x.v})
		}
	}
	out = append(out, cRun{lo, hi, v})
	sort.Slice(out, func(i, j int) bool { return out[i].lo < out[j].lo })
	h.content = out
}

func (h *cHandle) read(lo uint64, dst []byte) {
	hi := lo + uint64(len(dst))
	for _, x := range h.content {
		a, c := max(x.lo, lo), min(x.hi, hi)
		for k := a; k < c; k++ {
			dst[k-lo] = x.v
		}
	}
}

// predictRead returns the bytes the rules predict for [off, off+n) of reservation r.
func (b *belief) predictRead(r int, off, n uint64) []byte {
	out := make([]byte, n)
	for _, m := range b.mapsIn(r) {
		a, c := max(m.off, off), min(m.off+m.size, off+n)
		if a < c {
			b.handles[m.h].read(a-m.off, out[a-off:c-off])
		}
	}
	return out
}

// gen draws the next call. pending holds calls the generator owes (initialising memsets).
type gen struct {
	rng       *rand.Rand
	b         *belief
	cfg       Config
	pending   []Op
	illegalOK bool
}

func (gn *gen) pick(n int) int { return gn.rng.IntN(n) }

func (gn *gen) handleSize() uint64 {
	g := gn.b.g
	switch x := gn.rng.IntN(20); {
	case x < 8:
		return g
	case x < 13:
		return 2 * g
	case x < 16:
		return 4 * g
	case x < 19:
		return 8 * g
	default:
		return 32 * g
	}
}

func (gn *gen) unreleased() []int {
	var out []int
	for i, h := range gn.b.handles {
		if !h.released {
			out = append(out, i)
		}
	}
	return out
}

func (gn *gen) liveRes() []int {
	var out []int
	for i, r := range gn.b.res {
		if !r.freed {
			out = append(out, i)
		}
	}
	return out
}

// next returns the next call. Weights favour legal calls; about a quarter break exactly one rule.
func (gn *gen) next() Op {
	if len(gn.pending) > 0 {
		op := gn.pending[0]
		gn.pending = gn.pending[1:]
		return op
	}
	b, g := gn.b, gn.b.g
	for {
		switch x := gn.rng.IntN(100); {
		case x < 10: // Create
			if gn.rng.IntN(8) == 0 {
				bad := []uint64{g + 4096, g / 2, 0}[gn.pick(3)]
				return Op{Kind: vmm.CallCreate, Rule: "create-misaligned-size", Size: bad, Expect: vmm.InvalidValue}
			}
			s := gn.handleSize()
			if b.phys+s > gn.cfg.MaxPhysical {
				continue
			}
			return Op{Kind: vmm.CallCreate, Rule: "legal", Size: s, H: len(b.handles)}
		case x < 15: // Release
			hs := gn.unreleased()
			if gn.cfg.ModelOnlyFaults && gn.rng.IntN(10) == 0 {
				var gone []int
				for i, h := range b.handles {
					if h.freedMem {
						gone = append(gone, i)
					}
				}
				if len(gone) > 0 {
					return Op{Kind: vmm.CallRelease, Rule: "release-after-release", H: gone[gn.pick(len(gone))], UB: true, Expect: vmm.InvalidHandle}
				}
			}
			if len(hs) == 0 {
				continue
			}
			return Op{Kind: vmm.CallRelease, Rule: "legal", H: hs[gn.pick(len(hs))]}
		case x < 22: // Reserve
			if gn.rng.IntN(8) == 0 {
				bad := []uint64{g + 4096, 0}[gn.pick(2)]
				return Op{Kind: vmm.CallReserve, Rule: "reserve-misaligned-size", Size: bad, Expect: vmm.InvalidValue}
			}
			if len(gn.liveRes()) >= 12 {
				continue
			}
			return Op{Kind: vmm.CallReserve, Rule: "legal", Size: uint64(1+gn.rng.IntN(16)) * g, R: len(b.res)}
		case x < 27: // FreeAddress
			rs := gn.liveRes()
			if len(rs) == 0 {
				continue
			}
			r := rs[gn.pick(len(rs))]
			size := b.res[r].size
			mapped := !b.free(r, 0, size)
			switch gn.rng.IntN(4) {
			case 0:
				if size > g {
					return Op{Kind: vmm.CallFreeAddress, Rule: "free-address-wrong-size", R: r, Size: size - g, Expect: vmm.InvalidValue}
				}
			case 1:
				if size > g {
					return Op{Kind: vmm.CallFreeAddress, Rule: "free-address-interior", R: r, Off: g, Size: size - g, Expect: vmm.InvalidValue}
				}
			}
			if mapped {
				return Op{Kind: vmm.CallFreeAddress, Rule: "free-address-mapped", R: r, Size: size, Expect: vmm.InvalidValue}
			}
			return Op{Kind: vmm.CallFreeAddress, Rule: "legal", R: r, Size: size}
		case x < 45: // Map
			if op, ok := gn.genMap(); ok {
				return op
			}
		case x < 55: // Unmap
			if op, ok := gn.genUnmap(); ok {
				return op
			}
		case x < 65: // SetAccess
			if op, ok := gn.genSetAccess(); ok {
				return op
			}
		case x < 75: // Memset
			runs := b.accessibleRuns()
			if gn.cfg.ModelOnlyFaults && gn.rng.IntN(10) == 0 {
				for _, m := range b.maps {
					if !m.access {
						return Op{Kind: vmm.CallMemset, Rule: "memset-without-access", R: m.r, Off: m.off, Size: m.size,
							Value: byte(gn.rng.IntN(256)), Expect: vmm.IllegalAddress}
					}
				}
			}
			if len(runs) == 0 {
				continue
			}
			rn := runs[gn.pick(len(runs))]
			off, n := gn.window(rn[1], rn[2], rn[2])
			ss := b.liveStreams()
			return Op{Kind: vmm.CallMemset, Rule: "legal", R: int(rn[0]), Off: off, Size: n, Value: byte(1 + gn.rng.IntN(255)), S: ss[gn.pick(len(ss))]}
		case x < 85: // Read, preferring a handle mapped more than once (aliasing)
			runs := b.accessibleRuns()
			if len(runs) == 0 {
				continue
			}
			rn := runs[gn.pick(len(runs))]
			for _, m := range b.maps {
				if b.handles[m.h].mappings > 1 && m.access && b.handles[m.h].initDone && gn.rng.IntN(2) == 0 {
					rn = [3]uint64{uint64(m.r), m.off, m.size}
					break
				}
			}
			off, n := gn.window(rn[1], rn[2], 64*vmm.KiB)
			ss := b.liveStreams()
			return Op{Kind: vmm.CallRead, Rule: "legal", R: int(rn[0]), Off: off, Size: n, S: ss[gn.pick(len(ss))]}
		case x < 87:
			return Op{Kind: vmm.CallMemInfo, Rule: "legal"}
		default: // streams and events
			if op, ok := gn.genStreamOp(); ok {
				return op
			}
		}
	}
}

// window picks [off, off+n) inside [lo, lo+size) with n <= maxN, often touching a granule boundary.
func (gn *gen) window(lo, size, maxN uint64) (uint64, uint64) {
	n := 1 + uint64(gn.rng.Int64N(int64(min(size, maxN))))
	if gn.rng.IntN(4) == 0 {
		n = min(size, maxN)
	}
	start := lo + uint64(gn.rng.Int64N(int64(size-n+1)))
	if gn.rng.IntN(3) == 0 && size > gn.b.g && n > 1 {
		// Straddle a granule boundary inside the run.
		bnd := lo + gn.b.g*uint64(1+gn.rng.Int64N(int64(size/gn.b.g-1+1)))
		if bnd > lo+n/2 && bnd-n/2+n <= lo+size {
			start = bnd - n/2
		}
	}
	return start, n
}

func (gn *gen) genMap() (Op, bool) {
	b, g := gn.b, gn.b.g
	rs := gn.liveRes()
	if len(rs) == 0 {
		return Op{}, false
	}
	// Use after release, only once the memory is freed.
	if gn.cfg.ModelOnlyFaults && gn.rng.IntN(20) == 0 {
		for i, h := range b.handles {
			if h.freedMem {
				r := rs[gn.pick(len(rs))]
				if b.res[r].size >= h.size && b.free(r, 0, h.size) {
					return Op{Kind: vmm.CallMap, Rule: "map-after-release", R: r, Size: h.size, H: i, UB: true, Expect: vmm.InvalidHandle}, true
				}
			}
		}
	}
	hs := gn.unreleased()
	if len(hs) == 0 {
		return Op{}, false
	}
	// Prefer handles already mapped (aliasing) a third of the time.
	h := hs[gn.pick(len(hs))]
	if gn.rng.IntN(3) == 0 {
		for _, i := range hs {
			if b.handles[i].mappings > 0 {
				h = i
				break
			}
		}
	}
	hsz := b.handles[h].size
	r := rs[gn.pick(len(rs))]
	rsz := b.res[r].size
	if rsz < hsz {
		return Op{}, false
	}
	var freeOffs, busyOffs []uint64
	for off := uint64(0); off+hsz <= rsz; off += g {
		if b.free(r, off, hsz) {
			freeOffs = append(freeOffs, off)
		} else {
			busyOffs = append(busyOffs, off)
		}
	}
	switch gn.rng.IntN(15) {
	case 0:
		if len(busyOffs) > 0 {
			return Op{Kind: vmm.CallMap, Rule: "map-over-mapped", R: r, Off: busyOffs[gn.pick(len(busyOffs))], Size: hsz, H: h, Expect: vmm.InvalidValue}, true
		}
	case 1:
		if len(freeOffs) > 0 && hsz > g {
			return Op{Kind: vmm.CallMap, Rule: "map-nonzero-offset", R: r, Off: freeOffs[0], Size: hsz - g, H: h, MapOff: g, Expect: vmm.NotSupported}, true
		}
		if len(freeOffs) > 0 {
			return Op{Kind: vmm.CallMap, Rule: "map-nonzero-offset", R: r, Off: freeOffs[0], Size: hsz, H: h, MapOff: g, Expect: vmm.NotSupported}, true
		}
	case 2:
		if len(freeOffs) > 0 && hsz > g {
			return Op{Kind: vmm.CallMap, Rule: "map-part-of-handle", R: r, Off: freeOffs[0], Size: hsz - g, H: h, Expect: vmm.NotSupported}, true
		}
	case 3:
		// Map more than the handle holds (the range itself is free and inside the reservation).
		for _, off := range freeOffs {
			if off+hsz+g <= rsz && b.free(r, off, hsz+g) {
				return Op{Kind: vmm.CallMap, Rule: "map-beyond-handle", R: r, Off: off, Size: hsz + g, H: h, Expect: vmm.NotSupported}, true
			}
		}
	case 5:
		// A pointer 64 KiB past a granule boundary, the range (rounded out) free and inside the reservation.
		for _, off := range freeOffs {
			if off+hsz+g <= rsz && b.free(r, off, hsz+g) {
				return Op{Kind: vmm.CallMap, Rule: "map-misaligned-ptr", R: r, Off: off + 64*vmm.KiB, Size: hsz, H: h, Expect: vmm.InvalidValue}, true
			}
		}
	case 4:
		if len(freeOffs) > 0 {
			return Op{Kind: vmm.CallMap, Rule: "map-misaligned-size", R: r, Off: freeOffs[0], Size: hsz - 4096, H: h, Expect: vmm.NotSupported}, true
		}
	}
	if len(freeOffs) == 0 {
		return Op{}, false
	}
	return Op{Kind: vmm.CallMap, Rule: "legal", R: r, Off: freeOffs[gn.pick(len(freeOffs))], Size: hsz, H: h}, true
}

func (gn *gen) genUnmap() (Op, bool) {
	b, g := gn.b, gn.b.g
	if len(b.maps) == 0 {
		return Op{}, false
	}
	m := b.maps[gn.pick(len(b.maps))]
	switch gn.rng.IntN(8) {
	case 0:
		if m.size > g {
			return Op{Kind: vmm.CallUnmap, Rule: "unmap-part-of-mapping", R: m.r, Off: m.off, Size: m.size - g, Expect: vmm.InvalidValue}, true
		}
	case 1:
		if m.size > g {
			return Op{Kind: vmm.CallUnmap, Rule: "unmap-part-of-mapping", R: m.r, Off: m.off + g, Size: m.size - g, Expect: vmm.InvalidValue}, true
		}
	case 2:
		// A range with a hole: this mapping plus the unmapped granule after it.
		end := m.off + m.size
		if end+g <= b.res[m.r].size && b.free(m.r, end, g) {
			return Op{Kind: vmm.CallUnmap, Rule: "unmap-with-hole", R: m.r, Off: m.off, Size: m.size + g}, true
		}
	case 3:
		// Nothing mapped at all.
		rsz := b.res[m.r].size
		for off := uint64(0); off < rsz; off += g {
			if b.free(m.r, off, g) {
				return Op{Kind: vmm.CallUnmap, Rule: "unmap-unmapped", R: m.r, Off: off, Size: g}, true
			}
		}
	case 4:
		// Several whole, adjacent mappings in one call.
		off, size := m.off, m.size
		for _, x := range b.mapsIn(m.r) {
			if x.off == off+size {
				size += x.size
			}
		}
		return Op{Kind: vmm.CallUnmap, Rule: "legal", R: m.r, Off: off, Size: size}, true
	}
	return Op{Kind: vmm.CallUnmap, Rule: "legal", R: m.r, Off: m.off, Size: m.size}, true
}

func (gn *gen) genSetAccess() (Op, bool) {
	b, g := gn.b, gn.b.g
	if len(b.maps) == 0 {
		return Op{}, false
	}
	m := b.maps[gn.pick(len(b.maps))]
	for _, x := range b.maps { // prefer a mapping without access
		if !x.access && gn.rng.IntN(2) == 0 {
			m = x
			break
		}
	}
	switch gn.rng.IntN(8) {
	case 0:
		end := m.off + m.size
		if end+g <= b.res[m.r].size && b.free(m.r, end, g) {
			return Op{Kind: vmm.CallSetAccess, Rule: "set-access-partly-mapped", R: m.r, Off: m.off, Size: m.size + g, Expect: vmm.InvalidValue}, true
		}
	case 1:
		rsz := b.res[m.r].size
		for off := uint64(0); off < rsz; off += g {
			if b.free(m.r, off, g) {
				return Op{Kind: vmm.CallSetAccess, Rule: "set-access-unmapped", R: m.r, Off: off, Size: g, Expect: vmm.InvalidValue}, true
			}
		}
	case 2:
		if m.size > g {
			return Op{Kind: vmm.CallSetAccess, Rule: "set-access-part-of-mapping", R: m.r, Off: m.off + g, Size: m.size - g, Expect: vmm.InvalidValue}, true
		}
	case 3:
		return Op{Kind: vmm.CallSetAccess, Rule: "set-access-misaligned-size", R: m.r, Off: m.off, Size: m.size - 4096, Expect: vmm.InvalidValue}, true
	case 4:
		// Over several adjacent mappings at once (a stitched range).
		off, size := m.off, m.size
		for _, x := range b.mapsIn(m.r) {
			if x.off == off+size {
				size += x.size
			}
		}
		return Op{Kind: vmm.CallSetAccess, Rule: "legal", R: m.r, Off: off, Size: size}, true
	}
	return Op{Kind: vmm.CallSetAccess, Rule: "legal", R: m.r, Off: m.off, Size: m.size}, true
}

func (gn *gen) genStreamOp() (Op, bool) {
	b := gn.b
	ss, es := b.liveStreams(), b.liveEvents()
	switch gn.rng.IntN(8) {
	case 0:
		if len(ss) < 4 {
			return Op{Kind: vmm.CallCreateStream, Rule: "legal", S: len(b.streams) + 1}, true
		}
	case 1:
		if len(ss) > 1 && gn.rng.IntN(3) == 0 {
			return Op{Kind: vmm.CallDestroyStream, Rule: "legal", S: ss[1+gn.pick(len(ss)-1)]}, true
		}
		if gn.cfg.ModelOnlyFaults {
			return Op{Kind: vmm.CallDestroyStream, Rule: "destroy-default-stream", S: 0, Expect: vmm.InvalidHandle}, true
		}
	case 2:
		return Op{Kind: vmm.CallStreamQuery, Rule: "legal", S: ss[gn.pick(len(ss))]}, true
	case 3:
		if len(es) < 5 {
			return Op{Kind: vmm.CallCreateEvent, Rule: "legal", E: len(b.events)}, true
		}
	case 4:
		if len(es) > 0 {
			return Op{Kind: vmm.CallRecordEvent, Rule: "legal", E: es[gn.pick(len(es))], S: ss[gn.pick(len(ss))]}, true
		}
	case 5:
		if len(es) > 0 {
			return Op{Kind: vmm.CallQueryEvent, Rule: "legal", E: es[gn.pick(len(es))]}, true
		}
	case 6:
		if len(es) > 0 {
			return Op{Kind: vmm.CallStreamWaitEvent, Rule: "legal", E: es[gn.pick(len(es))], S: ss[gn.pick(len(ss))]}, true
		}
	case 7:
		if len(es) > 0 && gn.rng.IntN(3) == 0 {
			return Op{Kind: vmm.CallDestroyEvent, Rule: "legal", E: es[gn.pick(len(es))]}, true
		}
	}
	return Op{}, false
}

// apply updates the belief after op succeeded on the devices.
func (gn *gen) apply(op Op, ok bool) {
	b := gn.b
	if !ok {
		return
	}
	switch op.Kind {
	case vmm.CallCreate:
		b.handles = append(b.handles, &cHandle{size: op.Size})
		b.phys += op.Size
	case vmm.CallRelease:
		h := b.handles[op.H]
		h.released = true
		if h.mappings == 0 && !h.freedMem {
			h.freedMem = true
			b.phys -= h.size
		}
	case vmm.CallReserve:
		b.res = append(b.res, &cRes{size: op.Size})
	case vmm.CallFreeAddress:
		b.res[op.R].freed = true
	case vmm.CallMap:
		b.maps = append(b.maps, &cMap{r: op.R, off: op.Off, size: op.Size, h: op.H})
		b.handles[op.H].mappings++
	case vmm.CallUnmap:
		kept := b.maps[:0]
		for _, m := range b.maps {
			if m.r == op.R && m.off >= op.Off && m.off+m.size <= op.Off+op.Size {
				h := b.handles[m.h]
				h.mappings--
				if h.released && h.mappings == 0 && !h.freedMem {
					h.freedMem = true
					b.phys -= h.size
				}
				continue
			}
			kept = append(kept, m)
		}
		b.maps = kept
	case vmm.CallSetAccess:
		var fresh []*cMap
		for _, m := range b.maps {
			if m.r == op.R && m.off >= op.Off && m.off+m.size <= op.Off+op.Size {
				if !m.access {
					fresh = append(fresh, m)
				}
				m.access = true
			}
		}
		for _, m := range fresh {
			if h := b.handles[m.h]; !h.initDone {
				h.initDone = true // the initialising memset is owed next
				gn.pending = append(gn.pending, Op{Kind: vmm.CallMemset, Rule: "legal-init", R: m.r, Off: m.off, Size: m.size,
					Value: byte(1 + gn.rng.IntN(255))})
			}
		}
	case vmm.CallMemset:
		for _, m := range b.mapsIn(op.R) {
			a, c := max(m.off, op.Off), min(m.off+m.size, op.Off+op.Size)
			if a < c {
				b.handles[m.h].paint(a-m.off, c-m.off, op.Value)
			}
		}
	case vmm.CallCreateStream:
		b.streams = append(b.streams, true)
	case vmm.CallDestroyStream:
		b.streams[op.S-1] = false
	case vmm.CallCreateEvent:
		b.events = append(b.events, true)
	case vmm.CallDestroyEvent:
		b.events[op.E] = false
	}
}

// ids is one device's table from symbolic operands to concrete values.
type ids struct {
	d       vmm.Driver
	handles []vmm.Handle
	res     []vmm.DevicePtr
	streams []vmm.Stream // index i-1: stream #i
	events  []vmm.Event
}

func (x *ids) stream(i int) vmm.Stream {
	if i == 0 {
		return vmm.DefaultStream
	}
	return x.streams[i-1]
}

func (x *ids) syncAll() {
	sy, ok := x.d.(vmm.StreamSyncer)
	if !ok {
		return
	}
	_ = sy.Synchronize(vmm.DefaultStream)
	for _, s := range x.streams {
		if s != 0 {
			_ = sy.Synchronize(s)
		}
	}
}

func outcome(err error) Outcome {
	if err == nil {
		return Outcome{Result: vmm.Success}
	}
	return Outcome{Result: vmm.ResultOf(err), Err: err.Error()}
}

// exec runs op on one device and records new concrete values.
func (x *ids) exec(op Op) Outcome {
	d := x.d
	switch op.Kind {
	case vmm.CallCreate:
		h, err := d.Create(op.Size)
		if err == nil {
			x.handles = append(x.handles, h)
		}
		return outcome(err)
	case vmm.CallRelease:
		x.syncAll()
		return outcome(d.Release(x.handles[op.H]))
	case vmm.CallReserve:
		p, err := d.Reserve(op.Size)
		if err == nil {
			x.res = append(x.res, p)
		}
		return outcome(err)
	case vmm.CallFreeAddress:
		x.syncAll()
		return outcome(d.FreeAddress(x.res[op.R].Add(op.Off), op.Size))
	case vmm.CallMap:
		return outcome(d.Map(x.res[op.R].Add(op.Off), op.Size, x.handles[op.H], op.MapOff))
	case vmm.CallUnmap:
		x.syncAll()
		return outcome(d.Unmap(x.res[op.R].Add(op.Off), op.Size))
	case vmm.CallSetAccess:
		return outcome(d.SetAccess(x.res[op.R].Add(op.Off), op.Size))
	case vmm.CallMemInfo:
		_, _, err := d.MemInfo()
		return outcome(err)
	case vmm.CallMemset:
		return outcome(d.Memset(x.res[op.R].Add(op.Off), op.Size, op.Value, x.stream(op.S)))
	case vmm.CallRead:
		x.syncAll()
		buf := make([]byte, op.Size)
		o := outcome(d.Read(x.res[op.R].Add(op.Off), buf, x.stream(op.S)))
		if o.Result == vmm.Success {
			o.Data = buf
		}
		return o
	case vmm.CallCreateStream:
		s, err := d.CreateStream()
		if err == nil {
			x.streams = append(x.streams, s)
		}
		return outcome(err)
	case vmm.CallDestroyStream:
		err := d.DestroyStream(x.stream(op.S))
		if err == nil {
			x.streams[op.S-1] = 0 // never synchronised again
		}
		return outcome(err)
	case vmm.CallStreamQuery:
		_, err := d.StreamQuery(x.stream(op.S))
		return outcome(err)
	case vmm.CallCreateEvent:
		e, err := d.CreateEvent()
		if err == nil {
			x.events = append(x.events, e)
		}
		return outcome(err)
	case vmm.CallRecordEvent:
		return outcome(d.RecordEvent(x.events[op.E], x.stream(op.S)))
	case vmm.CallQueryEvent:
		_, err := d.QueryEvent(x.events[op.E])
		return outcome(err)
	case vmm.CallStreamWaitEvent:
		return outcome(d.StreamWaitEvent(x.stream(op.S), x.events[op.E]))
	case vmm.CallDestroyEvent:
		return outcome(d.DestroyEvent(x.events[op.E]))
	}
	panic(fmt.Sprintf("harness: conformance op of unknown kind %v", op.Kind))
}

// cleanup releases everything the belief says the device holds; errors are returned, not fatal.
func (x *ids) cleanup(b *belief) []string {
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	x.syncAll()
	for _, m := range b.maps {
		note(x.d.Unmap(x.res[m.r].Add(m.off), m.size))
	}
	for i, h := range b.handles {
		if !h.released && i < len(x.handles) {
			note(x.d.Release(x.handles[i]))
		}
	}
	for i, r := range b.res {
		if !r.freed && i < len(x.res) {
			note(x.d.FreeAddress(x.res[i], r.size))
		}
	}
	for i, ok := range b.events {
		if ok && i < len(x.events) {
			note(x.d.DestroyEvent(x.events[i]))
		}
	}
	for i, ok := range b.streams {
		if ok && i < len(x.streams) {
			note(x.d.DestroyStream(x.streams[i]))
		}
	}
	return errs
}

// Run runs cfg.Sequences random sequences. Each sequence runs on a fresh reference device made
// by newRef(granularity) and, when dut is not nil, on dut (which must be empty of what the sequences
// create, and is left as found). Without dut, the reference is checked against the rules' predictions.
// The error is for setup failures only; disagreements are in the report.
func Run(cfg Config, newRef func(granularity uint64) vmm.Driver, dut vmm.Driver) (*Report, error) {
	if cfg.Sequences <= 0 {
		cfg.Sequences = 20
	}
	if cfg.Calls <= 0 {
		cfg.Calls = 300
	}
	if cfg.MaxPhysical == 0 {
		cfg.MaxPhysical = 2 * vmm.GiB
	}
	if dut != nil && cfg.ModelOnlyFaults {
		return nil, fmt.Errorf("harness: ModelOnlyFaults would fault the device under test; use it without one")
	}
	rep := &Report{ByKind: map[string]int{}, ByRule: map[string]int{}, UBOutcomes: map[string]int{}, Outcomes: map[string]int{}}
	var g uint64
	if dut != nil {
		g = dut.Granularity()
	} else {
		g = newRef(0).Granularity()
	}
	for seq := 0; seq < cfg.Sequences; seq++ {
		seed := cfg.Seed + int64(seq)
		runSequence(cfg, seq, seed, g, newRef, dut, rep)
	}
	return rep, nil
}

func runSequence(cfg Config, seq int, seed int64, g uint64, newRef func(uint64) vmm.Driver, dut vmm.Driver, rep *Report) {
	rep.Sequences++
	b := &belief{g: g}
	gn := &gen{rng: rand.New(rand.NewPCG(uint64(seed), 0x6d6c616b65)), b: b, cfg: cfg}
	ref := &ids{d: newRef(g)}
	var other *ids
	if dut != nil {
		other = &ids{d: dut}
	}
	var ops []Op
	diverged := false
	for i := 0; i < cfg.Calls && !diverged; i++ {
		op := gn.next()
		ops = append(ops, op)
		rep.Calls++
		rep.ByKind[op.Kind.Short()]++
		rep.ByRule[op.Rule]++
		if op.Expect != vmm.Success {
			rep.Illegal++
		}
		ro := ref.exec(op)
		var want []byte
		if op.Kind == vmm.CallRead {
			want = b.predictRead(op.R, op.Off, op.Size)
		}
		mkDiff := func(a, c Outcome, what string) Difference {
			return Difference{Sequence: seq, Seed: seed, Index: i, Op: op, Ref: a, DUT: c, What: what, Prefix: append([]Op(nil), ops[:len(ops)-1]...)}
		}
		exp := Outcome{Result: op.Expect}
		if other == nil {
			rep.Outcomes[fmt.Sprintf("%s: %s -> %s", op.Rule, op.Kind.Short(), ro.Result.Name())]++
			lab := [2]string{"device", "expected"}
			if !sameResult(op, ro.Result, op.Expect) {
				df := mkDiff(ro, exp, "the device answers otherwise than expected")
				df.Labels = lab
				rep.AgainstRules = append(rep.AgainstRules, df)
			} else if ro.Result == vmm.Success && want != nil && !bytes.Equal(ro.Data, want) {
				df := mkDiff(ro, exp, "the device read "+firstDiff(ro.Data, want))
				df.Labels = lab
				rep.AgainstRules = append(rep.AgainstRules, df)
			}
			gn.apply(op, ro.Result == vmm.Success)
			continue
		}
		do := other.exec(op)
		rep.Outcomes[fmt.Sprintf("%s: %s -> %s / %s", op.Rule, op.Kind.Short(), ro.Result.Name(), do.Result.Name())]++
		if op.UB {
			rep.UBOutcomes[fmt.Sprintf("%s: ref %s / dut %s", op.Rule, ro.Result.Name(), do.Result.Name())]++
		}
		switch {
		case !sameResult(op, ro.Result, do.Result):
			rep.Differences = append(rep.Differences, mkDiff(ro, do, "results differ"))
			diverged = true
		case ro.Result == vmm.Success && op.Kind == vmm.CallRead && !bytes.Equal(ro.Data, do.Data):
			rep.Differences = append(rep.Differences, mkDiff(ro, do, "data read back differs: reference vs device "+firstDiff(ro.Data, do.Data)))
			diverged = true
		default:
			if !sameResult(op, do.Result, op.Expect) {
				df := mkDiff(do, exp, "both devices answer otherwise than expected")
				df.Labels = [2]string{"both", "expected"}
				rep.AgainstRules = append(rep.AgainstRules, df)
			}
			if do.Result == vmm.Success && want != nil && !bytes.Equal(do.Data, want) {
				df := mkDiff(do, exp, "both devices read "+firstDiff(do.Data, want))
				df.Labels = [2]string{"both", "expected"}
				rep.AgainstRules = append(rep.AgainstRules, df)
			}
		}
		if diverged {
			break
		}
		gn.apply(op, ro.Result == vmm.Success)
	}
	// Tear down. Each device's table follows the belief (identical while the devices agree).
	errs := ref.cleanup(b)
	if other != nil {
		errs = append(errs, other.cleanup(b)...)
	}
	if !diverged {
		for _, e := range errs {
			rep.CleanupErrors = append(rep.CleanupErrors, fmt.Sprintf("sequence %d (seed %d): %s", seq, seed, e))
		}
		if md, ok := ref.d.(*sim.Device); ok && !md.Leaks().Empty() {
			rep.CleanupErrors = append(rep.CleanupErrors, fmt.Sprintf("sequence %d (seed %d): reference device after cleanup: %v", seq, seed, md.Leaks()))
		}
	}
}

// sameResult compares two results; for calls with undefined behaviour on the GPU only failure vs success.
func sameResult(op Op, a, c vmm.Result) bool {
	if op.UB {
		return (a == vmm.Success) == (c == vmm.Success)
	}
	return a == c
}

func firstDiff(a, c []byte) string {
	for i := range a {
		if i >= len(c) || a[i] != c[i] {
			var cv any = "nothing"
			if i < len(c) {
				cv = fmt.Sprintf("%#x", c[i])
			}
			return fmt.Sprintf("%#x at byte %d, other has %v", a[i], i, cv)
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(c))
}
