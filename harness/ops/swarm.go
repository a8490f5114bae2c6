package ops

import (
	"fmt"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): instead of one configuration and every action
// in every sequence, each sequence draws its own configuration and switches some actions off, so that
// sequences go deep in different directions (no frees: pressure and out-of-memory; no completes: pending
// cross-stream states; no faults: long clean runs). The generator-side rules, by name:
//
//   - swarm-streams: 1 to 4 streams, the default stream included;
//   - swarm-sync: a third of the sequences run with synchronous streams (work completes at once);
//   - swarm-capacity: devices from a few chunks (out of memory within a few ops) to 4 GiB, and for gmlake
//     one of 2049 granules (its chunk size, 1/2048 of the device, rounds up to two granules: INV-CHUNK);
//   - swarm-knobs: the policy's knobs (gmlake: chunk size, stitch threshold, sBlock cache 1-4 or default,
//     cross-stream off; gmlake-paper: stitch threshold, sBlock cache, reuse limit, reAlloc, defragLevel, autoGC); PyTorch's
//     policies keep theirs;
//   - swarm-faults: a fault schedule over every driver call kind the engine makes, or none;
//   - swarm-actions: each optional action is on with probability 1/2;
//   - sizes-threshold: a third of the sizes sit at a threshold of the sequence's policy and knobs (512 B,
//     1 MiB, 10 MiB, 20 MiB, the granularity and its multiples, the stitch threshold, the chunk size,
//     512 MiB), exactly, and 1 B, 512 B, one granule, 1 MiB and 1 MiB + 512 B either side (a page minus a
//     split threshold);
//   - sizes-repeat: a sixth repeat an earlier request exactly (cached blocks and sBlocks get reused).
type Swarm struct {
	Streams  int
	Sync     bool
	Capacity uint64
	Knobs    impl.Config
	Faults   []vmm.CallKind  // call kinds faults may hit; empty: no faults this sequence
	Off      map[string]bool // actions switched off this sequence
	// Serve: the sequence drives the engine through the serving layer (Config.Serve: what libgmlake runs),
	// under a memory cap of MemoryLimit bytes (0: none).
	Serve       bool
	MemoryLimit uint64
	// DefaultName: the engine is asked for gmlake by the empty policy name (impl's default), as a
	// Config{} from a Go program or an unset GMLAKE_POLICY asks for it.
	DefaultName bool
	// OptIn names the opt-in rules (ops.OptIn) this sequence may draw; DrawSwarm names them all.
	OptIn []string
	_     struct{}
}

// String is the swarm's one-line summary (the op file's header says the same in its own words).
func (s Swarm) String() string {
	var off []string
	for k := range s.Off {
		off = append(off, k)
	}
	sort.Strings(off)
	return fmt.Sprintf("streams=%d sync=%v capacity=%s knobs={%s} faults=%d off=%s serve=%v limit=%s default-name=%v", s.Streams, s.Sync,
		vmm.FormatBytes(s.Capacity), KnobString(s.Knobs), len(s.Faults), strings.Join(off, ","), s.Serve, vmm.FormatBytes(s.MemoryLimit), s.DefaultName)
}

// SwarmFaultCalls are the call kinds the engine makes after New (granularity and the first MemInfo come
// at New, before any fault can be armed).
var SwarmFaultCalls = []vmm.CallKind{vmm.CallCreate, vmm.CallRelease, vmm.CallReserve, vmm.CallFreeAddress,
	vmm.CallMap, vmm.CallUnmap, vmm.CallSetAccess, vmm.CallMemInfo, vmm.CallStreamQuery, vmm.CallCreateEvent,
	vmm.CallRecordEvent, vmm.CallQueryEvent, vmm.CallStreamWaitEvent, vmm.CallDestroyEvent}

// swarmOptional are the actions swarm-actions may switch off (alloc, free and the empty action stay on).
var swarmOptional = []string{"alloc-threshold", "alloc-repeat", "double-free", "free-interior", "record",
	"launch", "complete", "completeall", "emptycache", "bad-stream", "close", "pending-pair", "pool", "capture",
	"fail", "clearfaults", "fragments", "arena-hole", "handoff", "forget", "query", "capture-flush", "close-fault", "fence"}

