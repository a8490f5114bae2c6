package ops

import (
	"math/rand"
	"slices"
	"sort"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// The one generator: named rules, each with a weight, that make ops from a source of choices. rapid draws
// the choices (so its shrinker shrinks them), porcupine's goroutines a seeded math/rand, and the fuzz
// targets read them from the fuzzer's bytes (ByteSource; fuzz.Decode, and fuzz.Encode backwards).
// A rule reads the run so far through State (an Env, or a porcupine goroutine's own view) and returns
// the ops to run, nil when it does not apply now (nothing live to free, say).
//
// The rules, by name (weights in Rules):
//
//   - alloc: a fresh id, a size (sizes below), a stream;
//   - alloc-threshold: a size at a threshold of the policy and knobs exactly or just beside it (Thresholds);
//   - free, double-free (a freed id again), free-interior (a live id plus 1..4096 B), record (a live id on
//     a stream), launch, complete, completeall, emptycache;
//   - bad-stream: alloc on a stream the environment does not have (ErrUnknownStream);
//   - pending-pair (a template): a block and its neighbour on stream a, the block recorded on stream b,
//     work pending on both, both freed; then maybe a completes and the cache is emptied, maybe b does,
//     maybe the pair's size is asked again on b: the multi-stream pending states in one rule;
//   - pool (a template): create a private pool, allocate in it on a stream, free, allocate in the default
//     pool, maybe release the pool, maybe empty the cache;
//   - capture (a template): a block recorded on another stream with work pending there, a capture begins
//     on a stream, the block is freed and its size asked again, the capture ends, the work completes;
//   - fragments (a template; opt-in, ops.OptIn, as handoff): on one stream, 2-5 pieces of 1-6 granules each followed by a one-granule
//     separator (gmlake-paper: 5-10 granules, segments of their own, and a 1 MiB separator), the pieces freed (free chunks apart, none large enough alone), then a request no single
//     piece holds: the two largest exactly, the largest plus 512 B, all of them, all but half a granule,
//     or all plus a granule (stitching's choices: largest first, the smallest chunk covering the rest, new
//     memory for the rest; best fit and growth under the others); then maybe that block is freed and asked
//     again, at 4/5 of it, two granules less, or three (a cached stitched block is reused up to
//     max(1.25x the request, the request + 2 granules): the reuse limit exactly, and a granule beyond),
//     after one piece's size took one of its chunks (no longer reusable), or after the smallest piece's
//     head and tail were taken and the head freed (its chunk free only in part), or freed and the cache
//     emptied (with faults on, maybe behind a refused unmap first: EmptyCache must report it); or, with
//     faults on, the request's first three reservations refused (every stitch attempt gmlake-paper makes:
//     the block split for it goes back whole), or its N-th map, its access or a handle's creation (a stitch
//     that grew new memory for the rest undoes it), or its first or second reservation out of address
//     space, asked on any stream (one with no arena yet opens one for the stitch's rest), and the request
//     asked again once the faults clear; or, after the largest piece's size took a chunk back, that block recorded
//     on another stream whose work is launched, and freed (its chunk waits for that stream's event), then
//     the request again before and after that work completes; or the block freed while its stream's work
//     is in flight (with faults on, maybe behind a refused event record) and the cache emptied before and
//     after that work completes; or its last byte and one past its end freed (bad frees), then the block;
//   - arena-hole (a template; opt-in): on one stream, blocks of 1-3 and 1-4 granules and a separator, the
//     first freed and the cache emptied (an unmapped hole in the arena), the second freed (free, mapped), then
//     the hole's size plus half the free block, all of it but half a granule, all of it, or one granule (the
//     candidate run counts the mapped bytes only as far as the request reaches: INV-STITCH, INV-GROWTH);
//   - handoff (a template): on stream a, the smallest large-pool block, then one that fills the device after
//     it (from mid-chunk to a chunk's end), freed, work launched on a after the free, and the small size
//     asked on another stream: the engine must release what a freed (the free completed before the work:
//     a fence recorded at the free says so) rather than run out of memory;
//   - forget (opt-in, ops.OptIn): ForgetStream of a stream (the default one a misuse: exactly
//     ErrUnknownStream), alone, or as a template: a block of the stream used with work pending on it and
//     freed, or another stream's block recorded on it, then the stream forgotten (with faults on, maybe
//     behind a fault on the event it records: a failed forget changes nothing; or synchronized and, as the
//     driver answers, destroyed before the forget: nothing is left to wait on), the block's size asked on
//     another stream before and after the forgotten stream's work completes (its memory waits for that
//     work: the event the forget recorded), the cache emptied; later ops on the stream are misuse
//     (ErrUnknownStream), a launch on it is refused by the Env (a destroyed stream runs no more work);
//   - query (opt-in): one of the engine's queries and resets that change no memory: largest
//     (LargestCachedBlock, judged after every step anyway), snapshot (Snapshot, against the Env's record),
//     reset-peak and reset-acc (the statistics' resets, then judged against the reset model);
//   - capture-flush (a template; opt-in): a block recorded on another stream with work pending there, freed
//     while its stream captures (the free is deferred: no event may be recorded during a capture), then one
//     of: the capturing stream forgotten (a misuse: ErrStreamCapturing, nothing changes) and the capture
//     ended; the recorded stream forgotten during the capture (its last event is recorded on a stream that
//     does not capture) and its work completed before or after the capture's end (the deferred free then
//     waits for nothing, or for that event); with faults on, the flush at the capture's end failing on its
//     event record and again at the EmptyCache after it (the free stays deferred; EmptyCache reports it),
//     then the cache emptied clean; or the cache emptied and the size asked again during the capture and
//     after it;
//   - close-fault (opt-in): rarely, completeall, a fault on a call Close makes (cuEventDestroy once; an
//     unmap, release or address free four times in a row, past the engine's retries) and Close: a Close that
//     reports no error left nothing on the device (C-CLOSE);
//   - fence (a template; opt-in; devices up to 64 MiB): the fence a free stamps on its stream (gmlake's chunks, Gen.chunk): a
//     granule, then a chunk taken in two halves, the device filled behind it, the second half recorded on
//     another stream with work pending there, both freed (the first beside a live block that only touches
//     the chunk), work launched after the frees, the other stream's work completed, the whole chunk asked on
//     the other stream; or the device taken whole and freed, a granule taken back, the rest taken and freed,
//     work launched after the free, a chunk asked on another stream (INV-NOSPURIOUSOOM judges the answer); or a
//     block to the end of a chunk it shares with a live block freed beside a chunk that holds only a block
//     pending on another stream (no fence: INV-FENCE), the chunk asked on that stream once its work completed;
//   - fence-cap (a template; opt-in; devices up to 64 MiB): spec/FINDINGS.md F6: 9-11 blocks of a unit each
//     (a chunk under gmlake, else a 1 MiB request in a 2 MiB segment of its own) on stream a, all freed
//     while a is idle (more frees than the engine's fences per stream, each leaving a whole unit free), work
//     launched on a after the frees or before the last one (that work may use the last block), then a
//     request on another stream that needs that memory back (the units, the device less one unit, or all of
//     it); maybe behind a fail-sync: the engine's wait for a on its out-of-memory path fails, and the frees
//     past the cap must not count as safe (INV-RELEASESAFE);
//   - close: rarely, completeall and Close mid-sequence (every call after must fail with ErrClosed);
//   - fail, clearfaults: a fault on one of the swarm's call kinds, N-th next call, a driver result; or a
//     burst of 2-7 in a row from the N-th on (the engine's retry bounds: gmlake-paper's realloc_block tries
//     three times a pass, Close and EmptyCache retry an unmap, a release, an address free).
//
// Sizes (rules sizes-threshold, sizes-repeat of Swarm): a sixth repeat an earlier request exactly; the
// rest come from 0..4 KiB, 1 B..64 MiB, 1 B..4 GiB, the bundled traces' request sizes (Config.TraceSizes),
// the thresholds, or 1 B..the device's capacity.

// Source is where a generator's choices come from.
type Source interface {
	// Intn returns a choice in [0, n), n >= 1; label names the choice in the source's log.
	Intn(n int, label string) int
}

// RapidSource draws the choices from rapid (its failures shrink them).
func RapidSource(t *rapid.T) Source { return rapidSource{t} }

type rapidSource struct{ t *rapid.T }

func (s rapidSource) Intn(n int, label string) int { return rapid.IntRange(0, n-1).Draw(s.t, label) }

// RandSource draws the choices from a seeded math/rand (porcupine's goroutines).
func RandSource(r *rand.Rand) Source { return randSource{r} }

type randSource struct{ r *rand.Rand }

func (s randSource) Intn(n int, _ string) int { return s.r.Intn(n) }

// State is what the rules read of the run so far.
type State interface {
	LiveIDs() []int  // ids bound to live allocations
	FreedIDs() []int // ids allocated and freed since
	NextID() int     // an id no op has bound yet
}

// Sizer is a State that knows the bytes each live id asked for: the free-interior rule then also draws the
// allocation's boundaries (its last byte, one past its end), where off-by-one errors of the containing-block
// search live.
type Sizer interface {
	SizeOf(id int) uint64 // the bytes the live allocation id asked for (0: unknown)
}

// Rule is one named, weighted rule of the generator.
type Rule struct {
	Name   string
	Weight int
	make   func(g *Gen, st State, src Source) []Op
}

// OptIn are the rules that are off unless the swarm names them (Swarm.OptIn) or the caller does (Gen.On's
// only). A rule added to the table changes what a given string of choices decodes to; an opt-in rule
// leaves the programs of saved byte strings (the fuzz corpus) as they were until their owner opts in.
var OptIn = map[string]bool{"arena-hole": true, "fragments": true, "handoff": true, "forget": true, "query": true, "capture-flush": true,
	"close-fault": true, "fence": true, "remainder": true, "fence-cap": true}

// Gen is the generator for one sequence: the swarm's configuration and rules switched off, the sizes it
// draws from, and the requests made so far (sizes-repeat).
type Gen struct {
	Swarm    Swarm
	Policy   string
	Capacity uint64   // the device's bytes (sizes up to it)
	Gran     uint64   // the device's granularity
	Streams  int      // stream indexes 0..Streams-1
	Home     int      // >= 0: alloc, launch and complete use this stream only (porcupine's goroutine); -1: any
	Traces   []uint64 // request sizes of real traces (sampled for a quarter of the sizes); may be empty
	Sizes    []uint64 // nil: any size; else only these (porcupine's small set)

	thresholds []uint64
	used       []uint64
}

// NewGen returns the generator of one sequence under swarm s for policy on a device of capacity bytes.
func NewGen(s Swarm, policy string, capacity, gran uint64) *Gen {
	return &Gen{Swarm: s, Policy: policy, Capacity: capacity, Gran: gran, Streams: max(s.Streams, 1), Home: -1,
		thresholds: Thresholds(policy, s.Knobs, gran)}
}

// Rules are the generator's rules with their weights; Swarm.Off switches rules off by name.
var Rules = []Rule{
	{"alloc", 3, func(g *Gen, st State, src Source) []Op {
		return []Op{{Kind: OpAlloc, ID: st.NextID(), Size: g.size(src), Stream: g.home(src)}}
	}},
	{"alloc-threshold", 2, func(g *Gen, st State, src Source) []Op {
		sz := g.thresholds[src.Intn(len(g.thresholds), "threshold")]
		g.used = append(g.used, sz)
		return []Op{{Kind: OpAlloc, ID: st.NextID(), Size: sz, Stream: g.home(src)}}
	}},
	{"free", 2, func(g *Gen, st State, src Source) []Op {
		return pickID(st.LiveIDs(), src, "live", func(id int) []Op { return []Op{{Kind: OpFree, ID: id}} })
	}},
	{"double-free", 1, func(g *Gen, st State, src Source) []Op {
		return pickID(st.FreedIDs(), src, "freed", func(id int) []Op { return []Op{{Kind: OpFree, ID: id}} })
	}},
	{"free-interior", 1, func(g *Gen, st State, src Source) []Op {
		return pickID(st.LiveIDs(), src, "live", func(id int) []Op {
			off := 1 + uint64(src.Intn(4096, "offset"))
			if sz, ok := st.(Sizer); ok && sz.SizeOf(id) > 1 && src.Intn(3, "offset-at-end?") == 0 {
				// The boundaries of the allocation: its last byte, one past its request, one past the request
				// rounded to 512 B and to the granularity (one past its block under every policy's
				// rounding: the next block's or the next reservation's start, never an interior pointer).
				n := sz.SizeOf(id)
				off = []uint64{n - 1, n, vmm.AlignUp(n, 512), vmm.AlignUp(n, g.Gran)}[src.Intn(4, "offset-end")]
			}
			return []Op{{Kind: OpFreeInterior, ID: id, Offset: off}}
		})
	}},
	{"record", 1, func(g *Gen, st State, src Source) []Op {
		return pickID(st.LiveIDs(), src, "live", func(id int) []Op {
			return []Op{{Kind: OpRecord, ID: id, Stream: g.stream(src, "stream")}}
		})
	}},
	{"launch", 2, func(g *Gen, st State, src Source) []Op { return []Op{{Kind: OpLaunch, Stream: g.home(src)}} }},
	{"complete", 1, func(g *Gen, st State, src Source) []Op { return []Op{{Kind: OpComplete, Stream: g.home(src)}} }},
	{"completeall", 1, func(g *Gen, st State, src Source) []Op { return []Op{{Kind: OpCompleteAll}} }},
	{"emptycache", 1, func(g *Gen, st State, src Source) []Op { return []Op{{Kind: OpEmptyCache}} }},
	{"bad-stream", 1, func(g *Gen, st State, src Source) []Op {
		return []Op{{Kind: OpAlloc, ID: st.NextID(), Size: g.size(src), Stream: g.Streams}}
	}},
	{"pending-pair", 1, func(g *Gen, st State, src Source) []Op {
		a, b := g.home(src), g.stream(src, "pair-b")
		x := st.NextID()
		sx, sy := g.size(src), g.size(src)
		seq := []Op{{Kind: OpAlloc, ID: x, Size: sx, Stream: a}, {Kind: OpAlloc, ID: x + 1, Size: sy, Stream: a},
			{Kind: OpRecord, ID: x, Stream: b}, {Kind: OpLaunch, Stream: a}, {Kind: OpLaunch, Stream: b},
			{Kind: OpFree, ID: x}, {Kind: OpFree, ID: x + 1}}
		switch src.Intn(4, "pair-then") {
		case 0:
			seq = append(seq, Op{Kind: OpComplete, Stream: a}, Op{Kind: OpEmptyCache})
		case 1:
			seq = append(seq, Op{Kind: OpComplete, Stream: b}, Op{Kind: OpEmptyCache})
		case 2:
			seq = append(seq, Op{Kind: OpAlloc, ID: x + 2, Size: sx, Stream: b})
		}
		return seq
	}},
	{"pool", 1, func(g *Gen, st State, src Source) []Op {
		p, s, x := 1+src.Intn(2, "pool"), g.home(src), st.NextID()
		sz := g.size(src)
		seq := []Op{{Kind: OpPoolCreate, Pool: p}, {Kind: OpAlloc, ID: x, Size: sz, Stream: s, Pool: p},
			{Kind: OpFree, ID: x}, {Kind: OpAlloc, ID: x + 1, Size: sz, Stream: s}}
		if src.Intn(2, "pool-replay?") == 0 {
			// a graph of the pool replays, on any stream, over its freed block: the release must wait for it
			seq = append(seq, Op{Kind: OpReplay, Pool: p, Stream: g.stream(src, "replay-on")})
		}
		if src.Intn(2, "pool-release?") == 0 {
			seq = append(seq, Op{Kind: OpPoolRelease, Pool: p})
		}
		if src.Intn(2, "pool-empty?") == 0 {
			seq = append(seq, Op{Kind: OpEmptyCache})
		}
		return seq
	}},
	{"capture", 1, func(g *Gen, st State, src Source) []Op {
		c, o, x := g.home(src), g.stream(src, "capture-other"), st.NextID()
		sz := g.size(src)
		return []Op{{Kind: OpAlloc, ID: x, Size: sz, Stream: c}, {Kind: OpRecord, ID: x, Stream: o},
			{Kind: OpLaunch, Stream: o}, {Kind: OpCaptureBegin, Stream: c}, {Kind: OpFree, ID: x},
			{Kind: OpAlloc, ID: x + 1, Size: sz, Stream: c}, {Kind: OpCaptureEnd, Stream: c},
			{Kind: OpComplete, Stream: o}, {Kind: OpFree, ID: x + 1}}
	}},
	{"close", 1, func(g *Gen, st State, src Source) []Op {
		if src.Intn(10, "close?") != 0 {
			return nil // rarely
		}
		return []Op{{Kind: OpCompleteAll}, {Kind: OpClose}}
	}},
	{"fail", 1, func(g *Gen, st State, src Source) []Op {
		if len(g.Swarm.Faults) == 0 {
			return nil
		}
		f := Op{Kind: OpFail, Call: g.Swarm.Faults[src.Intn(len(g.Swarm.Faults), "call")], N: 1 + src.Intn(4, "n"),
			Result: []vmm.Result{vmm.OutOfMemory, vmm.UnknownCUDAError, vmm.InvalidValue}[src.Intn(3, "result")]}
		if src.Intn(4, "fail-burst?") > 0 {
			return []Op{f}
		}
		// A burst: the calls of the kind from the N-th on, 2-7 in a row, to reach the engine's retry bounds.
		seq := []Op{f}
		for k := 1 + src.Intn(6, "fail-burst"); k > 0; k-- {
			f.N++
			seq = append(seq, f)
		}
		return seq
	}},
	{"clearfaults", 1, func(g *Gen, st State, src Source) []Op {
		if len(g.Swarm.Faults) == 0 {
			return nil
		}
		return []Op{{Kind: OpClearFaults}}
	}},
	{"fragments", 1, func(g *Gen, st State, src Source) []Op {
		s, x := g.home(src), st.NextID()
		n := 2 + src.Intn(4, "frag-pieces")
		var seq, frees []Op
		var sizes []uint64
		pieces, sep := []uint64{1, 2, 3, 4, 6}, g.Gran
		if g.Policy == impl.PolicyGMLakePaper {
			// gmlake-paper's segments: a piece of at least 10 MiB is a segment of its own, with no free
			// remainder for best fit to serve the request from; the separator a small-pool block.
			pieces, sep = []uint64{5, 6, 7, 8, 10}, vmm.MiB
		}
		for i := 0; i < n; i++ {
			sz := g.Gran * pieces[src.Intn(len(pieces), "frag-size")]
			sizes = append(sizes, sz)
			seq = append(seq, Op{Kind: OpAlloc, ID: x + 2*i, Size: sz, Stream: s},
				Op{Kind: OpAlloc, ID: x + 2*i + 1, Size: sep, Stream: s})
			frees = append(frees, Op{Kind: OpFree, ID: x + 2*i})
		}
		seq = append(seq, frees...)
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
		var total uint64
		for _, sz := range sizes {
			total += sz
		}
		want := []uint64{sizes[0] + sizes[1], sizes[0] + 512, total, total - g.Gran/2, total + g.Gran}[src.Intn(5, "frag-request")]
		y := x + 2*n
		if len(g.Swarm.Faults) > 0 && src.Intn(4, "frag-reserve-fault?") == 0 {
			// The stitch's reservation refused at every attempt (gmlake-paper collects sBlocks and tries
			// three times; gmlake grows instead): the split block goes back whole and the request is served
			// otherwise, or fails clean.
			// Or one of the stitch's other calls refused: the N-th next map (the growth's own into the
			// arena, then the view's), the access, or a handle's creation: a stitch that grew new memory
			// for the rest undoes that growth too (buildSBlockLocked), and a failed request holds no more.
			r := s // the request's stream: maybe another one, which views s's chunks through a stitch
			switch src.Intn(5, "frag-fault-call") {
			case 0:
				for i := 1; i <= 3; i++ {
					seq = append(seq, Op{Kind: OpFail, Call: vmm.CallReserve, N: i, Result: vmm.UnknownCUDAError})
				}
			case 1:
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallMap, N: 1 + src.Intn(4, "frag-fault-n"), Result: vmm.UnknownCUDAError})
			case 2:
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallSetAccess, N: 1 + src.Intn(2, "frag-fault-n"), Result: vmm.UnknownCUDAError})
			case 3:
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallCreate, N: 1 + src.Intn(2, "frag-fault-n"), Result: vmm.OutOfMemory})
			case 4:
				// The address space exhausted at the request's first or second reservation (the view's, or
				// an arena the stitch opens for the rest), asked maybe on another stream: one that may have
				// no arena yet, so its stitch's growth must open one.
				r = g.stream(src, "frag-reserve-stream")
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallReserve, N: 1 + src.Intn(2, "frag-fault-n"), Result: vmm.OutOfMemory})
			}
			return append(seq, Op{Kind: OpAlloc, ID: y, Size: want, Stream: r}, Op{Kind: OpClearFaults},
				Op{Kind: OpAlloc, ID: y + 1, Size: want, Stream: r})
		}
		seq = append(seq, Op{Kind: OpAlloc, ID: y, Size: want, Stream: s})
		switch src.Intn(9, "frag-then") {
		case 1:
			seq = append(seq, Op{Kind: OpFree, ID: y}, Op{Kind: OpAlloc, ID: y + 1, Size: want, Stream: s})
		case 2:
			// A request at the reuse limit of the cached block of b = AlignUp(want, G) bytes: the smallest
			// it serves by the ratio (4/5 of it, rounded up to 512 B), by the additive bound (b - 2 granules:
			// max(r/4*5, r + 2 granules) >= b), or one granule below that (b - 3 granules: reused only
			// while 5/4 of it reaches b).
			b := vmm.AlignUp(want, g.Gran)
			r := vmm.AlignUp(b*4/5, 512)
			switch src.Intn(3, "frag-reuse-at") {
			case 1:
				r = max(b, 3*g.Gran) - 2*g.Gran
			case 2:
				r = max(b, 4*g.Gran) - 3*g.Gran
			}
			seq = append(seq, Op{Kind: OpFree, ID: y}, Op{Kind: OpAlloc, ID: y + 1, Size: r, Stream: s})
			if src.Intn(2, "frag-reuse-free?") == 1 {
				// Freed again: the block that served r goes back to the cache whole (gmlake-paper hands out
				// only the pieces under r).
				seq = append(seq, Op{Kind: OpFree, ID: y + 1})
			}
		case 3:
			seq = append(seq, Op{Kind: OpFree, ID: y}, Op{Kind: OpAlloc, ID: y + 1, Size: sizes[len(sizes)-1], Stream: s},
				Op{Kind: OpAlloc, ID: y + 2, Size: want, Stream: s})
		case 4:
			// The smallest piece's head and then its tail taken, the head freed: its chunk is free only in part.
			small := sizes[len(sizes)-1]
			head := vmm.AlignUp(small/2, 512)
			seq = append(seq, Op{Kind: OpFree, ID: y}, Op{Kind: OpAlloc, ID: y + 1, Size: head, Stream: s},
				Op{Kind: OpAlloc, ID: y + 2, Size: small - head, Stream: s}, Op{Kind: OpFree, ID: y + 1},
				Op{Kind: OpAlloc, ID: y + 3, Size: want, Stream: s})
		case 5:
			// The block freed (a stitched one stays cached) and the cache emptied; with faults on, behind a
			// refused unmap (the first the release makes: what it could not unmap stays, and EmptyCache says so).
			seq = append(seq, Op{Kind: OpFree, ID: y})
			if len(g.Swarm.Faults) > 0 && src.Intn(2, "frag-unmap-fault?") == 0 {
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallUnmap, N: 1, Result: vmm.UnknownCUDAError},
					Op{Kind: OpEmptyCache}, Op{Kind: OpClearFaults})
			}
			seq = append(seq, Op{Kind: OpEmptyCache})
		case 6:
			// The block freed (cached), the largest piece's size taken back (every stitch views the largest
			// piece: stitching takes the largest first), recorded on another stream whose work
			// is launched, and freed: its chunk waits for that stream's event, so the cached block must not
			// be reused on s before that work completes (the request asked again), and may be after.
			o := s // another stream where there is one
			if g.Streams > 1 {
				o = (s + 1 + src.Intn(g.Streams-1, "frag-record-stream")) % g.Streams
			}
			seq = append(seq, Op{Kind: OpFree, ID: y}, Op{Kind: OpAlloc, ID: y + 1, Size: sizes[0], Stream: s},
				Op{Kind: OpRecord, ID: y + 1, Stream: o}, Op{Kind: OpLaunch, Stream: o}, Op{Kind: OpFree, ID: y + 1},
				Op{Kind: OpAlloc, ID: y + 2, Size: want, Stream: s}, Op{Kind: OpComplete, Stream: o},
				Op{Kind: OpFree, ID: y + 2}, Op{Kind: OpAlloc, ID: y + 3, Size: want, Stream: s})
		case 7:
			// The block freed while s's work is in flight (with faults on, maybe behind a refused event
			// record: its last use then known only by the stream's fences), and the cache emptied before
			// that work completes (what it views must stay) and after (it may go).
			seq = append(seq, Op{Kind: OpLaunch, Stream: s})
			if len(g.Swarm.Faults) > 0 && src.Intn(2, "frag-record-fault?") == 0 {
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallRecordEvent, N: 1, Result: vmm.UnknownCUDAError})
			}
			seq = append(seq, Op{Kind: OpFree, ID: y}, Op{Kind: OpClearFaults}, Op{Kind: OpEmptyCache},
				Op{Kind: OpComplete, Stream: s}, Op{Kind: OpEmptyCache})
		case 8:
			// The block's boundaries probed by bad frees (a stitched block's range is its own reservation,
			// searched apart from the segments'): its last byte (an interior pointer), one past its end
			// (the next reservation's start: no allocation's interior), then the block freed.
			end := vmm.AlignUp(want, g.Gran)
			seq = append(seq, Op{Kind: OpFreeInterior, ID: y, Offset: end - 1}, Op{Kind: OpFreeInterior, ID: y, Offset: end},
				Op{Kind: OpFree, ID: y})
		}
		return seq
	}},
	{"forget", 1, func(g *Gen, st State, src Source) []Op {
		s := g.home(src)
		if g.Home < 0 && g.Streams > 1 && src.Intn(4, "forget-default?") != 0 {
			s = 1 + src.Intn(g.Streams-1, "forget-stream") // mostly a stream that can be forgotten
		}
		o := (s + 1 + src.Intn(max(g.Streams-1, 1), "forget-other")) % g.Streams
		x, sz := st.NextID(), g.size(src)
		var pre []Op
		switch src.Intn(3, "forget-then") {
		case 0:
			return []Op{{Kind: OpForget, Stream: s}}
		case 1: // a block of s, work pending on s, freed: it waits for that work
			pre = []Op{{Kind: OpAlloc, ID: x, Size: sz, Stream: s}, {Kind: OpLaunch, Stream: s}, {Kind: OpFree, ID: x}}
		case 2: // another stream's block recorded on s with work pending there, freed after the forget
			pre = []Op{{Kind: OpAlloc, ID: x, Size: sz, Stream: o}, {Kind: OpRecord, ID: x, Stream: s}, {Kind: OpLaunch, Stream: s}}
		}
		forget := []Op{{Kind: OpForget, Stream: s}}
		if len(g.Swarm.Faults) > 0 {
			switch src.Intn(4, "forget-fault?") {
			case 0:
				// The forget's own driver calls fail: its event's creation or recording (a stream the driver
				// says is invalid, or any other error).
				call := []vmm.CallKind{vmm.CallRecordEvent, vmm.CallCreateEvent}[src.Intn(2, "forget-fault-call")]
				r := []vmm.Result{vmm.InvalidHandle, vmm.UnknownCUDAError}[src.Intn(2, "forget-fault-result")]
				forget = []Op{{Kind: OpFail, Call: call, N: 1, Result: r}, forget[0], {Kind: OpClearFaults}}
			case 1:
				// The caller synchronized s and destroyed it before the forget (the wrong order): the
				// driver answers the forget's record and the engine's StreamQuery that s does not exist,
				// and the forget succeeds with nothing left to wait on.
				forget = []Op{{Kind: OpComplete, Stream: s},
					{Kind: OpFail, Call: vmm.CallRecordEvent, N: 1, Result: vmm.InvalidHandle},
					{Kind: OpFail, Call: vmm.CallStreamQuery, N: 1, Result: vmm.InvalidHandle},
					forget[0], {Kind: OpClearFaults}}
			}
		}
		seq := append(pre, forget...)
		if pre[0].Stream == o {
			seq = append(seq, Op{Kind: OpFree, ID: x})
		}
		seq = append(seq, Op{Kind: OpAlloc, ID: x + 1, Size: sz, Stream: o}, Op{Kind: OpComplete, Stream: s},
			Op{Kind: OpAlloc, ID: x + 2, Size: sz, Stream: o})
		if src.Intn(2, "forget-empty?") == 0 {
			seq = append(seq, Op{Kind: OpFree, ID: x + 1}, Op{Kind: OpFree, ID: x + 2}, Op{Kind: OpEmptyCache})
		}
		return seq
	}},
	{"query", 1, func(g *Gen, st State, src Source) []Op {
		return []Op{{Kind: []OpKind{OpLargest, OpSnapshot, OpResetPeak, OpResetAcc}[src.Intn(4, "query")]}}
	}},
	{"capture-flush", 1, func(g *Gen, st State, src Source) []Op {
		c, x := g.home(src), st.NextID()
		o := (c + 1 + src.Intn(max(g.Streams-1, 1), "capflush-other")) % g.Streams
		sz := g.size(src)
		seq := []Op{{Kind: OpAlloc, ID: x, Size: sz, Stream: c}, {Kind: OpRecord, ID: x, Stream: o},
			{Kind: OpLaunch, Stream: o}, {Kind: OpCaptureBegin, Stream: c}, {Kind: OpFree, ID: x}}
		faults := len(g.Swarm.Faults) > 0
		switch src.Intn(4, "capflush-then") {
		case 0: // the capturing stream forgotten: a misuse, refused (C-FORGET), then the capture ends
			seq = append(seq, Op{Kind: OpForget, Stream: c}, Op{Kind: OpCaptureEnd, Stream: c},
				Op{Kind: OpComplete, Stream: o})
		case 1: // the recorded stream forgotten during the capture, its work completed before or after its end
			seq = append(seq, Op{Kind: OpForget, Stream: o})
			if src.Intn(2, "capflush-complete-first?") == 0 {
				seq = append(seq, Op{Kind: OpComplete, Stream: o}, Op{Kind: OpCaptureEnd, Stream: c})
			} else {
				seq = append(seq, Op{Kind: OpCaptureEnd, Stream: c}, Op{Kind: OpComplete, Stream: o})
			}
		case 2: // the flush at the capture's end fails, and again at the EmptyCache after it; then it proceeds
			if faults {
				seq = append(seq, Op{Kind: OpFail, Call: vmm.CallRecordEvent, N: 1, Result: vmm.UnknownCUDAError},
					Op{Kind: OpCaptureEnd, Stream: c},
					Op{Kind: OpFail, Call: vmm.CallRecordEvent, N: 1, Result: vmm.UnknownCUDAError},
					Op{Kind: OpEmptyCache}, Op{Kind: OpClearFaults})
			} else {
				seq = append(seq, Op{Kind: OpCaptureEnd, Stream: c})
			}
			seq = append(seq, Op{Kind: OpEmptyCache}, Op{Kind: OpComplete, Stream: o})
		case 3: // the cache emptied and the size asked again during the capture, then after it
			seq = append(seq, Op{Kind: OpEmptyCache}, Op{Kind: OpAlloc, ID: x + 1, Size: sz, Stream: c},
				Op{Kind: OpCaptureEnd, Stream: c}, Op{Kind: OpEmptyCache}, Op{Kind: OpComplete, Stream: o},
				Op{Kind: OpAlloc, ID: x + 2, Size: sz, Stream: o})
		}
		return seq
	}},
	{"close-fault", 1, func(g *Gen, st State, src Source) []Op {
		var calls []vmm.CallKind
		for _, k := range []vmm.CallKind{vmm.CallDestroyEvent, vmm.CallUnmap, vmm.CallRelease, vmm.CallFreeAddress} {
			if slices.Contains(g.Swarm.Faults, k) {
				calls = append(calls, k)
			}
		}
		if len(calls) == 0 || src.Intn(8, "close-fault?") != 0 {
			return nil // rarely: it ends the sequence
		}
		k, n := calls[src.Intn(len(calls), "close-fault-call")], 1+src.Intn(3, "close-fault-n")
		r := []vmm.Result{vmm.UnknownCUDAError, vmm.InvalidValue}[src.Intn(2, "close-fault-result")]
		seq := []Op{{Kind: OpCompleteAll}}
		tries := 1
		if k != vmm.CallDestroyEvent {
			tries = 4 // the engine retries a failed release three times: the fault must outlast them
		}
		for i := 0; i < tries; i++ {
			seq = append(seq, Op{Kind: OpFail, Call: k, N: n + i, Result: r})
		}
		return append(seq, Op{Kind: OpClose})
	}},
	{"fence", 1, func(g *Gen, st State, src Source) []Op {
		a, x := g.home(src), st.NextID()
		b := (a + 1 + src.Intn(max(g.Streams-1, 1), "fence-other")) % g.Streams
		c := g.chunk()
		if g.Capacity > 64*vmm.MiB {
			return nil // the state fills the device: on a large one its thousands of chunks make every judge slow
		}
		variant := src.Intn(3, "fence-beside-live?")
		if variant == 2 {
			// A block to the end of a chunk that it shares with a live block, freed while the chunk after it
			// holds only a block recorded on b with work pending there: nothing under the freed block could
			// be released or stitched, so the free records no fence (INV-FENCE); then the chunk asked on b
			// once b's work completed.
			y := max(c/2, vmm.MiB+vmm.MiB/2) // a large-pool request, less than a chunk
			if c < 2*vmm.MiB || g.Capacity < 3*c {
				return nil
			}
			return []Op{{Kind: OpAlloc, ID: x, Size: 2*c - y, Stream: a}, {Kind: OpAlloc, ID: x + 1, Size: y, Stream: a},
				{Kind: OpAlloc, ID: x + 2, Size: c, Stream: a}, {Kind: OpRecord, ID: x + 2, Stream: b}, {Kind: OpLaunch, Stream: b},
				{Kind: OpFree, ID: x + 2}, {Kind: OpFree, ID: x + 1}, {Kind: OpLaunch, Stream: a}, {Kind: OpComplete, Stream: b},
				{Kind: OpAlloc, ID: x + 3, Size: c, Stream: b}}
		}
		if variant == 0 {
			// A chunk of one granule, then a chunk of c bytes taken in two halves; the second half recorded on
			// b with work pending there, both freed (the first beside a live block that only touches the
			// chunk), work launched on a after the frees, b's work completed, the whole chunk asked on b
			// with the device full: the fence stamped at the frees lets the engine hand it out.
			if c < 2*g.Gran || g.Capacity < g.Gran+c {
				return nil
			}
			seq := []Op{{Kind: OpAlloc, ID: x, Size: g.Gran, Stream: a}, {Kind: OpAlloc, ID: x + 1, Size: c, Stream: a}}
			if fill := g.Capacity - g.Gran - c; fill > 0 {
				seq = append(seq, Op{Kind: OpAlloc, ID: x + 5, Size: fill, Stream: a})
			}
			return append(seq, Op{Kind: OpFree, ID: x + 1}, Op{Kind: OpAlloc, ID: x + 2, Size: c / 2, Stream: a},
				Op{Kind: OpAlloc, ID: x + 3, Size: c / 2, Stream: a}, Op{Kind: OpRecord, ID: x + 3, Stream: b},
				Op{Kind: OpLaunch, Stream: b}, Op{Kind: OpFree, ID: x + 3}, Op{Kind: OpFree, ID: x + 2},
				Op{Kind: OpLaunch, Stream: a}, Op{Kind: OpComplete, Stream: b}, Op{Kind: OpAlloc, ID: x + 4, Size: c, Stream: b})
		}
		// The device taken whole and freed, one granule taken back and the rest taken and freed (a block
		// to the last byte of the last chunk, beside a live block in the chunk before), work launched on a
		// after the free, a chunk asked on b: the fence stamped at the free covers the chunk's last use.
		if g.Capacity < g.Gran+c {
			return nil
		}
		return []Op{{Kind: OpAlloc, ID: x, Size: g.Capacity, Stream: a}, {Kind: OpFree, ID: x},
			{Kind: OpAlloc, ID: x + 1, Size: g.Gran, Stream: a}, {Kind: OpAlloc, ID: x + 2, Size: g.Capacity - g.Gran, Stream: a},
			{Kind: OpFree, ID: x + 2}, {Kind: OpLaunch, Stream: a}, {Kind: OpAlloc, ID: x + 3, Size: c, Stream: b}}
	}},
	{"fence-cap", 1, func(g *Gen, st State, src Source) []Op {
		a, x := g.home(src), st.NextID()
		b := (a + 1 + src.Intn(max(g.Streams-1, 1), "fence-cap-other")) % g.Streams
		req, unit := uint64(vmm.MiB), 2*g.Gran // a small-pool request: a 2 MiB segment (chunk) of its own
		if g.Policy == impl.PolicyGMLake {
			req, unit = g.chunk(), g.chunk()
		}
		n := 9 + src.Intn(3, "fence-cap-n") // impl's maxFences is 8
		if g.Capacity > 64*vmm.MiB || g.Capacity < uint64(n)*unit+unit {
			return nil
		}
		var seq []Op
		for i := 0; i < n; i++ {
			seq = append(seq, Op{Kind: OpAlloc, ID: x + i, Size: req, Stream: a})
		}
		for i := 0; i < n-1; i++ {
			seq = append(seq, Op{Kind: OpFree, ID: x + i})
		}
		// Busy: the work is launched before the last free, and may use that block until it completes.
		busy := src.Intn(2, "fence-cap-busy?") == 0
		if busy {
			seq = append(seq, Op{Kind: OpLaunch, Stream: a})
		}
		seq = append(seq, Op{Kind: OpFree, ID: x + n - 1})
		if !busy {
			seq = append(seq, Op{Kind: OpLaunch, Stream: a})
		}
		if src.Intn(3, "fence-cap-fail-sync?") == 0 {
			seq = append(seq, Op{Kind: OpSyncFail, N: 1})
		}
		big := []uint64{uint64(n) * unit, g.Capacity - unit, g.Capacity}[src.Intn(3, "fence-cap-request")]
		return append(seq, Op{Kind: OpAlloc, ID: x + n, Size: big, Stream: b})
	}},
	{"arena-hole", 1, func(g *Gen, st State, src Source) []Op {
		// On one stream: blocks of h and m granules and a one-granule separator, the first freed and the
		// cache emptied (its chunks unmapped: a hole), the second freed (free and mapped); then a request
		// that takes the hole and part of the free block (the arena's candidate run maps the hole, whose
		// mapped bytes count only as far as the request reaches), or the hole and all of it.
		s, x := g.home(src), st.NextID()
		h, m := g.Gran*uint64(1+src.Intn(3, "hole-size")), g.Gran*uint64(1+src.Intn(4, "hole-free"))
		want := h + []uint64{m / 2, m - g.Gran/2, m, g.Gran}[src.Intn(4, "hole-request")]
		return []Op{{Kind: OpAlloc, ID: x, Size: h, Stream: s}, {Kind: OpAlloc, ID: x + 1, Size: m, Stream: s},
			{Kind: OpAlloc, ID: x + 2, Size: g.Gran, Stream: s}, {Kind: OpFree, ID: x}, {Kind: OpEmptyCache},
			{Kind: OpFree, ID: x + 1}, {Kind: OpAlloc, ID: x + 3, Size: want, Stream: s}}
	}},
	{"handoff", 1, func(g *Gen, st State, src Source) []Op {
		a, x := g.home(src), st.NextID()
		b := (a + 1 + src.Intn(max(g.Streams-1, 1), "handoff-other")) % g.Streams
		small := uint64(vmm.MiB + 512) // the smallest large-pool request
		fill := g.Capacity - min(g.Capacity, 2*vmm.MiB)
		return []Op{{Kind: OpAlloc, ID: x, Size: small, Stream: a}, {Kind: OpAlloc, ID: x + 1, Size: fill, Stream: a},
			{Kind: OpFree, ID: x + 1}, {Kind: OpLaunch, Stream: a}, {Kind: OpAlloc, ID: x + 2, Size: small, Stream: b},
			{Kind: OpFree, ID: x + 2}, {Kind: OpFree, ID: x}}
	}},
	{"remainder", 1, func(g *Gen, st State, src Source) []Op {
		// A free block whose start no Alloc returned: the rest of a freed block after a smaller request took
		// its head, merged with its freed right neighbour; then frees at the request's boundaries (the rest's
		// start, a pointer never handed out: unknown, exactly) and a free of the freed neighbour's old start.
		s, x := g.home(src), st.NextID()
		unit := []uint64{512, 4096, vmm.MiB + 512, g.Gran}[src.Intn(4, "remainder-unit")]
		small := unit
		if src.Intn(2, "remainder-odd?") == 1 {
			small = unit - 1 // rounds up to the unit again
		}
		return []Op{{Kind: OpAlloc, ID: x, Size: unit, Stream: s}, {Kind: OpAlloc, ID: x + 1, Size: 4 * unit, Stream: s},
			{Kind: OpAlloc, ID: x + 2, Size: unit, Stream: s}, {Kind: OpFree, ID: x + 1},
			{Kind: OpAlloc, ID: x + 3, Size: small, Stream: s}, {Kind: OpFree, ID: x + 2},
			{Kind: OpFreeInterior, ID: x + 3, Offset: vmm.AlignUp(small, 512)}, {Kind: OpFreeInterior, ID: x + 3, Offset: 4 * unit},
			{Kind: OpFree, ID: x + 2}}
	}},
}

