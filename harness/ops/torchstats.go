package ops

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// torchStatsJudge judges INV-TORCHSTATS from outside the engine: the counts come from the Env's own record of
// what it was given (live ids, requested sizes), from the public snapshot and from the View, never from the
// engine's counters of itself.
type torchStatsJudge struct {
	// seen holds, for each value, the highest Current seen after a step since the last reset-peak (the
	// Current at the reset then), so a Peak is at least it, and exactly it for the values that cannot peak
	// inside one call.
	seen impl.DeviceStats
	// base holds each value's Current at the last reset-acc (zero before any): allocated - freed =
	// current - base. heldBase: the physical handles held then, so num_device_alloc - num_device_free =
	// held - heldBase.
	base     impl.DeviceStats
	heldBase int
}

// note keeps the judge's model across a step that is not judged (light mode): the highest currents, and a
// reset's new starting point (held: the handles held, for reset-acc).
func (j *torchStatsJudge) note(k OpKind, got impl.DeviceStats, held int) {
	switch k {
	case OpResetPeak:
		j.seen = impl.DeviceStats{}
	case OpResetAcc:
		j.base, j.heldBase = currents(got), held
	}
	j.observe(got)
}

// currents returns got with only the Current of each value kept.
func currents(got impl.DeviceStats) impl.DeviceStats {
	var c impl.DeviceStats
	ga, ca := statArrays(&got), statArrays(&c)
	for k := range ga {
		for i := range ga[k] {
			ca[k][i].Current = ga[k][i].Current
		}
	}
	return c
}

// reset judges the statistics right after reset-peak or reset-acc (torch.cuda.reset_peak_memory_stats,
// reset_accumulated_memory_stats) and moves the judge's model to the reset's starting point: after
// reset-peak every peak equals its current, the engine's own peaks (the View's Stats) too, and the highest
// values seen start again from there; after reset-acc every allocated and freed total and the num_* counters
// are zero, and the accumulated values count from the currents and the handles held now. Other ops: nothing.
func (j *torchStatsJudge) reset(k OpKind, got impl.DeviceStats, after spec.View, held int) []spec.Violation {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	ga := statArrays(&got)
	switch k {
	case OpResetPeak:
		for n := range ga {
			for i := 0; i < 3; i++ {
				if g := ga[n][i]; g.Peak != g.Current {
					bad("%s[%d].peak = %d after reset-peak, current %d", statNames[n], i, g.Peak, g.Current)
				}
			}
		}
		st := after.Stats
		if st.PeakAllocated != st.Allocated || st.PeakRequested != st.Requested || st.PeakReserved != st.Reserved {
			bad("Stats peaks after reset-peak: allocated %d/%d requested %d/%d reserved %d/%d (peak/current)",
				st.PeakAllocated, st.Allocated, st.PeakRequested, st.Requested, st.PeakReserved, st.Reserved)
		}
		j.seen = impl.DeviceStats{}
	case OpResetAcc:
		for n := range ga {
			for i := 0; i < 3; i++ {
				if g := ga[n][i]; g.Allocated != 0 || g.Freed != 0 {
					bad("%s[%d] after reset-acc: allocated %d, freed %d (want 0, 0)", statNames[n], i, g.Allocated, g.Freed)
				}
			}
		}
		if got.NumAllocRetries != 0 || got.NumOOMs != 0 || got.NumDeviceAlloc != 0 || got.NumDeviceFree != 0 {
			bad("after reset-acc: num_alloc_retries %d num_ooms %d num_device_alloc %d num_device_free %d (want 0)",
				got.NumAllocRetries, got.NumOOMs, got.NumDeviceAlloc, got.NumDeviceFree)
		}
		j.base, j.heldBase = currents(got), held
	default:
		return nil
	}
	if len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvTorchStats, Msg: strings.Join(errs, "; ")}}
}

// statNames names the arrays of impl.DeviceStats in the order of statArrays.
var statNames = []string{"allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
	"active_bytes", "inactive_split_bytes", "requested_bytes"}

func statArrays(s *impl.DeviceStats) []*impl.StatArray {
	return []*impl.StatArray{&s.Allocation, &s.Segment, &s.Active, &s.InactiveSplit, &s.AllocatedBytes,
		&s.ReservedBytes, &s.ActiveBytes, &s.InactiveSplitBytes, &s.RequestedBytes}
}

// transientStat reports whether value k may peak inside one call and come back down before it returns: a
// pending block freed and its memory allocated again; a run cut in two while its chunks are unmapped one by
// one; pages mapped before a later page fails and the cache is released.
func transientStat(k int) bool {
	n := statNames[k]
	return n == "segment" || n == "reserved_bytes" || strings.HasPrefix(n, "inactive_split")
}