// DrawSwarm draws one sequence's configuration for policy.
func DrawSwarm(t *rapid.T, policy string, noFaults bool) Swarm {
	const gran = 2 * vmm.MiB
	s := Swarm{Off: map[string]bool{}}
	s.Streams = rapid.IntRange(1, 4).Draw(t, "swarm-streams")
	s.Sync = rapid.IntRange(0, 2).Draw(t, "swarm-sync") == 0
	caps := []uint64{8 * vmm.MiB, 24 * vmm.MiB, 64 * vmm.MiB, 512 * vmm.MiB, 4 * vmm.GiB}
	if policy == impl.PolicyCaching || policy == impl.PolicyExpandable {
		caps[0], caps[1] = 40*vmm.MiB, 60*vmm.MiB // their large segments and pages are 20 MiB
	}
	if policy == impl.PolicyGMLake {
		// A device of 2049 granules: 1/2048 of it is no whole granule, so gmlake's chunk rounds up to two
		// (INV-CHUNK; below 2049 granules and on an H200 the rounding never shows).
		caps = append(caps, 4*vmm.GiB+gran)
	}
	s.Capacity = rapid.SampledFrom(caps).Draw(t, "swarm-capacity")
	switch policy {
	case impl.PolicyGMLake:
		s.Knobs.ChunkSize = rapid.SampledFrom([]uint64{0, gran, 2 * gran, 4 * gran, 12 * gran}).Draw(t, "swarm-chunk")
		s.Knobs.StitchMin = rapid.SampledFrom([]uint64{0, 512, gran, 2 * gran, 3 * gran, 4*gran + 512}).Draw(t, "swarm-stitchmin")
		s.Knobs.SBlockCache = rapid.IntRange(0, 4).Draw(t, "swarm-sblockcache") // 0: the default (256)
		s.Knobs.NoCrossStream = rapid.IntRange(0, 3).Draw(t, "swarm-nocross") == 0
		s.DefaultName = rapid.IntRange(0, 3).Draw(t, "swarm-default-name") == 0
	case impl.PolicyGMLakePaper:
		// GLake's 2 MiB piece (0), or a chunk of two or three granules: segments, splits and rounding go by it.
		s.Knobs.ChunkSize = rapid.SampledFrom([]uint64{0, 0, 2 * gran, 3 * gran}).Draw(t, "swarm-chunk")
		s.Knobs.StitchMin = rapid.SampledFrom([]uint64{0, 2 * gran, 4 * gran}).Draw(t, "swarm-stitchmin")
		s.Knobs.SBlockCache = rapid.IntRange(0, 4).Draw(t, "swarm-sblockcache")
		// reuseLimit: 0 the default (10); 1 only a cached block of the request's size; 1.5 and 3 between.
		s.Knobs.ReuseLimit = rapid.SampledFrom([]float64{0, 1, 1.5, 3}).Draw(t, "swarm-reuselimit")
		// GLake's other knobs: reAlloc, the stitch attempts skipped (defragLevel), an autoGC low enough to run.
		s.Knobs.ReAlloc = rapid.IntRange(0, 2).Draw(t, "swarm-realloc") == 0
		s.Knobs.DefragLevel = rapid.SampledFrom([]int{0, 0, 1, 2, 3}).Draw(t, "swarm-defraglevel")
		s.Knobs.AutoGC = rapid.SampledFrom([]uint64{0, 0, 8 * vmm.MiB, 64 * vmm.MiB}).Draw(t, "swarm-autogc")
	}
	if !noFaults && rapid.IntRange(0, 3).Draw(t, "swarm-faults") != 0 {
		for _, k := range SwarmFaultCalls {
			if rapid.Bool().Draw(t, "swarm-fault-"+k.Short()) {
				s.Faults = append(s.Faults, k)
			}
		}
	}
	if len(s.Faults) == 0 {
		s.Off["fail"], s.Off["clearfaults"] = true, true
	}
	for _, a := range swarmOptional {
		if rapid.Bool().Draw(t, "swarm-off-"+a) {
			s.Off[a] = true
		}
	}
	for _, r := range Rules {
		if OptIn[r.Name] {
			s.OptIn = append(s.OptIn, r.Name)
		}
	}
	// Half the sequences run what libgmlake runs: the serving layer, sometimes under a cap below the device.
	if s.Serve = rapid.Bool().Draw(t, "swarm-serve"); s.Serve {
		s.MemoryLimit = rapid.SampledFrom([]uint64{0, s.Capacity / 2, s.Capacity - gran}).Draw(t, "swarm-limit")
	}
	return s
}

// Thresholds returns the request sizes at which the policy's decisions change, for the knobs given (zero
// knobs: the defaults), each exactly and 1 B, 512 B and one granule either side (rule sizes-threshold).
func Thresholds(policy string, knobs impl.Config, gran uint64) []uint64 {
	points := []uint64{512, vmm.MiB, 10 * vmm.MiB, 20 * vmm.MiB, gran, 2 * gran, 3 * gran, 5 * gran, 512 * vmm.MiB}
	switch policy {
	case impl.PolicyGMLake:
		points = append(points, or64(knobs.StitchMin, 2*gran), or64(knobs.ChunkSize, 48*vmm.MiB))
	case impl.PolicyGMLakePaper:
		points = append(points, or64(knobs.StitchMin, 512*vmm.MiB), or64(knobs.ChunkSize, gran))
	}
	seen := map[uint64]bool{}
	var out []uint64
	for _, p := range points {
		// +-1 MiB and +-(1 MiB + 512 B): a page or segment minus them leaves exactly PyTorch's split thresholds.
		for _, d := range []int64{0, -1, 1, -512, 512, -int64(gran), int64(gran), -1 << 20, 1 << 20, -(1<<20 + 512), 1<<20 + 512} {
			v := int64(p) + d
			if v > 0 && !seen[uint64(v)] {
				seen[uint64(v)] = true
				out = append(out, uint64(v))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func or64(v, def uint64) uint64 {
	if v == 0 {
		return def
	}
	return v
}
