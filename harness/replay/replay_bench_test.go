package replay

import (
	"context"
	"testing"

	"github.com/gmlake/gmlake/harness/snapshot"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// BenchmarkReplay replays a bundled trace through each policy on a fresh simulated H200 and reports trace
// events per second (the target: at least 1e6 per policy on one core). Trace parsing is excluded.
func BenchmarkReplay(b *testing.B) {
	tr, err := snapshot.LoadTrace("../../testdata/traces/llama1b-ckpt.trace.gz")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range Policies {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(context.Background(), tr, Options{Policy: p}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(tr.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// nopAlloc hands out addresses and does nothing else: BenchmarkReplayHarness measures the harness alone.
type nopAlloc struct{ next vmm.DevicePtr }

func (n *nopAlloc) Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error) {
	n.next += 512
	return n.next, nil
}
func (n *nopAlloc) Free(vmm.DevicePtr) error                     { return nil }
func (n *nopAlloc) RecordStream(vmm.DevicePtr, vmm.Stream) error { return nil }
func (n *nopAlloc) Stats() impl.Stats                            { return impl.Stats{} }
func (n *nopAlloc) Close() (impl.CloseReport, error)             { return impl.CloseReport{}, nil }

// BenchmarkReplayHarness is the replay loop's own cost (an allocator that does nothing), so that the
// harness is never what limits BenchmarkReplay.
func BenchmarkReplayHarness(b *testing.B) {
	tr, err := snapshot.LoadTrace("../../testdata/traces/llama1b-ckpt.trace.gz")
	if err != nil {
		b.Fatal(err)
	}
	old := newReplayAllocator
	newReplayAllocator = func(vmm.Driver, impl.Config) (replayAllocator, error) { return &nopAlloc{}, nil }
	defer func() { newReplayAllocator = old }()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(context.Background(), tr, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tr.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
