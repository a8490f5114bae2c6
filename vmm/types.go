package vmm

import "fmt"

// Sizes used throughout the project.
const (
	KiB uint64 = 1 << 10
	MiB uint64 = 1 << 20
	GiB uint64 = 1 << 30
)

// Bytes is a count of bytes: the size or offset of physical memory, of a virtual range, of a request. The
// engine's internals (impl) carry every size as Bytes; the Driver interface, Range and the helpers below
// still take uint64 and switch to Bytes in one mechanical change (docs/ARCHITECTURE.md, "Named units").
type Bytes uint64

// String prints the count with a binary unit (FormatBytes).
func (n Bytes) String() string { return FormatBytes(uint64(n)) }

// DevicePtr is a virtual address in the GPU's address space (CUdeviceptr). Zero is never a valid allocation.
type DevicePtr uint64

// String prints the address in hex.
func (p DevicePtr) String() string { return fmt.Sprintf("%#x", uint64(p)) }

// Add returns p advanced by n bytes.
func (p DevicePtr) Add(n uint64) DevicePtr { return p + DevicePtr(n) }

// Handle names a physical allocation (CUmemGenericAllocationHandle): a value, not a pointer. Zero is invalid.
type Handle uint64

// Stream names an ordered queue of GPU work (CUstream). DefaultStream (0) always exists.
type Stream uint64

// DefaultStream is the device's legacy default stream; it needs no creation and cannot be destroyed.
const DefaultStream Stream = 0

// Event marks a point in a stream's work (CUevent). It completes when all work recorded before it on its
// stream has completed. Zero is invalid.
type Event uint64

// Range is the half-open virtual range [Base, Base+Size).
type Range struct {
	Base DevicePtr
	Size uint64
}

// Limit returns the first address past the range.
func (r Range) Limit() DevicePtr { return r.Base.Add(r.Size) }

// Contains reports whether p lies in [Base, Limit).
func (r Range) Contains(p DevicePtr) bool { return p >= r.Base && p < r.Limit() }

// Overlaps reports whether the two ranges share a byte. Empty ranges overlap nothing.
func (r Range) Overlaps(o Range) bool {
	return r.Size > 0 && o.Size > 0 && r.Base < o.Limit() && o.Base < r.Limit()
}

// String prints the range as [base, limit).
func (r Range) String() string { return fmt.Sprintf("[%#x, %#x)", uint64(r.Base), uint64(r.Limit())) }

// AlignUp rounds n up to a multiple of align, which must be a power of two.
func AlignUp(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }

// RoundUp rounds n up to a multiple of q, any q > 0 (a chunk size of three granules, an expandable page of
// 20 MiB), where AlignUp needs a power of two.
func RoundUp(n, q uint64) uint64 { return (n + q - 1) / q * q }

// FormatBytes prints a byte count with a binary unit, for error messages and tables.
func FormatBytes(n uint64) string {
	switch {
	case n >= GiB:
		return fmt.Sprintf("%.2f GiB", float64(n)/float64(GiB))
	case n >= MiB:
		return fmt.Sprintf("%.2f MiB", float64(n)/float64(MiB))
	case n >= KiB:
		return fmt.Sprintf("%.2f KiB", float64(n)/float64(KiB))
	}
	return fmt.Sprintf("%d B", n)
}
