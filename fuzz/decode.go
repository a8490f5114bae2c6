package fuzz

// Decoding fuzzer bytes into programs, and encoding programs back into bytes (for the seed corpus).
//
// The bytes are the choices of the one generator (harness/ops: ops.Rules, through an ops.ByteSource), after
// a header of three bytes, so go test -fuzz mutates the generator's choices themselves and reaches every
// rule: the pending-pair, pool and capture templates, sizes at the thresholds, faults on every call kind,
// misuse; and the swarm's draw of the serving layer (rule swarm-serve, as rapid's DrawSwarm), so half the
// inputs run exactly what libgmlake runs (impl/serve: the memory cap, synchronise every stream and retry
// on out of memory, stream mapping).
//
//	header[0]  capacity: capacities[(b & 0x7f) % len(capacities)]; bit 7 set: end with Close while allocations are live
//	header[1]  streams: 1 + b % MaxStreams
//	header[2]  serving layer (format 2): bit 0 set: through impl/serve, under the cap serveLimits[(b&0x3f >> 1) % 3]
//	           (none, half the device, the device less one granule); bit 0 clear: the bare engine.
//	           Bit 7 set: the opt-in rules of format 3 (ops.OptIn: the fragments and handoff templates) are
//	           drawn too (rapid's swarm opts in to them the same way). Bit 6 set: those of format 4 (the
//	           forget and query rules: ForgetStream, LargestCachedBlock, Snapshot, the statistics' resets)
//	           are drawn too, after format 3's.
//	           Bit 5 set (format 5): header[3] is a knob byte (decodeKnobs), and the choices start after it.
//	header[3]  only with header[2]'s bit 5: the engine's knobs, for every policy: bits 0-1 the chunk size
//	           (default, 2, 3 or 12 granules), bits 2-3 the stitch threshold (default, 2 or 4 granules, 4
//	           granules + 512 B), bits 4-5 the sBlock cache (default, 1, 2, 4), bit 6 no cross-stream reuse,
//	           bit 7 gmlake-paper's reAlloc (rapid's swarm draws the same values)
//	then       rule choices and their arguments (ops.ByteSource: one byte for a choice among up to 256)
//
// Format 2 added header[2]. The committed corpus (testdata/fuzz/FuzzOps) was migrated, not re-drawn: each
// format-1 file got a 0 byte inserted at offset 2 (the bare engine, as before), so every old entry decodes
// to exactly the program it decoded to before (TestServeByteChangesOnlyTheLayer: header[2] changes no op;
// the migration diffed every entry's history under every policy, identical); TestGenerateCorpus writes the
// same files, and the serve-* entries on top. An input of the fuzzer's own cache from before (GOCACHE's
// fuzz folder) just decodes as another format-2 input.
//
// Format 3 gave header[2]'s bit 7 to the opt-in rules. A rule in the list changes which rule every later
// choice byte names, so the opt-in rules are drawn only where that bit says so: every format-2 entry of the
// corpus (header[2] at most 5) decodes exactly as before (TestServeByteChangesOnlyTheLayer), and the
// optin-* entries and half of TestRandomPrograms' inputs reach the templates.
//
// Format 4 gave bit 6 to the rules opted in after format 3 (format4Rules), the same way: bit 6 was clear in
// every committed entry (header[2] at most 0x85), and it no longer counts in the serving layer's cap, so
// every format-3 entry decodes exactly as before (TestFormat4BitChangesNoEntry); the forget-* entries and a
// quarter of TestRandomPrograms' inputs set it.
//
// Format 5 gave bit 5 to the knob byte. Bit 5 was clear in every committed entry (header[2] one of 0-5,
// 0x40-0x44, 0x80-0x85, 0xc1-0xc5), and it no longer counts in the serving layer's cap, so every format-4
// entry decodes exactly as before (TestKnobByteChangesOnlyTheKnobs); the knobs-* entries set it.
//
// Every byte string decodes to some program (missing bytes read as 0), so the fuzzer never wastes an input;
// the decoder keeps the sequence meaningful by naming live allocations by their index among those it
// believes live (an allocation may fail when the program runs: its later ops are then misuse the engine
// must refuse).

import (
	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
	"slices"
)

// MaxStreams is the most streams a decoded program uses.
const MaxStreams = 4

// maxDecodeSize bounds the sizes the generator draws up to the device's capacity (decodeGen).
const maxDecodeSize = 4 * vmm.GiB

// headerLen is the bytes before the generator's choices (formats 2 and 3).
const headerLen = 3

// optInBit is header[2]'s bit that turns the opt-in rules (ops.OptIn) of format 3 on; format4Bit turns
// those of format 4 on (format4Rules).
const (
	optInBit   = 0x80
	format4Bit = 0x40
	knobBit    = 0x20 // format 5: header[3] is a knob byte (decodeKnobs)
)

