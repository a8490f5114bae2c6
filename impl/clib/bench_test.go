package clib

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gmlake/gmlake/model/sim"
)

// BenchmarkCLibAllocFree: Alloc+Free of one size through the C library's engine (integer pointers and
// streams, PyTorch's statistics, the event hook's check, then impl/serve), warm cache, on the simulated
// device: what one gmlake_alloc/gmlake_free pair costs in Go before the cgo crossings, one row of the
// per-pair breakdown (docs/results/hotpath-breakdown.md).
func BenchmarkCLibAllocFree(b *testing.B) {
	for _, size := range []uint64{512, 1 << 20, 8 << 20, 256 << 20} {
		name := fmt.Sprintf("%dB", size)
		if size >= 1<<20 {
			name = fmt.Sprintf("%dMiB", size>>20)
		}
		b.Run("gmlake/"+name, func(b *testing.B) {
			e, err := New(sim.NewDevice(sim.DeviceConfig{SyncStreams: true}), Config{Driver: "sim", OwnStreams: true})
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
			c0 := cpuNow()
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
				b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