// check judges the statistics got and the snapshot snap the engine shows after a step, against the View v
// after it. live is the number of distinct live pointers the ops hold, requested the bytes they asked for,
// held the physical handles the View says the engine holds.
func (j *torchStatsJudge) check(got impl.DeviceStats, snap impl.TorchSnapshot, v spec.View, live int, requested uint64, held int) []spec.Violation {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	if c := got.Allocation[impl.StatAll].Current; c != int64(live) {
		bad("allocation.current = %d, the ops hold %d live allocations", c, live)
	}
	if c := got.RequestedBytes[impl.StatAll].Current; c != int64(requested) {
		bad("requested_bytes.current = %d, the ops' live allocations asked for %d", c, requested)
	}
	if a, r := got.AllocatedBytes[impl.StatAll].Current, got.RequestedBytes[impl.StatAll].Current; a < r {
		bad("allocated_bytes.current %d < requested_bytes.current %d", a, r)
	}
	if got.NumDeviceAlloc-got.NumDeviceFree != int64(held-j.heldBase) {
		bad("num_device_alloc %d - num_device_free %d != %d physical handles held - %d at the last reset-acc", got.NumDeviceAlloc, got.NumDeviceFree, held, j.heldBase)
	}
	j.observe(got)
	ga, sa, ba := statArrays(&got), statArrays(&j.seen), statArrays(&j.base)
	for k := range ga {
		for i := 0; i < 3; i++ {
			g := ga[k][i]
			if g.Current < 0 || g.Peak < g.Current {
				bad("%s[%d]: current %d, peak %d", statNames[k], i, g.Current, g.Peak)
			}
			if g.Peak < sa[k][i].Current || (!transientStat(k) && g.Peak != sa[k][i].Current) {
				bad("%s[%d].peak = %d, the highest current seen after a step is %d", statNames[k], i, g.Peak, sa[k][i].Current)
			}
			if g.Allocated-g.Freed != g.Current-ba[k][i].Current {
				bad("%s[%d]: allocated %d - freed %d != current %d - %d at the last reset-acc", statNames[k], i, g.Allocated, g.Freed, g.Current, ba[k][i].Current)
			}
		}
		s, l, all := ga[k][impl.StatSmall], ga[k][impl.StatLarge], ga[k][impl.StatAll]
		if s.Current+l.Current != all.Current || s.Allocated+l.Allocated != all.Allocated || s.Freed+l.Freed != all.Freed {
			bad("%s: all %+v != small %+v + large %+v", statNames[k], all, s, l)
		}
	}
	// inactive_split: the free pBlocks with a mapped neighbour in their segment (PyTorch's is_split), counted
	// from the View: a View lists the mapped pBlocks, so a neighbour is one that ends where the block starts,
	// or starts where it ends, in the same reservation.
	n, bytes := splitInactive(v)
	for p := impl.StatSmall; p <= impl.StatLarge; p++ {
		if c, b := got.InactiveSplit[p].Current, got.InactiveSplitBytes[p].Current; c != n[p] || b != bytes[p] {
			bad("inactive_split[%d] = %d (%d B), the View has %d free pBlocks (%d B) beside a mapped one", p, c, b, n[p], bytes[p])
		}
	}
	errs = append(errs, snapshotAgrees(snap, got, heldOrphans(v))...)
	if len(errs) == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvTorchStats, Msg: strings.Join(errs, "; ")}}
}

// observe notes the statistics after a step that is not judged (an Env in light mode replays explored
// prefixes without checks), so that a later peak is judged against every value the engine held.
func (j *torchStatsJudge) observe(got impl.DeviceStats) {
	ga, sa := statArrays(&got), statArrays(&j.seen)
	for k := range ga {
		for i := range ga[k] {
			sa[k][i].Current = max(sa[k][i].Current, ga[k][i].Current)
		}
	}
}

// heldOrphans returns, per pool, the bytes of v's orphan chunks: handles the engine gave up whose release
// failed past the retries, unmapped while the cache was given back (spec/FINDINGS.md F11) or new handles of a
// failed step's undo (F17). The device still holds them, so memory_stats' reserved_bytes counts them, as
// PyTorch's does (unmap_block lowers it only after the release), while no segment of memory_snapshot shows
// them.
func heldOrphans(v spec.View) (bytes [3]int64) {
	for _, c := range v.Chunks {
		if c.Orphan {
			p := impl.StatLarge
			if c.SmallPool {
				p = impl.StatSmall
			}
			bytes[p] += int64(c.Size)
		}
	}
	return bytes
}

