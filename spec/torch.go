package spec

import (
	"errors"
	"slices"

	"github.com/gmlake/gmlake/vmm"
)

// INV-TORCH: the policies that claim PyTorch's semantics make PyTorch's decisions, one Alloc at a time. A
// compact, independent statement of c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x), written from its
// source, not from the engine:
//
//	round_size(n)          = 512 if n < 512, else n rounded up to 512 (kMinBlockSize)
//	get_allocation_size(r) = 2 MiB (kSmallBuffer) if r <= 1 MiB (kSmallSize); 20 MiB (kLargeBuffer) if
//	                         r < 10 MiB (kMinLargeAlloc); else r rounded up to 2 MiB (kRoundLarge)
//	should_split(b, r)     = remaining >= 512 for the small pool, or for expandable segments;
//	                         remaining > 1 MiB for the large pool otherwise (max_split_size unlimited)
//
// Checked after each successful Alloc of the caching policy (a new segment has exactly
// get_allocation_size bytes, or, the engine's one documented departure, r rounded to the granularity when
// the full segment could not be made even after releasing the cache (on the Alloc's retry: num_alloc_retries
// rose): the device was short of it, or an
// injected fault answered out of memory to a call on the full segment's bytes during the Alloc, which the
// engine cannot tell from a real one; the block handed out is split or not per should_split) and of the
// expandable policy (should_split, for blocks served from mapped free memory). Which block is chosen is
// INV-BESTFIT. gmlake-paper is GLake's fork of that allocator: its small pool (requests rounded to at most
// 1 MiB) is PyTorch's, unchanged (2 MiB segments, should_split's 512 B remainder, and no smaller fallback:
// realloc_block breaks on a small request's failure), and is judged as caching's is; its large pool
// stitches and splits by GMLake's own rules and is not judged here.
const (
	torchMinBlock  = 512
	torchSmallSize = 1 << 20
	torchSmallBuf  = 2 << 20
	torchLargeBuf  = 20 << 20
	torchMinLarge  = 10 << 20
	torchRoundLg   = 2 << 20
)

// TorchRoundSize is PyTorch's round_size.
func TorchRoundSize(n uint64) uint64 {
	if n < torchMinBlock {
		return torchMinBlock
	}
	return vmm.AlignUp(n, torchMinBlock)
}

// TorchAllocationSize is PyTorch's get_allocation_size: the segment cudaMalloc'ed for a rounded request.
func TorchAllocationSize(r uint64) uint64 {
	switch {
	case r <= torchSmallSize:
		return torchSmallBuf
	case r < torchMinLarge:
		return torchLargeBuf
	}
	return vmm.AlignUp(r, torchRoundLg)
}

// TorchShouldSplit is PyTorch's should_split for a block of blockSize serving rounded request r.
func TorchShouldSplit(blockSize, r uint64, expandable bool) bool {
	rem := blockSize - r
	if r <= torchSmallSize || expandable {
		return rem >= torchMinBlock
	}
	return rem > torchSmallSize
}

// FailedCall is one driver call that failed during a step: what the judge knows of a step beyond the
// Views before and after it (the executor logs them: harness/ops).
type FailedCall struct {
	Call vmm.CallKind
	Size uint64 // the bytes it was asked for (Create, Reserve) or covered (Map, SetAccess, Unmap)
	Err  error
	// Injected: a fault op made the call fail, not the device's own answer (the device had room).
	Injected bool
}

// injectedOOM reports whether an injected fault answered out of memory to a call on size bytes.
func injectedOOM(failed []FailedCall, size uint64) bool {
	for _, f := range failed {
		if f.Injected && f.Size == size && errors.Is(f.Err, vmm.ErrOutOfMemory) {
			return true
		}
	}
	return false
}

