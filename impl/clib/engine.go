package clib

// See doc.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/serve"
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

// ErrBadKnob is the kind (errors.Is) of every error about a setting or a knob: an unknown name, a value that
// does not parse or is outside its range (SettingError says which variable).
var ErrBadKnob = errors.New("gmlake: bad knob")

// Config configures one engine of the C library.
type Config struct {
	Driver string // the driver's name, for the statistics ("cuda", "sim")
	Device int    // device ordinal, for the statistics and errors
	Policy string // one of impl.Policies; "" is the default policy
	// OwnStreams says the driver accepts only streams it created (the simulated device): each C stream
	// value met gets a stream of the driver's, C stream 0 its default stream. Off (the real GPU), a C
	// stream value is the driver's stream itself (a cudaStream_t is the CUstream).
	OwnStreams bool
	// Knobs set fields of impl.Config by name, as text: the Go field name ("ChunkSize") or its
	// environment spelling without the prefix ("CHUNK_SIZE"). Sizes accept KiB/MiB/GiB (or K/M/G) suffixes.
	Knobs map[string]string
	// MemoryLimit caps the physical bytes the engine may hold (0: no cap; GMLAKE_MEMORY_LIMIT). See SetMemoryLimit.
	MemoryLimit uint64
	// MemoryFraction caps them at a share of the device's memory (0: none; GMLAKE_MEMORY_FRACTION): a finite
	// number in (0, 1], 1 meaning no cap, whose cap is at least one byte. With MemoryLimit too, the stricter
	// cap is in force, Note is told which, and Stats' memory_limit_from names it.
	MemoryFraction float64
	// Note, if not nil, is told once by New when one memory setting overrides another (one line, no newline).
	Note func(string)
	// TimeDriver measures the wall time of every driver call by kind (Stats' driver_seconds): two clock
	// reads a call, for profiling where an allocator's time goes (bench/e2e fsdp-profile). Off: counts only.
	TimeDriver bool
	// NoHostCache turns off the C library's host cache (GMLAKE_HOST_CACHE=0): every free and allocation then
	// enters the engine (HostClass admits nothing).
	NoHostCache bool

	_ struct{}
}

// Engine is one engine of the C library: a serve.Engine (the memory cap, sync-and-retry on out of memory,
// stream mapping: what every checker of the harness drives) on one device, addressed with plain integers
// (pointers and CUDA streams as uintptr). Safe for concurrent use.
type Engine struct {
	cfg   Config
	s     *serve.Engine
	a     *impl.Allocator // s's engine
	inner vmm.Driver      // the driver given to New, under every wrapper: its Close and modeled time
	timer *wrap.Meter     // times every driver call by kind (Config.TimeDriver); nil: not timed

	torch torchCounters             // PyTorch's statistics kept here rather than in the engine (torch.go)
	hook  atomic.Pointer[EventHook] // receives segment and out-of-memory events (torch.go); nil: none

	limitMu   sync.Mutex // orders cap changes, so that limitFrom names the cap in force
	limitFrom string     // the setting the cap came from (Stats' memory_limit_from); under limitMu
	// fraction is the fraction SetMemoryFraction last set, which MemoryFraction returns exactly (as PyTorch's
	// get_per_process_memory_fraction does); -1 when the cap in force came from bytes. Under limitMu.
	fraction float64
}

