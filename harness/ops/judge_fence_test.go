package ops

import (
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// Property (INV-FENCE): a Free that records an event on its allocation's own stream (a fence) when every
// handle under the freed block still holds a live block is flagged, and so are two fences in one Free and a
// fence on a stream neither the allocation's nor recorded; a free with no fence, events recorded on the
// allocation's recorded streams, a fence at a free left pending, a fence at a free that leaves a handle with
// no live block, and gmlake-paper's frees are not. And the engine, through the Env, passes it at both kinds
// of fence (a block freed beside a pending neighbour in a chunk of its own; a block left pending).
func TestFenceJudgeBites(t *testing.T) {
	const mb = vmm.MiB
	base := vmm.DevicePtr(0x7f00_0000_0000)
	at := func(off, size uint64) vmm.Range { return vmm.Range{Base: base.Add(off), Size: size} }
	p := base.Add(5 * mb / 2) // a 1.5 MiB block to the end of the second 2 MiB chunk, after a 2.5 MiB live one
	freed := spec.Alloc{Ptr: p, Requested: 3 * mb / 2, Size: 3 * mb / 2, Stream: 0, Block: 2}
	before := spec.View{Live: []spec.Alloc{{Ptr: base, Size: 5 * mb / 2, Block: 1}, freed},
		Blocks: []spec.Block{{ID: 1, State: spec.BlockLive, Range: at(0, 5*mb/2)}, {ID: 2, State: spec.BlockLive, Range: at(5*mb/2, 3*mb/2)},
			{ID: 3, State: spec.BlockPending, Range: at(4*mb, 2*mb)}}}
	maps := []spec.Mapping{{VA: at(0, 2*mb), Handle: 1}, {VA: at(2*mb, 2*mb), Handle: 2}, {VA: at(4*mb, 2*mb), Handle: 3}}
	after := spec.View{Mappings: maps, Blocks: []spec.Block{{ID: 1, State: spec.BlockLive, Range: at(0, 5*mb/2)},
		{ID: 2, State: spec.BlockFree, Range: at(5*mb/2, 3*mb/2)}, {ID: 3, State: spec.BlockPending, Range: at(4*mb, 2*mb)}}}
	rec := func(ss ...vmm.Stream) []streamCall {
		var out []streamCall
		for _, s := range ss {
			out = append(out, streamCall{vmm.CallRecordEvent, s}, streamCall{vmm.CallQueryEvent, 0})
		}
		return out
	}
	pending := after
	pending.Blocks = []spec.Block{after.Blocks[0], {ID: 2, State: spec.BlockPending, Range: at(5*mb/2, 3*mb/2)}, after.Blocks[2]}
	alone := after // the block before it freed already: the second chunk holds no live block
	alone.Blocks = []spec.Block{{ID: 1, State: spec.BlockFree, Range: at(0, 4*mb)}, after.Blocks[2]}
	used := before // the allocation recorded on stream 1
	used.Live = []spec.Alloc{before.Live[0], freed}
	used.Live[1].Uses = []vmm.Stream{1}
	for _, c := range []struct {
		name          string
		before, after spec.View
		calls         []streamCall
		want          string // a word of the violation's text; "" for none
	}{
		{"a fence under live blocks only", before, after, rec(0), "holds a live block"},
		{"two fences", before, alone, rec(0, 0), "at most one"},
		{"a fence on another stream", before, alone, rec(1), "not another's"},
		{"no fence", before, after, nil, ""},
		{"an event on the recorded stream", used, pending, rec(1), ""},
		{"a fence at a free left pending", used, pending, rec(1, 0), ""},
		{"a fence beside a chunk with no live block", before, alone, rec(0), ""},
	} {
		vs := judgeFence(impl.PolicyGMLake, c.before, c.after, p, c.calls)
		switch {
		case c.want == "" && len(vs) > 0:
			t.Errorf("%s: %v", c.name, vs)
		case c.want != "" && (len(vs) != 1 || vs[0].Inv != spec.InvFence || !strings.Contains(vs[0].Msg, c.want)):
			t.Errorf("%s: want one INV-FENCE saying %q, got %v", c.name, c.want, vs)
		}
	}
	if vs := judgeFence(impl.PolicyGMLakePaper, before, after, p, rec(0)); len(vs) != 0 {
		t.Errorf("gmlake-paper judged: %v", vs)
	}
	for _, c := range []struct {
		scene string
		fence bool // the last free records a fence on s0
	}{
		// The fence-stops-at-chunk-end scenario: no fence at the second free.
		{"alloc a0 2621440 s0\nalloc a1 1572864 s0\nalloc a2 2097152 s0\nrecord a2 s1\nlaunch s1\nfree a2\nfree a1\n", false},
		// A block left pending: its stream's fence, stamped at the free.
		{"alloc a0 2097152 s0\nrecord a0 s1\nlaunch s1\nfree a0\n", true},
		// A block freed beside a pending neighbour, its chunk wholly non-live: a fence.
		{"alloc a0 2097152 s0\nalloc a1 2097152 s0\nrecord a1 s1\nlaunch s1\nfree a1\nfree a0\n", true},
	} {
		env := runScene(t, Config{Policy: impl.PolicyGMLake, Capacity: 16 * mb, Streams: 2, Knobs: impl.Config{ChunkSize: 2 * mb}}, c.scene)
		fenced := false
		for _, call := range env.calls.syncs {
			fenced = fenced || call.kind == vmm.CallRecordEvent && call.stream == env.Streams[0]
		}
		if fenced != c.fence {
			t.Errorf("%q: the last free fenced %v, want %v (its calls: %v)", c.scene, fenced, c.fence, env.calls.syncs)
		}
		env.Finish()
	}
}
