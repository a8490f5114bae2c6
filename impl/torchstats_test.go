package impl

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// seeds returns the seeds a property test runs: GMLAKE_SEED alone if set (to reproduce a failure), else n
// seeds from base.
func seeds(n int, base int64) []int64 {
	if v := os.Getenv("GMLAKE_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return []int64{s}
		}
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = base + int64(i)
	}
	return out
}

// checkTorchStats checks INV-TORCHSTATS (torchstats.go): every current value equals the live set and the
// segments counted afresh; all = small + large; peak >= current and >= every current seen since the last
// peak reset (seen), and equal to the highest seen for the values that cannot peak inside one call; allocated - freed == current - the current at the last accumulated reset (base);
// reserved and allocated bytes agree with Stats; created - released handles == the chunks held.
func checkTorchStats(a *Allocator, seen, base *DeviceStats, resetAcc bool) error {
	a.mu.Lock()
	want := a.torchStatsCountedLocked()
	a.mu.Unlock()
	got := a.TorchStats()
	st := a.Stats()
	names := torchStatNames
	ga, wa, sa, ba := got.arrays(), want.arrays(), seen.arrays(), base.arrays()
	var errs []string
	for k := range ga {
		for i := 0; i < 3; i++ {
			g, w := ga[k][i], wa[k][i]
			if g.Current != w.Current {
				errs = append(errs, fmt.Sprintf("%s[%d].current = %d, counted %d", names[k], i, g.Current, w.Current))
			}
			if g.Peak < g.Current {
				errs = append(errs, fmt.Sprintf("%s[%d].peak %d < current %d", names[k], i, g.Peak, g.Current))
			}
			sa[k][i].Current = max(sa[k][i].Current, g.Current)
			// Segments, reserved bytes and inactive split blocks may peak inside one call (a pending block
			// freed, then allocated; a run cut in two while its chunks are unmapped one by one; pages mapped
			// before a later page fails and the cache is released), the others cannot.
			transient := names[k] == "segment" || names[k] == "reserved_bytes" || strings.HasPrefix(names[k], "inactive_split")
			if g.Peak < sa[k][i].Current || (!transient && g.Peak != sa[k][i].Current) {
				errs = append(errs, fmt.Sprintf("%s[%d].peak = %d, highest current seen %d", names[k], i, g.Peak, sa[k][i].Current))
			}
			if g.Allocated-g.Freed != g.Current-ba[k][i].Current {
				errs = append(errs, fmt.Sprintf("%s[%d]: allocated %d - freed %d != current %d - current at reset %d",
					names[k], i, g.Allocated, g.Freed, g.Current, ba[k][i].Current))
			}
		}
		s, l, all := ga[k][1], ga[k][2], ga[k][0]
		if s.Current+l.Current != all.Current || s.Allocated+l.Allocated != all.Allocated || s.Freed+l.Freed != all.Freed {
			errs = append(errs, fmt.Sprintf("%s: all %+v != small %+v + large %+v", names[k], all, s, l))
		}
	}
	if uint64(got.ReservedBytes[0].Current) != st.ReservedBytes || uint64(got.AllocatedBytes[0].Current) != st.AllocatedBytes ||
		uint64(got.RequestedBytes[0].Current) != st.RequestedBytes || uint64(got.Allocation[0].Current) != st.NumLive {
		errs = append(errs, fmt.Sprintf("torch stats %+v disagree with Stats %+v", got, st))
	}
	if !resetAcc {
		chunks := 0
		for _, c := range a.Snapshot().Chunks {
			if c.Size > 0 {
				chunks++
			}
		}
		if got.NumDeviceAlloc-got.NumDeviceFree != int64(chunks) {
			errs = append(errs, fmt.Sprintf("num_device_alloc %d - num_device_free %d != %d chunks held",
				got.NumDeviceAlloc, got.NumDeviceFree, chunks))
		}
		if got.NumOOMs != int64(st.NumOOMs) || got.NumAllocRetries != int64(st.NumCacheFlushes) {
			errs = append(errs, fmt.Sprintf("num_ooms %d / num_alloc_retries %d, Stats say %d / %d",
				got.NumOOMs, got.NumAllocRetries, st.NumOOMs, st.NumCacheFlushes))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

func TestTorchStatsMatchLiveSet(t *testing.T) {
	for _, pol := range Policies {
		for _, seed := range seeds(3, 1) {
			t.Run(fmt.Sprintf("%s/seed=%d", pol, seed), func(t *testing.T) {
				a, dev := newTest(t, pol, 1<<30, false /* sync */)
				streams := []vmm.Stream{0}
				for i := 0; i < 2; i++ {
					s, _ := dev.CreateStream()
					streams = append(streams, s)
				}
				rng := rand.New(rand.NewSource(seed))
				sizes := []uint64{1, 700, 64 << 10, 1 << 20, (1 << 20) + 1, 3 << 20, 9 << 20, 21 << 20, 70 << 20, 200 << 20}
				var live []vmm.DevicePtr
				var seen, base DeviceStats
				resetAcc := false
				var ops []string
				a.RecordSegmentEvents(true)
				var mappedNet int64 // bytes mapped minus unmapped, by the segment events
				for i := 0; i < 800; i++ {
					s := streams[rng.Intn(len(streams))]
					var op string
					switch r := rng.Intn(24); {
					case r < 10:
						n := sizes[rng.Intn(len(sizes))] + uint64(rng.Intn(4096))
						op = fmt.Sprintf("alloc %d s%d", n, s)
						if p, err := a.Alloc(n, s); err == nil {
							live = append(live, p)
						} else if !errors.Is(err, vmm.ErrOutOfMemory) {
							t.Fatal(err)
						}
					case r < 18 && len(live) > 0:
						j := rng.Intn(len(live))
						op = fmt.Sprintf("free %v", live[j])
						mustFree(t, a, live[j])
						live = append(live[:j], live[j+1:]...)
					case r == 18 && len(live) > 0:
						p := live[rng.Intn(len(live))]
						op = fmt.Sprintf("record %v s%d", p, s)
						if err := a.RecordStream(p, s); err != nil {
							t.Fatal(err)
						}
					case r == 19:
						op = fmt.Sprintf("launch s%d", s)
						dev.Launch(s)
					case r == 20:
						op = fmt.Sprintf("complete s%d", s)
						dev.Complete(s)
					case r == 21:
						op = "empty_cache"
						if err := a.EmptyCache(); err != nil {
							t.Fatal(err)
						}
					case r == 22:
						op = "reset_peak"
						a.ResetPeakStats()
						seen = a.TorchStats()
					default:
						op = "reset_accumulated"
						a.ResetAccumulatedStats()
						base = a.TorchStats()
						resetAcc = true
					}
					ops = append(ops, op)
					for _, ev := range a.TakeSegmentEvents() {
						if ev.Action == SegmentMap {
							mappedNet += int64(ev.Size)
						} else {
							mappedNet -= int64(ev.Size)
						}
					}
					err := checkTorchStats(a, &seen, &base, resetAcc)
					if r := a.TorchStats().ReservedBytes[0].Current; err == nil && r != mappedNet {
						err = fmt.Errorf("segment events mapped %d bytes net, reserved %d", mappedNet, r)
					}
					if err != nil {
						t.Fatalf("seed %d, after op %d (%s):\n%v\nlast ops: %v\nreproduce: GMLAKE_SEED=%d go test ./impl -run 'TestTorchStatsMatchLiveSet/%s' -v",
							seed, i, op, err, ops[max(0, len(ops)-12):], seed, pol)
					}
				}
				dev.CompleteAll()
				for _, p := range live {
					mustFree(t, a, p)
				}
				a.EmptyCache()
				if err := checkTorchStats(a, &seen, &base, resetAcc); err != nil {
					t.Fatalf("seed %d, after freeing everything: %v", seed, err)
				}
				closeClean(t, a, dev)
			})
		}
	}
}