// New starts an engine on d, which it owns from then on: Close closes d, and so does a failed
// New (when d has a Close method). Bad knobs are an error wrapping ErrBadKnob.
func New(d vmm.Driver, cfg Config) (*Engine, error) {
	closeDriver := func() {
		if c, ok := d.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
	icfg := impl.Config{Policy: cfg.Policy}
	if err := ApplyKnobs(&icfg, cfg.Knobs); err != nil {
		closeDriver()
		return nil, err
	}
	e := &Engine{cfg: cfg, inner: d}
	under := d
	if cfg.TimeDriver {
		e.timer = wrap.NewTimer(d)
		under = e.timer
	}
	limit, from, note, err := memoryCap(d, cfg)
	if err != nil {
		closeDriver()
		return nil, err
	}
	s, err := serve.New(under, serve.Config{Engine: icfg, MemoryLimit: limit, MapStreams: cfg.OwnStreams})
	if err != nil {
		closeDriver()
		return nil, fmt.Errorf("gmlake: starting policy %q on %s device %d: %w", cfg.Policy, cfg.Driver, cfg.Device, err)
	}
	e.s, e.a, e.limitFrom, e.fraction = s, s.Allocator(), from, -1
	if note != "" && cfg.Note != nil {
		cfg.Note(note)
	}
	return e, nil
}

// Alloc allocates size bytes for use on stream and returns the device address. On the real GPU, a request
// that fails for lack of memory is retried once after the streams' work has completed (serve.Engine).
func (e *Engine) Alloc(size uint64, stream uintptr) (uintptr, error) {
	return e.AllocPool(size, stream, impl.PoolID{})
}

// AllocPool is Alloc from memory pool pool (impl.AllocPool; the zero id is the default pool).
func (e *Engine) AllocPool(size uint64, stream uintptr, pool impl.PoolID) (uintptr, error) {
	p, err := e.s.AllocPool(size, vmm.Stream(stream), pool)
	oom := uint64(0)
	if err != nil && IsOutOfMemory(err) {
		oom = size
	}
	if oom != 0 || e.a.SegmentEventsPending() {
		e.afterCall(oom, stream)
	}
	return uintptr(p), err
}

// Free frees ptr, stream-ordered on its allocation stream. The segment events the free causes (the last
// block of a released private pool gives its memory back) reach the hook before Free returns.
func (e *Engine) Free(ptr uintptr) error {
	err := e.s.Free(vmm.DevicePtr(ptr))
	e.afterCall(0, 0)
	return err
}

// RecordStream marks ptr as used on stream too: its memory is reused only after that stream's work
// submitted before the free has completed.
func (e *Engine) RecordStream(ptr, stream uintptr) error {
	err := e.s.RecordStream(vmm.DevicePtr(ptr), vmm.Stream(stream))
	e.afterCall(0, 0)
	return err
}

// HostClass is impl.Allocator.HostClass, or nothing admitted while the host cache is off (GMLAKE_HOST_CACHE=0).
func (e *Engine) HostClass(ptr uintptr) (lo, hi uint64) {
	if e.cfg.NoHostCache {
		return 0, 0
	}
	return e.a.HostClass(vmm.DevicePtr(ptr))
}

// HostOp is one entry of the host cache's log (impl.HostOp): a free (Size 0) or a hit of Size bytes at Ptr.
type HostOp = impl.HostOp

// IsClosed reports whether err says the engine was closed before the call.
func IsClosed(err error) bool { return errors.Is(err, impl.ErrClosed) }

// Replay applies the host cache's log (impl.Allocator.Replay) and delivers the segment events it caused.
func (e *Engine) Replay(ops []HostOp) (int, error) {
	n, err := e.a.Replay(ops)
	e.afterCall(0, 0)
	return n, err
}

// AllocHost is the host cache's miss: its log replayed, then an allocation of the default pool and its class
// (serve.Engine.AllocHost), in one hold of the engine's lock. While the host cache is off the class is empty.
func (e *Engine) AllocHost(ops []HostOp, size uint64, stream uintptr) (impl.HostAlloc, error) {
	r, err := e.s.AllocHost(ops, size, vmm.Stream(stream))
	if e.cfg.NoHostCache {
		r.Lo, r.Hi = 0, 0
	}
	oom := uint64(0)
	if err != nil && r.ReplayErr == nil && IsOutOfMemory(err) {
		oom = size
	}
	if oom != 0 || e.a.SegmentEventsPending() {
		e.afterCall(oom, stream)
	}
	return r, err
}

// EmptyCache returns every cached (free) byte to the device, after the streams' work has completed (as
// torch.cuda.empty_cache, which synchronises the device).
func (e *Engine) EmptyCache() error {
	err := e.s.EmptyCache()
	e.afterCall(0, 0)
	return err
}

// Policy returns the engine's policy name.
func (e *Engine) Policy() string { return e.a.Policy() }

// TotalMemory returns the device's total memory in bytes, as the driver reported it at open.
func (e *Engine) TotalMemory() uint64 { return e.s.TotalMemory() }

// SetMemoryLimit caps the physical bytes the engine may hold (0 removes the cap). Memory already held
// beyond a new cap stays until it is freed and released (EmptyCache).
func (e *Engine) SetMemoryLimit(bytes uint64) { e.setLimit(bytes, "SetMemoryLimit") }

// setLimit sets the cap and the setting it came from ("none" for no cap).
func (e *Engine) setLimit(bytes uint64, from string) {
	e.limitMu.Lock()
	defer e.limitMu.Unlock()
	if bytes == 0 {
		from = "none"
	}
	e.s.SetMemoryLimit(bytes)
	e.limitFrom, e.fraction = from, -1
}

// MemoryLimitFrom names the setting the cap in force came from: "GMLAKE_MEMORY_LIMIT",
// "GMLAKE_MEMORY_FRACTION", "gmlake_set_memory_fraction" (the C function PyTorch's
// set_per_process_memory_fraction calls), "SetMemoryLimit" (a Go caller), or "none".
func (e *Engine) MemoryLimitFrom() string {
	e.limitMu.Lock()
	defer e.limitMu.Unlock()
	return e.limitFrom
}

// SetMemoryFraction caps the engine at fraction f of the device's total memory, as PyTorch's
// set_per_process_memory_fraction: f must be a finite number in [0, 1] (1: no cap; 0: a cap of 0 bytes,
// under which every allocation that needs new physical memory fails with out-of-memory, as under PyTorch's
// allocator; a fraction so small that it caps at 0 bytes is that cap too, never "no cap"). Errors wrap
// ErrBadKnob and change nothing.
func (e *Engine) SetMemoryFraction(f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("%w: memory fraction %g: want a number in [0, 1]", ErrBadKnob, f)
	}
	e.limitMu.Lock()
	defer e.limitMu.Unlock()
	if f == 1 {
		e.s.SetMemoryLimit(0)
		e.limitFrom = "none"
	} else {
		e.s.SetMemoryCap(uint64(f * float64(e.s.TotalMemory())))
		e.limitFrom = "gmlake_set_memory_fraction"
	}
	e.fraction = f
	return nil
}

