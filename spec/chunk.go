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
// after it and did not before, are each at most the chunk size, and, laid out where each is first mapped
// (its arena; address order), all but the last of each run mapped side by side exactly the chunk size: a
// growth maps ceil(n/chunk) handles into each unmapped stretch it fills, n that stretch's bytes, and one
// request's run may span several stretches (free blocks kept between them: find_expandable_block).
func CheckChunks(rule GrowthRule, before, after View) []Violation {
	if rule.Chunk == 0 {
		return nil
	}
	old := map[vmm.Handle]bool{}
	for _, h := range before.Device.Handles {
		old[h.Handle] = true
	}
	fresh := map[vmm.Handle]uint64{}
	var sizes []uint64
	for _, h := range after.Device.Handles {
		if !h.Released && !old[h.Handle] {
			fresh[h.Handle] = h.Size
			sizes = append(sizes, h.Size)
		}
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
	for _, sz := range sizes {
		if sz > rule.Chunk {
			return []Violation{violation(InvChunk, "the call created a handle of %s, above the chunk size %s (new handles %v)",
				vmm.FormatBytes(sz), vmm.FormatBytes(rule.Chunk), sizes)}
		}
	}
	// Where each new handle is first mapped: its lowest mapping (the arena's, below every stitched view a
	// stitch with growth maps it into).
	first := map[vmm.Handle]vmm.Range{}
	for _, m := range after.Device.Mappings { // sorted by VA
		if _, ok := fresh[m.Handle]; ok {
			if _, seen := first[m.Handle]; !seen {
				first[m.Handle] = m.VA
			}
		}
	}
	var laid []vmm.Range
	for _, va := range first {
		laid = append(laid, va)
	}
	sort.Slice(laid, func(i, j int) bool { return laid[i].Base < laid[j].Base })
	for i, va := range laid {
		last := i == len(laid)-1 || laid[i+1].Base != va.Limit()
		if va.Size < rule.Chunk && !last {
			return []Violation{violation(InvChunk, "the call created a handle of %s at %#x, below the chunk size %s, with another mapped right after it (new handles %v): a growth maps whole chunks but the last piece of each stretch",
				vmm.FormatBytes(va.Size), uint64(va.Base), vmm.FormatBytes(rule.Chunk), fmt.Sprint(sizes))}
		}
	}
	return nil
}
