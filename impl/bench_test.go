package impl

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

func benchAlloc(b *testing.B, policy string) (*Allocator, *sim.Device) {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, err := New(dev, Config{Policy: policy})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return a, dev
}

// BenchmarkAllocFree: Alloc+Free of one size, warm cache, reference device. Target (policy gmlake):
// <= 250 ns and 0 allocations per pair.
func BenchmarkAllocFree(b *testing.B) {
	for _, pol := range Policies {
		for _, size := range []uint64{512, 1 << 20, 8 << 20, 256 << 20} {
			b.Run(fmt.Sprintf("%s/%s", pol, sizeName(size)), func(b *testing.B) {
				a, _ := benchAlloc(b, pol)
				p, err := a.Alloc(size, 0)
				if err != nil {
					b.Fatal(err)
				}
				a.Free(p)
				b.ReportAllocs()
				b.ResetTimer()
				c0 := cpuTime()
				for i := 0; i < b.N; i++ {
					p, err := a.Alloc(size, 0)
					if err != nil {
						b.Fatal(err)
					}
					if err := a.Free(p); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, c0, b.N)
			})
		}
	}
}

// BenchmarkAllocFreeOverAnotherStream is BenchmarkAllocFree on a second stream after the default stream freed
// the memory: the pair reuses an sBlock stitched over the default stream's blocks (the threads of
// bench/torch/hotpath_bench.sh, each on a pool stream). 256 MiB took 37 us per pair before pend stopped
// keeping one stale wait per pair (TestWarmPairsLeaveTheEngineAsTheyFoundIt).
func BenchmarkAllocFreeOverAnotherStream(b *testing.B) {
	for _, size := range []uint64{8 << 20, 256 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			a, dev := benchAlloc(b, PolicyGMLake)
			s, err := dev.CreateStream()
			if err != nil {
				b.Fatal(err)
			}
			for _, st := range []vmm.Stream{0, s, s} {
				p, err := a.Alloc(size, st)
				if err != nil {
					b.Fatal(err)
				}
				a.Free(p)
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				p, err := a.Alloc(size, s)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Free(p); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, c0, b.N)
		})
	}
}

// cpuTime is the process's user+system CPU time: on a loaded machine, CPU time per operation is a steadier
// measure than wall time (reported as cpu-ns/op beside ns/op).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration, ops int) {
	if ops > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(ops), "cpu-ns/op")
	}
}

func sizeName(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

var mixedSizes = []uint64{512, 4096, 65536, 1 << 20, 3 << 20, 8 << 20, 24 << 20, 100 << 20, 256 << 20}

// BenchmarkAllocFreeMixed: 64 live blocks of sizes from 512 B to 256 MiB, freed in shuffled order, warm
// cache. Target (policy gmlake): <= 400 ns per Alloc+Free pair.
func BenchmarkAllocFreeMixed(b *testing.B) {
	for _, pol := range Policies {
		b.Run(pol, func(b *testing.B) {
			a, _ := benchAlloc(b, pol)
			rng := rand.New(rand.NewSource(1))
			const live = 64
			sizes := make([]uint64, live)
			for i := range sizes {
				sizes[i] = mixedSizes[rng.Intn(len(mixedSizes))]
			}
			ptrs := make([]vmm.DevicePtr, live)
			order := rng.Perm(live)
			round := func() {
				for i, s := range sizes {
					p, err := a.Alloc(s, 0)
					if err != nil {
						b.Fatal(err)
					}
					ptrs[i] = p
				}
				for _, i := range order {
					if err := a.Free(ptrs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			for i := 0; i < 3; i++ { // warm the cache
				round()
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			n := 0
			for n < b.N {
				round()
				n += live
			}
			reportCPU(b, c0, n)
		})
	}
}

// BenchmarkAllocFreeParallel: pairs per second with 1, 2, 4 and 8 goroutines, each on its own stream, one
// allocator (one lock).
func BenchmarkAllocFreeParallel(b *testing.B) {
	for _, g := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			a, dev := benchAlloc(b, PolicyGMLake)
			streams := make([]vmm.Stream, g)
			for i := range streams {
				s, err := dev.CreateStream()
				if err != nil {
					b.Fatal(err)
				}
				streams[i] = s
				p, err := a.Alloc(1<<20, s)
				if err != nil {
					b.Fatal(err)
				}
				a.Free(p)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N / g
			for i := 0; i < g; i++ {
				wg.Add(1)
				go func(s vmm.Stream) {
					defer wg.Done()
					for n := 0; n < per; n++ {
						p, err := a.Alloc(1<<20, s)
						if err != nil {
							b.Error(err)
							return
						}
						if err := a.Free(p); err != nil {
							b.Error(err)
							return
						}
					}
				}(streams[i])
			}
			wg.Wait()
			b.ReportMetric(float64(per*g)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

// traceRingSizes are the sizes of the C++ benchmark's mixed pattern (bench/torch/hotpath_bench.py, bench/abi
// pair.c's `mixed`): the allocations of testdata/traces/llama1b-ckpt.trace.gz from the 1000th on, 4096 of them.
func traceRingSizes(b *testing.B) []uint64 {
	f, err := os.Open("../testdata/traces/llama1b-ckpt.trace.gz")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	var out []uint64
	sc := bufio.NewScanner(z)
	for sc.Scan() && len(out) < 4096 {
		var id, size uint64
		if n, _ := fmt.Sscanf(sc.Text(), "a %d %d", &id, &size); n == 2 && id >= 1000 {
			out = append(out, size)
		}
	}
	if len(out) == 0 {
		b.Fatal("no allocations in the trace")
	}
	return out
}

// BenchmarkAllocFreeTraceRing is the engine's share of the mixed pattern the GPU benchmarks time: a ring of 64
// live blocks over a real trace's sizes, the oldest freed before each allocation (warm: one pass first).
func BenchmarkAllocFreeTraceRing(b *testing.B) {
	sizes := traceRingSizes(b)
	for _, pol := range Policies {
		b.Run(pol, func(b *testing.B) {
			a, dev := benchAlloc(b, pol)
			const live = 64
			var ring [live]vmm.DevicePtr
			k := 0
			step := func() {
				if p := ring[k%live]; p != 0 {
					if err := a.Free(p); err != nil {
						b.Fatal(err)
					}
				}
				p, err := a.Alloc(sizes[k%len(sizes)], 0)
				if err != nil {
					b.Fatal(err)
				}
				ring[k%live] = p
				k++
			}
			for range sizes {
				step()
			}
			calls0 := dev.Counts()
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				step()
			}
			reportCPU(b, c0, b.N)
			b.StopTimer()
			calls := dev.Counts()
			var n uint64
			for i := range calls {
				n += calls[i] - calls0[i]
			}
			b.ReportMetric(float64(n)/float64(b.N), "driver-calls/op")
		})
	}
}
