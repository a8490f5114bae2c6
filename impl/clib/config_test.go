package clib

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// Knob values that are not byte counts a device could have are errors, not 2^63 (issue 14 item 4): NaN,
// Inf, 1e300, a number beyond 2^64, a unit that overflows.
func TestParseBytesRefusesUnrepresentable(t *testing.T) {
	for _, bad := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "1e300", "99999999999999999999",
		"99999999999GiB", "18446744073709551616", "1e20B", "17179869184GiB"} {
		if n, err := ParseBytes(bad); !errors.Is(err, ErrBadKnob) {
			t.Errorf("ParseBytes(%q) = %d, %v; want ErrBadKnob", bad, n, err)
		}
	}
	if n, err := ParseBytes("18446744073709551615"); err != nil || n != math.MaxUint64 {
		t.Errorf("ParseBytes(2^64-1) = %d, %v", n, err)
	}
}

// Float and integer knobs refuse NaN, Inf and out-of-range values with the knob's name.
func TestApplyKnobsRefusesNonFinite(t *testing.T) {
	for _, knobs := range []map[string]string{{"CHUNK_SIZE": "NaN"}, {"CHUNK_SIZE": "1e300"},
		{"SBLOCK_CACHE": "99999999999999999999"}, {"GMLAKE_CHUNK_SIZE": "Inf"}} {
		e, err := New(newSim(0 /* capacity: an H200 */), simConfig(Config{Knobs: knobs}))
		if !errors.Is(err, ErrBadKnob) {
			if e != nil {
				e.Close()
			}
			t.Errorf("knobs %v: err %v, want ErrBadKnob", knobs, err)
			continue
		}
		for k := range knobs {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("knobs %v: %v does not name %s", knobs, err, k)
			}
		}
	}
	if _, err := New(newSim(0), simConfig(Config{Knobs: map[string]string{"GMLAKE_CHUNK_SIZE": "64MiB"}})); err != nil {
		t.Errorf("a knob spelled with its GMLAKE_ prefix: %v", err)
	}
}

// GMLAKE_MEMORY_FRACTION is a finite number in (0, 1] (0 in the environment would start an engine that can
// hold nothing). SetMemoryFraction, PyTorch's set_per_process_memory_fraction, takes [0, 1] as PyTorch's
// allocator does: 0, or a fraction so small it caps at 0 bytes, is a cap of 0 bytes under which every
// allocation fails with out-of-memory, never "no cap" (issue 14 item 4); get returns the fraction set,
// exactly; a refused fraction changes nothing.
func TestMemoryFractionZeroIsACapOfZeroBytes(t *testing.T) {
	for _, bad := range []string{"NaN", "Inf", "0", "-0.5", "1.5", "x", ""} {
		if f, err := ParseFraction(bad); !errors.Is(err, ErrBadKnob) {
			t.Errorf("ParseFraction(%q) = %g, %v; want ErrBadKnob", bad, f, err)
		}
	}
	if f, err := ParseFraction("0.25"); err != nil || f != 0.25 {
		t.Errorf("ParseFraction(0.25) = %g, %v", f, err)
	}
	e, err := New(newSim(1*vmm.GiB), simConfig(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetMemoryFraction(0.5); err != nil || e.MemoryLimit() != 512*vmm.MiB || e.MemoryFraction() != 0.5 {
		t.Fatalf("fraction 0.5 of 1 GiB: %v, limit %d, fraction %g", err, e.MemoryLimit(), e.MemoryFraction())
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), -0.1, 2} {
		if err := e.SetMemoryFraction(f); !errors.Is(err, ErrBadKnob) {
			t.Errorf("SetMemoryFraction(%g) = %v, want ErrBadKnob", f, err)
		}
		if e.MemoryLimit() != 512*vmm.MiB || e.MemoryFraction() != 0.5 {
			t.Fatalf("a refused fraction %g changed the limit to %d, the fraction to %g", f, e.MemoryLimit(), e.MemoryFraction())
		}
	}
	for _, f := range []float64{0, 1e-12} {
		if err := e.SetMemoryFraction(f); err != nil || e.MemoryFraction() != f || e.MemoryLimitFrom() != "gmlake_set_memory_fraction" {
			t.Fatalf("SetMemoryFraction(%g): %v, fraction %g, from %q", f, err, e.MemoryFraction(), e.MemoryLimitFrom())
		}
		if p, err := e.Alloc(2*vmm.MiB, 0); !IsOutOfMemory(err) {
			t.Fatalf("an allocation under the fraction %g (a cap of 0 bytes): %#x, %v; want out-of-memory", f, p, err)
		}
	}
	if err := e.SetMemoryFraction(1); err != nil || e.MemoryFraction() != 1 || e.MemoryLimitFrom() != "none" {
		t.Fatalf("SetMemoryFraction(1): %v, fraction %g, from %q", err, e.MemoryFraction(), e.MemoryLimitFrom())
	}
	p, err := e.Alloc(2*vmm.MiB, 0)
	if err != nil {
		t.Fatalf("an allocation with the cap lifted: %v", err)
	}
	if err := e.Free(p); err != nil {
		t.Fatal(err)
	}
}

// Property: a byte count that is not 0 but rounds to 0 bytes is refused (GMLAKE_MEMORY_LIMIT=0.5 was a 0-byte
// cap, which means none), a fraction of a byte above 1 rounds down, and TiB is a unit (issue 36 item 3).
func TestParseBytesRefusesWhatRoundsToZero(t *testing.T) {
	for _, bad := range []string{"0.5", "0.0004KiB", "1e-300", "0.0000001B"} {
		if n, err := ParseBytes(bad); !errors.Is(err, ErrBadKnob) || !strings.Contains(err.Error(), "rounds to 0") {
			t.Errorf("ParseBytes(%q) = %d, %v; want ErrBadKnob saying it rounds to 0", bad, n, err)
		}
	}
	for in, want := range map[string]uint64{"1.5": 1, "1.3KiB": 1331, "2TiB": 2 << 40, "1t": 1 << 40, "0.0TiB": 0} {
		if n, err := ParseBytes(in); err != nil || n != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
}
