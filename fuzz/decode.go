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

	"github.com/gmlake/gmlake/vmm"
)

// MaxStreams is the most streams a decoded program uses.
const MaxStreams = 4

// MaxOps is the most operations decoded from one input, so each fuzz execution stays fast.
const MaxOps = 256

// capacities are the simulated device sizes a decoded program may run on: small, so that out-of-memory,
// cache release and retry are exercised, and one large enough for windows of real traces.
var capacities = []uint64{64 * vmm.MiB, 256 * vmm.MiB, 1 * vmm.GiB, 4 * vmm.GiB, 16 * vmm.GiB, 80 * vmm.GiB}

// commonSizes are sizes at the policies' boundaries.
var commonSizes = []uint64{
	1, 511, 512, 513, vmm.MiB - 1, vmm.MiB, vmm.MiB + 1, 2*vmm.MiB - 1, 2 * vmm.MiB, 2*vmm.MiB + 1,
	10*vmm.MiB - 1, 10 * vmm.MiB, 10*vmm.MiB + 1, 20 * vmm.MiB, 20*vmm.MiB + 1, 64 * vmm.MiB,
	256 * vmm.MiB, 512*vmm.MiB - 1, 512 * vmm.MiB, 512*vmm.MiB + 1, vmm.GiB, 131072000, 8388608, 3 * vmm.GiB,
}

// faultKinds are the driver calls a decoded program may make fail (not Memset and Read: the checker's own).
var faultKinds = []vmm.CallKind{
	vmm.CallCreate, vmm.CallRelease, vmm.CallReserve, vmm.CallFreeAddress, vmm.CallMap, vmm.CallUnmap,
	vmm.CallSetAccess, vmm.CallMemInfo, vmm.CallStreamQuery, vmm.CallCreateEvent, vmm.CallRecordEvent,
	vmm.CallQueryEvent, vmm.CallStreamWaitEvent, vmm.CallDestroyEvent,
}

// faultResults are what an injected failure answers: what the real driver gives for such calls.
var faultResults = []vmm.Result{vmm.OutOfMemory, vmm.InvalidValue, vmm.UnknownCUDAError, vmm.NotPermitted}

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

