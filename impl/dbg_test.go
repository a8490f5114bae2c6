package impl

import (
	"fmt"
	"os"
	"testing"

	"github.com/gmlake/gmlake/harness/trace"
	"github.com/gmlake/gmlake/model"
	"github.com/gmlake/gmlake/vmm"
)

func TestDbgPeak(t *testing.T) {
	name := os.Getenv("GMLAKE_DBG")
	if name == "" {
		t.Skip()
	}
	tr := loadTrace(t, name)
	dev := model.NewDevice(model.DeviceConfig{SyncStreams: true})
	a, _ := New(dev, Config{ChunkSize: 2 << 20})
	streams := []vmm.Stream{0}
	for len(streams) < tr.Streams {
		s, _ := dev.CreateStream()
		streams = append(streams, s)
	}
	ptrs := map[uint64]vmm.DevicePtr{}
	sizes := map[uint64]uint64{}
	var live uint64
	var lastPeak uint64
	report := ""
	for _, ev := range tr.Events {
		switch ev.Op {
		case trace.OpAlloc:
			p, err := a.Alloc(ev.Size, streams[ev.Stream])
			if err != nil {
				t.Fatal(err)
			}
			ptrs[ev.ID] = p
			sizes[ev.ID] = roundSize(ev.Size)
			live += sizes[ev.ID]
			if a.st.PeakReservedBytes > lastPeak {
				lastPeak = a.st.PeakReservedBytes
				var freeMapped, sbWaste, sbLive, held uint64
				var nfree int
				for _, seg := range a.segs {
					for b := seg.head; b != nil; b = b.next {
						if b.mapped && b.state == Free {
							freeMapped += b.size
							nfree++
							if !b.inSet {
								t.Logf("free block %d size %d not in set", b.id, b.size)
							}
						}
						if b.heldBy != nil {
							held += b.size
						}
					}
				}
				for _, sb := range a.sblocks {
					if sb.state == Live {
						sbLive += sb.size
						sbWaste += sb.size - roundSize(sb.requested)
					}
				}
				var small, large uint64
				for _, seg := range a.segs {
					for b := seg.head; b != nil; b = b.next {
						if b.mapped && b.state == Free {
							if seg.pool == smallPool {
								small += b.size
							} else {
								large += b.size
							}
						}
					}
				}
				var candSum uint64
				for _, c := range a.stitchable(a.streams[streams[ev.Stream]]) {
					candSum += c.size
				}
				report = fmt.Sprintf("req %.1fMiB small %.3f large %.3f cands(after) %.3f ", float64(ev.Size)/(1<<20), float64(small)/1e9, float64(large)/1e9, float64(candSum)/1e9) + fmt.Sprintf("peak %.3f live %.3f alloc %.3f freeMapped %.3f (%d blocks) sbLive %.3f sbWaste %.3f held %.3f",
					float64(lastPeak)/1e9, float64(live)/1e9, float64(a.st.AllocatedBytes)/1e9, float64(freeMapped)/1e9, nfree,
					float64(sbLive)/1e9, float64(sbWaste)/1e9, float64(held)/1e9)
			}
		case trace.OpFree:
			a.Free(ptrs[ev.ID])
			live -= sizes[ev.ID]
		}
	}
	t.Log(report)
}
