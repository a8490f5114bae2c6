package impl

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// PyTorch's constants (c10/cuda/CUDACachingAllocator.cpp).
const (
	minBlockSize  = 512        // kMinBlockSize: every size is rounded to a multiple of 512 B
	smallSize     = 1 << 20    // kSmallSize: the largest "small" request
	smallBuffer   = 2 << 20    // kSmallBuffer: small requests are packed into 2 MiB segments
	largeBuffer   = 20 << 20   // kLargeBuffer: 1-10 MiB requests get 20 MiB segments
	minLargeAlloc = 10 << 20   // kMinLargeAlloc
	roundLarge    = 2 << 20    // kRoundLarge: larger requests round up to 2 MiB
	paperStitch   = 512 << 20  // GMLake's fragLimit default: stitch only requests of at least 512 MiB
	paperPiece    = 2 << 20    // GMLake's kGranularity: its physical pieces, and its large-request rounding
	paperReuse    = 10         // GMLake's reuseLimit default: a cached sBlock serves requests down to 1/10
	paperAutoGC   = 1000 << 30 // GMLake's autoGC default (1000 GiB of cumulative stitched bytes)
	defaultChunk  = 48 << 20   // gmlake: the largest physical chunk one growth creates (doc.go: measured)
	defaultSave   = 128 << 20  // gmlake: the growth a stitch must save to be worth its mappings (doc.go)
	maxStitchPcs  = 1 << 20    // the most chunks one new sBlock maps
	arenaSlackNum = 9          // arenas reserve 9/8 of the device (PyTorch's ExpandableSegment)
	arenaSlackDen = 8          //
	noLimit       = 1<<63 - 1  //
)

// params are a policy's resolved knobs.
type params struct {
	name        string
	arena       bool      // arenas per (stream, pool) that grow (expandable, gmlake); else fixed segments
	pageSmall   vmm.Bytes // expandable: page (= chunk) size of the small arena; 0: gmlake chunking
	pageLarge   vmm.Bytes // expandable: page size of the large arena
	chunkMax    vmm.Bytes // gmlake: largest chunk one growth creates; gmlake-paper: the chunk size of segments
	splitAny    bool      // split whenever the remainder is >= 512 B (expandable rule), else PyTorch's pool rules
	stitch      bool      // gmlake: serve misses by stitching free chunks (allocNewLocked); false for gmlake-paper, whose misses stitch by GLake's rule (paperMissLocked)
	stitchMin   vmm.Bytes // smallest rounded request that may be stitched
	crossStream bool      // stitch chunks of other streams' pools once their free events completed
	sblockCache int       // cached free sBlocks before LRU StitchFree; < 0 unlimited
	maxPieces   int       // gmlake: the most chunks one new sBlock maps (gmlake-paper's paperStitchLocked fuses any number)
	stitchSave  vmm.Bytes // gmlake: a stitch must save at least this much growth (Config.StitchSave)
	debugOOM    bool      // Config.DebugOOM: dump the state on the out-of-memory path
	reuseLimit  uint64    // a cached sBlock serves requests down to size*4/reuseLimit (x4: gmlake 5 = 1.25x)

	// gmlake-paper: GMLake's own rules (paper.go), each knob under its GLake environment variable's name.
	paper       bool      // the paper's allocation path (paperMissLocked), rounding, splitting, GC and block events
	fragLimit   vmm.Bytes // fragLimit: the smallest rounded request get_fused_fragmented_blocks stitches
	paperReuse  float64   // reuseLimit: a cached sBlock serves a request if its size <= request * paperReuseLocked
	defragLevel int       // defragLevel: stitch attempts below this number (0, 1, 2) are skipped
	autoGC      vmm.Bytes // autoGC: cumulative stitched bytes that trigger garbage_collect_fused_blocks(2)
	reAlloc     bool      // reAlloc: grow by the request less the stream's free large bytes, then stitch
}