// decodeKnobs is the engine configuration a knob byte (format 5's header[3]) names: 0 is the defaults.
func decodeKnobs(k byte) impl.Config {
	const gran = 2 * vmm.MiB
	return impl.Config{
		ChunkSize:     []uint64{0, 2 * gran, 3 * gran, 12 * gran}[k&3],
		StitchMin:     []uint64{0, 2 * gran, 4 * gran, 4*gran + 512}[k>>2&3],
		SBlockCache:   []int{0, 1, 2, 4}[k>>4&3],
		NoCrossStream: k&0x40 != 0,
		ReAlloc:       k&0x80 != 0,
	}
}

// encodeKnobs is the knob byte of k, if decodeKnobs names k exactly.
func encodeKnobs(k impl.Config) (byte, bool) {
	for b := 0; b < 256; b++ {
		if decodeKnobs(byte(b)) == k {
			return byte(b), true
		}
	}
	return 0, false
}

// format4Rules are the opt-in rules format 4 added (header[2]'s bit 6); every other opt-in rule is format 3's
// (bit 7).
var format4Rules = map[string]bool{"forget": true, "query": true}

// undecodedRules are the opt-in rules added after format 4: no header bit draws them yet (a rule in the list
// would change what every format-3 or format-4 entry decodes to), so the decoder leaves them out; rapid's
// swarm draws them, and the golden scenarios (harness/testdata/scenarios) hold their states.
var undecodedRules = map[string]bool{"capture-flush": true, "close-fault": true, "fence": true}

// serveLimits are the memory caps of a decoded program run through the serving layer, as the swarm draws
// them (ops.DrawSwarm's swarm-limit): none, half the device, the device less one granule.
func serveLimits(capacity uint64) []uint64 { return []uint64{0, capacity / 2, capacity - 2*vmm.MiB} }

// serveByte is header[2] for a program's setup: 0 for the bare engine, else the serving layer under the
// cap of serveLimits nearest cfg.MemoryLimit (no cap counts as the whole device).
func serveByte(cfg ops.Config, capacity uint64) byte {
	if !cfg.Serve {
		return 0
	}
	eff := func(l uint64) uint64 {
		if l == 0 || l > capacity {
			return capacity
		}
		return l
	}
	want, best, k := eff(cfg.MemoryLimit), uint64(1<<63), 0
	for i, l := range serveLimits(capacity) {
		d := max(eff(l), want) - min(eff(l), want)
		if d < best {
			best, k = d, i
		}
	}
	return byte(k<<1) | 1
}

// MaxOps is the most operations decoded from one input, so each fuzz execution stays fast.
const MaxOps = 256

// capacities are the simulated device sizes a decoded program may run on: small, so that out-of-memory,
// cache release and retry are exercised, and one large enough for windows of real traces.
var capacities = []uint64{64 * vmm.MiB, 256 * vmm.MiB, 1 * vmm.GiB, 4 * vmm.GiB, 16 * vmm.GiB, 80 * vmm.GiB}

// commonSizes are sizes at the policies' boundaries (ops.Thresholds: each exactly and 1 B, 512 B, a
// granule, 1 MiB either side) and a few sizes of the real traces; the generator samples them as its trace
// sizes, and the campaign draws from them too.
var commonSizes = append(ops.Thresholds("", impl.Config{}, 2*vmm.MiB), 64*vmm.MiB, 256*vmm.MiB, vmm.GiB,
	131072000, 3*vmm.GiB)

// decodeGen is the generator of a decoded program: every rule on, faults on every call kind the engine
// makes after New, sizes up to the device's capacity or maxDecodeSize (a program of many tens-of-GiB
// allocations on the 80 GiB device holds ~40k chunks, and every step judges them all: slow, and no deeper).
// The opt-in rules (ops.OptIn) are on too as header[2] says (h2: its bits 7 and 6, optInBit and format4Bit).
func decodeGen(capacity uint64, streams int, h2 byte) (*ops.Gen, []ops.Rule) {
	sw := ops.Swarm{Streams: streams, Faults: ops.SwarmFaultCalls}
	for _, r := range ops.Rules {
		if ops.OptIn[r.Name] && !undecodedRules[r.Name] &&
			(format4Rules[r.Name] && h2&format4Bit != 0 || !format4Rules[r.Name] && h2&optInBit != 0) {
			sw.OptIn = append(sw.OptIn, r.Name)
		}
	}
	g := ops.NewGen(sw, "", min(capacity, maxDecodeSize), 2*vmm.MiB)
	g.Traces = commonSizes
	return g, g.On()
}

