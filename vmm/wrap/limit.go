package wrap

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/gmlake/gmlake/vmm"
)

// Limit is a vmm.Driver with an optional cap on the physical bytes created through it (PyTorch's
// set_per_process_memory_fraction, in libgmlake). Creating beyond the cap fails with
// CUDA_ERROR_OUT_OF_MEMORY, exactly as a smaller GPU would, so an allocator takes its ordinary
// out-of-memory path (stitch, release the cache, retry) before giving up. MemInfo reports the free memory
// under the cap; the total stays the device's.
type Limit struct {
	vmm.Driver
	limit atomic.Uint64 // the cap in bytes (0 admits nothing); noCap: none. Written by SetLimit and SetCap, read by Create and MemInfo.

	mu struct {
		sync.Mutex
		used  uint64                // Invariant: the sum of sizes of handles created and not yet released.
		sizes map[vmm.Handle]uint64 // size of each unreleased handle created through this driver
	}
}

// noCap is the stored cap that caps nothing.
const noCap = math.MaxUint64

// NewLimit wraps d with a cap of limit bytes (0: none).
func NewLimit(d vmm.Driver, limit uint64) *Limit {
	l := &Limit{Driver: d}
	l.SetLimit(limit)
	l.mu.sizes = make(map[vmm.Handle]uint64)
	return l
}

// SetLimit changes the cap (0 removes it). Memory already held beyond a new cap stays until released.
func (l *Limit) SetLimit(bytes uint64) {
	if bytes == 0 {
		bytes = noCap
	}
	l.limit.Store(bytes)
}

// SetCap caps the bytes created at exactly bytes: 0 is a cap that admits no creation
// (set_per_process_memory_fraction(0), as PyTorch's allocator reads it). Memory already held stays.
func (l *Limit) SetCap(bytes uint64) { l.limit.Store(bytes) }

// Limit returns the cap (0: none, or a cap of 0 bytes that SetCap set).
func (l *Limit) Limit() uint64 {
	if lim := l.limit.Load(); lim != noCap {
		return lim
	}
	return 0
}

// Inner returns the wrapped driver.
func (l *Limit) Inner() vmm.Driver { return l.Driver }

func (l *Limit) Create(size uint64) (vmm.Handle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim := l.limit.Load(); lim != noCap && (size > lim || l.mu.used > lim-size) {
		return 0, vmm.Errorf(vmm.CallCreate, vmm.OutOfMemory,
			"memory limit: %s held + %s asked > limit %s (set by the memory fraction)",
			vmm.FormatBytes(l.mu.used), vmm.FormatBytes(size), vmm.FormatBytes(lim))
	}
	h, err := l.Driver.Create(size)
	if err == nil {
		l.mu.used += size
		l.mu.sizes[h] = size
	}
	return h, err
}

func (l *Limit) Release(h vmm.Handle) error {
	err := l.Driver.Release(h)
	if err == nil {
		l.mu.Lock()
		l.mu.used -= l.mu.sizes[h]
		delete(l.mu.sizes, h)
		l.mu.Unlock()
	}
	return err
}

func (l *Limit) MemInfo() (free, total uint64, err error) {
	free, total, err = l.Driver.MemInfo()
	if lim := l.limit.Load(); err == nil && lim != noCap {
		l.mu.Lock()
		used := l.mu.used
		l.mu.Unlock()
		capFree := uint64(0)
		if lim > used {
			capFree = lim - used
		}
		// total stays the device's: an engine sizes its checks by it at New, and a cap may be lifted later.
		free = min(free, capFree)
	}
	return free, total, err
}
