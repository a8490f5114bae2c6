// Package vmm is the driver contract: everything the gmlake allocator may ask of a GPU, and nothing more.
//
// It owns the vocabulary shared by every layer above it:
//   - named types for device pointers ([DevicePtr]), physical allocation handles ([Handle]), streams ([Stream])
//     and events ([Event]), byte counts ([Bytes]: the engine's sizes; the Driver's methods still take uint64),
//     and the half-open virtual range [Range];
//   - the [Driver] interface, a thin, faithful image of the CUDA driver's virtual memory management (VMM)
//     calls (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease,
//     cuMemAddressFree, cuMemGetInfo) plus the stream-ordered event calls a caching allocator needs, and
//     memset/read-back for integrity checks;
//   - errors that map CUDA results one to one ([Result], [CallError]) and work with [errors.Is]:
//     errors.Is(err, vmm.ErrOutOfMemory) holds for every out-of-memory, whichever call or layer raised it;
//   - a cost model ([CostModel]) giving the latency of each call kind by size, whose defaults are the
//     H200 medians measured by `gmlake probe` (docs/gpu.md), so a simulated device can report modeled driver time.
//
// # The rules every Driver enforces (measured on an H200: docs/cuda-vmm.md, harness/conformance TestConformanceReal)
//
//  1. Sizes passed to Create, Reserve, Map, Unmap and SetAccess are whole multiples of Granularity()
//     (2 MiB on the H200, never hard-coded: ask the driver). Otherwise: ErrInvalidValue (for Map,
//     ErrNotSupported: its size must be the handle's, rule 2). Addresses are aligned to it too.
//  2. Map places a whole handle at offset 0: a non-zero offset, or a size other than the handle's (smaller,
//     larger, or not a multiple of Granularity), is ErrNotSupported, checked before the address.
//  3. Map only onto addresses inside one reservation, none of them already mapped: ErrInvalidValue.
//  4. Unmap removes every mapping inside the range: whole mappings, adjacent or with unmapped holes between
//     them; a range with nothing mapped succeeds and does nothing. A range that starts or ends inside a
//     mapping is ErrInvalidValue. (The simulated device also refuses a range that is not reserved; the H200
//     was not asked.)
//  5. SetAccess works on whole mappings: the range must be exactly whole mappings, adjacent, no holes;
//     part of a mapping, or an unmapped byte, is ErrInvalidValue. A fresh mapping has no access until it
//     is set, and reading or writing it before is ErrIllegalAddress (the real GPU faults).
//  6. FreeAddress takes the exact (ptr, size) that Reserve returned, with nothing still mapped in it:
//     ErrInvalidValue otherwise.
//  7. Release drops the caller's reference to a handle; the physical memory returns to the device only when
//     the handle was released AND its last mapping unmapped. Any use of a released handle (Map, Release) is
//     ErrInvalidHandle on the simulated device (undefined behaviour on the real driver).
//  8. One handle may be mapped at several addresses at once (aliasing): bytes written through one mapping are
//     read through every other.
//  9. Unmap and Release do not wait for in-flight GPU work: callers unmap or release only after an event
//     recorded after the last use has completed.
//
// A Driver is safe for concurrent use by several goroutines. A failed call changes nothing.
package vmm