// On returns the rules this sequence uses: those its swarm did not switch off, and of those only the
// named ones if only is not empty.
func (g *Gen) On(only ...string) []Rule {
	var out []Rule
	for _, r := range Rules {
		if g.Swarm.Off[r.Name] || len(only) > 0 && !contains(only, r.Name) ||
			len(only) == 0 && OptIn[r.Name] && !contains(g.Swarm.OptIn, r.Name) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Make runs rule r: the ops it makes now (nil: it does not apply).
func (g *Gen) Make(r Rule, st State, src Source) []Op { return r.make(g, st, src) }

// Next draws a rule of rules by weight and returns its name and ops (nil ops: it did not apply).
func (g *Gen) Next(rules []Rule, st State, src Source) (string, []Op) {
	total := 0
	for _, r := range rules {
		total += r.Weight
	}
	k := src.Intn(total, "rule")
	for _, r := range rules {
		if k -= r.Weight; k < 0 {
			return r.Name, r.make(g, st, src)
		}
	}
	return "", nil
}

// size draws a request size (see the sizes above).
// chunk is the chunk size the fence template builds its states on: gmlake's (spec.ChunkSize), two granules
// under the other policies.
func (g *Gen) chunk() uint64 {
	if g.Policy == impl.PolicyGMLake {
		return spec.ChunkSize(g.Swarm.Knobs.ChunkSize, g.Capacity, g.Gran)
	}
	return 2 * g.Gran
}

func (g *Gen) size(src Source) uint64 {
	var sz uint64
	if len(g.Sizes) > 0 {
		sz = g.Sizes[src.Intn(len(g.Sizes), "size")]
	} else if len(g.used) > 0 && !g.Swarm.Off["alloc-repeat"] && src.Intn(6, "repeat?") == 0 {
		sz = g.used[src.Intn(len(g.used), "repeat-size")]
	} else {
		switch k := src.Intn(8, "size-class"); {
		case k == 0:
			sz = uint64(src.Intn(4097, "size")) // 0: ErrInvalidSize
		case k == 1:
			sz = 1 + uint64(src.Intn(int(64*vmm.MiB), "size"))
		case k == 2:
			sz = 1 + uint64(src.Intn(int(4*vmm.GiB), "size"))
		case k <= 4 && len(g.Traces) > 0:
			sz = g.Traces[src.Intn(len(g.Traces), "trace-size")]
		case k <= 5:
			sz = g.thresholds[src.Intn(len(g.thresholds), "threshold")]
		default:
			sz = 1 + uint64(src.Intn(int(max(g.Capacity, 1)), "size"))
		}
	}
	g.used = append(g.used, sz)
	return sz
}

// home is the stream of an alloc, launch or complete: the goroutine's own, or any.
func (g *Gen) home(src Source) int {
	if g.Home >= 0 {
		return g.Home
	}
	return g.stream(src, "stream")
}

func (g *Gen) stream(src Source, label string) int { return src.Intn(g.Streams, label) }

func pickID(ids []int, src Source, label string, f func(int) []Op) []Op {
	if len(ids) == 0 {
		return nil
	}
	return f(ids[src.Intn(len(ids), label)])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ByteSource reads a generator's choices from fuzzer bytes, so that go test -fuzz mutates the choices
// themselves: Intn(n) takes the fewest bytes that hold n-1 (none for n = 1, one up to 256), big-endian,
// modulo n; past the end it reads zeros. PutChoice writes the bytes that read back as a given choice.
type ByteSource struct {
	b []byte
	i int
}

// NewByteSource returns a source over b.
func NewByteSource(b []byte) *ByteSource { return &ByteSource{b: b} }

// More reports whether bytes are left.
func (s *ByteSource) More() bool { return s.i < len(s.b) }

// Intn implements Source.
func (s *ByteSource) Intn(n int, _ string) int {
	var v uint64
	for k := choiceBytes(n); k > 0; k-- {
		v <<= 8
		if s.i < len(s.b) {
			v |= uint64(s.b[s.i])
		}
		s.i++
	}
	return int(v % uint64(n))
}

// PutChoice appends to b the bytes ByteSource.Intn(n) reads as v (0 <= v < n).
func PutChoice(b []byte, v, n int) []byte {
	for k := choiceBytes(n) - 1; k >= 0; k-- {
		b = append(b, byte(uint64(v)>>(8*k)))
	}
	return b
}

// choiceBytes is how many bytes a choice among n takes.
func choiceBytes(n int) int {
	k := 0
	for m := uint64(n - 1); m > 0; m >>= 8 {
		k++
	}
	return k
}

// RuleStart returns the first value of the "rule" choice that Gen.Next maps to the named rule among
// rules, and the total weight (the n of that choice); ok is false if the rule is not among them.
func RuleStart(rules []Rule, name string) (start, total int, ok bool) {
	for _, r := range rules {
		if r.Name == name {
			start, ok = total, true
		}
		total += r.Weight
	}
	return start, total, ok
}

// Mark returns how many request sizes the generator has noted (for sizes-repeat); Reset(m) forgets those
// noted since, so a caller that draws a rule and rejects its ops (fuzz.Encode) leaves the generator as if
// it had not drawn.
func (g *Gen) Mark() int { return len(g.used) }

// Reset forgets the sizes noted since Mark returned m.
func (g *Gen) Reset(m int) { g.used = g.used[:min(m, len(g.used))] }
