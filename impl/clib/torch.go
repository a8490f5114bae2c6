package clib

// What PyTorch's full CUDAAllocator needs from an engine beyond alloc and free (issue 15): its statistics,
// the figures of a failed allocation, cacheInfo, getBaseAllocation and the memory fraction. capi/torch.go
// exposes them as C.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// PyTorch's statistics, as the engine keeps them (capi may import only this package).
type (
	DeviceStats = impl.DeviceStats
	Stat        = impl.Stat
	StatArray   = impl.StatArray
)

// torchCounters are the bases of the statistics the serving layer counts, because its retry (synchronise
// the streams, allocate again) sits above the engine: an out of memory is counted once it reaches the caller.
type torchCounters struct {
	oomsBase, syncsBase atomic.Uint64 // serve.Counters' OOMs and Syncs at the last ResetAccumulatedStats
}

// TorchStats returns PyTorch's DeviceStats of the engine (see impl/torchstats.go for the meaning), with
// num_ooms counting the allocations that failed with out of memory after every retry (including requests
// larger than the device) and num_sync_all_streams the synchronisations of every stream (empty_cache and the
// out-of-memory path; counted on the simulated device too, where they complete at once).
func (e *Engine) TorchStats() impl.DeviceStats {
	s := e.a.TorchStats()
	c := e.s.Counters()
	s.NumOOMs = int64(c.OOMs - e.torch.oomsBase.Load())
	s.NumSyncAllStreams = int64(c.Syncs - e.torch.syncsBase.Load())
	return s
}

// ResetPeakStats sets every peak to its current value.
func (e *Engine) ResetPeakStats() { e.a.ResetPeakStats() }

// ResetAccumulatedStats zeroes the accumulated totals and the num_* counters.
func (e *Engine) ResetAccumulatedStats() {
	e.a.ResetAccumulatedStats()
	c := e.s.Counters()
	e.torch.oomsBase.Store(c.OOMs)
	e.torch.syncsBase.Store(c.Syncs)
}

// Failure kinds of AllocFailure (gmlake.h's GMLAKE_FAIL_*).
const (
	FailOOM     = 1 // out of memory, also a request larger than the device
	FailInvalid = 2 // a bad argument (size 0 is not a failure)
	FailOther   = 3 // a driver error or a disabled engine
)

// AllocFailure is why an allocation failed, with the figures PyTorch's out-of-memory message needs.
type AllocFailure struct {
	Kind                                                                   int
	Requested, DeviceTotal, DeviceFree, Allocated, Reserved, Cached, Limit uint64

	_ struct{}
}

// Failure describes the failure err of an allocation of size bytes.
func (e *Engine) Failure(size uint64, err error) AllocFailure {
	f := AllocFailure{Kind: FailOther, Requested: size, DeviceTotal: e.s.TotalMemory(), Limit: e.s.MemoryLimit()}
	var oom *impl.OOMError
	switch {
	case errors.As(err, &oom):
		f.Kind, f.DeviceFree, f.Allocated, f.Reserved, f.Cached = FailOOM, oom.DeviceFree, oom.Live, oom.Reserved, oom.Cached
		return f
	case IsOutOfMemory(err):
		f.Kind = FailOOM
	case errors.Is(err, impl.ErrInvalidSize), errors.Is(err, impl.ErrUnknownStream), errors.Is(err, impl.ErrUnknownPool):
		f.Kind = FailInvalid
	}
	st := e.a.Stats()
	f.Allocated, f.Reserved = st.AllocatedBytes, st.ReservedBytes
	f.Cached = st.ReservedBytes - min(st.ReservedBytes, st.AllocatedBytes)
	f.DeviceFree, _, _ = e.s.Driver().MemInfo()
	return f
}

// CacheInfo returns the largest block an allocation of the default pool could get without new memory.
func (e *Engine) CacheInfo() uint64 { return e.a.LargestCachedBlock() }

