package clib

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Property: ApplyKnobs sets each kind of field (byte counts with units, integers in any base, booleans,
// floats) by Go name, environment name or the GMLAKE_ spelling, exactly, and leaves the others alone.
func TestApplyKnobsSetsEachKind(t *testing.T) {
	cfg := impl.Config{Policy: impl.PolicyCaching, ReAlloc: true}
	err := ApplyKnobs(&cfg, map[string]string{"GMLAKE_CHUNK_SIZE": "4MiB", "StitchMin": " 1G", "SBLOCK_CACHE": "0x10",
		"NO_CROSS_STREAM": " true", "REUSE_LIMIT": "1.5", "DEFRAG_LEVEL": "2", "AutoGC": "2048"})
	if err != nil {
		t.Fatal(err)
	}
	want := impl.Config{Policy: impl.PolicyCaching, ReAlloc: true, ChunkSize: 4 * vmm.MiB, StitchMin: vmm.GiB,
		SBlockCache: 16, NoCrossStream: true, ReuseLimit: 1.5, DefragLevel: 2, AutoGC: 2048}
	if cfg != want {
		t.Fatalf("ApplyKnobs set %+v, want %+v", cfg, want)
	}
	if err := ApplyKnobs(&cfg, nil); err != nil || cfg != want {
		t.Fatalf("no knobs: %v, %+v", err, cfg)
	}
}

// Property: a knob that names no settable field (the policy and the seeded bugs are not knobs) or whose
// value does not parse is ErrBadKnob, and the error names the knob and what is wrong with it.
func TestApplyKnobsRefusesBadKnobs(t *testing.T) {
	for _, c := range []struct{ key, value, says string }{
		{"NO_SUCH_KNOB", "1", "unknown knob"},
		{"POLICY", "caching", "unknown knob"},
		{"TEST_ONLY_MUTATIONS", "1", "unknown knob"},
		{"NO_CROSS_STREAM", "maybe", "NO_CROSS_STREAM"},
		{"REUSE_LIMIT", "x", "REUSE_LIMIT"},
		{"REUSE_LIMIT", "NaN", "not a finite number"},
		{"SBLOCK_CACHE", "1.5", "SBLOCK_CACHE"},
		{"DEFRAG_LEVEL", "99999999999999999999", "DEFRAG_LEVEL"},
		{"CHUNK_SIZE", "-1", "not a byte count"},
		{"CHUNK_SIZE", "0.5", "rounds to 0"},
		{"DEFRAG_LEVEL", "-1", "0 to 3"},
		{"REUSE_LIMIT", "-0.5", ">= 0"},
		{"STITCH_MIN", "1000", "multiple of 512B"},
	} {
		var cfg impl.Config
		err := ApplyKnobs(&cfg, map[string]string{c.key: c.value})
		if !errors.Is(err, ErrBadKnob) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s=%q: %v; want ErrBadKnob naming %s and saying %q", c.key, c.value, err, c.key, c.says)
		}
	}
}

// Property: KnobNames lists every settable field of impl.Config in its environment spelling, sorted, and
// neither the policy nor the seeded bugs.
func TestKnobNamesAreTheSettableFields(t *testing.T) {
	names := KnobNames()
	if !slices.IsSorted(names) {
		t.Fatalf("KnobNames not sorted: %v", names)
	}
	for _, want := range []string{"CHUNK_SIZE", "SBLOCK_CACHE", "NO_CROSS_STREAM", "REUSE_LIMIT", "STITCH_MIN", "AUTO_GC"} {
		if !slices.Contains(names, want) {
			t.Errorf("KnobNames lacks %s: %v", want, names)
		}
	}
	for _, not := range []string{"POLICY", "TEST_ONLY_MUTATIONS"} {
		if slices.Contains(names, not) {
			t.Errorf("KnobNames has %s: %v", not, names)
		}
	}
}