// MemoryLimit returns the cap set by SetMemoryLimit (0: none).
func (e *Engine) MemoryLimit() uint64 { return e.s.MemoryLimit() }

// IsConfigError reports whether err is about the configuration (a knob, the policy, a limit), not the
// device: the C library says those once, naming the variable.
func IsConfigError(err error) bool {
	return errors.Is(err, ErrBadKnob) || errors.Is(err, impl.ErrUnknownPolicy) || errors.Is(err, impl.ErrBadConfig)
}

// IsUnknownPolicy reports whether err says the policy name is not one of impl.Policies.
func IsUnknownPolicy(err error) bool { return errors.Is(err, impl.ErrUnknownPolicy) }

// IsInvalidArgument reports whether err says the caller's argument was bad (a size, a pointer that is not a
// live allocation's start, a stream or a pool the engine does not know), not the device or the memory.
func IsInvalidArgument(err error) bool {
	for _, k := range []error{impl.ErrInvalidSize, impl.ErrUnknownPointer, impl.ErrInteriorPtr, impl.ErrDoubleFree,
		impl.ErrUnknownStream, impl.ErrUnknownPool, impl.ErrClosed} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// IsUnknownPointer reports whether err says a pointer was not allocated by the engine.
func IsUnknownPointer(err error) bool { return errors.Is(err, impl.ErrUnknownPointer) }

// IsOutOfMemory reports whether err says the device (or the memory limit) could not serve a request.
func IsOutOfMemory(err error) bool { return errors.Is(err, vmm.ErrOutOfMemory) }

// Stats returns the engine's statistics as a JSON-ready map: byte counters and their peaks, fragmentation
// (1 - peak allocated / peak reserved, and the same against peak requested bytes), counters, and driver
// calls by kind. extra entries are merged in (the C library adds its own counters).
func (e *Engine) Stats(extra map[string]any) map[string]any {
	s := e.a.Stats()
	frag := func(used, reserved uint64) float64 {
		if reserved == 0 {
			return 0
		}
		return 1 - float64(used)/float64(reserved)
	}
	m := map[string]any{
		"device": e.cfg.Device, "driver": e.cfg.Driver, "policy": e.a.Policy(), "initialized": true,
		"requested_bytes": s.RequestedBytes, "peak_requested_bytes": s.PeakRequestedBytes,
		"allocated_bytes": s.AllocatedBytes, "peak_allocated_bytes": s.PeakAllocatedBytes,
		"reserved_bytes": s.ReservedBytes, "peak_reserved_bytes": s.PeakReservedBytes,
		"mapped_bytes":            s.MappedBytes,
		"fragmentation":           frag(s.PeakAllocatedBytes, s.PeakReservedBytes),
		"fragmentation_requested": frag(s.PeakRequestedBytes, s.PeakReservedBytes),
		"num_live":                s.NumLive, "num_allocs": s.NumAllocs, "num_frees": s.NumFrees,
		"num_stitches": s.NumStitches, "num_stitch_reuses": s.NumStitchReuses, "num_stitch_frees": s.NumStitchFrees,
		"num_ooms": s.NumOOMs, "num_cache_flushes": s.NumCacheFlushes,
		"driver_calls": s.DriverCalls.Map(), "driver_calls_total": s.DriverCalls.Total(),
		"memory_limit_bytes": e.s.MemoryLimit(), "memory_limit_from": e.MemoryLimitFrom(), "device_total_bytes": e.s.TotalMemory(),
		"oom_sync_retries": e.s.Counters().SyncRetries, "sync_errors": e.s.Counters().SyncErrors,
	}
	if c, ok := e.inner.(vmm.CallCounter); ok {
		m["modeled_driver_seconds"] = c.ModeledTime().Seconds()
	}
	if e.timer != nil {
		secs, total := map[string]float64{}, 0.0
		for k, t := range e.timer.MeasuredByKind() {
			if t != 0 {
				secs[vmm.CallKind(k).Short()] = t.Seconds()
				total += t.Seconds()
			}
		}
		m["driver_seconds"], m["driver_seconds_total"] = secs, total
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// StatsJSON is Stats as JSON.
func (e *Engine) StatsJSON(extra map[string]any) []byte {
	b, err := json.Marshal(e.Stats(extra))
	if err != nil { // only plain numbers and strings above: cannot happen
		return []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return b
}

// Close releases everything the engine holds and closes the driver. It returns how many allocations were
// still live (released anyway) and how many physical bytes went back to the device.
func (e *Engine) Close() (live int, released uint64, err error) {
	rep, err := e.s.Close()
	live, released = len(rep.Live), rep.ReleasedBytes
	if c, ok := e.inner.(interface{ Close() error }); ok {
		err = errors.Join(err, c.Close())
	}
	return live, released, err
}

// Serve returns the serving layer the C library drives (the harness's checkers judge it, and the engine
// under it, after each call made through this package).
func (e *Engine) Serve() *serve.Engine { return e.s }