// Decode turns fuzzer bytes into a program (for every policy: Setup.Policy is "").
func Decode(data []byte) *Program {
	r := &byteReader{b: data}
	h0, h1 := r.u8(), r.u8()
	p := &Program{Setup: Setup{
		Capacity:  capacities[int(h0&0x7f)%len(capacities)],
		CloseLive: h0&0x80 != 0,
		Streams:   1 + int(h1)%MaxStreams,
	}}
	var (
		live   []uint64 // live IDs in allocation order (as the decoder believes: an alloc may fail)
		freed  []uint64
		nextID uint64 = 1
	)
	pick := func(b byte) (uint64, int, bool) {
		if len(live) == 0 {
			return 0, 0, false
		}
		i := int(b) % len(live)
		return live[i], i, true
	}
	for r.more() && len(p.Ops) < MaxOps {
		b := r.u8()
		switch code := b % 16; {
		case code <= codeAllocHi:
			size := decodeSize(r)
			p.Ops = append(p.Ops, Op{Kind: OpAlloc, ID: nextID, Size: size, Stream: int(b>>4) % p.Streams})
			live = append(live, nextID)
			nextID++
		case code == codeFree || code == codeFree2 || code == codeFreeOldest:
			sel := byte(0)
			if code != codeFreeOldest {
				sel = r.u8()
			}
			if id, i, ok := pick(sel); ok {
				p.Ops = append(p.Ops, Op{Kind: OpFree, ID: id})
				live = append(live[:i], live[i+1:]...)
				freed = append(freed, id)
			}
		case code == codeRecord:
			sel, s := r.u8(), r.u8()
			if id, _, ok := pick(sel); ok {
				p.Ops = append(p.Ops, Op{Kind: OpRecord, ID: id, Stream: int(s) % p.Streams})
			}
		case code == codeLaunch:
			p.Ops = append(p.Ops, Op{Kind: OpLaunch, Stream: int(b>>4) % p.Streams})
		case code == codeComplete:
			p.Ops = append(p.Ops, Op{Kind: OpComplete, Stream: int(b>>4) % p.Streams})
		case code == codeCompleteAl:
			p.Ops = append(p.Ops, Op{Kind: OpComplete, Stream: AllStreams})
		case code == codeEmptyCache:
			p.Ops = append(p.Ops, Op{Kind: OpEmptyCache})
		case code == codeFail:
			k, n, res := r.u8(), r.u8(), r.u8()
			p.Ops = append(p.Ops, Op{Kind: OpFail, Call: faultKinds[int(k)%len(faultKinds)],
				N: 1 + int(n)%8, Result: faultResults[int(res)%len(faultResults)]})
		case code == codeMisuse:
			m, sel := Misuse((b>>4)%byte(numMisuses)), r.u8()
			var id uint64
			switch m {
			case MisuseDoubleFree:
				if len(freed) == 0 {
					continue
				}
				id = freed[int(sel)%len(freed)]
			case MisuseInterior:
				var ok bool
				if id, _, ok = pick(sel); !ok {
					continue
				}
			}
			p.Ops = append(p.Ops, Op{Kind: OpMisuse, Misuse: m, ID: id})
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
// frees of live allocations (Decode renumbers IDs 1, 2, ... in allocation order). Allocations use the
// exact-size class. Ops the byte format cannot say (a free of an ID that is not live, a misuse of an unknown stream
// with an ID) are dropped. The seed corpus is written with it.
func Encode(p *Program) []byte {
	ci := len(capacities) - 1
	for i, c := range capacities {
		if c >= p.Capacity {
			ci = i
			break
		}
	}
	h0 := byte(ci)
	if p.CloseLive {
		h0 |= 0x80
	}
	streams := min(max(p.Streams, 1), MaxStreams)
	out := []byte{h0, byte(streams - 1)}
	var live, freed []uint64
	idx := func(list []uint64, id uint64) int {
		for i, x := range list {
			if x == id {
				return i
			}
		}
		return -1
	}
	st := func(s int) byte { return byte(s%streams) << 4 }
	for _, o := range p.Ops {
		switch o.Kind {
		case OpAlloc:
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], min(o.Size, 1<<40-1))
			out = append(out, st(o.Stream)|codeAllocLo, 15)
			out = append(out, b[3:]...)
			live = append(live, o.ID)
		case OpFree:
			i := idx(live, o.ID)
			if i < 0 {
				continue
			}
			out = append(out, codeFree, byte(i))
			if i > 255 {
				out = out[:len(out)-2] // not expressible: the selector is one byte
				continue
			}
			live = append(live[:i], live[i+1:]...)
			freed = append(freed, o.ID)
		case OpRecord:
			i := idx(live, o.ID)
			if i < 0 || i > 255 {
				continue
			}
			out = append(out, codeRecord, byte(i), byte(o.Stream%streams))
		case OpLaunch:
			out = append(out, st(o.Stream)|codeLaunch)
		case OpComplete:
			if o.Stream == AllStreams {
				out = append(out, codeCompleteAl)
			} else {
				out = append(out, st(o.Stream)|codeComplete)
			}
		case OpEmptyCache:
			out = append(out, codeEmptyCache)
		case OpFail:
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
		case OpMisuse:
			sel := 0
			switch o.Misuse {
			case MisuseDoubleFree:
				if sel = idx(freed, o.ID); sel < 0 || sel > 255 {
					continue
				}
			case MisuseInterior:
				if sel = idx(live, o.ID); sel < 0 || sel > 255 {
					continue
				}
			}
			out = append(out, byte(o.Misuse)<<4|codeMisuse, byte(sel))
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
