package serve

// See doc.go.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

// Config configures an Engine.
type Config struct {
	Engine impl.Config // the engine's policy and knobs
	// MemoryLimit caps the physical bytes the engine may hold (0: no cap); SetMemoryLimit changes it.
	MemoryLimit uint64
	// MapStreams says the driver accepts only streams it created (the simulated device): each caller stream
	// value met gets a new stream of the driver's, value 0 its default stream. Off (the real GPU), a caller's
	// stream is the driver's stream itself (a cudaStream_t is the CUstream).
	MapStreams bool
	// Sync synchronises one of the driver's streams: it returns once the work submitted to it so far has
	// completed. nil: the driver's own (vmm.StreamSyncer) if it has one; with neither there is no
	// sync-and-retry (the simulated device's work completes on the test's clock). The harness passes its
	// own, which completes the work on the simulated device and tells the oracle.
	Sync vmm.StreamSyncer
	// DeviceSync waits for the whole device; the engine calls it before a released private pool's memory
	// goes back (its graphs' replays may still run on streams it was never told of: impl/pool.go). nil: the
	// driver's own (vmm.DeviceSyncer, found through its wrappers) if it has one. The harness passes its own, which completes every
	// stream's work on the simulated device and tells the oracle.
	DeviceSync vmm.DeviceSyncer

	_ struct{}
}

// Engine is an impl.Allocator as a framework process runs it (see doc.go). Safe for concurrent use.
type Engine struct {
	a     *impl.Allocator
	drv   *wrap.Limit // the driver given to New under the memory cap
	total uint64      // the device's total memory at New (0: unknown)
	sync  vmm.StreamSyncer

	// mapped maps a caller's stream value to a stream of the driver's (Config.MapStreams only; nil
	// otherwise). Guarded by mapMu. Invariant: mapped[0] == vmm.DefaultStream, no two keys map to the
	// same stream, and no key maps to a stream the engine forgot (ForgetStream unmaps it).
	mapMu  sync.Mutex
	mapped map[vmm.Stream]vmm.Stream

	// seen holds every driver stream allocated on or recorded on successfully (keys vmm.Stream; the default stream is
	// synchronised anyway), less the caller's own streams forgotten (ForgetStream), lastSeen the latest, so
	// the hot path touches seen only when the stream changes. Both are read by syncStreams. Written without
	// a lock (sync.Map, atomic).
	seen     sync.Map
	lastSeen atomic.Uint64

	syncs      atomic.Uint64 // synchronisations of every stream (EmptyCache and the OOM path), with or without a synchroniser
	retries    atomic.Uint64 // allocations that succeeded only after synchronising
	syncErrors atomic.Uint64 // stream synchronisations that failed
	ooms       atomic.Uint64 // allocations that failed with out of memory after every retry (oversize included)
}

// deviceSyncing is the capped driver the engine runs on, with the device's wait (Config.DeviceSync).
type deviceSyncing struct {
	*wrap.Limit
	vmm.DeviceSyncer
}

// New starts an engine on d. On error nothing of d's is held (the caller still owns d and closes it).
func New(d vmm.Driver, cfg Config) (*Engine, error) {
	e := &Engine{drv: wrap.NewLimit(d, cfg.MemoryLimit), sync: cfg.Sync}
	if e.sync == nil {
		e.sync, _ = vmm.Find[vmm.StreamSyncer](d) // through any wrapper (clib's timing meter)
	}
	if cfg.MapStreams {
		e.mapped = map[vmm.Stream]vmm.Stream{0: vmm.DefaultStream}
	}
	if _, total, err := d.MemInfo(); err == nil {
		e.total = total
	}
	var ed vmm.Driver = e.drv // the engine finds d's own device wait through the cap (vmm.Find)
	if cfg.DeviceSync != nil {
		ed = deviceSyncing{e.drv, cfg.DeviceSync} // the cap stays (wrap.Limit), with the caller's wait
	}
	a, err := impl.New(ed, cfg.Engine)
	if err != nil {
		return nil, err
	}
	e.a = a
	return e, nil
}

// Allocator returns the engine under the layer (statistics, snapshots, pools, PyTorch's views).
func (e *Engine) Allocator() *impl.Allocator { return e.a }

// Driver returns the driver the engine runs on, under the memory cap (its MemInfo reports the free memory
// under the cap).
func (e *Engine) Driver() vmm.Driver { return e.drv }

// TotalMemory returns the device's total memory in bytes as the driver reported it at New (0: unknown).
func (e *Engine) TotalMemory() uint64 { return e.total }

// SetMemoryLimit caps the physical bytes the engine may hold (0 removes the cap). Memory already held
// beyond a new cap stays until it is freed and released (EmptyCache).
func (e *Engine) SetMemoryLimit(bytes uint64) { e.drv.SetLimit(bytes) }

// MemoryLimit returns the cap (0: none, or a cap of 0 bytes that SetMemoryCap set).
func (e *Engine) MemoryLimit() uint64 { return e.drv.Limit() }

