package impl

// Queries PyTorch's allocator interface needs beyond alloc and free: cacheInfo and getBaseAllocation.

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// LargestCachedBlock returns the largest block an allocation of the default pool could get from the cache
// without new memory (PyTorch's cacheInfo, which cuDNN's benchmark mode uses to size its workspace): the
// largest free mapped block of any stream, or a cached stitched block whose chunks are all free.
func (a *Allocator) LargestCachedBlock() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var best vmm.Bytes
	for _, ss := range a.streams {
		if !ss.defaultPool() {
			continue
		}
		for i := range ss.free {
			if b := ss.free[i].max(); b != nil {
				best = max(best, b.size)
			}
		}
	}
	for _, sb := range a.sblocks {
		if sb.state != Free || sb.size <= best || !sb.home.defaultPool() {
			continue
		}
		ok := true
		for _, c := range sb.chunks {
			if !a.chunkFreeLocked(c, sb.home) {
				ok = false
				break
			}
		}
		if ok {
			best = sb.size
		}
	}
	return uint64(best)
}

// AllocationAt returns the range of the live allocation holding p (its start and block size): PyTorch's
// getBaseAllocation. ErrUnknownPointer if no live allocation holds p.
func (a *Allocator) AllocationAt(p vmm.DevicePtr) (vmm.Range, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return vmm.Range{}, ErrClosed
	}
	b := a.liveAtLocked(p)
	if b == nil {
		if b = a.liveContainingLocked(p); b == nil {
			return vmm.Range{}, fmt.Errorf("%w: %v is in no live allocation", ErrUnknownPointer, p)
		}
	}
	return span(b.ptr, b.size), nil
}
