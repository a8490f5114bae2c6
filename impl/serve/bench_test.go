package serve

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
)

// BenchmarkServeAllocFree: Alloc+Free of one size through the serving layer (stream lookup, the memory cap's
// driver, the engine), warm cache, on the simulated device: the layer's cost over impl's BenchmarkAllocFree,
// one row of the per-pair breakdown (docs/results/hotpath-breakdown.md).
func BenchmarkServeAllocFree(b *testing.B) {
	for _, size := range []uint64{512, 1 << 20, 8 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("%s/%s", impl.PolicyGMLake, benchSize(size)), func(b *testing.B) {
			d := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
			e, err := New(d, Config{MapStreams: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Close() })
			p, err := e.Alloc(size, 0)
			if err != nil {
				b.Fatal(err)
			}
			e.Free(p)
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				p, err := e.Alloc(size, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Free(p); err != nil {
					b.Fatal(err)
				}
			}
			if b.N > 0 {
				b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

func benchSize(n uint64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}

// cpuTime is the process's user+system CPU time (steadier than wall time on a loaded machine).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
