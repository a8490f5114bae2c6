package impl

// The engine's structural invariants, checked: what block.go and engine.go write on their fields, walked over
// the whole state. See doc.go for the design.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// CheckInvariants walks the engine's own data structures (segments, chunks, pBlocks, sBlocks, free sets,
// the pointer table, pending waits) and returns the first field invariant that does not hold, or nil. It
// is for checkers and tests, between calls: O(blocks + chunks), never on the allocation path. A closed
// allocator holds nothing and passes.
func (a *Allocator) CheckInvariants() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.checkInvariantsLocked()
}

// errInvariant wraps every report of CheckInvariants.
var errInvariant = errors.New("gmlake: engine invariant broken")

func (a *Allocator) checkInvariantsLocked() error {
	a.assertLocked()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errInvariant}, args...)...)
	}
	ids := map[uint64]bool{}
	inUse := map[*block]bool{}
	deferred := map[*block]bool{}
	for _, b := range a.deferred {
		deferred[b] = true
	}
	evRefs := map[*blockEvent]int{}
	inSets := map[*freeSet]int{}
	views := map[*chunk]int{}
	header := func(b *block, what string) error {
		if b.id == 0 || ids[b.id] {
			return fail("%s: id %d zero or not unique", what, b.id)
		}
		ids[b.id] = true
		inUse[b] = true
		if (b.p == nil) == (b.s == nil) || (b.p != nil && &b.p.block != b) || (b.s != nil && &b.s.block != b) {
			return fail("%s %d: p and s must be exactly one, pointing back", what, b.id)
		}
		if b.handedOut() && b.requested > b.size {
			return fail("%s %d: requested %d > size %d", what, b.id, b.requested, b.size)
		}
		if len(b.uses) > 0 && b.state == Free {
			return fail("%s %d: Free with RecordStream uses %v", what, b.id, b.uses)
		}
		for i, s := range b.uses {
			if s == b.stream || slices.Contains(b.uses[:i], s) {
				return fail("%s %d: uses %v repeat a stream or hold its own", what, b.id, b.uses)
			}
		}
		if (b.events > 0) != (b.state == Pending) && !(b.state == Pending && deferred[b]) {
			return fail("%s %d: %v with %d events", what, b.id, b.state, b.events)
		}
		if b.stamped && b.state != Pending {
			return fail("%s %d: stamped while %v", what, b.id, b.state)
		}
		if b.active && b.state != Pending {
			return fail("%s %d: counted active while %v", what, b.id, b.state)
		}
		if b.ev != nil {
			evRefs[b.ev]++
			if b.ev.id > a.evSeq {
				return fail("%s %d: event recorded as %d, after the last (%d)", what, b.id, b.ev.id, a.evSeq)
			}
		}
		if b.id > a.nextID || b.freeSeq > a.freeSeq {
			return fail("%s %d: id or free stamp %d ahead of the allocator's (%d, %d)", what, b.id, b.freeSeq, a.nextID, a.freeSeq)
		}
		return nil
	}

	for si, seg := range a.segs {
		if si > 0 && a.segs[si-1].base >= seg.base {
			return fail("segments not sorted by base at %d", seg.id)
		}
		var sum vmm.Bytes
		for i, c := range seg.chunks {
			if c.seg != seg || c.size == 0 || c.size%a.gran != 0 || c.off+c.size > seg.size {
				return fail("segment %d: chunk %d (off %d, %d B) misplaced", seg.id, c.h, c.off, c.size)
			}
			if i > 0 && seg.chunks[i-1].off+seg.chunks[i-1].size > c.off {
				return fail("segment %d: chunks not sorted and disjoint at off %d", seg.id, c.off)
			}
			if !seg.arena && c.off != sum {
				return fail("segment %d: fixed segment's chunks do not tile it (off %d)", seg.id, c.off)
			}
			sum += c.size
		}
		if sum != seg.mapped || (!seg.arena && sum != seg.size) {
			return fail("segment %d: mapped %d, chunks add up to %d (size %d)", seg.id, seg.mapped, sum, seg.size)
		}
		var unmapped []*pBlock
		want := seg.base
		var prev *pBlock
		for b := seg.head; b != nil; prev, b = b, b.next {
			if err := header(&b.block, "pBlock"); err != nil {
				return err
			}
			if b.seg != seg || b.prev != prev || b.ptr != want || b.size == 0 || b.size%minBlockSize != 0 {
				return fail("segment %d: pBlock %d [%v +%d] breaks the tiling at %v", seg.id, b.id, b.ptr, b.size, want)
			}
			want = b.end()
			if b.stream != seg.ss.s || b.pool != seg.pool {
				return fail("pBlock %d: stream %d pool %d, its segment's %d %d", b.id, b.stream, b.pool, seg.ss.s, seg.pool)
			}
			lo, hi := b.segOff(), b.segOff()+b.size
			var over vmm.Bytes
			for _, c := range seg.chunks {
				if l, h := max(lo, c.off), min(hi, c.off+c.size); h > l {
					over += h - l
				}
			}
			if b.mapped != (over == b.size) || (!b.mapped && over != 0) {
				return fail("pBlock %d: mapped %v, %d of its %d bytes over chunks", b.id, b.mapped, over, b.size)
			}
			if !b.mapped {
				unmapped = append(unmapped, b)
				if b.state != Free || b.node.inSet {
					return fail("unmapped pBlock %d: %v, in a free set %v", b.id, b.state, b.node.inSet)
				}
			}
			if b.heldBy != nil && (b.state != Live || !slices.Contains(b.heldBy.parts, b)) {
				return fail("pBlock %d: held by sBlock %d while %v, or not one of its parts", b.id, b.heldBy.id, b.state)
			}
			if b.xwait != nil && (b.state != Pending || b.events != 1) {
				return fail("pBlock %d: waits for stream %d's fence while %v with %d events", b.id, b.xwait.s, b.state, b.events)
			}
			if b.node.inSet != (b.state == Free && b.mapped) {
				return fail("pBlock %d: %v, mapped %v, in a free set %v", b.id, b.state, b.mapped, b.node.inSet)
			}
			if b.node.inSet {
				inSets[&seg.ss.free[b.pool]]++
			}
			if b.node.splitCounted && !b.node.inSet {
				return fail("pBlock %d: counted as an inactive split block outside a free set", b.id)
			}
		}
		if want != at(seg.base, seg.size) {
			return fail("segment %d: blocks end at %v, the reservation at %v", seg.id, want, at(seg.base, seg.size))
		}
		if !slices.Equal(unmapped, seg.unmapped) {
			return fail("segment %d: unmapped list is not its unmapped blocks in address order", seg.id)
		}
	}

	for i, sb := range a.sblocks {
		if err := header(&sb.block, "sBlock"); err != nil {
			return err
		}
		if sb.sIndex != sblockIdx(i) {
			return fail("sBlock %d: sIndex %d at sblocks[%d]", sb.id, sb.sIndex, i)
		}
		if sb.home == nil || sb.home.s != sb.stream || sb.pool != largePool {
			return fail("sBlock %d: home, stream %d or pool %d wrong", sb.id, sb.stream, sb.pool)
		}
		if sb.resv.Base != sb.ptr || sb.size > sizeOf(sb.resv) || (sb.size != sizeOf(sb.resv) && !(a.p.paper && sb.state != Free)) {
			return fail("sBlock %d: [%v +%d] in reservation %v", sb.id, sb.ptr, sb.size, sb.resv)
		}
		var sum vmm.Bytes
		under := 0
		for _, c := range sb.chunks {
			views[c]++
			if sum < sb.size {
				under++
			}
			sum += c.size
		}
		if sum != sizeOf(sb.resv) {
			return fail("sBlock %d: chunks add up to %d, reservation %d", sb.id, sum, sizeOf(sb.resv))
		}
		if sb.state == Free && len(sb.parts) != 0 {
			return fail("sBlock %d: Free with %d parts held", sb.id, len(sb.parts))
		}
		if sb.state != Free {
			if len(sb.parts) != under {
				return fail("sBlock %d: %v with %d parts for %d chunks under its size", sb.id, sb.state, len(sb.parts), under)
			}
			for j, pb := range sb.parts {
				c := sb.chunks[j]
				if pb.heldBy != sb || pb.seg != c.seg || pb.segOff() != c.off || pb.size != c.size {
					return fail("sBlock %d: part %d is not the pBlock held exactly under chunk %d", sb.id, pb.id, c.h)
				}
			}
		}
	}

	for _, seg := range a.segs {
		for _, c := range seg.chunks {
			if c.views != views[c] {
				return fail("chunk %d: views %d, sBlocks viewing it %d", c.h, c.views, views[c])
			}
		}
	}
	for ev, n := range evRefs {
		if ev.refs != n {
			return fail("block event %d: refs %d, blocks holding it %d", ev.e, ev.refs, n)
		}
	}
	for p, b := range a.ptrs.all {
		if b.ptr != p || !inUse[b] {
			return fail("ptrs[%v] is block %d at %v, in use %v", p, b.id, b.ptr, inUse[b])
		}
	}
	if a.last != nil && (a.streams[a.last.s] != a.last || a.last.gone || a.last.recheck) {
		return fail("last is stream %d: unknown, gone or to recheck", a.last.s)
	}
	if a.nCapturing != len(a.capturing) || len(a.ready) != 0 || len(a.scratch) != 0 {
		return fail("nCapturing %d for %d streams; scratch lists %d and %d long between calls", a.nCapturing, len(a.capturing), len(a.ready), len(a.scratch))
	}
	for i, c := range a.cands[:cap(a.cands)] {
		if c != nil {
			return fail("stitch candidate %d (chunk %d) kept between calls", i, c.h)
		}
	}
	for i, g := range a.growths[:cap(a.growths)] {
		if g.u != nil || g.chunks != nil {
			return fail("prepared growth %d kept between calls", i)
		}
	}
	for _, b := range a.deferred {
		if b.state != Pending || b.events != 0 {
			return fail("deferred free of block %d: %v with %d events", b.id, b.state, b.events)
		}
	}
	for _, b := range a.spare {
		if inUse[&b.block] || b.p != b || b.seg != nil || b.node.inSet {
			return fail("spare pBlock %d still in use or linked", b.id)
		}
	}
	for _, sb := range a.sblocks {
		if sb.lastUse > a.clock {
			return fail("sBlock %d: last use %d after the clock (%d)", sb.id, sb.lastUse, a.clock)
		}
	}
	waits := map[*block]int{}
	for _, pe := range a.pend {
		if pe.ev != 0 && (pe.rec == 0 || pe.rec > a.recs) {
			return fail("a pending event's place among the records is %d of %d", pe.rec, a.recs)
		}
		for _, b := range pe.blocks {
			if pe.ev == 0 && !pe.last {
				if b.p == nil {
					return fail("a cross-stream wait lists sBlock %d", b.id)
				}
				if b.p.xwait != pe.st || b.p.xseq != pe.seq || b.state != Pending {
					continue // taken back or recycled since: processEventsOnceLocked skips it
				}
			}
			waits[b]++
		}
	}
	for b := range waits {
		if !inUse[b] {
			return fail("a pending wait lists block %d, which left the engine", b.id)
		}
	}
	if !a.staleWaits {
		for _, pe := range a.pend {
			if pe.ev == 0 && !pe.last && !pe.partWaits() {
				return fail("a cross-stream wait on stream %d lists %d parts and none waits on it, after the pass "+
					"that drops such entries", pe.st.s, len(pe.blocks))
			}
		}
	}
	for b := range inUse {
		if b.events != waits[b] {
			return fail("block %d: %d events, %d pending waits list it", b.id, b.events, waits[b])
		}
	}

	if len(a.order) != len(a.streams) {
		return fail("order lists %d streams, streams %d", len(a.order), len(a.streams))
	}
	var states []*streamState
	for i, ss := range a.order {
		if a.streams[ss.s] != ss || (i > 0 && a.order[i-1].s >= ss.s) {
			return fail("order is not streams sorted by id at stream %d", ss.s)
		}
		states = append(states, ss)
	}
	for id, mp := range a.pools {
		for _, ss := range mp.order {
			if a.streams[ss.s] == nil { // syncCappedLocked finds a pool's states through the streams
				return fail("pool %v has a state of stream %d, which the engine does not know", id, ss.s)
			}
			states = append(states, ss)
		}
	}
	// deadPools says whether some released pool still holds memory, and a released pool is known only
	// while it does (forgetEmptyPoolsLocked): else every later free walks the cache for nothing.
	holds := a.poolsHoldingLocked()
	anyDead := false
	for id, mp := range a.pools {
		if mp.drained && !mp.dead {
			return fail("pool %v is drained but lives: a pool created again must wait for the device again when it is released", id)
		}
		if !mp.dead {
			continue
		}
		anyDead = true
		if !holds[mp] {
			return fail("released pool %v holds no segment and no stitched block, but is still known", id)
		}
	}
	if anyDead != a.deadPools {
		return fail("deadPools is %v, but a released pool holding memory is known: %v", a.deadPools, anyDead)
	}
	arenas := map[*segment]bool{}
	for _, seg := range a.segs {
		if seg.id > a.nextID {
			return fail("segment %d: id ahead of the allocator's %d", seg.id, a.nextID)
		}
		for _, c := range seg.chunks {
			if c.freeSeq > a.freeSeq {
				return fail("chunk %d: free stamp %d ahead of the allocator's %d", c.h, c.freeSeq, a.freeSeq)
			}
		}
		if seg.arena {
			arenas[seg] = true
		}
	}
	for _, ss := range states {
		if ss.safeSeq > a.freeSeq || ss.capped > a.freeSeq {
			return fail("stream %d: safe up to %d, capped at %d, of %d frees", ss.s, ss.safeSeq, ss.capped, a.freeSeq)
		}
		for i, f := range ss.fences {
			if f.seq > a.freeSeq || (i > 0 && f.seq <= ss.fences[i-1].seq) {
				return fail("stream %d: fence stamps out of order or ahead of the frees", ss.s)
			}
			if f.rec == 0 || f.rec > a.recs || (i > 0 && f.rec <= ss.fences[i-1].rec) {
				return fail("stream %d: fence places among the records out of order or ahead of them (%d of %d)", ss.s, f.rec, a.recs)
			}
		}
		if ss.lastRec > a.recs || ss.doneRec > a.recs || ss.stuckRec > a.recs {
			return fail("stream %d: a record place ahead of the records (last %d, done %d, stuck %d of %d)", ss.s, ss.lastRec, ss.doneRec, ss.stuckRec, a.recs)
		}
		for pool, as := range ss.arenas {
			for _, seg := range as {
				if !arenas[seg] || seg.ss != ss || seg.pool != poolKind(pool) {
					return fail("stream %d: arena %d is not its own registered arena of pool %d", ss.s, seg.id, pool)
				}
				delete(arenas, seg)
			}
		}
		for pool := range ss.free {
			fs := &ss.free[pool]
			if err := fs.check(ss, poolKind(pool)); err != nil {
				return fail("stream %d pool %d: %v", ss.s, pool, err)
			}
			if inSets[fs] != fs.n {
				return fail("stream %d pool %d: %d blocks say they are in the free set, it holds %d", ss.s, pool, inSets[fs], fs.n)
			}
		}
	}
	for seg := range arenas {
		return fail("arena %d is listed by no stream state", seg.id)
	}
	// Every driver event the engine holds has exactly one holder (the event pool, a pending wait, a stream's
	// fence or last event, a gmlake-paper block event): one event in two places is recorded over while
	// still waited on, or destroyed twice at Close.
	holder := map[vmm.Event]string{}
	hold := func(e vmm.Event, who string) error {
		if e == 0 {
			return nil
		}
		if prev, ok := holder[e]; ok {
			return fail("event %d is held twice: by %s and by %s", e, prev, who)
		}
		holder[e] = who
		return nil
	}
	for _, e := range a.evFree {
		if e == 0 {
			return fail("the event pool holds event 0 (no event)")
		}
		if err := hold(e, "the event pool"); err != nil {
			return err
		}
	}
	for i, pe := range a.pend {
		if err := hold(pe.ev, fmt.Sprintf("pending wait %d", i)); err != nil {
			return err
		}
	}
	for _, ss := range states {
		if !ss.gone && ss.lastEv != 0 {
			return fail("stream %d is not forgotten but holds a last event %d", ss.s, ss.lastEv)
		}
		for _, f := range ss.fences {
			if err := hold(f.ev, fmt.Sprintf("a fence of stream %d", ss.s)); err != nil {
				return err
			}
		}
		if err := hold(ss.lastEv, fmt.Sprintf("stream %d's last event", ss.s)); err != nil {
			return err
		}
	}
	for ev := range evRefs {
		if err := hold(ev.e, "a block event"); err != nil {
			return err
		}
	}
	// The PyTorch statistics' current values (kept by deltas on the hot path) are what the live set and the
	// segments count afresh (INV-TORCHSTATS' current clause).
	got, want := a.torchStatsLocked(), a.torchStatsCountedLocked()
	names := torchStatNames
	for k, g := range got.arrays() {
		for i, w := range want.arrays()[k] {
			if g[i].Current != w.Current {
				return fail("torch stat %s[%d].current is %d, the live set and segments count %d", names[k], i, g[i].Current, w.Current)
			}
		}
	}
	return nil
}