// CheckTorch is INV-TORCH for one successful Alloc(size) that returned ptr, over the Views before and
// after the call and the driver calls that failed during it, for policy "caching" or "expandable" (other
// policies: nothing to check).
func CheckTorch(policy string, before, after View, ptr vmm.DevicePtr, size uint64, failed []FailedCall) []Violation {
	expandable := policy == "expandable"
	paper := policy == "gmlake-paper"
	if policy != "caching" && !expandable && !paper || size == 0 {
		return nil
	}
	r := TorchRoundSize(size)
	if paper && r > torchSmallSize {
		return nil // GMLake's large pool has its own rules (realloc_block, stitching): not PyTorch's
	}
	got := liveBlockAt(after, ptr, false /* stitched */)
	if got == nil {
		return nil // INV-BLOCKS
	}
	var from uint64 // the size of the free block the request was carved from
	if seg, ok := resOfSorted(after.Device.Reservations, ptr); ok {
		if old, had := resOfSorted(before.Device.Reservations, ptr); !had || old != seg {
			if expandable {
				return torchSplitBound(got, size, r, expandable) // a new arena: page-granular growth
			}
			// A new segment (cudaMalloc): exactly get_allocation_size bytes, carved from its start.
			// The engine departs from PyTorch in one documented way (impl: segmentAlloc): when even after
			// releasing the cache making the full segment runs out of memory, it takes just r rounded to
			// the granularity. Out of memory is the device's answer when it is short of the full segment
			// (free before the fallback segment, less than want), or an injected fault's on one of the
			// full segment's calls (Reserve, Create, Map, SetAccess of want bytes) during this Alloc.
			// And only on the retry, after the cache was released (malloc's alloc_block fails,
			// release_cached_blocks, alloc_block again: num_alloc_retries rises by one).
			want := TorchAllocationSize(r)
			retried := after.Stats.AllocRetries > before.Stats.AllocRetries
			fallback := !paper && seg.Size == vmm.AlignUp(r, after.Granularity) && retried &&
				(after.Device.Free()+seg.Size < want || injectedOOM(failed, vmm.AlignUp(want, after.Granularity)))
			if seg.Size != want && !fallback {
				return []Violation{violation(InvTorch, "Alloc(%d) (rounded %d) opened a segment of %s, PyTorch's get_allocation_size is %s (a smaller one only when the full one did not fit even after releasing the cache; retried: %v)",
					size, r, vmm.FormatBytes(seg.Size), vmm.FormatBytes(want), retried)}
			}
			from = seg.Size
		}
	}
	if from == 0 {
		// Served from a free block of before that starts at ptr; not one next to a pending block (its
		// events may complete during the call and merge it larger) nor one that can grow into unmapped room.
		for _, b := range before.Blocks {
			if b.Stitched || b.State != BlockFree || b.Range.Base != ptr {
				continue
			}
			for _, p := range before.Blocks {
				if !p.Stitched && p.State == BlockPending && (p.Range.Limit() == b.Range.Base || b.Range.Limit() == p.Range.Base) {
					return nil
				}
			}
			if _, holes := before.Device.Backing(vmm.Range{Base: b.Range.Limit(), Size: 1}); len(holes) > 0 {
				if seg, ok := resOfSorted(before.Device.Reservations, b.Range.Base); ok && b.Range.Limit() < seg.Limit() {
					return nil
				}
			}
			from = b.Range.Size
		}
	}
	if from == 0 {
		// Carved from memory mapped during the call (growth) or from a block whose size may have changed:
		// whatever it was, should_split bounds what may be left unsplit.
		return torchSplitBound(got, size, r, expandable)
	}
	if from < r {
		return nil
	}
	want := from
	if TorchShouldSplit(from, r, expandable) {
		want = r
	}
	if got.Range.Size != want {
		split := "not split"
		if want == r {
			split = "split"
		}
		return []Violation{violation(InvTorch, "Alloc(%d) (rounded %d) from a free block of %s got a block of %s: PyTorch's should_split says %s (%s)",
			size, r, vmm.FormatBytes(from), vmm.FormatBytes(got.Range.Size), split, vmm.FormatBytes(want))}
	}
	return nil
}

// torchSplitBound is the part of should_split that holds whatever block the request was carved from: a
// block handed out unsplit keeps less than the split threshold beyond the request (under 512 B in the small
// pool and under expandable segments, at most 1 MiB in caching's large pool).
func torchSplitBound(got *Block, size, r uint64, expandable bool) []Violation {
	if got.Range.Size < r {
		return nil // INV-STATS
	}
	if rem := got.Range.Size - r; rem > 0 && TorchShouldSplit(got.Range.Size, r, expandable) {
		return []Violation{violation(InvTorch, "Alloc(%d) (rounded %d) got a block of %s: %s beyond the request, which PyTorch's should_split would have split off",
			size, r, vmm.FormatBytes(got.Range.Size), vmm.FormatBytes(rem))}
	}
	return nil
}

// PaperShouldSplit is GLake's should_split for a block of gmlake-paper's large pool (max_split_size unset):
// the rest is split off when it is at least one of GLake's pieces (kGranularity, the engine's chunk size).
func PaperShouldSplit(blockSize, r, chunk uint64) bool { return blockSize-r >= chunk }

