package spec

// INV-CHUNK (SPEC.md): the physical handles one growth of gmlake creates.

import (
	"fmt"
	"sort"

	"github.com/gmlake/gmlake/vmm"
)

// ChunkSize is gmlake's chunk size (impl/doc.go, the allocation path; impl/policy.go): the ChunkSize knob,
// else 48 MiB scaled down on small devices to 1/2048 of the device's capacity, rounded up to the
// granularity (an H200 takes the full 48 MiB).
func ChunkSize(knob, capacity, gran uint64) uint64 {
	if knob != 0 {
		return knob
	}
	return vmm.AlignUp(max(min(48*vmm.MiB, capacity/2048), 1), gran)
}

// CheckChunks is INV-CHUNK for one successful Alloc under gmlake (rule.Chunk > 0), over the Views before and
// after the call (no fault armed): the physical handles created during the call, those the device holds
// after it and did not before, are each at most the chunk size, and all but at most one of them (the last
// piece of the growth) exactly the chunk size: a growth of n bytes maps ceil(n/chunk) handles.
func CheckChunks(rule GrowthRule, before, after View) []Violation {
	if rule.Chunk == 0 {
		return nil
	}
	old := map[vmm.Handle]bool{}
	for _, h := range before.Device.Handles {
		old[h.Handle] = true
	}
	var sizes []uint64
	for _, h := range after.Device.Handles {
		if !h.Released && !old[h.Handle] {
			sizes = append(sizes, h.Size)
		}
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
	short := 0
	for _, sz := range sizes {
		if sz > rule.Chunk {
			return []Violation{violation(InvChunk, "the call created a handle of %s, above the chunk size %s (new handles %v)",
				vmm.FormatBytes(sz), vmm.FormatBytes(rule.Chunk), sizes)}
		}
		if sz < rule.Chunk {
			short++
		}
	}
	if short > 1 {
		return []Violation{violation(InvChunk, "the call created %d handles below the chunk size %s (new handles %v): a growth maps whole chunks but its last piece",
			short, vmm.FormatBytes(rule.Chunk), fmt.Sprint(sizes))}
	}
	return nil
}