// SetMemoryCap caps the physical bytes at exactly bytes: 0 admits no new physical memory (PyTorch's
// set_per_process_memory_fraction(0)). Memory already held stays until released.
func (e *Engine) SetMemoryCap(bytes uint64) { e.drv.SetCap(bytes) }

// Stream returns the driver's stream for the caller's stream s: s itself unless Config.MapStreams, else the
// stream mapped to s, created on first use. An error is the driver's (CreateStream), and maps nothing.
func (e *Engine) Stream(s vmm.Stream) (vmm.Stream, error) {
	if e.mapped == nil {
		return s, nil
	}
	e.mapMu.Lock()
	defer e.mapMu.Unlock()
	if v, ok := e.mapped[s]; ok {
		return v, nil
	}
	v, err := e.drv.CreateStream()
	if err != nil {
		return 0, fmt.Errorf("serve: a stream for caller stream %#x: %w", uint64(s), err)
	}
	e.mapped[s] = v
	return v, nil
}

// CallerStream turns a driver stream back into the caller's stream it stands for (itself if none).
func (e *Engine) CallerStream(s vmm.Stream) vmm.Stream {
	if e.mapped == nil {
		return s
	}
	e.mapMu.Lock()
	defer e.mapMu.Unlock()
	for c, v := range e.mapped {
		if v == s {
			return c
		}
	}
	return s
}

// remember notes that driver stream s has work of the engine's (allocated or recorded on, successfully).
func (e *Engine) remember(s vmm.Stream) {
	if e.sync == nil || e.lastSeen.Load() == uint64(s) {
		return
	}
	if _, ok := e.seen.Load(s); !ok {
		e.seen.Store(s, struct{}{})
	}
	e.lastSeen.Store(uint64(s))
}

// syncStreams waits for the work of the default stream and of every stream remembered. PyTorch's allocator
// synchronises the device before it returns cached memory to CUDA (empty_cache, its out-of-memory path):
// the engine releases a cached block only once the event recorded after its free has completed, so without
// waiting, memory still in use by queued work could not be released, and a request would fail that PyTorch
// serves.
func (e *Engine) syncStreams() {
	if e.a.Capturing() {
		return // synchronising a capturing stream is illegal (and waits for nothing)
	}
	e.syncs.Add(1)
	if e.sync == nil {
		return
	}
	if err := e.sync.Synchronize(vmm.DefaultStream); err != nil {
		e.syncErrors.Add(1)
	}
	e.seen.Range(func(k, _ any) bool {
		if s := k.(vmm.Stream); s != vmm.DefaultStream {
			if err := e.sync.Synchronize(s); err != nil {
				e.syncErrors.Add(1)
			}
		}
		return true
	})
}

// Alloc allocates size bytes for use on the caller's stream s (see doc.go for the steps).
func (e *Engine) Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error) {
	return e.AllocPool(size, s, impl.PoolID{})
}

// AllocPool is Alloc from memory pool pool (impl.AllocPool; the zero id is the default pool).
func (e *Engine) AllocPool(size uint64, s vmm.Stream, pool impl.PoolID) (vmm.DevicePtr, error) {
	ds, err := e.Stream(s)
	if err != nil {
		return 0, err
	}
	p, err := e.a.AllocPool(size, ds, pool)
	return e.afterAlloc(size, ds, pool, p, err)
}

// AllocHost is impl.Allocator.AllocHost (the host cache's log, then an Alloc of the default pool, in one hold
// of the engine's lock) with Alloc's stream mapping, out-of-memory retry and counting. A retried allocation has
// no class (Lo, Hi 0: the cache does not keep it).
func (e *Engine) AllocHost(ops []impl.HostOp, size uint64, s vmm.Stream) (impl.HostAlloc, error) {
	ds, err := e.Stream(s)
	if err != nil {
		var r impl.HostAlloc
		if r.Replayed, r.ReplayErr = e.a.Replay(ops); r.ReplayErr != nil {
			return r, r.ReplayErr
		}
		return r, err
	}
	r, err := e.a.AllocHost(ops, size, ds)
	if r.ReplayErr != nil {
		return r, err
	}
	p, err := e.afterAlloc(size, ds, impl.PoolID{}, r.Ptr, err)
	if p != r.Ptr {
		r.Lo, r.Hi = 0, 0
	}
	r.Ptr = p
	return r, err
}