// BaseAllocation returns the live allocation holding ptr: its start and block size.
func (e *Engine) BaseAllocation(ptr uintptr) (uintptr, uint64, error) {
	r, err := e.a.AllocationAt(vmm.DevicePtr(ptr))
	return uintptr(r.Base), r.Size, err
}

// IPCExport is a live allocation as another process maps it (impl.IPCExport).
type IPCExport = impl.IPCExport

// ExportIPC returns the physical handles under the live allocation that starts at ptr, exported as POSIX file
// descriptors, for CUDA IPC (impl.Allocator.ExportIPC).
func (e *Engine) ExportIPC(ptr uintptr) (IPCExport, error) { return e.a.ExportIPC(vmm.DevicePtr(ptr)) }

// MemoryFraction returns the cap on the physical memory as a fraction of the device (1: no cap): the
// fraction SetMemoryFraction set, exactly, else the cap in bytes over the device's total.
func (e *Engine) MemoryFraction() float64 {
	e.limitMu.Lock()
	f := e.fraction
	e.limitMu.Unlock()
	if f >= 0 {
		return f
	}
	lim, total := e.s.MemoryLimit(), e.s.TotalMemory()
	if lim == 0 || total == 0 || lim >= total {
		return 1
	}
	return float64(lim) / float64(total)
}

// cStream turns a driver stream back into the C stream it stands for.
func (e *Engine) cStream(s vmm.Stream) uintptr { return uintptr(e.s.CallerStream(s)) }

// Event actions of the event hook (gmlake.h's GMLAKE_EVENT_*).
const (
	EventSegmentMap   = 0
	EventSegmentUnmap = 1
	EventOOM          = 2
)

// EventHook receives segment events: action (Event*), address and size (for EventOOM: 0 and the bytes
// asked for), and the C stream.
type EventHook func(action int, addr uintptr, size uint64, stream uintptr)

// SetEventHook sets (nil: clears) the hook that receives segment map/unmap and out-of-memory events. It is
// called outside the engine's lock, on the thread of the call that caused the event.
func (e *Engine) SetEventHook(h EventHook) {
	if h == nil {
		e.hook.Store(nil)
	} else {
		e.hook.Store(&h)
	}
	e.a.RecordSegmentEvents(h != nil)
}

// deliverEvents hands the engine's recorded segment events to the hook.
func (e *Engine) deliverEvents() {
	evs := e.a.TakeSegmentEvents()
	h := e.hook.Load()
	if h == nil {
		return
	}
	for _, ev := range evs {
		act := EventSegmentMap
		if ev.Action == impl.SegmentUnmap {
			act = EventSegmentUnmap
		}
		(*h)(act, uintptr(ev.Addr), ev.Size, e.cStream(ev.Stream))
	}
}

// afterCall delivers pending segment events and, for a failed allocation of size bytes on stream that ran
// out of memory, the out-of-memory event.
func (e *Engine) afterCall(oomSize uint64, stream uintptr) {
	if e.a.SegmentEventsPending() {
		e.deliverEvents()
	}
	if oomSize != 0 {
		if h := e.hook.Load(); h != nil {
			(*h)(EventOOM, 0, oomSize, stream)
		}
	}
}

type jsonBlock struct {
	Address      uint64 `json:"address"`
	Size         uint64 `json:"size"`
	Requested    uint64 `json:"requested_size"`
	State        string `json:"state"`
	StitchedInto uint64 `json:"stitched_into,omitempty"`
}

type jsonSegment struct {
	Device     int         `json:"device"`
	Address    uint64      `json:"address"`
	TotalSize  uint64      `json:"total_size"`
	Stream     uint64      `json:"stream"`
	Type       string      `json:"segment_type"`
	Allocated  uint64      `json:"allocated_size"`
	Active     uint64      `json:"active_size"`
	Requested  uint64      `json:"requested_size"`
	Stitched   bool        `json:"stitched"`
	Pool       [2]uint64   `json:"pool_id"`
	Expandable bool        `json:"is_expandable"`
	Counter    uint64      `json:"registration_counter"`
	Blocks     []jsonBlock `json:"blocks"`
}

