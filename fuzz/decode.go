package fuzz

// Decoding fuzzer bytes into programs, and encoding programs back into bytes (for the seed corpus).
//
// The format is a header of two bytes, then operations, each an opcode byte followed by its argument bytes.
// Every byte string decodes to some program (missing bytes read as 0), so the fuzzer never wastes an input;
// the decoder keeps the sequence meaningful by naming live allocations by their index among the live ones.
//
//	header[0]  capacity: capacities[b % len(capacities)]; bit 7 set: end with Close while allocations are live
//	header[1]  streams: 1 + b % MaxStreams
//	op byte    b % 16 selects the operation (see decodeOp); allocations take 6 of the 16 values
//
// Alloc sizes come from a skewed distribution over 1 B .. 8 GiB (sizeClass) that favours the boundaries the
// policies care about (512 B, 1 MiB, 2 MiB multiples, 10 MiB, 20 MiB, 512 MiB), and an exact 40-bit size for
// sequences cut from real traces.

import (
	"encoding/binary"
	"math"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// MaxStreams is the most streams a decoded program uses.
const MaxStreams = 4

// MaxOps is the most operations decoded from one input, so each fuzz execution stays fast.
const MaxOps = 256

// capacities are the simulated device sizes a decoded program may run on: small, so that out-of-memory,
// cache release and retry are exercised, and one large enough for windows of real traces.
var capacities = []uint64{64 * vmm.MiB, 256 * vmm.MiB, 1 * vmm.GiB, 4 * vmm.GiB, 16 * vmm.GiB, 80 * vmm.GiB}

// commonSizes are sizes at the policies' boundaries (ops.Thresholds: each exactly and 1 B, 512 B, a
// granule, 1 MiB either side) and a few sizes of the real traces.
var commonSizes = append(ops.Thresholds("", impl.Config{}, 2*vmm.MiB), 64*vmm.MiB, 256*vmm.MiB, vmm.GiB,
	131072000, 3*vmm.GiB)

// faultKinds are the driver calls a decoded program may make fail: every kind the engine makes after New.
var faultKinds = ops.SwarmFaultCalls

// faultResults are what an injected failure answers: what the real driver gives for such calls.
var faultResults = ops.FaultResults[:4]

// Opcodes (b % 16).
const (
	codeAllocLo    = 0 // 0..5: alloc; sizeClass from the next byte
	codeAllocHi    = 5
	codeFree       = 6 // 6, 7: free
	codeFree2      = 7
	codeRecord     = 8
	codeLaunch     = 9
	codeComplete   = 10
	codeCompleteAl = 11
	codeEmptyCache = 12
	codeFail       = 13
	codeMisuse     = 14
	codeFreeOldest = 15 // free the oldest live allocation (keeps long sequences from filling the device)
)

// byteReader hands out bytes; past the end it reads zeros.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) more() bool { return r.i < len(r.b) }

func (r *byteReader) u8() byte {
	if r.i >= len(r.b) {
		r.i++
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *byteReader) u16() uint16 { return uint16(r.u8())<<8 | uint16(r.u8()) }

// Misuse codes (the op byte's high nibble with codeMisuse): calls the engine must refuse, changing
// nothing. Each decodes into plain ops (harness/ops has no misuse kind: a misuse is an op with arguments
// the engine must refuse), about an id no alloc binds (badID and up) where it needs one.
const (
	misuseDoubleFree    = iota // free of a freed id
	misuseInterior             // free-interior of a live id, at half its size
	misuseUnknownPtr           // free of an id no alloc bound
	misuseUnknownStream        // alloc on a stream the device does not know, then its free
	misuseZeroSize             // alloc of 0 bytes, then its free
	misuseRecordUnknown        // record of an id no alloc bound
	numMisuses
)

// badID is the first id of the misuses' unbound allocations; unknownStream a stream no device has.
const (
	badID         = 1 << 40
	unknownStream = 1 << 20
)

// Decode turns fuzzer bytes into a program (for every policy: Cfg.Policy is ""), with the pattern check
// on. Unless the header says to end with Close while allocations are live, it ends by freeing every
// allocation the decoder believes live.
func Decode(data []byte) *ops.Program {
	r := &byteReader{b: data}
	h0, h1 := r.u8(), r.u8()
	p := &ops.Program{Cfg: ops.Config{
		Capacity: capacities[int(h0&0x7f)%len(capacities)],
		Streams:  1 + int(h1)%MaxStreams,
		Patterns: true,
	}}
	closeLive := h0&0x80 != 0
	var (
		live   []int // live IDs in allocation order (as the decoder believes: an alloc may fail)
		freed  []int
		size   = map[int]uint64{}
		nextID = 1
		bad    = badID
	)
	pick := func(b byte) (int, int, bool) {
		if len(live) == 0 {
			return 0, 0, false
		}
		i := int(b) % len(live)
		return live[i], i, true
	}
	add := func(o ...ops.Op) { p.Ops = append(p.Ops, o...) }
	for r.more() && len(p.Ops) < MaxOps {
		b := r.u8()
		switch code := b % 16; {
		case code <= codeAllocHi:
			sz := decodeSize(r)
			add(ops.Op{Kind: ops.OpAlloc, ID: nextID, Size: sz, Stream: int(b>>4) % p.Cfg.Streams})
			live, size[nextID] = append(live, nextID), sz
			nextID++
		case code == codeFree || code == codeFree2 || code == codeFreeOldest:
			sel := byte(0)
			if code != codeFreeOldest {
				sel = r.u8()
			}
			if id, i, ok := pick(sel); ok {
				add(ops.Op{Kind: ops.OpFree, ID: id})
				live = append(live[:i], live[i+1:]...)
				freed = append(freed, id)
			}
		case code == codeRecord:
			// RecordStream, then the other stream's use of the block: one unit of work there.
			sel, s := r.u8(), int(r.u8())%p.Cfg.Streams
			if id, _, ok := pick(sel); ok {
				add(ops.Op{Kind: ops.OpRecord, ID: id, Stream: s}, ops.Op{Kind: ops.OpLaunch, Stream: s})
			}
		case code == codeLaunch:
			add(ops.Op{Kind: ops.OpLaunch, Stream: int(b>>4) % p.Cfg.Streams})
		case code == codeComplete:
			add(ops.Op{Kind: ops.OpComplete, Stream: int(b>>4) % p.Cfg.Streams})
		case code == codeCompleteAl:
			add(ops.Op{Kind: ops.OpCompleteAll})
		case code == codeEmptyCache:
			add(ops.Op{Kind: ops.OpEmptyCache})
		case code == codeFail:
			k, n, res := r.u8(), r.u8(), r.u8()
			add(ops.Op{Kind: ops.OpFail, Call: faultKinds[int(k)%len(faultKinds)],
				N: 1 + int(n)%8, Result: faultResults[int(res)%len(faultResults)]})
		case code == codeMisuse:
			m, sel := int(b>>4)%numMisuses, r.u8()
			switch m {
			case misuseDoubleFree:
				if len(freed) > 0 {
					add(ops.Op{Kind: ops.OpFree, ID: freed[int(sel)%len(freed)]})
				}
			case misuseInterior:
				if id, _, ok := pick(sel); ok && size[id] >= 2 {
					add(ops.Op{Kind: ops.OpFreeInterior, ID: id, Offset: 1 + (size[id]-1)/2})
				}
			case misuseUnknownPtr:
				add(ops.Op{Kind: ops.OpFree, ID: bad})
				bad++
			case misuseUnknownStream, misuseZeroSize:
				o := ops.Op{Kind: ops.OpAlloc, ID: bad, Size: 4096, Stream: unknownStream}
				if m == misuseZeroSize {
					o.Size, o.Stream = 0, 0 // may be a valid allocation (the engine documents which): freed next
				}
				add(o, ops.Op{Kind: ops.OpFree, ID: bad})
				bad++
			case misuseRecordUnknown:
				add(ops.Op{Kind: ops.OpRecord, ID: bad})
				bad++
			}
		}
	}
	if !closeLive {
		for _, id := range live {
			add(ops.Op{Kind: ops.OpFree, ID: id})
		}
	}
	return p
}

// decodeSize reads a size class byte and its argument bytes.
func decodeSize(r *byteReader) uint64 {
	c := r.u8()
	switch c % 16 {
	case 0: // tiny: 1..512 B
		return 1 + uint64(r.u16())%512
	case 1, 2, 3: // small: 512 B .. 1 MiB, log-uniform
		return logUniform(512, vmm.MiB, r.u16())
	case 4, 5, 6: // medium: 1 MiB .. 32 MiB
		return logUniform(vmm.MiB, 32*vmm.MiB, r.u16())
	case 7, 8: // large: 32 MiB .. 512 MiB
		return logUniform(32*vmm.MiB, 512*vmm.MiB, r.u16())
	case 9: // huge: 512 MiB .. 8 GiB
		return logUniform(512*vmm.MiB, 8*vmm.GiB, r.u16())
	case 10, 11: // whole granules
		return (1 + uint64(r.u8())%64) * 2 * vmm.MiB
	case 12: // a granule boundary +- 1
		k, d := 1+uint64(r.u8())%64, r.u8()%3
		return k*2*vmm.MiB + uint64(d) - 1
	case 13, 14: // boundary sizes
		return commonSizes[int(r.u8())%len(commonSizes)]
	default: // exact 40-bit size (sequences cut from real traces)
		var b [8]byte
		for i := 3; i < 8; i++ {
			b[i] = r.u8()
		}
		return max(1, binary.BigEndian.Uint64(b[:]))
	}
}

// logUniform maps m (0..65535) to [lo, hi) log-uniformly.
func logUniform(lo, hi uint64, m uint16) uint64 {
	f := float64(m) / 65536
	v := uint64(float64(lo) * math.Pow(float64(hi)/float64(lo), f))
	return min(max(v, lo), hi-1)
}

// Encode turns a program back into bytes that Decode reads as the same program, as long as the program is
// one Decode could produce: at most MaxStreams streams, a capacity from the table (else the nearest larger),
// frees of live allocations (Decode renumbers IDs 1, 2, ... in allocation order), misuses as Decode writes
// them. Allocations use the exact-size class. Ops the byte format cannot say (a free of an id that is not
// live and never was, pools, capture) are dropped. The seed corpus is written with it.
func Encode(p *ops.Program) []byte {
	ci := len(capacities) - 1
	for i, c := range capacities {
		if c >= p.Cfg.Capacity {
			ci = i
			break
		}
	}
	streams := min(max(p.Cfg.Streams, 1), MaxStreams)
	// The program's own frees come explicitly: Decode then has nothing live left to free at the end.
	out := []byte{byte(ci) | 0x80, byte(streams - 1)}
	var live, freed []int
	idx := func(list []int, id int) int {
		for i, x := range list {
			if x == id {
				return i
			}
		}
		return -1
	}
	st := func(s int) byte { return byte(s%streams) << 4 }
	misuse := func(m int, sel int) { out = append(out, byte(m)<<4|codeMisuse, byte(sel)) }
	seq := p.Ops
	for k := 0; k < len(seq); k++ {
		o := seq[k]
		next := func() (ops.Op, bool) {
			if k+1 < len(seq) {
				return seq[k+1], true
			}
			return ops.Op{}, false
		}
		switch o.Kind {
		case ops.OpAlloc:
			if o.ID >= badID {
				if n, ok := next(); ok && n.Kind == ops.OpFree && n.ID == o.ID {
					k++
					if o.Stream == unknownStream {
						misuse(misuseUnknownStream, 0)
					} else if o.Size == 0 {
						misuse(misuseZeroSize, 0)
					}
				}
				continue
			}
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], min(o.Size, 1<<40-1))
			out = append(out, st(o.Stream)|codeAllocLo, 15)
			out = append(out, b[3:]...)
			live = append(live, o.ID)
		case ops.OpFree:
			if o.ID >= badID {
				misuse(misuseUnknownPtr, 0)
				continue
			}
			if i := idx(freed, o.ID); i >= 0 && i <= 255 {
				misuse(misuseDoubleFree, i)
				continue
			}
			i := idx(live, o.ID)
			if i < 0 || i > 255 {
				continue // not expressible: the selector is one byte
			}
			out = append(out, codeFree, byte(i))
			live = append(live[:i], live[i+1:]...)
			freed = append(freed, o.ID)
		case ops.OpFreeInterior:
			if i := idx(live, o.ID); i >= 0 && i <= 255 {
				misuse(misuseInterior, i)
			}
		case ops.OpRecord:
			if o.ID >= badID {
				misuse(misuseRecordUnknown, 0)
				continue
			}
			i := idx(live, o.ID)
			if i < 0 || i > 255 {
				continue
			}
			out = append(out, codeRecord, byte(i), byte(o.Stream%streams))
			if n, ok := next(); ok && n.Kind == ops.OpLaunch && n.Stream == o.Stream {
				k++ // Decode's record launches on the stream itself
			}
		case ops.OpLaunch:
			out = append(out, st(o.Stream)|codeLaunch)
		case ops.OpComplete:
			out = append(out, st(o.Stream)|codeComplete)
		case ops.OpCompleteAll:
			out = append(out, codeCompleteAl)
		case ops.OpEmptyCache:
			out = append(out, codeEmptyCache)
		case ops.OpFail:
			k := idxKind(o.Call)
			res := 0
			for i, r := range faultResults {
				if r == o.Result {
					res = i
				}
			}
			if k < 0 {
				continue
			}
			out = append(out, codeFail, byte(k), byte(max(o.N-1, 0)%8), byte(res))
		}
	}
	return out
}

func idxKind(k vmm.CallKind) int {
	for i, x := range faultKinds {
		if x == k {
			return i
		}
	}
	return -1
}
