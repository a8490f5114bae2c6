package clib

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// hookLog records the event hook's calls.
type hookLog struct{ acts []int }

// Property: what PyTorch's allocator reads beyond alloc and free agrees with what happened: num_ooms counts
// the out of memory that reached the caller (a request larger than the device too), the OOM event reaches the
// hook with the bytes asked for, a reset zeroes the counters the layer keeps, the failure's figures are the
// error's, segment events reach the hook, and the snapshot JSON lists the segments with their blocks.
func TestTorchViewsAgreeWithTheCalls(t *testing.T) {
	e, err := New(newSim(64*vmm.MiB), simConfig(Config{MemoryLimit: 32 * vmm.MiB}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var h hookLog
	var oomSize uint64
	e.SetEventHook(func(act int, addr uintptr, size uint64, stream uintptr) {
		h.acts = append(h.acts, act)
		if act == EventOOM {
			oomSize = size
		}
	})
	p, err := e.Alloc(4*vmm.MiB, 0x7f00)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.acts) == 0 || h.acts[0] != EventSegmentMap {
		t.Fatalf("events after a first allocation: %v, want a segment map", h.acts)
	}
	if err := e.SetCapturing(0x7f00, true); err != nil {
		t.Fatal(err)
	}
	if err := e.SetCapturing(0x7f00, false); err != nil {
		t.Fatal(err)
	}
	_, err = e.Alloc(40*vmm.MiB, 0) // beyond the 32 MiB limit
	if !IsOutOfMemory(err) || oomSize != 40*vmm.MiB {
		t.Fatalf("40 MiB under a 32 MiB limit: %v, OOM event for %d bytes; want out of memory, an event for 40 MiB", err, oomSize)
	}
	f := e.Failure(40*vmm.MiB, err)
	st := e.a.Stats()
	if f.Kind != FailOOM || f.Requested != 40*vmm.MiB || f.Allocated != st.AllocatedBytes || f.Reserved != st.ReservedBytes ||
		f.Cached != st.ReservedBytes-st.AllocatedBytes || f.Limit != 32*vmm.MiB || f.DeviceTotal != 64*vmm.MiB {
		t.Fatalf("failure %+v, engine %+v", f, st)
	}
	if f := e.Failure(0, impl.ErrInvalidSize); f.Kind != FailInvalid || f.Allocated != st.AllocatedBytes {
		t.Errorf("failure of an invalid size: %+v", f)
	}
	if f := e.Failure(1, errors.New("driver")); f.Kind != FailOther {
		t.Errorf("failure of a driver error: %+v", f)
	}
	if _, err := e.Alloc(65*vmm.MiB, 0); !IsOutOfMemory(err) {
		t.Fatalf("more than the device: %v", err)
	}
	if n := e.TorchStats().NumOOMs; n != 2 {
		t.Fatalf("num_ooms %d after two out of memory, want 2", n)
	}
	if err := e.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	syncs := e.TorchStats().NumSyncAllStreams
	if syncs < 1 {
		t.Fatalf("num_sync_all_streams %d after an EmptyCache, want at least 1", syncs)
	}
	e.ResetAccumulatedStats()
	if s := e.TorchStats(); s.NumOOMs != 0 || s.NumSyncAllStreams != 0 {
		t.Fatalf("after a reset: num_ooms %d, num_sync_all_streams %d; want 0", s.NumOOMs, s.NumSyncAllStreams)
	}
	if fr := e.MemoryFraction(); fr != 0.5 {
		t.Errorf("MemoryFraction %g under a 32 MiB cap of 64 MiB, want 0.5", fr)
	}
	var snap struct {
		Segments []struct {
			Stream    uint64 `json:"stream"`
			Allocated uint64 `json:"allocated_size"`
			Active    uint64 `json:"active_size"`
			Blocks    []struct {
				Address uint64 `json:"address"`
			} `json:"blocks"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(e.SnapshotJSON(), &snap); err != nil {
		t.Fatal(err)
	}
	// One live 4 MiB block: allocated and active alike (active_size also counts blocks pending a free).
	if len(snap.Segments) != 1 || snap.Segments[0].Stream != 0x7f00 || snap.Segments[0].Allocated != 4*vmm.MiB ||
		snap.Segments[0].Active != 4*vmm.MiB || len(snap.Segments[0].Blocks) == 0 {
		t.Fatalf("snapshot %+v, want one segment of C stream 0x7f00 with 4 MiB allocated and active", snap)
	}
	if err := e.Free(p); err != nil {
		t.Fatal(err)
	}
	e.SetMemoryLimit(0)
	if fr := e.MemoryFraction(); fr != 1 {
		t.Errorf("MemoryFraction %g without a cap, want 1", fr)
	}
	if err := e.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if last := h.acts[len(h.acts)-1]; last != EventSegmentUnmap {
		t.Errorf("events after EmptyCache released the segment: %v, want a segment unmap last", h.acts)
	}
	if _, _, err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.EmptyCache(); !errors.Is(err, impl.ErrClosed) {
		t.Errorf("EmptyCache after Close: %v, want %v", err, impl.ErrClosed)
	}
	if err := e.SetCapturing(0, true); !errors.Is(err, impl.ErrClosed) {
		t.Errorf("SetCapturing after Close: %v, want %v", err, impl.ErrClosed)
	}
}

// Property: the snapshot's registration_counter orders segments by creation, not by address: a segment made
// after another has the larger counter even where it reuses a lower address (ProcessGroupNCCL registers a
// pool's segments in this order on every rank, and asserts each counter is set).
func TestSnapshotRegistrationCounterFollowsCreation(t *testing.T) {
	e, err := New(newSim(256*vmm.MiB), simConfig(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	type seg struct {
		Address uint64 `json:"address"`
		Stream  uint64 `json:"stream"`
		Counter *int64 `json:"registration_counter"`
	}
	segments := func() map[uint64]seg { // by stream: each stream's block has a segment of its own
		var snap struct {
			Segments []seg `json:"segments"`
		}
		if err := json.Unmarshal(e.SnapshotJSON(), &snap); err != nil {
			t.Fatal(err)
		}
		out := map[uint64]seg{}
		for _, s := range snap.Segments {
			if s.Counter == nil || *s.Counter < 0 {
				t.Fatalf("segment at %#x: registration_counter %v, want a number >= 0", s.Address, s.Counter)
			}
			out[s.Stream] = s
		}
		return out
	}
	first, err := e.Alloc(24*vmm.MiB, 0x100)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []uintptr{0x200, 0x300} {
		if _, err := e.Alloc(24*vmm.MiB, st); err != nil {
			t.Fatal(err)
		}
	}
	s := segments()
	if len(s) != 3 || !(*s[0x100].Counter < *s[0x200].Counter && *s[0x200].Counter < *s[0x300].Counter) {
		t.Fatalf("segments of streams 0x100, 0x200, 0x300 made in that order: %+v, want counters increasing", s)
	}
	// Release the first segment; the next one made comes later, wherever it lands.
	if err := e.Free(first); err != nil {
		t.Fatal(err)
	}
	if err := e.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Alloc(24*vmm.MiB, 0x400); err != nil {
		t.Fatal(err)
	}
	s2 := segments()
	if _, ok := s2[0x100]; ok || *s2[0x400].Counter <= *s2[0x300].Counter {
		t.Fatalf("after the first segment's release and a new one on stream 0x400: %+v, want 0x100 gone and 0x400's counter above 0x300's", s2)
	}
}
