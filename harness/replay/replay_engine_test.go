package replay

import (
	"context"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
)

// The caching policy on a small trace, with the peaks worked out by hand from PyTorch's rules
// (c10/cuda/CUDACachingAllocator.cpp): requests round up to 512 B; under 1 MiB they come from 2 MiB small
// segments; 1-10 MiB requests get a 20 MiB segment; larger ones a segment of the size rounded to 2 MiB; a
// large block is split when more than 1 MiB remains; best fit; freed blocks merge with free neighbours.
func TestReplayCachingPeaksByHand(t *testing.T) {
	const K, M = 1 << 10, 1 << 20
	tr := parseTrace(t, `a 0 1000 0
a 1 5242880 0
a 2 12582912 0
f 1
a 3 31457280 0
f 2
a 4 20971520 0
`)
	// a 0: 1 KiB block in a new 2 MiB small segment.            allocated 1K        reserved  2M
	// a 1: 5 MiB from a new 20 MiB segment, split (15 MiB left). allocated 5M+1K     reserved 22M
	// a 2: 12 MiB best-fits the 15 MiB block, split (3 MiB left). allocated 17M+1K    reserved 22M
	// f 1: the 5 MiB block is free (its neighbour a 2 is live).   allocated 12M+1K
	// a 3: 30 MiB fits no free block (5, 3): a new 30 MiB segment. allocated 42M+1K   reserved 52M
	// f 2: 12 MiB merges with 5 before and 3 after: 20 MiB free.   allocated 30M+1K
	// a 4: 20 MiB takes the merged block whole, nothing new.      allocated 50M+1K    reserved 52M
	r, err := Run(context.Background(), tr, Options{Policy: impl.PolicyCaching})
	if err != nil {
		t.Fatal(err)
	}
	if r.PeakLiveBytes != 50*M+K || r.PeakAllocatedBytes != 50*M+K || r.PeakReservedBytes != 52*M {
		t.Errorf("peaks live %d allocated %d reserved %d; want %d, %d, %d",
			r.PeakLiveBytes, r.PeakAllocatedBytes, r.PeakReservedBytes, 50*M+K, 50*M+K, 52*M)
	}
	if want := 1 - float64(50*M+K)/float64(52*M); r.Fragmentation != want {
		t.Errorf("Fragmentation = %v, want %v", r.Fragmentation, want)
	}
	if r.Unfreed != 3 || r.Stats.NumAllocs != 5 || r.Stats.NumFrees != 2 {
		t.Errorf("unfreed %d, engine allocs %d frees %d; want 3, 5, 2", r.Unfreed, r.Stats.NumAllocs, r.Stats.NumFrees)
	}
	if r.ModeledDriverTime <= 0 || r.DriverCalls.Total() == 0 {
		t.Errorf("no driver work recorded: %v, %v", r.ModeledDriverTime, r.DriverCalls.Map())
	}
}

// Every policy replays a multi-stream trace with a cross-stream free request to the end, on the simulated
// device, and leaves nothing behind on it.
func TestReplayEveryPolicyMultiStream(t *testing.T) {
	tr := parseTrace(t, `a 0 4194304 0
a 1 1000 1
a 2 33554432 2
r 2
a 3 8388608 1
f 0
f 2
a 4 33554432 0
f 1
`)
	for _, p := range Policies {
		d := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
		r, err := Run(context.Background(), tr, Options{Policy: p, SampleEvery: 1, Driver: d})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if r.PeakReservedBytes < r.PeakAllocatedBytes || r.PeakAllocatedBytes < r.PeakLiveBytes || len(r.Timeline) != 9 {
			t.Errorf("%s: reserved %d < allocated %d or allocated < live %d, or timeline %d", p, r.PeakReservedBytes, r.PeakAllocatedBytes, r.PeakLiveBytes, len(r.Timeline))
		}
		if l := d.Leaks(); !l.Empty() {
			t.Errorf("%s: the device holds memory after the replay: %s", p, l.String())
		}
	}
}