// Property: the statistics JSON is the engine's statistics, value for value (bytes, peaks, counts, driver
// calls, fragmentation by its formula), with the layer's figures: the memory limit, the device's total and
// the out-of-memory counters.
func TestStatsJSONIsTheEngines(t *testing.T) {
	e, err := New(newSim(256*vmm.MiB), simConfig(Config{Device: 3, MemoryLimit: 128 * vmm.MiB}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Alloc(3*vmm.MiB, 0x7f00)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Alloc(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Free(a); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Alloc(200*vmm.MiB, 0); !IsOutOfMemory(err) {
		t.Fatalf("200 MiB under a 128 MiB limit: %v, want out of memory", err)
	}
	var got map[string]any
	if err := json.Unmarshal(e.StatsJSON(nil), &got); err != nil {
		t.Fatal(err)
	}
	st := e.a.Stats()
	frag := func(used, reserved uint64) float64 { return 1 - float64(used)/float64(reserved) }
	want := map[string]any{
		"device": 3.0, "driver": "sim", "policy": e.a.Policy(), "initialized": true,
		"requested_bytes": float64(st.RequestedBytes), "peak_requested_bytes": float64(st.PeakRequestedBytes),
		"allocated_bytes": float64(st.AllocatedBytes), "peak_allocated_bytes": float64(st.PeakAllocatedBytes),
		"reserved_bytes": float64(st.ReservedBytes), "peak_reserved_bytes": float64(st.PeakReservedBytes),
		"mapped_bytes": float64(st.MappedBytes), "num_live": float64(st.NumLive), "num_allocs": float64(st.NumAllocs),
		"num_frees": float64(st.NumFrees), "num_stitches": float64(st.NumStitches), "num_stitch_reuses": float64(st.NumStitchReuses),
		"num_stitch_frees": float64(st.NumStitchFrees), "num_ooms": float64(st.NumOOMs), "num_cache_flushes": float64(st.NumCacheFlushes),
		"driver_calls_total":      float64(st.DriverCalls.Total()),
		"fragmentation":           frag(st.PeakAllocatedBytes, st.PeakReservedBytes),
		"fragmentation_requested": frag(st.PeakRequestedBytes, st.PeakReservedBytes),
		"memory_limit_bytes":      float64(128 * vmm.MiB), "device_total_bytes": float64(256 * vmm.MiB),
		"oom_sync_retries": float64(e.s.Counters().SyncRetries), "sync_errors": 0.0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stats[%q] = %v, want %v (the engine's)", k, got[k], v)
		}
	}
	if st.NumLive != 1 || st.NumFrees != 1 || st.RequestedBytes != 1000 || st.PeakRequestedBytes != 3*vmm.MiB+1000 {
		t.Errorf("the engine's own statistics %+v do not say what happened (one live of 1000 bytes, one free)", st)
	}
	calls := got["driver_calls"].(map[string]any)
	for k, n := range st.DriverCalls.Map() {
		if calls[k] != float64(n) {
			t.Errorf("driver_calls[%q] = %v, want %d", k, calls[k], n)
		}
	}
	if err := e.Free(b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing reserved: fragmentation 0, not NaN.
	e, err = New(newSim(256*vmm.MiB), simConfig(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(map[string]any{"num_live": "overridden"}); s["fragmentation"] != 0.0 || s["num_live"] != "overridden" {
		t.Errorf("an unused engine's stats: fragmentation %v, extra entries %v", s["fragmentation"], s["num_live"])
	}
	e.Close()
}

// Property: SetMemoryFraction caps the engine at that share of the device (1: no cap), and a fraction out of
// [0, 1] is ErrBadKnob and leaves the cap as it was; the configuration errors say so.
func TestSetMemoryFraction(t *testing.T) {
	e, err := New(newSim(256*vmm.MiB), simConfig(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetMemoryFraction(0.25); err != nil || e.MemoryLimit() != 64*vmm.MiB {
		t.Fatalf("fraction 0.25 of 256 MiB: limit %d, %v; want 64 MiB", e.MemoryLimit(), err)
	}
	for _, bad := range []float64{-0.5, 1.5, math.NaN()} {
		if err := e.SetMemoryFraction(bad); !errors.Is(err, ErrBadKnob) || !IsConfigError(err) || e.MemoryLimit() != 64*vmm.MiB {
			t.Errorf("fraction %g: %v, limit %d; want ErrBadKnob and the limit unchanged", bad, err, e.MemoryLimit())
		}
	}
	if err := e.SetMemoryFraction(1); err != nil || e.MemoryLimit() != 0 {
		t.Fatalf("fraction 1: limit %d, %v; want no cap", e.MemoryLimit(), err)
	}
	if e.TotalMemory() != 256*vmm.MiB {
		t.Errorf("TotalMemory %d, want the device's 256 MiB", e.TotalMemory())
	}
}

// Property: New refuses an unknown policy (IsUnknownPolicy, a configuration error) and leaves nothing on the
// device; the error kinds are told apart.
func TestNewRefusesAnUnknownPolicy(t *testing.T) {
	d := newSim(256 * vmm.MiB)
	_, err := New(d, simConfig(Config{Policy: "no-such-policy"}))
	if !IsUnknownPolicy(err) || !IsConfigError(err) || IsOutOfMemory(err) || IsUnknownPointer(err) {
		t.Fatalf("New with an unknown policy: %v", err)
	}
	if l := d.Leaks(); !l.Empty() {
		t.Errorf("a failed New left on the device: %s", l)
	}
	if IsConfigError(vmm.ErrOutOfMemory) || !IsOutOfMemory(vmm.ErrOutOfMemory) || !IsUnknownPointer(impl.ErrUnknownPointer) {
		t.Errorf("error kinds mixed up")
	}
}

// closingDevice is a simulated device with a Close, as the real driver has.
type closingDevice struct {
	*sim.Device
	closed int
}

func (d *closingDevice) Close() error { d.closed++; return nil }

// Property: New owns the driver it is given: a failed New (a bad knob, an unknown policy) closes it, and so
// does Close.
func TestNewClosesTheDriverOnFailure(t *testing.T) {
	for _, cfg := range []Config{{Knobs: map[string]string{"NO_SUCH_KNOB": "1"}}, {Policy: "no-such-policy"}} {
		d := &closingDevice{Device: newSim(64 * vmm.MiB)}
		if _, err := New(d, simConfig(cfg)); err == nil || d.closed != 1 {
			t.Errorf("New(%+v): %v, driver closed %d times; want an error and the driver closed once", cfg, err, d.closed)
		}
	}
	d := &closingDevice{Device: newSim(64 * vmm.MiB)}
	e, err := New(d, simConfig(Config{}))
	if err != nil || d.closed != 0 {
		t.Fatalf("New: %v, driver closed %d times", err, d.closed)
	}
	if _, _, err := e.Close(); err != nil || d.closed != 1 {
		t.Fatalf("Close: %v, driver closed %d times; want once", err, d.closed)
	}
}
