package impl

// This file is the engine's public surface: configuration, statistics, the snapshot the checkers read, and
// the error kinds. Other packages (harness, spec adapters, cmd, capi, the root facade) are written against
// it; add fields freely, but do not rename or remove them. See doc.go for the design.

import (
	"errors"
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// Policy names, selected by Config.Policy.
const (
	PolicyGMLake      = "gmlake"       // ours, the default: stitching, tuned chunk sizes, cross-stream reuse
	PolicyCaching     = "caching"      // PyTorch's native CUDA caching allocator
	PolicyExpandable  = "expandable"   // PyTorch's expandable_segments:True
	PolicyGMLakePaper = "gmlake-paper" // the original GMLake (GLake's source, rule by rule: paper.go)
)

// Policies lists every policy name, the default first.
var Policies = []string{PolicyGMLake, PolicyCaching, PolicyExpandable, PolicyGMLakePaper}

// Mutation is a seeded bug, switched on only by tests (harness.TestMutationsCaught) to prove that every
// checker bites. The switches are compiled only with -tags gmlake_mutants (seeded_on.go; SeededBugs): without
// the tag New refuses a non-zero Config.TestOnlyMutations with ErrBadConfig.
type Mutation uint32

// The seeded bugs. Each must be caught by at least one checker (rapid vs the contract, the spec invariants,
// porcupine, the exhaustive explorer, the device's integrity checks).
const (
	MutSkipSetAccessStitched Mutation = 1 << iota // a stitched range is mapped but SetAccess is skipped
	MutMapChunkTwice                              // stitching may take a chunk that backs a live block
	MutEarlyCrossStreamReuse                      // reuse on another stream without waiting for the free event
	MutRefcountOffByOne                           // a chunk's reference count is one too high after a stitch
	MutLeakOnStitchFailure                        // a driver failure mid-stitch leaks the mapped handles/range
	MutWrongBestFit                               // best fit picks the largest fitting block instead of smallest
	MutNoMerge                                    // freed blocks are not merged with free neighbours
	MutStatsDoubleCount                           // allocated bytes are counted twice for stitched blocks
	MutSpuriousOOM                                // out of memory without releasing the cache and retrying
	MutLeakOnClose                                // Close forgets to release cached chunks
	NumMutations             = 10
)

var mutationNames = []string{
	"skip-setaccess-stitched", "map-chunk-twice", "early-cross-stream-reuse", "refcount-off-by-one",
	"leak-on-stitch-failure", "wrong-best-fit", "no-merge", "stats-double-count", "spurious-oom",
	"leak-on-close",
}

// String names the mutation (one bit).
func (m Mutation) String() string {
	for i, n := range mutationNames {
		if m == 1<<i {
			return n
		}
	}
	return fmt.Sprintf("Mutation(%#x)", uint32(m))
}

// AllMutations lists each seeded bug.
func AllMutations() []Mutation {
	out := make([]Mutation, NumMutations)
	for i := range out {
		out[i] = 1 << i
	}
	return out
}

// Errors of the allocator, for errors.Is. Out-of-memory errors are *OOMError and match vmm.ErrOutOfMemory.
var (
	ErrInvalidSize    = errors.New("gmlake: invalid allocation size")
	ErrUnknownPointer = errors.New("gmlake: pointer was not returned by Alloc")
	ErrInteriorPtr    = errors.New("gmlake: pointer is inside an allocation, not its start")
	ErrDoubleFree     = errors.New("gmlake: pointer already freed")
	ErrUnknownStream  = errors.New("gmlake: unknown stream")
	ErrClosed         = errors.New("gmlake: allocator is closed")
	ErrUnknownPolicy  = errors.New("gmlake: unknown policy")
	ErrBadConfig      = errors.New("gmlake: invalid configuration")
	// ErrStreamCapturing: ForgetStream of a stream that captures a CUDA graph (SetCapturing on). Its last
	// event cannot be recorded (it would become a node of the graph) and destroying the stream would
	// invalidate the capture: end the capture first.
	ErrStreamCapturing = errors.New("gmlake: stream is capturing a CUDA graph")
)

// OOMError says that a request could not be served even after stitching, releasing the cache and retrying.
// errors.Is(err, vmm.ErrOutOfMemory) holds.
type OOMError struct {
	Requested  uint64 // bytes asked for
	Rounded    uint64 // after the policy's rounding
	Reserved   uint64 // physical bytes the allocator holds
	Cached     uint64 // of which free (cached)
	Live       uint64 // of which in live allocations
	DeviceFree uint64 // what the device reported free
	Stream     vmm.Stream
	Cause      error // the driver's error, if any
}

func (e *OOMError) Error() string {
	return fmt.Sprintf("gmlake: out of memory: requested %s (rounded %s) on stream %d; allocator holds %s "+
		"(%s live, %s cached); device has %s free: free tensors or call EmptyCache in other processes, "+
		"or lower the batch size",
		vmm.FormatBytes(e.Requested), vmm.FormatBytes(e.Rounded), e.Stream, vmm.FormatBytes(e.Reserved),
		vmm.FormatBytes(e.Live), vmm.FormatBytes(e.Cached), vmm.FormatBytes(e.DeviceFree))
}

// Is makes errors.Is(err, vmm.ErrOutOfMemory) true.
func (e *OOMError) Is(target error) bool { return target == vmm.ErrOutOfMemory }

// Unwrap returns the driver's error, if any.
func (e *OOMError) Unwrap() error { return e.Cause }

// Stats are the allocator's counters. Invariant (INV-STATS): AllocatedBytes equals the sum of the block
// sizes of live allocations, ReservedBytes the sum of the sizes of the physical chunks the allocator holds.
type Stats struct {
	RequestedBytes     uint64 // sum of requested sizes of live allocations
	PeakRequestedBytes uint64
	AllocatedBytes     uint64 // sum of block sizes (after rounding) of live allocations
	PeakAllocatedBytes uint64
	ReservedBytes      uint64 // physical memory held (sum of chunk sizes)
	PeakReservedBytes  uint64
	MappedBytes        uint64 // virtual bytes mapped (stitched views count again)
	NumLive            uint64 // live allocations
	NumAllocs          uint64 // successful Alloc calls
	NumFrees           uint64 // successful Free calls
	NumStitches        uint64 // stitched blocks created
	NumStitchReuses    uint64 // allocations served from a cached stitched block
	NumStitchFrees     uint64 // stitched blocks torn down (StitchFree)
	NumOOMs            uint64 // Alloc calls that failed with out of memory
	NumCacheFlushes    uint64 // times the cache was released to retry an allocation
	NumSyncs           uint64 // streams waited for on the out-of-memory path (a driver that can wait; F6)
	DriverCalls        vmm.CallCounts
}

// BlockKind says whether a block is primitive (owns its virtual range and chunks) or stitched.
type BlockKind uint8

const (
	Primitive BlockKind = iota // a pBlock: a virtual range over chunks it owns
	Stitched                   // an sBlock: a virtual range mapping the chunks of several pBlocks
)

func (k BlockKind) String() string {
	if k == Stitched {
		return "sBlock"
	}
	return "pBlock"
}

// BlockState is where a block stands. Legal transitions: Free -> Live (alloc, or a pBlock held under a
// stitched block), Live -> Free (free, or given back by its stitched block), Live -> Pending (free while events
// on other streams are outstanding, or deferred during a capture; a stitched block's part waiting for that
// block's stream), Pending -> Free (all events completed), Pending -> Live (such a part taken back by a
// stitched block of that stream; a deferred free re-tried after the capture). block.go lists them by kind
// with the steps that make them.
type BlockState uint8

const (
	Free    BlockState = iota // cached, reusable (on its stream; on others once its events completed)
	Live                      // handed out by Alloc
	Pending                   // freed, waiting for events recorded on other streams
)

func (s BlockState) String() string {
	switch s {
	case Live:
		return "live"
	case Pending:
		return "pending"
	}
	return "free"
}

// Mapping is one handle mapped at a virtual range, as the engine believes the device holds it.
type Mapping struct {
	VA     vmm.Range
	Handle vmm.Handle
}

// BlockInfo describes one block for the snapshot.
type BlockInfo struct {
	ID        uint64
	Kind      BlockKind
	State     BlockState
	Range     vmm.Range  // the bytes the block covers (Size is the rounded block size)
	Stream    vmm.Stream // the stream whose pool owns the block
	Requested uint64     // for a live block: the size asked for
	// Backing lists, in address order, the physical bytes behind the block: each entry is a mapping
	// (whole handle at VA) that overlaps Range. A pBlock inside a segment lists the segment's mappings that
	// overlap it.
	Backing []Mapping
	Parts   []uint64 // for an sBlock: the IDs of the pBlocks it stitches, in address order
	Events  int      // events still outstanding before the block is reusable
	HeldBy  uint64   // for a pBlock: the ID of the live sBlock that holds its chunk, 0 if none
	// SmallPool: the block lies in the small-request pool (requests of at most 1 MiB, rounded to 512 B).
	SmallPool bool
	// WaitsOnStream: a Pending pBlock that is a part of an sBlock freed on another stream, waiting only for
	// WaitStream (that sBlock's stream) to finish the work submitted before the free. WaitStream may take it
	// back at once (stream order); other streams wait. Both are zero for every other block.
	WaitsOnStream bool
	WaitStream    vmm.Stream
}

// ChunkInfo describes one physical handle the allocator holds.
type ChunkInfo struct {
	Handle vmm.Handle
	Size   uint64
	Refs   int // mappings of this handle the engine counts (its pBlock mapping plus each sBlock view)
	// SmallPool: the chunk belongs to a segment of the small-request pool.
	SmallPool bool
	// Orphan: a handle the engine gave up whose release the device refused past the retries (or that an
	// orphan mapping still maps): in no segment, still counted in the reserved bytes, released by the next
	// release of the cache or Close (spec/FINDINGS.md F11, F17).
	Orphan bool
}

// LiveInfo describes one live allocation.
type LiveInfo struct {
	Ptr       vmm.DevicePtr
	Requested uint64
	Size      uint64       // block size
	Stream    vmm.Stream   // allocation stream
	Uses      []vmm.Stream // streams added by RecordStream
	Block     uint64       // block ID
}

// Snapshot is the allocator's full state, for the checkers (spec predicates, harness) and for humans.
// It is a deep copy: later allocator calls do not change it.
type Snapshot struct {
	Policy       string
	Granularity  uint64
	Closed       bool
	Live         []LiveInfo  // sorted by Ptr
	Blocks       []BlockInfo // every pBlock and sBlock, sorted by (Kind, Range.Base)
	Chunks       []ChunkInfo // sorted by Handle
	Reservations []vmm.Range // virtual ranges the allocator reserved, sorted by Base
	Mappings     []Mapping   // every mapping the allocator made and has not unmapped, sorted by VA.Base
	Stats        Stats
}

// CloseReport says what Close found and released.
type CloseReport struct {
	Live          []LiveInfo // allocations never freed (released anyway)
	ReleasedBytes uint64     // physical bytes returned to the device: handles released that no mapping left standing keeps (F20)
}

// Config selects a policy and its knobs. The zero value is the default policy (gmlake) with its defaults.
// Knob fields left zero take the policy's default.
type Config struct {
	Policy string // one of Policies; "" means PolicyGMLake

	// Knobs. Zero takes the policy's default (see policy.go and doc.go for each policy's values).

	// StitchMin is the smallest rounded request that may be served by stitching (gmlake: 4 MiB, twice the
	// granularity; gmlake-paper: 512 MiB, GMLake's fragment_limit). Must be a multiple of 512.
	StitchMin uint64
	// ChunkSize is the physical chunk size of fixed segments in gmlake-paper (default 2 MiB), and the
	// largest chunk an arena growth creates in gmlake (default 48 MiB, or 1/2048 of a smaller device; see
	// doc.go for the measurement). A multiple of the driver's granularity.
	ChunkSize uint64
	// PageSizeSmall and PageSizeLarge are the expandable policy's page sizes (PyTorch: 2 MiB and 20 MiB).
	PageSizeSmall, PageSizeLarge uint64
	// SBlockCache is how many free stitched blocks stay cached before StitchFree tears down the least
	// recently used (gmlake default 256; gmlake-paper: no limit, as GMLake's GC starts at 1000 GB).
	// Negative: no limit.
	SBlockCache int
	// NoCrossStream turns off cross-stream stitching and reuse in the gmlake policy.
	NoCrossStream bool
	// StitchSave: gmlake stitches rather than grows only when that saves more than StitchSave bytes of
	// growth (default 128 MiB, or 1/1024 of a smaller device; any saving on the retry after an
	// out-of-memory). In bytes. See doc.go for the sweep that chose it.
	StitchSave uint64
	// DebugOOM prints the engine's whole state to stderr on the out-of-memory path, before releasing the
	// cache and at the final error: a debugging aid for spurious out-of-memory reports (libgmlake:
	// GMLAKE_DEBUG_OOM=1).
	DebugOOM bool

	// gmlake-paper's other knobs, GLake's environment variables (StitchMin above is its fragLimit).
	// ReuseLimit (reuseLimit, default 10): a cached stitched block serves a request when its size is at most
	// ReuseLimit times the request. Must be >= 0.
	ReuseLimit float64
	// DefragLevel (defragLevel, default 0): stitching is tried at attempts 0, 1 and 2 of an allocation
	// (before growing, after growing failed, after releasing the cache); attempts below DefragLevel are
	// skipped. 0 to 3.
	DefragLevel int
	// AutoGC (autoGC, default 1000 GiB): once the stitched bytes created and not yet collected exceed it,
	// every cached stitched block whose last use completed is torn down. In bytes.
	AutoGC uint64
	// ReAlloc (reAlloc, default off): a large request no free block holds grows a segment of only the
	// request less the stream's free large bytes, and is stitched from those and the new segment.
	ReAlloc bool

	// TestOnlyMutations switches on seeded bugs (see Mutation). Only tests set it, and only a build with
	// -tags gmlake_mutants accepts it.
	TestOnlyMutations Mutation

	_ struct{}
}

// BlockInfo.HeldBy: a pBlock whose chunk is viewed by a live sBlock is reported with State Live and
// HeldBy set to that sBlock's ID; it is not in Snapshot.Live (the sBlock is).