type jsonStitched struct {
	Address   uint64    `json:"address"`
	Size      uint64    `json:"size"`
	Requested uint64    `json:"requested_size"`
	Stream    uint64    `json:"stream"`
	Pool      [2]uint64 `json:"pool_id"`
	State     string    `json:"state"`
	Parts     []uint64  `json:"parts"`
}

// SnapshotJSON returns the segments and blocks as the JSON of gmlake.h's gmlake_snapshot_json.
func (e *Engine) SnapshotJSON() []byte {
	snap := e.a.TorchSnapshot()
	out := struct {
		Device   int            `json:"device"`
		Segments []jsonSegment  `json:"segments"`
		Stitched []jsonStitched `json:"stitched_blocks"`
	}{Device: e.cfg.Device, Segments: []jsonSegment{}, Stitched: []jsonStitched{}}
	for _, seg := range snap.Segments {
		js := jsonSegment{Device: e.cfg.Device, Address: uint64(seg.Addr), TotalSize: seg.Size,
			Stream: uint64(e.cStream(seg.Stream)), Type: "small", Stitched: seg.Stitched,
			Pool: [2]uint64{seg.Pool.A, seg.Pool.B}, Expandable: seg.Expandable, Counter: seg.Created,
			Blocks: []jsonBlock{}}
		if seg.Large {
			js.Type = "large"
		}
		for _, b := range seg.Blocks {
			js.Blocks = append(js.Blocks, jsonBlock{Address: uint64(b.Addr), Size: b.Size, Requested: b.Requested,
				State: b.State.String(), StitchedInto: uint64(b.StitchedInto)})
			switch b.State {
			case impl.TorchActiveAllocated:
				js.Allocated += b.Size
				js.Active += b.Size
			case impl.TorchActivePending:
				js.Active += b.Size
			}
			js.Requested += b.Requested
		}
		out.Segments = append(out.Segments, js)
	}
	for _, sb := range snap.Stitched {
		js := jsonStitched{Address: uint64(sb.Addr), Size: sb.Size, Requested: sb.Requested,
			Stream: uint64(e.cStream(sb.Stream)), Pool: [2]uint64{sb.Pool.A, sb.Pool.B}, State: sb.State.String(),
			Parts: []uint64{}}
		for _, p := range sb.Parts {
			js.Parts = append(js.Parts, uint64(p))
		}
		out.Stitched = append(out.Stitched, js)
	}
	b, err := json.Marshal(out)
	if err != nil { // plain numbers and strings: cannot happen
		return []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return b
}

// PoolID names a memory pool (PyTorch's MempoolId_t); the zero value is the default pool.
type PoolID = impl.PoolID

// ErrUnknownPool matches the errors about a pool never created or already released.
var ErrUnknownPool = impl.ErrUnknownPool

// CreateOrIncrefPool creates pool id or increments its use count; it returns the new count.
func (e *Engine) CreateOrIncrefPool(id PoolID) (int, error) { return e.a.CreateOrIncrefPool(id) }

// ReleasePool decrements pool id's use count; at 0 the pool's free memory goes back to the device (and the
// memory of its live allocations as they are freed). It returns the new count.
func (e *Engine) ReleasePool(id PoolID) (int, error) {
	n, err := e.a.ReleasePool(id)
	e.afterCall(0, 0)
	return n, err
}

// PoolUseCount returns pool id's use count (0: none).
func (e *Engine) PoolUseCount(id PoolID) int { return e.a.PoolUseCount(id) }

// PoolLive returns the addresses of pool id's live allocations, in address order.
func (e *Engine) PoolLive(id PoolID) []uintptr {
	ps := e.a.PoolLive(id)
	out := make([]uintptr, len(ps))
	for i, p := range ps {
		out[i] = uintptr(p)
	}
	return out
}

// SetCapturing says that stream begins (on) or ends (off) a CUDA graph capture (impl.SetCapturing).
func (e *Engine) SetCapturing(stream uintptr, on bool) error {
	err := e.s.SetCapturing(vmm.Stream(stream), on)
	e.afterCall(0, 0)
	return err
}