// CheckPaperSplit is INV-TORCH's clause for gmlake-paper's large pool, for one successful Alloc(size) that
// returned ptr: a large request (rounded to 512 B, above 1 MiB) rounded up to the chunk size (GLake's
// kGranularity rounding) served by a free pBlock of before that starts at ptr — not one next to a pending
// block, whose events may complete during the call and merge it larger — gets that block split exactly when
// PaperShouldSplit says so. Stitched blocks and new segments are GLake's other rules (INV-PAPERGC, the
// stitch), not judged here.
func CheckPaperSplit(before, after View, ptr vmm.DevicePtr, size, chunk uint64) []Violation {
	if size == 0 || chunk == 0 || TorchRoundSize(size) <= torchSmallSize {
		return nil
	}
	r := vmm.RoundUp(size, chunk)
	got := liveBlockAt(after, ptr, false /* stitched */)
	if got == nil {
		return nil
	}
	var from uint64
	for _, b := range before.Blocks {
		if b.Stitched || b.State != BlockFree || b.Range.Base != ptr || b.SmallPool {
			continue
		}
		for _, p := range before.Blocks {
			if !p.Stitched && p.State == BlockPending && (p.Range.Limit() == b.Range.Base || b.Range.Limit() == p.Range.Base) {
				return nil
			}
		}
		from = b.Range.Size
	}
	if from < r {
		return nil // not served from a free block of before, or one that grew during the call
	}
	want := from
	if PaperShouldSplit(from, r, chunk) {
		want = r
	}
	if got.Range.Size != want {
		return []Violation{violation(InvTorch, "gmlake-paper: Alloc(%d) (rounded %d) from a free block of %s got a block of %s: GLake's should_split (rest >= %s) says %s",
			size, r, vmm.FormatBytes(from), vmm.FormatBytes(got.Range.Size), vmm.FormatBytes(chunk), vmm.FormatBytes(want))}
	}
	return nil
}

// PaperRule is what CheckPaperSegment needs of gmlake-paper's knobs (impl.Config: ReAlloc, StitchMin as
// GLake's fragLimit, default 512 MiB, and DefragLevel).
type PaperRule struct {
	ReAlloc     bool
	FragLimit   uint64
	DefragLevel int
	_           struct{}
}

// CheckPaperSegment is INV-TORCH's clause for gmlake-paper's large pool on realloc_block's segment, for one
// successful Alloc(size) on stream s: with r the request rounded up to the chunk (GLake's round_size; above
// 1 MiB), a segment made during the call (a reservation new after it that holds pBlocks) has
// get_allocation_size(r) bytes rounded up to the chunk; with reAlloc on and F free large-pool bytes of stream s
// before the call, 0 < F < r, get_allocation_size(r - F) rounded up (the rest, stitched at once to the free
// blocks; below fragLimit, where no stitch serves it, or where the rest's segment is not the smaller, the
// retry's whole segment too), and none at all when
// F >= r, r is at least fragLimit and defragLevel leaves stitch attempt 2 (realloc_block returns false: the
// free blocks cover it; otherwise the retry grows the whole segment, impl/doc.go's departure). Judged only
// where F cannot change during the call: no pending pBlock before it (events completing free more) and no
// handle released during it (release_cached_blocks drops free segments before the retry).
func CheckPaperSegment(before, after View, size, chunk uint64, rule PaperRule, s vmm.Stream) []Violation {
	if size == 0 || chunk == 0 || TorchRoundSize(size) <= torchSmallSize {
		return nil
	}
	r := vmm.RoundUp(size, chunk)
	var free uint64
	for _, b := range before.Blocks {
		if b.Stitched {
			continue
		}
		if b.State == BlockPending {
			return nil
		}
		if b.State == BlockFree && !b.SmallPool && b.Stream == s {
			free += b.Range.Size
		}
	}
	if releasedDuring(before, after) {
		return nil
	}
	full := vmm.RoundUp(TorchAllocationSize(r), chunk)
	want, why := []uint64{full}, "get_allocation_size of the request"
	stitchable := r >= rule.FragLimit
	switch {
	case !rule.ReAlloc || free == 0:
	case free >= r && stitchable && rule.DefragLevel <= 2:
		want, why = nil, "none: reAlloc grows nothing while the stream's free large blocks cover the request"
	case free >= r:
		why = "the retry's whole segment: reAlloc's shortcut would fail a request no stitch serves"
	case stitchable:
		rest := vmm.RoundUp(TorchAllocationSize(r-free), chunk)
		want, why = []uint64{rest}, "reAlloc: get_allocation_size of the request less the stream's free large bytes"
		if rest >= full {
			want, why = append(want, full), "reAlloc's rest on the first try; the whole segment, smaller, on the retry"
		}
	default:
		want = []uint64{vmm.RoundUp(TorchAllocationSize(r-free), chunk), full}
		why = "reAlloc's rest on the first try, the whole segment on the retry (no stitch serves the request)"
	}
	for _, res := range after.Device.Reservations {
		if _, old := resOfSorted(before.Device.Reservations, res.Base); old {
			continue
		}
		seg := false
		for _, b := range after.Blocks {
			if !b.Stitched && !b.SmallPool && res.Contains(b.Range.Base) {
				seg = true
			}
		}
		if seg && !slices.Contains(want, res.Size) {
			return []Violation{violation(InvTorch, "gmlake-paper: Alloc(%d) (rounded %d) on stream %d made a segment of %s with %s free in the stream's large blocks; GLake's realloc_block makes %v (%s)",
				size, r, s, vmm.FormatBytes(res.Size), vmm.FormatBytes(free), formatSizes(want), why)}
		}
	}
	return nil
}
