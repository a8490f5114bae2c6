package impl

import (
	"fmt"
	"os"
)

// Config.DebugOOM prints the engine's state to stderr on the out-of-memory path (dumpStateLocked): a debugging aid
// for spurious out-of-memory reports from the checkers.

// dumpStateLocked prints every stream, segment, block, sBlock and pending wait. mu must be held.
func (a *Allocator) dumpStateLocked(why string) {
	fmt.Fprintf(os.Stderr, "=== %s %s reserved=%d freeSeq=%d\n", a.p.name, why, a.st.ReservedBytes>>20, a.freeSeq)
	for _, ss := range a.sortedStreamsLocked() {
		fmt.Fprintf(os.Stderr, "stream %d safeSeq %d fences %v\n", ss.s, ss.safeSeq, ss.fences)
	}
	for _, seg := range a.segs {
		fmt.Fprintf(os.Stderr, " seg %d s%d pool %d arena %v mapped %dMiB chunks:", seg.id, seg.ss.s, seg.pool, seg.arena, seg.mapped>>20)
		for _, c := range seg.chunks {
			fmt.Fprintf(os.Stderr, " [%d+%d v%d]", c.off>>20, c.size>>20, c.views)
		}
		fmt.Fprintln(os.Stderr)
		for b := seg.head; b != nil; b = b.next {
			fmt.Fprintf(os.Stderr, "   blk %d off %.2fMiB size %.2fMiB %v mapped %v held %v seq %d ev %d\n", b.id, float64(b.segOff())/(1<<20), float64(b.size)/(1<<20), b.state, b.mapped, b.heldBy != nil, b.freeSeq, b.events)
		}
	}
	for _, sb := range a.sblocks {
		fmt.Fprintf(os.Stderr, " sblock %d s%d %v size %dMiB seq %d\n", sb.id, sb.stream, sb.state, sb.size>>20, sb.freeSeq)
	}
	for _, pe := range a.pend {
		fmt.Fprintf(os.Stderr, " pend ev %d seq %d n %d\n", pe.ev, pe.seq, len(pe.blocks))
	}
}