// belief is what the decoder believes of the run (ops.State): every alloc succeeds.
type belief struct {
	live, freed []int
	next        int
}

func (b *belief) LiveIDs() []int  { return append([]int(nil), b.live...) }
func (b *belief) FreedIDs() []int { return append([]int(nil), b.freed...) }
func (b *belief) NextID() int     { return b.next }

func (b *belief) apply(o ops.Op) {
	switch o.Kind {
	case ops.OpAlloc:
		b.next = max(b.next, o.ID+1)
		b.live = append(b.live, o.ID)
	case ops.OpFree:
		for i, id := range b.live {
			if id == o.ID {
				b.live = append(b.live[:i], b.live[i+1:]...)
				b.freed = append(b.freed, id)
				break
			}
		}
	}
}

// Decode turns fuzzer bytes into a program (for every policy: Cfg.Policy is ""), with the pattern check
// on, through the serving layer or not as header[2] says. Unless the header says to end with Close while allocations are live, it ends by freeing every
// allocation the decoder believes live.
func Decode(data []byte) *ops.Program {
	var h [headerLen]byte
	copy(h[:], data)
	h0, h1, h2 := h[0], h[1], h[2]
	p := &ops.Program{Cfg: ops.Config{
		Capacity: capacities[int(h0&0x7f)%len(capacities)],
		Streams:  1 + int(h1)%MaxStreams,
		Patterns: true,
	}}
	if h2&1 != 0 {
		p.Cfg.Serve, p.Cfg.MemoryLimit = true, serveLimits(p.Cfg.Capacity)[int(h2&^(optInBit|format4Bit|knobBit)>>1)%3]
	}
	start := headerLen
	if h2&knobBit != 0 {
		if len(data) > headerLen {
			p.Cfg.Knobs = decodeKnobs(data[headerLen])
		}
		start++
	}
	src := ops.NewByteSource(data[min(start, len(data)):])
	gen, rules := decodeGen(p.Cfg.Capacity, p.Cfg.Streams, h2)
	st := &belief{next: 1}
	for src.More() && len(p.Ops) < MaxOps {
		_, seq := gen.Next(rules, st, src)
		for _, o := range seq {
			p.Ops = append(p.Ops, o)
			st.apply(o)
		}
	}
	if h0&0x80 == 0 {
		for _, id := range st.live {
			p.Ops = append(p.Ops, ops.Op{Kind: ops.OpFree, ID: id})
		}
	}
	return p
}

// script is an ops.Source that answers each choice from a table by its label and writes the bytes an
// ops.ByteSource reads as those answers (Encode's way of running the generator backwards).
type script struct {
	want map[string]int
	out  []byte
	bad  bool // a choice was out of range
}

func (s *script) Intn(n int, label string) int {
	v := s.want[label]
	if v < 0 || v >= n {
		s.bad, v = true, 0
	}
	s.out = ops.PutChoice(s.out, v, n)
	return v
}

// Encode turns a program back into bytes that Decode reads as the same program, for the ops one rule of
// the generator makes alone: alloc (sizes up to 4 GiB), free, double free, free-interior,
// record, launch, complete, completeall, emptycache, fail (the generator's results, N up to 4),
// clearfaults. Decode numbers ids 1, 2, ... in allocation order, so the program's ids are renamed; ops
// about an id no earlier alloc bound, and ops no single rule makes (pools, capture, close), are dropped.
// The capacity is the table's nearest at or above the program's, the streams at most MaxStreams, the
// serving layer as the program's (its cap the nearest of serveLimits at or below). The seed corpus is
// written with it.
func Encode(p *ops.Program) []byte {
	ci := len(capacities) - 1
	for i, c := range capacities {
		if c >= p.Cfg.Capacity {
			ci = i
			break
		}
	}
	streams := min(max(p.Cfg.Streams, 1), MaxStreams)
	// The program's own frees come explicitly: Decode then has nothing to free at the end.
	out := []byte{byte(ci) | 0x80, byte(streams - 1), serveByte(p.Cfg, capacities[ci])}
	if k, ok := encodeKnobs(p.Cfg.Knobs); ok && k != 0 {
		out[2] |= knobBit
		out = append(out, k)
	}
	gen, rules := decodeGen(capacities[ci], streams, 0 /* h2: Encode names the rules without the opt-in ones */)
	st := &belief{next: 1}
	rename := map[int]int{}
	for i := 0; i < len(p.Ops); i++ {
		o := p.Ops[i]
		orig := o.ID
		want, name, ok := choicesFor(&o, st, rename, capacities[ci], streams)
		if !ok {
			continue
		}
		start, total, ok := ops.RuleStart(rules, name)
		if !ok {
			continue
		}
		group := []ops.Op{o} // the ops one rule call makes: o, and the rest of a fault burst that starts at o
		if o.Kind == ops.OpFail {
			group = failBurst(p.Ops[i:])
			want["fail-burst?"] = 1
			if len(group) > 1 {
				want["fail-burst?"], want["fail-burst"] = 0, len(group)-2
			}
		}
		s := &script{want: want}
		s.out = ops.PutChoice(s.out, start, total)
		mark := gen.Mark()
		seq := gen.Make(rules[ruleIndex(rules, name)], st, s)
		if s.bad || !slices.Equal(seq, group) {
			gen.Reset(mark)
			continue
		}
		if o.Kind == ops.OpAlloc {
			rename[orig] = o.ID
		}
		for _, x := range seq {
			st.apply(x)
		}
		out = append(out, s.out...)
		i += len(group) - 1
	}
	return out
}

