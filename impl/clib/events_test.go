package clib

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// Property (issue 36 item 4): every segment event is delivered by the call that caused it: after each call
// of the Engine (random sequences of allocations from the default and private pools, frees, record_stream,
// pool create and release, captures, EmptyCache, memory fractions, on every policy), no event waits in the
// engine and the hook's mapped-minus-unmapped bytes equal the reserved bytes. Before Free delivered its
// events, freeing the last block of a released private pool left its unmap for some later call. A budget by
// count: 40 sequences of 80 calls a policy, fixed seeds.
func TestEveryEventIsDeliveredByTheCallThatCausedIt(t *testing.T) {
	for _, policy := range []string{"gmlake", "caching", "expandable", "gmlake-paper"} {
		t.Run(policy, func(t *testing.T) {
			for seq := 0; seq < 40; seq++ {
				if err := eventSequence(policy, int64(seq)); err != nil {
					t.Fatalf("policy %s, seed %d: %v (reproduce: go test -count=1 -run 'TestEveryEventIsDeliveredByTheCallThatCausedIt/%s' ./impl/clib)",
						policy, seq, err, policy)
				}
			}
		})
	}
}

// eventSequence runs one random sequence and returns the first call after which an event was late.
func eventSequence(policy string, seed int64) error {
	r := rand.New(rand.NewSource(seed))
	e, err := New(newSim(256*vmm.MiB), simConfig(Config{Policy: policy}))
	if err != nil {
		return err
	}
	defer e.Close()
	var mapped int64
	e.SetEventHook(func(act int, addr uintptr, size uint64, stream uintptr) {
		switch act {
		case EventSegmentMap:
			mapped += int64(size)
		case EventSegmentUnmap:
			mapped -= int64(size)
		}
	})
	type block struct {
		p    uintptr
		pool int
	}
	var live []block
	pools := map[int]int{} // pool id A (B = 1) -> use count
	capturing := map[uintptr]bool{}
	streams := []uintptr{0, 0x55, 0x77}
	sizes := []uint64{512, 4096, vmm.MiB + 1, 3 * vmm.MiB, 9 * vmm.MiB, 30 * vmm.MiB}
	var calls []string
	for i := 0; i < 80; i++ {
		var call string
		switch k := r.Intn(10); {
		case k < 3 || len(live) == 0 && k < 5:
			size, s := sizes[r.Intn(len(sizes))], streams[r.Intn(len(streams))]
			pool := 0
			if r.Intn(2) == 0 && len(pools) > 0 {
				for id := range pools {
					pool = id
					break
				}
			}
			call = fmt.Sprintf("AllocPool(%d, %#x, pool %d)", size, s, pool)
			if p, err := e.AllocPool(size, s, PoolID{A: uint64(pool), B: uint64(min(pool, 1))}); err == nil {
				live = append(live, block{p, pool})
			}
		case k < 5:
			j := r.Intn(len(live))
			call = fmt.Sprintf("Free(%#x)", live[j].p)
			if err := e.Free(live[j].p); err != nil {
				return fmt.Errorf("%s: %v", call, err)
			}
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		case k == 5 && len(live) > 0:
			p, s := live[r.Intn(len(live))].p, streams[r.Intn(len(streams))]
			call = fmt.Sprintf("RecordStream(%#x, %#x)", p, s)
			_ = e.RecordStream(p, s)
		case k == 6 && policy != "gmlake-paper": // which has no private pools
			id := 1 + r.Intn(2)
			if pools[id] > 0 && r.Intn(2) == 0 {
				call = fmt.Sprintf("ReleasePool(%d)", id)
				n, err := e.ReleasePool(PoolID{A: uint64(id), B: 1})
				if err != nil {
					return fmt.Errorf("%s: %v", call, err)
				}
				if pools[id] = n; n == 0 {
					delete(pools, id)
					for j := range live {
						if live[j].pool == id {
							live[j].pool = -1 // of the released pool
						}
					}
				}
			} else {
				call = fmt.Sprintf("CreateOrIncrefPool(%d)", id)
				n, err := e.CreateOrIncrefPool(PoolID{A: uint64(id), B: 1})
				if err != nil {
					return fmt.Errorf("%s: %v", call, err)
				}
				pools[id] = n
			}
		case k == 7:
			s := streams[r.Intn(len(streams))]
			on := !capturing[s]
			call = fmt.Sprintf("SetCapturing(%#x, %v)", s, on)
			if err := e.SetCapturing(s, on); err != nil {
				return fmt.Errorf("%s: %v", call, err)
			}
			capturing[s] = on
		case k == 8:
			call = "EmptyCache()"
			_ = e.EmptyCache()
		default:
			f := []float64{1, 0.5, 0.25}[r.Intn(3)]
			call = fmt.Sprintf("SetMemoryFraction(%g)", f)
			_ = e.SetMemoryFraction(f)
		}
		calls = append(calls, call)
		reserved := e.TorchStats().ReservedBytes[0].Current
		if e.a.SegmentEventsPending() || mapped != reserved {
			return fmt.Errorf("after call %d, %s: events pending %v, the hook's mapped bytes %d, reserved %d\ncalls:\n  %s",
				i, call, e.a.SegmentEventsPending(), mapped, reserved, strings.Join(calls, "\n  "))
		}
	}
	return nil
}
