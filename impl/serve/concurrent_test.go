package serve

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// lockedClock is the test's synchroniser for many threads at once: it completes a stream's work on the
// simulated device and counts the synchronisations under a lock.
type lockedClock struct {
	d  *sim.Device
	mu sync.Mutex
	n  int
}

func (c *lockedClock) Synchronize(s vmm.Stream) error {
	c.d.Complete(s)
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

// Property: the serving layer is safe for concurrent use as a framework process uses it: one thread per
// caller stream allocating, freeing, recording its blocks on its neighbour's stream and freeing blocks of
// other threads, at a memory cap tight enough that the out-of-memory path synchronises and retries, beside a
// thread that empties the cache, moves the cap and reads the counters, and threads recording blocks another
// thread may be freeing at that moment. Every allocation that succeeds is
// distinct from every other live one, no request fails but by out of memory, and at the end Close lists no
// live allocation and the device holds nothing. Run under the race detector by make test (make race): a
// data race in impl/serve or the engine's locking fails CI.
func TestServeConcurrentThreadsKeepEveryRule(t *testing.T) {
	const threads, steps = 4, 8000
	const limit = 96 << 20
	for _, policy := range impl.Policies {
		t.Run(policy, func(t *testing.T) {
			d := sim.NewDevice(sim.DeviceConfig{Capacity: 512 << 20})
			clk := &lockedClock{d: d}
			e, err := New(d, Config{Engine: impl.Config{Policy: policy}, MemoryLimit: limit, MapStreams: true, Sync: clk})
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu     sync.Mutex
				owner  = map[vmm.DevicePtr]int{} // live allocation -> the thread that made it
				shared []vmm.DevicePtr           // live allocations any thread may free
				fails  []string
			)
			fail := func(format string, args ...any) {
				mu.Lock()
				fails = append(fails, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			var wg sync.WaitGroup
			for th := 0; th < threads; th++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(th), 7))
					stream := vmm.Stream(th + 1) // caller stream values, mapped to the device's
					var mine []vmm.DevicePtr
					for i := 0; i < steps; i++ {
						switch k := rng.IntN(10); {
						case k < 5 || len(mine) == 0:
							size := uint64(512 + rng.IntN(12<<20))
							p, err := e.Alloc(size, stream)
							if err != nil {
								if !errors.Is(err, vmm.ErrOutOfMemory) {
									fail("thread %d: Alloc(%d): %v, want success or out of memory", th, size, err)
								}
								continue
							}
							mu.Lock()
							if o, ok := owner[p]; ok {
								fails = append(fails, fmt.Sprintf("thread %d got %v, live in thread %d", th, p, o))
							}
							owner[p] = th
							if rng.IntN(4) == 0 {
								shared = append(shared, p)
							} else {
								mine = append(mine, p)
							}
							mu.Unlock()
						case k < 6:
							p := mine[rng.IntN(len(mine))]
							if err := e.RecordStream(p, vmm.Stream((th+1)%threads+1)); err != nil {
								fail("thread %d: RecordStream(%v): %v", th, p, err)
							}
							// A shared block another thread may be freeing right now: recorded, or refused
							// as freed, nothing else.
							mu.Lock()
							var q vmm.DevicePtr
							if n := len(shared); n > 0 {
								q = shared[rng.IntN(n)]
							}
							mu.Unlock()
							if q != 0 {
								// (Freed meanwhile, its memory may lie inside another allocation by now.)
								if err := e.RecordStream(q, stream); err != nil && !errors.Is(err, impl.ErrUnknownPointer) &&
									!errors.Is(err, impl.ErrDoubleFree) && !errors.Is(err, impl.ErrInteriorPtr) {
									fail("thread %d: RecordStream(%v) of a shared block: %v, want success or a freed pointer's error", th, q, err)
								}
							}
						case k < 9:
							j := rng.IntN(len(mine))
							p := mine[j]
							mine = append(mine[:j], mine[j+1:]...)
							mu.Lock()
							delete(owner, p)
							mu.Unlock()
							if err := e.Free(p); err != nil {
								fail("thread %d: Free(%v): %v", th, p, err)
							}
						default:
							mu.Lock()
							var p vmm.DevicePtr
							if n := len(shared); n > 0 {
								p, shared = shared[n-1], shared[:n-1]
								delete(owner, p)
							}
							mu.Unlock()
							if p != 0 {
								if err := e.Free(p); err != nil {
									fail("thread %d: Free(%v) of another thread's block: %v", th, p, err)
								}
							}
						}
					}
					for _, p := range mine {
						mu.Lock()
						delete(owner, p)
						mu.Unlock()
						if err := e.Free(p); err != nil {
							fail("thread %d: final Free(%v): %v", th, p, err)
						}
					}
				}()
			}
			wg.Add(1)
			go func() { // the framework's other calls, meanwhile
				defer wg.Done()
				for i := 0; i < steps/4; i++ {
					if err := e.EmptyCache(); err != nil {
						fail("EmptyCache: %v", err)
					}
					e.SetMemoryLimit(limit + uint64(i%2)*(32<<20))
					_ = e.Counters()
					_ = e.Allocator().Stats()
				}
			}()
			wg.Wait()
			for _, p := range shared {
				if err := e.Free(p); err != nil {
					t.Errorf("Free(%v) of a shared block: %v", p, err)
				}
			}
			for _, f := range fails {
				t.Error(f)
			}
			d.CompleteAll()
			rep, err := e.Close()
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
			if len(rep.Live) != 0 {
				t.Errorf("Close lists %d live allocations after every block was freed: %v", len(rep.Live), rep.Live)
			}
			t.Logf("counters %+v", e.Counters())
			if c := e.Counters(); c.SyncRetries+c.OOMs == 0 {
				t.Errorf("the cap never made the engine synchronise (counters %+v): the test no longer reaches the out-of-memory path", c)
			}
			if l := d.Leaks(); l.Used != 0 || !l.Empty() {
				t.Errorf("the device still holds memory after Close: %v", l)
			}
		})
	}
}