// afterAlloc is what Alloc does with the engine's answer (p, err) to a request of size bytes on engine stream ds.
func (e *Engine) afterAlloc(size uint64, ds vmm.Stream, pool impl.PoolID, p vmm.DevicePtr, err error) (vmm.DevicePtr, error) {
	if err != nil && e.total != 0 && size > e.total && errors.Is(err, impl.ErrInvalidSize) {
		// The engine refuses a request larger than the device as an invalid size; PyTorch says out of
		// memory. (Asked after the engine, so that a closed engine still says it is closed.)
		e.ooms.Add(1)
		return 0, e.oversize(size, ds)
	}
	if err != nil && e.sync != nil && errors.Is(err, vmm.ErrOutOfMemory) && !e.a.Capturing() {
		e.syncStreams()
		if p, err = e.a.AllocPool(size, ds, pool); err == nil {
			e.retries.Add(1)
		}
	}
	if err != nil && errors.Is(err, vmm.ErrOutOfMemory) {
		e.ooms.Add(1)
	}
	if err == nil {
		e.remember(ds) // (after the engine's answer: a refused call, on a forgotten stream say, leaves nothing to wait for)
	}
	return p, err
}

// oversize is the out-of-memory error of a request larger than the device.
func (e *Engine) oversize(size uint64, s vmm.Stream) error {
	st := e.a.Stats()
	free, _, _ := e.drv.MemInfo()
	return &impl.OOMError{Requested: size, Rounded: size, Reserved: st.ReservedBytes,
		Cached: st.ReservedBytes - min(st.ReservedBytes, st.AllocatedBytes), Live: st.AllocatedBytes,
		DeviceFree: free, Stream: s}
}

// Free frees p, stream-ordered on its allocation stream and the streams it was recorded on.
func (e *Engine) Free(p vmm.DevicePtr) error { return e.a.Free(p) }

// RecordStream marks p as used on the caller's stream s too: its memory is reused only after that stream's
// work submitted before the free has completed.
func (e *Engine) RecordStream(p vmm.DevicePtr, s vmm.Stream) error {
	ds, err := e.Stream(s)
	if err != nil {
		return err
	}
	if err := e.a.RecordStream(p, ds); err != nil {
		return err
	}
	e.remember(ds)
	return nil
}

// ForgetStream tells the engine that the caller's stream s is about to be destroyed (impl.ForgetStream:
// the blocks used on it wait for the work it was given; Alloc and RecordStream on it are refused from then
// on), and the layer forgets it too:
//   - under Config.MapStreams the caller value s is unmapped, so that a stream the caller makes later and
//     that gets the same value (CUDA reuses a destroyed stream's address) is a new stream of the driver's,
//     not the forgotten one the engine refuses. The driver stream made for s stays the layer's (the
//     caller never saw it, so nobody destroys it): its work still completes, and the layer still
//     synchronises it, which keeps the out-of-memory retry waiting for it as PyTorch's device-wide one does;
//   - otherwise s is the caller's own stream, destroyed right after: the layer no longer synchronises it
//     (synchronising a destroyed stream is an error, and on CUDA a use after free); the engine fences the
//     blocks used on it with the last event it recorded on s.
//
// A value the layer never mapped is mapped first (the engine forgets a stream it never met: nothing waits
// on it). An error changes nothing: the stream stays mapped and synchronised.
func (e *Engine) ForgetStream(s vmm.Stream) error {
	if e.mapped == nil {
		if err := e.a.ForgetStream(s); err != nil {
			return err
		}
		e.forgetSeen(s)
		return nil
	}
	ds, err := e.Stream(s)
	if err != nil {
		return err
	}
	e.mapMu.Lock()
	defer e.mapMu.Unlock()
	if err := e.a.ForgetStream(ds); err != nil {
		return err
	}
	delete(e.mapped, s) // (not caller value 0: the engine refuses to forget the default stream)
	return nil
}

// forgetSeen drops driver stream s from the streams syncStreams synchronises. (lastSeen may stay s: only
// a successful call on s remembers it, and the engine refuses every call on a forgotten stream.)
func (e *Engine) forgetSeen(s vmm.Stream) { e.seen.Delete(s) }

// EmptyCache returns every cached (free) byte to the device, after the streams' work has completed (as
// torch.cuda.empty_cache, which synchronises the device).
func (e *Engine) EmptyCache() error {
	e.syncStreams()
	return e.a.EmptyCache()
}

// SetCapturing says that the caller's stream s begins (on) or ends (off) a CUDA graph capture.
func (e *Engine) SetCapturing(s vmm.Stream, on bool) error {
	ds, err := e.Stream(s)
	if err != nil {
		return err
	}
	return e.a.SetCapturing(ds, on)
}

// Counters are what the layer itself counts.
type Counters struct {
	Syncs       uint64 // synchronisations of every stream (EmptyCache and the OOM path; counted without a synchroniser too)
	SyncRetries uint64 // allocations that succeeded only after synchronising
	SyncErrors  uint64 // stream synchronisations that failed
	OOMs        uint64 // allocations that failed with out of memory after every retry, requests larger than the device included
}

// Counters returns the layer's counters.
func (e *Engine) Counters() Counters {
	return Counters{Syncs: e.syncs.Load(), SyncRetries: e.retries.Load(), SyncErrors: e.syncErrors.Load(), OOMs: e.ooms.Load()}
}

// Close releases everything the engine holds (impl.Close). It does not close the driver.
func (e *Engine) Close() (impl.CloseReport, error) { return e.a.Close() }