// snapshotAgrees checks that torch.cuda.memory_snapshot() counts what memory_stats() counts, per pool: the
// segments' sizes (and the held orphans' bytes, orphans) are the reserved bytes, their active_allocated
// blocks the allocated bytes, active blocks the active bytes, the requests the requested bytes; blocks tile
// their segment in address order.
func snapshotAgrees(snap impl.TorchSnapshot, st impl.DeviceStats, orphans [3]int64) []string {
	var errs []string
	var reserved, allocated, active, requested, segments [3]int64
	reserved = orphans
	// PyTorch's snapshot lists segments by address (its segment list is walked in address order, and
	// memory_viz and the trace tools rely on it): so does ours, and the stitched blocks too.
	if !slices.IsSortedFunc(snap.Segments, func(x, y impl.TorchSegment) int { return cmp.Compare(x.Addr, y.Addr) }) {
		errs = append(errs, "snapshot segments are not in address order")
	}
	if !slices.IsSortedFunc(snap.Stitched, func(x, y impl.TorchStitched) int { return cmp.Compare(x.Addr, y.Addr) }) {
		errs = append(errs, "snapshot stitched blocks are not in address order")
	}
	for _, seg := range snap.Segments {
		p := impl.StatSmall
		if seg.Large {
			p = impl.StatLarge
		}
		segments[p]++
		reserved[p] += int64(seg.Size)
		at := seg.Addr
		for _, b := range seg.Blocks {
			if b.Addr != at {
				errs = append(errs, fmt.Sprintf("snapshot segment %v: block at %v, want %v", seg.Addr, b.Addr, at))
			}
			at = b.Addr.Add(b.Size)
			switch b.State {
			case impl.TorchActiveAllocated:
				allocated[p] += int64(b.Size)
				active[p] += int64(b.Size)
			case impl.TorchActivePending:
				active[p] += int64(b.Size)
			}
			requested[p] += int64(b.Requested)
		}
		if at != seg.Addr.Add(seg.Size) {
			errs = append(errs, fmt.Sprintf("snapshot segment %v of %s: its blocks end at %v", seg.Addr, vmm.FormatBytes(seg.Size), at))
		}
	}
	for _, sb := range snap.Stitched {
		requested[impl.StatLarge] += int64(sb.Requested)
	}
	for p := impl.StatSmall; p <= impl.StatLarge; p++ {
		if segments[p] != st.Segment[p].Current || reserved[p] != st.ReservedBytes[p].Current ||
			allocated[p] != st.AllocatedBytes[p].Current || active[p] != st.ActiveBytes[p].Current ||
			requested[p] != st.RequestedBytes[p].Current {
			errs = append(errs, fmt.Sprintf("snapshot pool %d: segments %d reserved %d allocated %d active %d requested %d; "+
				"memory_stats %d %d %d %d %d", p, segments[p], reserved[p], allocated[p], active[p], requested[p],
				st.Segment[p].Current, st.ReservedBytes[p].Current, st.AllocatedBytes[p].Current,
				st.ActiveBytes[p].Current, st.RequestedBytes[p].Current))
		}
	}
	return errs
}

// splitInactive counts, per pool (impl.StatSmall, impl.StatLarge), the free pBlocks of v that share their
// reservation with an adjacent mapped pBlock, and their bytes.
func splitInactive(v spec.View) (n, bytes [3]int64) {
	var pb []spec.Block
	for _, b := range v.Blocks {
		if !b.Stitched {
			pb = append(pb, b)
		}
	}
	slices.SortFunc(pb, func(x, y spec.Block) int { return cmp.Compare(x.Range.Base, y.Range.Base) })
	resv := func(p vmm.DevicePtr) int {
		i, _ := slices.BinarySearchFunc(v.Reservations, p, func(r vmm.Range, p vmm.DevicePtr) int {
			if r.Limit() <= p {
				return -1
			}
			if r.Base > p {
				return 1
			}
			return 0
		})
		return i
	}
	for i, b := range pb {
		if b.State != spec.BlockFree {
			continue
		}
		r := resv(b.Range.Base)
		beside := i > 0 && pb[i-1].Range.Limit() == b.Range.Base && resv(pb[i-1].Range.Base) == r ||
			i+1 < len(pb) && b.Range.Limit() == pb[i+1].Range.Base && resv(pb[i+1].Range.Base) == r
		if beside {
			p := impl.StatLarge
			if b.SmallPool {
				p = impl.StatSmall
			}
			n[p]++
			bytes[p] += int64(b.Range.Size)
		}
	}
	return n, bytes
}
