package ops

// Data integrity (Config.Patterns, and the fuzz campaign): every allocation is filled with a byte derived from its ID (Driver.Memset) right after
// Alloc, and a sample of it is read back (Driver.Read) and compared before Free. Two live allocations that
// share a physical byte (a mapping or stitching bug), a missing mapping or missing access (the device
// faults), or a block reused while another stream still writes it (on a real GPU) all show up as a wrong
// byte or a failed call. This is what the models cannot see: the device's own data path.

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// PatternByte is the fill value of allocation id: never 0 (fresh memory reads 0 on the simulated device).
func PatternByte(id uint64) byte { return byte(1 + (id*167)%255) }

// sample is one byte range [off, off+n) of an allocation that is read back.
type sample struct{ off, n uint64 }

// sampleRanges chooses what to read back of a block of size bytes: all of it when small; else the first,
// middle and last 256 bytes and a 64-byte probe in up to probes granules spread over the block (so that a
// chunk shared with another allocation is seen wherever it lies).
func sampleRanges(size, gran uint64, probes int) []sample {
	const whole, edge, probe = 64 * vmm.KiB, 256, 64
	if size <= whole {
		return []sample{{0, size}}
	}
	s := []sample{{0, edge}, {size/2 - edge/2, edge}, {size - edge, edge}}
	granules := (size + gran - 1) / gran
	step := max(uint64(1), granules/uint64(max(probes, 1)))
	for g, k := uint64(0), 0; g < granules && k < probes; g, k = g+step, k+1 {
		// A probe at a varying offset inside the granule, clamped into the block.
		off := g*gran + (g*4099)%max(gran-probe, 1)
		if off+probe > size {
			off = size - probe
		}
		s = append(s, sample{off, probe})
	}
	return s
}

// Fill writes the pattern of an allocation on stream s.
func Fill(d vmm.Driver, ptr vmm.DevicePtr, size uint64, val byte, s vmm.Stream) error {
	if err := d.Memset(ptr, size, val, s); err != nil {
		return fmt.Errorf("writing pattern %#02x into [%v, +%d): %w", val, ptr, size, err)
	}
	return nil
}

// Verify reads the samples of an allocation back on stream s and returns a description of the first wrong
// byte, or the failed call.
func Verify(d vmm.Driver, ptr vmm.DevicePtr, size uint64, val byte, s vmm.Stream, gran uint64, probes int, buf []byte) error {
	for _, sm := range sampleRanges(size, gran, probes) {
		if uint64(cap(buf)) < sm.n {
			buf = make([]byte, sm.n)
		}
		b := buf[:sm.n]
		if err := d.Read(ptr.Add(sm.off), b, s); err != nil {
			return fmt.Errorf("reading back [%v, +%d) of allocation [%v, +%d): %w", ptr.Add(sm.off), sm.n, ptr, size, err)
		}
		for i, x := range b {
			if x != val {
				return fmt.Errorf("byte at offset %d of allocation [%v, +%d) (address %v) reads %#02x, want its pattern %#02x: "+
					"another allocation shares this memory, or it was overwritten after reuse",
					sm.off+uint64(i), ptr, size, ptr.Add(sm.off+uint64(i)), x, val)
			}
		}
	}
	return nil
}
