package spec

import (
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// INV-CHUNK: gmlake's chunk size is the knob, else 1/2048 of the device up to 48 MiB, rounded up to the
// granularity; a call that created handles above it, or two below it, is caught; whole chunks and one last
// piece, released handles and handles held before pass.
func TestCheckChunks(t *testing.T) {
	const g = 2 * vmm.MiB
	for _, c := range []struct{ knob, capacity, want uint64 }{
		{0, 8 * vmm.MiB, g},            // 1/2048 is 4 KiB: one granule
		{0, 2048 * g, g},               // exactly one granule
		{0, 2049 * g, 2 * g},           // a little more: rounds up to two
		{0, 141_000_000_000, 48 << 20}, // an H200: the full 48 MiB
		{3 * g, 2049 * g, 3 * g},       // the knob
	} {
		if got := ChunkSize(c.knob, c.capacity, g); got != c.want {
			t.Errorf("ChunkSize(%d, %d) = %d, want %d", c.knob, c.capacity, got, c.want)
		}
	}
	rule := GrowthRule{Granularity: g, Chunk: 4 * vmm.MiB}
	views := func(old []uint64, created ...uint64) (View, View) {
		var b, a View
		h := vmm.Handle(1)
		for _, sz := range old {
			b.Device.Handles = append(b.Device.Handles, DevHandle{Handle: h, Size: sz, Mappings: 1})
			h++
		}
		a.Device.Handles = append(a.Device.Handles, b.Device.Handles...)
		// The created handles are mapped side by side from one base, in order; a 0 leaves a granule
		// unmapped between them (another stretch of the arena's run).
		va := vmm.DevicePtr(0x1000_0000)
		for _, sz := range created {
			if sz == 0 {
				va = va.Add(g)
				continue
			}
			a.Device.Handles = append(a.Device.Handles, DevHandle{Handle: h, Size: sz, Mappings: 1})
			a.Device.Mappings = append(a.Device.Mappings, DevMapping{VA: vmm.Range{Base: va, Size: sz}, Handle: h, Accessible: true})
			va = va.Add(sz)
			h++
		}
		return b, a
	}
	for _, c := range []struct {
		name    string
		old     []uint64
		created []uint64
		bad     bool
	}{
		{"whole chunks and a last piece", []uint64{g, g}, []uint64{4 * vmm.MiB, 4 * vmm.MiB, g}, false},
		{"one short growth", nil, []uint64{g}, false},
		{"nothing created", []uint64{g, g}, nil, false},
		{"a handle above the chunk", nil, []uint64{8 * vmm.MiB}, true},
		{"two short pieces side by side (chunk size too small)", nil, []uint64{g, g}, true},
		{"a short piece before a whole chunk", nil, []uint64{g, 4 * vmm.MiB}, true},
		{"two stretches, each with its short last piece", nil, []uint64{4 * vmm.MiB, g, 0, 4 * vmm.MiB, g}, false},
	} {
		b, a := views(c.old, c.created...)
		if vs := CheckChunks(rule, b, a); (len(vs) > 0) != c.bad || len(vs) > 0 && vs[0].Inv != InvChunk {
			t.Errorf("%s: %v, want bad=%v", c.name, vs, c.bad)
		}
	}
	b, a := views(nil, g, g)
	a.Device.Handles[0].Released = true
	if vs := CheckChunks(rule, b, a); len(vs) != 0 {
		t.Errorf("a released handle counted: %v", vs)
	}
	b, a = views(nil, g, g)
	if vs := CheckChunks(GrowthRule{}, b, a); len(vs) != 0 {
		t.Errorf("the zero rule judged: %v", vs)
	}
}