func resolve(cfg Config, gran, total vmm.Bytes) (params, error) {
	p := params{name: cfg.Policy, debugOOM: cfg.DebugOOM}
	if p.name == "" {
		p.name = PolicyGMLake
	}
	mult := func(what string, v uint64, of vmm.Bytes) error {
		if vmm.Bytes(v)%of != 0 {
			return fmt.Errorf("%w: %s %d is not a multiple of %d", ErrBadConfig, what, v, of)
		}
		return nil
	}
	for _, c := range []struct {
		what string
		v    uint64
		of   vmm.Bytes
	}{
		{"StitchMin", cfg.StitchMin, minBlockSize}, {"ChunkSize", cfg.ChunkSize, gran},
		{"PageSizeSmall", cfg.PageSizeSmall, gran}, {"PageSizeLarge", cfg.PageSizeLarge, gran},
	} {
		if err := mult(c.what, c.v, c.of); err != nil {
			return p, err
		}
	}
	or := func(v uint64, def vmm.Bytes) vmm.Bytes { // a Config knob in bytes, or its default
		if v == 0 {
			return def
		}
		return vmm.Bytes(v)
	}
	switch p.name {
	case PolicyCaching:
	case PolicyExpandable:
		p.arena, p.splitAny = true, true
		p.pageSmall = alignUp(or(cfg.PageSizeSmall, smallBuffer), gran)
		p.pageLarge = alignUp(or(cfg.PageSizeLarge, largeBuffer), gran)
	case PolicyGMLake:
		p.arena, p.splitAny, p.stitch, p.crossStream = true, true, true, !cfg.NoCrossStream
		p.stitchMin = or(cfg.StitchMin, 2*gran)
		// Both scale down on small devices (1/2048 and 1/1024 of the memory): an H200 takes the full values.
		p.chunkMax = or(cfg.ChunkSize, alignUp(min(defaultChunk, total/2048), gran))
		p.stitchSave = or(cfg.StitchSave, min(defaultSave, total/1024))
		p.sblockCache = 256
		p.maxPieces = maxStitchPcs
		p.reuseLimit = 5
	case PolicyGMLakePaper:
		p.paper = true // its misses go to paperMissLocked, which stitches by GLake's rule: p.stitch is not read
		p.stitchMin = or(cfg.StitchMin, paperStitch)
		p.fragLimit = p.stitchMin
		p.chunkMax = or(cfg.ChunkSize, alignUp(paperPiece, gran))
		p.sblockCache = -1 // cached sBlocks go only by garbage_collect_fused_blocks (paper.go)
		p.paperReuse = paperReuse
		if cfg.ReuseLimit != 0 {
			p.paperReuse = cfg.ReuseLimit
		}
		p.defragLevel = cfg.DefragLevel
		p.autoGC = or(cfg.AutoGC, paperAutoGC)
		p.reAlloc = cfg.ReAlloc
	default:
		return p, fmt.Errorf("%w %q (want one of %v)", ErrUnknownPolicy, cfg.Policy, Policies)
	}
	if cfg.ReuseLimit < 0 || cfg.DefragLevel < 0 || cfg.DefragLevel > 3 {
		return p, fmt.Errorf("%w: ReuseLimit %g must be >= 0 and DefragLevel %d one of 0, 1, 2, 3", ErrBadConfig,
			cfg.ReuseLimit, cfg.DefragLevel)
	}
	if cfg.SBlockCache != 0 {
		p.sblockCache = cfg.SBlockCache
	}
	return p, nil
}

// round is the policy's rounding of a request: PyTorch's round_size, and for gmlake-paper GMLake's round_size,
// which also rounds every request above 1 MiB (the large pool) up to a multiple of its 2 MiB piece.
func (p *params) round(n vmm.Bytes) vmm.Bytes {
	rs := roundSize(n)
	if p.paper && rs > smallSize {
		rs = roundUp(rs, p.chunkMax)
	}
	return rs
}

// roundSize is PyTorch's round_size: at least 512 B, a multiple of 512 B.
func roundSize(n vmm.Bytes) vmm.Bytes {
	if n < minBlockSize {
		return minBlockSize
	}
	return (n + minBlockSize - 1) &^ (minBlockSize - 1)
}

// allocationSize is PyTorch's get_allocation_size: the size of a new fixed segment for a rounded request.
func allocationSize(rs vmm.Bytes) vmm.Bytes {
	switch {
	case rs <= smallSize:
		return smallBuffer
	case rs < minLargeAlloc:
		return largeBuffer
	}
	return alignUp(rs, roundLarge)
}

func poolOf(rs vmm.Bytes) poolKind {
	if rs <= smallSize {
		return smallPool
	}
	return largePool
}

// shouldSplit is PyTorch's should_split (max_split_size unset); gmlake-paper's is GMLake's should_split,
// which splits a large block only when the rest is at least one 2 MiB piece.
func (p *params) shouldSplit(b *pBlock, rs vmm.Bytes) bool {
	rem := b.size - rs
	if p.paper && b.pool == largePool {
		return rem >= p.chunkMax
	}
	if b.pool == smallPool || p.splitAny {
		return rem >= minBlockSize
	}
	return rem > smallSize
}

// roundUp rounds n up to a multiple of q (any q > 0, not only powers of two: expandable's 20 MiB pages).
func roundUp(n, q vmm.Bytes) vmm.Bytes { return vmm.Bytes(vmm.RoundUp(uint64(n), uint64(q))) }