// failBurst returns the fault burst that starts at fs[0] (ops.Gen's fail rule): fs[0] and the faults after it
// on the same call with the same result, each on the call after the one before, up to seven in all.
func failBurst(fs []ops.Op) []ops.Op {
	n := 1
	for n < len(fs) && n < 7 && fs[n].Kind == ops.OpFail && fs[n].Call == fs[0].Call && fs[n].Result == fs[0].Result && fs[n].N == fs[0].N+n {
		n++
	}
	return fs[:n]
}

func ruleIndex(rules []ops.Rule, name string) int {
	for i, r := range rules {
		if r.Name == name {
			return i
		}
	}
	return -1
}

// choicesFor returns the rule that makes o alone and its choices by label, with o's ids renamed to what
// Decode will call them (an alloc gets the next id); ok is false if no rule makes it.
func choicesFor(o *ops.Op, st *belief, rename map[int]int, capacity uint64, streams int) (map[string]int, string, bool) {
	index := func(ids []int, id int) int {
		for i, x := range ids {
			if x == id {
				return i
			}
		}
		return -1
	}
	var orig int
	if o.Kind != ops.OpAlloc {
		var known bool
		if orig, known = rename[o.ID]; !known && (o.Kind == ops.OpFree || o.Kind == ops.OpFreeInterior || o.Kind == ops.OpRecord) {
			return nil, "", false
		}
	}
	want := map[string]int{"repeat?": 1}
	switch o.Kind {
	case ops.OpAlloc:
		sz := o.Size
		switch {
		case sz <= 4096:
			want["size-class"], want["size"] = 0, int(sz)
		case sz <= 64*vmm.MiB:
			want["size-class"], want["size"] = 1, int(sz-1)
		case sz <= 4*vmm.GiB:
			want["size-class"], want["size"] = 2, int(sz-1)
		case sz <= min(capacity, maxDecodeSize):
			want["size-class"], want["size"] = 7, int(sz-1)
		default:
			return nil, "", false
		}
		o.ID, o.Pool = st.NextID(), 0
		if o.Stream >= streams {
			o.Stream = streams
			return want, "bad-stream", true
		}
		want["stream"] = o.Stream
		return want, "alloc", true
	case ops.OpFree:
		o.ID = orig
		if i := index(st.live, orig); i >= 0 {
			want["live"] = i
			return want, "free", true
		}
		if i := index(st.freed, orig); i >= 0 {
			want["freed"] = i
			return want, "double-free", true
		}
	case ops.OpFreeInterior:
		o.ID = orig
		if i := index(st.live, orig); i >= 0 && o.Offset >= 1 && o.Offset <= 4096 {
			want["live"], want["offset"] = i, int(o.Offset-1)
			return want, "free-interior", true
		}
	case ops.OpRecord:
		o.ID = orig
		if i := index(st.live, orig); i >= 0 && o.Stream < streams {
			want["live"], want["stream"] = i, o.Stream
			return want, "record", true
		}
	case ops.OpLaunch, ops.OpComplete:
		if o.Stream < streams {
			want["stream"] = o.Stream
			return want, o.Kind.String(), true
		}
	case ops.OpCompleteAll, ops.OpEmptyCache, ops.OpClearFaults:
		return want, o.Kind.String(), true
	case ops.OpFail:
		call := -1
		for i, k := range ops.SwarmFaultCalls {
			if k == o.Call {
				call = i
			}
		}
		res := map[vmm.Result]int{vmm.OutOfMemory: 0, vmm.UnknownCUDAError: 1, vmm.InvalidValue: 2}
		if r, ok := res[o.Result]; ok && call >= 0 && o.N >= 1 && o.N <= 4 {
			want["call"], want["n"], want["result"] = call, o.N-1, r
			return want, "fail", true
		}
	}
	return nil, "", false
}
