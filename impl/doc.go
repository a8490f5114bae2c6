// Package impl is the gmlake allocator engine: a GPU caching allocator over vmm.Driver that defragments
// with virtual memory stitching (GMLake, ASPLOS 2024), and the PyTorch policies (caching, expandable) on the
// same engine. It never imports model, spec or harness: the engine cannot see its judge.
//
// # Layers
//
// Allocator (engine.go) is a thin lock (one mutex) over a single-threaded core whose decisions depend only on
// the requests, the driver's answers and event completion: the same calls give the same pointers and the
// same driver calls (TestDeterministic). Everything the core touches is guarded by Allocator.mu.
//
// # Data structures (block.go)
//
//   - chunk: one physical handle (cuMemCreate). Its primary mapping lives in a segment; every stitched block
//     (sBlock) that views it adds a reference. Invariant (INV-REFCOUNT): refs = 1 + views.
//   - segment: one reservation holding primary mappings. A fixed segment (caching, gmlake-paper) is mapped
//     whole when created, like a cudaMalloc; an arena (expandable, gmlake) reserves 9/8 of the device, like
//     PyTorch's ExpandableSegment, and maps chunks into it on demand; a (stream, pool) opens another arena
//     when no run of its arenas can hold a request (find_expandable_block). Blocks tile a segment in address
//     order; an arena's unmapped stretches are blocks with mapped == false.
//   - block: what a pBlock and an sBlock share, embedded as the first field of each: the range handed out,
//     its state (block.go lists the legal transitions of each kind), the request, the streams it was used on
//     and its free stamp. The pointer table and the pending waits hold *block; block.p or block.s (exactly
//     one is set) leads to the kind's own fields with one load, no type switch, no allocation.
//   - pBlock: a range of a segment; the blocks of a segment tile it (prev, next). Free mapped pBlocks of a
//     (stream, pool) are in a free set ordered by (size, address) for best fit (freeset.go): a sorted sequence
//     cut into leaves of 64 entries, each entry the block's key beside its pointer, so a search reads one or
//     two short arrays and no block; full leaves split, thin neighbours merge, emptied leaves are reused (no
//     allocation on the hot path). pBlock structs are recycled.
//   - sBlock: its own reservation mapping whole chunks of several free pBlocks side by side. While it is live,
//     the pBlock exactly under each of its chunks is held (State Live, heldBy = the sBlock), so no physical
//     byte backs two live allocations (INV: a chunk backs at most one live allocation). A freed sBlock stays
//     cached with its mappings and is reused when its chunks are all free again; freed while streams
//     recorded with RecordStream still have work, it is Pending first, like a pBlock. Freeing an sBlock is
//     one free: its parts carry the sBlock's free stamp, so one fence covers them all.
//
// Every field says its meaning and the invariant it keeps; CheckInvariants (invariants.go) walks the whole
// structure against them, and the engine's tests call it after every scenario (checkState).
//
// Units: every size and offset is a vmm.Bytes, indexes are chunkIdx (a segment's chunks) and sblockIdx
// (Allocator.sblocks); uint64 is left for counters, ids and free stamps. The driver contract still says
// uint64: driver.go is the one place that converts (docs/ARCHITECTURE.md, "Named units").
//
// # Pools and streams
//
// Requests are rounded to 512 B (gmlake-paper: above 1 MiB to 2 MiB, as GMLake's round_size); up to 1 MiB
// they use the small pool, above it the large pool (PyTorch's kSmallSize). Each stream has its own pools. Free is stream-ordered: the block is reusable at once on its
// allocation stream. A block used on other streams (RecordStream) goes Pending with one pooled event per
// recorded stream; Alloc polls pending events (only while there are any) and frees the block when all
// completed. A poll asks each stream's events once per op, oldest first, and stops at a stream's first
// incomplete one (opMutex: each hold of the lock is one poll; a wait for a stream starts another; INV-BUDGET). Memory is released (unmapped, cuMemRelease) or stitched across streams only when the work that
// used it completed: the engine learns that from fences, events recorded on the freeing stream (streamState):
// one at a free that leaves a whole segment or chunk free when no outstanding fence covers it, or lazily when
// needed. The steady-state hot path makes no driver call. The price: at most maxFences fences per stream
// are recorded at frees; a free beyond them is covered only by a lazy fence that also waits for work
// launched after the free. So the stream notes it (capped), and the out-of-memory path, before it
// releases the cache, waits for each such stream once when the driver can wait (vmm.StreamSyncer:
// impl/cudavmm; PyTorch waits there too): then every free on it so far is safe (spec/FINDINGS.md F6). On a
// driver that cannot wait (the simulated device alone) F6 stays: such a free may stay held until its
// stream's later work completes. Under impl/serve the layer's synchronise-and-retry waits for every stream
// instead (its memory cap hides the driver's wait from the engine).
//
// Destroyed streams: CUDA completes the work a destroyed stream still holds, but leaves no handle to wait
// on it. ForgetStream, called before cuStreamDestroy, records a last event on the stream: what was used on
// it waits for that event, unless a fence already says the free completed (an event outlives its stream:
// F15, in every (stream, pool) state of the stream and during a capture too), and the stream is unknown from
// then on. A released pool forgotten once it holds nothing gives its states' fence events back to the
// free events (F16). A stream destroyed without it is noticed
// at the first driver call on it that fails (confirmed with StreamQuery); its claims end with it.
//
// # Private pools, capture and PyTorch's view (pool.go, torchstats.go, torchsnap.go)
//
// A private pool (PoolID, PyTorch's MempoolId_t: CUDA graph pools, torch.cuda.MemPool) is a second set of
// (stream, pool) states with their own free sets, arenas, fences and cached stitched blocks: stitching
// across streams stays inside the pool, and EmptyCache, the out-of-memory release and the stitched-block
// cache limit skip a pool that lives (INV-POOL; they return only an arena of it with nothing mapped, which
// holds nobody's memory). ReleasePool at use count 0 returns its free memory, and the rest as its
// allocations are freed, each only after one wait for the whole device (vmm.DeviceSyncer: its graphs'
// replays ran on streams the engine was never told of, over blocks freed during the capture; mempool.drained,
// INV-RELEASESAFE's replay marks); created again while it still holds memory, the pool takes that memory back. While a stream captures (SetCapturing) no event is recorded or queried
// and frees of blocks used on other streams wait for the capture's end (one whose event could not be
// recorded then is retried by every Alloc outside a capture, PyTorch's process_events). The engine also
// keeps PyTorch's DeviceStats (small/large pool, a stitched block one large allocation of its physical bytes), a snapshot
// in PyTorch's terms (segments are fixed segments or mapped runs of arenas) and segment map/unmap events;
// torchstats.go says how each statistic maps. Each segment of the snapshot carries its creation order
// (TorchSegment.Created, the segment's id), which PyTorch calls registration_counter: ProcessGroupNCCL
// registers a pool's segments in that order on every rank.
//
// CUDA IPC (ipc.go): every mapping the engine makes maps a whole handle, so a live allocation, a stitched one
// too, lies over a run of whole handles side by side; ExportIPC lists them as the driver's POSIX file
// descriptors (vmm.Exporter) with the allocation's offset into the run. Nothing in the engine changes: the
// consumer's imports hold their own references to the memory, and PyTorch keeps the producer's allocation
// alive until the consumer lets it go.
//
// # The allocation path (alloc.go)
//
//  1. Round the size, pick the pool, poll pending events if any.
//  2. Best fit in the stream's pool: the smallest free block that holds the request, lowest address among
//     equals; in arenas, PyTorch's expandable rule (a block at the end of the mapped part counts with the
//     room it can grow into). Split the remainder by the policy's rule.
//  3. Miss, gmlake, large requests of at least StitchMin: reuse a cached sBlock of the stream (the smallest
//     that fits, up to max(1.25x the request, the request + 2 granules): 2x at the 4 MiB StitchMin, 1.25x
//     from 16 MiB) whose chunks are all free: no driver call. (gmlake-paper takes its
//     own path from here: see "gmlake-paper" below.)
//  4. Stitch (tryStitchLocked): collect the chunks lying wholly in free large-pool blocks of the stream and of
//     other streams whose fences say their frees completed, largest first; fill the request greedily, then
//     take the smallest chunk that covers the rest, or new memory for the rest. gmlake stitches only when that
//     saves at least 128 MiB of growth (any saving on the retry after an out-of-memory).
//  5. Grow: a fixed segment of PyTorch's get_allocation_size (caching: one handle; gmlake-paper: 2 MiB
//     handles), or map the lowest run of free and unmapped blocks of the stream's arenas, in a new arena when
//     none holds it (PyTorch's try_allocate_expandable_block): expandable maps 2 MiB / 20 MiB pages, gmlake
//     chunks of at most ChunkSize.
//  6. Out of memory: release the cache (releaseCachedLocked: StitchFree every cached sBlock, release whole free
//     segments, unmap free chunks of arenas; PyTorch's release_cached_blocks) and retry once, mapping on the
//     retry only what the granularity requires; then an *OOMError. A driver failure undoes what the failing
//     step made: its handles, mappings and reservations, a new arena opened for the request included
//     (TestFailedAllocReturnsTheArenaItOpened; undo calls are retried, what still fails is kept as an orphan,
//     counted as reserved and mapped while the device holds it, and tried again at the next release of the
//     cache and at Close, whose report counts as returned only the handles no mapping left standing still
//     maps: spec/FINDINGS.md F11, F17, F20). A failed Alloc leaves no more memory than it found (INV-FAILCLEAN): a run of
//     an arena with several unmapped stretches makes every stretch's driver calls before it commits any
//     (growth: prepareMapLocked, commitMapLocked), and a stitch's new memory is committed only once its
//     view is mapped; only the release before the retry changes the cache, and it lowers it. (PyTorch's
//     try_allocate_expandable_block keeps the stretches it mapped before a map_block that failed.)
//
// # Policies (policy.go)
//
//   - caching: PyTorch's native CUDACachingAllocator (max_split_size unset): 2 MiB small segments, 20 MiB
//     segments for 1-10 MiB requests, larger ones rounded to 2 MiB; split small remainders >= 512 B, large
//     remainders > 1 MiB. Replays land within 0.2% of PyTorch's measured peak reserved.
//   - expandable: PyTorch's expandable_segments:True: arenas per (stream, pool), 2 MiB / 20 MiB pages
//     mapped on demand, split remainders >= 512 B, pages unmapped only by EmptyCache or the out-of-memory path.
//     Replays land within 0.01% of PyTorch's.
//   - gmlake-paper: the original GMLake (paper.go), rule by rule from GLake's CUDACachingAllocator.cpp; see
//     "gmlake-paper" below.
//   - gmlake (default): arenas like expandable, grown by chunks of at most 48 MiB (one cuMemCreate per chunk,
//     not per 20 MiB page); stitching from 4 MiB up when it saves at least 128 MiB of growth, across streams;
//     sBlock cache of 256 with LRU StitchFree.
//
// # gmlake-paper (paper.go)
//
// GMLake's rules, read side by side with GLake's source (intelligent-machine-learning/glake,
// GMLake/src/CUDACachingAllocator.cpp, GMLake/include/cuda_vmm_allocator.h); each function in paper.go
// names the one it reproduces and paper_test.go has a scenario per rule. Knobs under GLake's environment
// names, with its defaults: fragLimit (Config.StitchMin, 512 MiB), reuseLimit (10), defragLevel (0),
// autoGC (1000 GiB), reAlloc (off).
//
//   - Segments (realloc_block): PyTorch's get_allocation_size; small ones one 2 MiB piece (GMLake calls
//     cudaMalloc), large ones 2 MiB pieces, each created, mapped and given access on its own (VirBlock: one
//     cuMemSetAccess per piece); one cuMemUnmap per segment at release. Requests above 1 MiB round up to
//     2 MiB; a large block splits only when at least 2 MiB is left (round_size, should_split).
//   - The miss path (malloc): best fit; then a cached sBlock of the stream, for any large request: the
//     smallest whose pieces are all free, if at most reuseLimit times the request, holding only the first
//     request/2 MiB pieces (the rest stays free for others); then stitch (attempt 0); grow; stitch (1);
//     release_cached_blocks and grow the same segment again (no smaller fallback); stitch (2); out of
//     memory. Attempts below defragLevel are skipped.
//   - Stitch (get_fused_fragmented_blocks): requests of at least fragLimit, the stream's free large blocks
//     whole, largest first (ties: the higher address), until they cover the request, the last split keeping
//     its head when 2 MiB or more is left; never with new memory, never across streams.
//   - Collection (garbage_collect_fused_blocks): cached sBlocks whose pieces are not all free first, then
//     (time > 0) the others, per stream oldest release first, stopping at the first whose event has not
//     completed. It runs when the stitched bytes not yet collected exceed autoGC, when a stitch's or a
//     segment's driver calls fail, and in EmptyCache (after releasing the unsplit free segments). The
//     out-of-memory path releases only unsplit free segments and the cached sBlocks viewing them.
//   - Events (BlockEvent): every GMLake Block carries a CUDA event: created with each Block (each malloc's
//     search key included), recorded at each free (a new one when shared), shared across splits and merges,
//     destroyed with the last block using it. gmlake-paper makes those calls on the driver, so replays
//     count and charge them (3 per alloc/free pair without a split, 5 with one), and its collection asks
//     the sBlock's event.
//
// GLake's own documents give four fragment limits: 512 MiB (the code's default), 1 GiB (README), 256 MiB
// (tutorial), 32 MiB with defragLevel 1 (first commit). The waste (1 - peak live / peak reserved) they give
// on the bundled traces (gmlake replay --policy gmlake-paper --paper-fragment-limit 32MiB,256MiB,512MiB,1GiB
// testdata/traces/*.trace.gz):
//
//	fragLimit  fsdp2-llama1b  llama1b-ckpt  llama3b-lora
//	32 MiB     11.5%          10.1%          3.0%
//	256 MiB    24.2%          11.7%         25.1%
//	512 MiB    22.9%          11.7%         25.2%
//	1 GiB      32.4%          11.7%         29.6%
//
// (all at defragLevel 0; at defragLevel 1, the first commit's 32 MiB setting, no request reaches attempt 1
// on a device with room: nothing is stitched, 32.4%, 32.1% and 29.6%, PyTorch's native allocator's waste.)
//
// Where it departs from GLake, and why: small segments are made with the VMM calls like every other
// segment (vmm.Driver has no cudaMalloc; at 2 MiB they cost about the same, 47 us against cuMemAlloc's
// 49-57 us); the engine carves the pBlock under each stitched piece where GMLake keeps block lists per
// piece, so the event counts are GMLake's rules applied to this engine's splits and merges; a segment is
// released, and an sBlock collected, only once its last use completed (GLake unmaps at once); a failed
// stitch gives its blocks back (GLake leaves them marked used), and a request that fails returns the
// segments reAlloc grew for it (GLake keeps them cached: INV-FAILCLEAN); on the retry after
// release_cached_blocks reAlloc applies only to a request a stitch can serve (at least fragLimit, and for its
// "the free blocks cover it, grow nothing" case only when defragLevel leaves stitch attempt 2) and grows the
// rest only when its segment is smaller than the whole one (get_allocation_size of a 2 MiB rest is 20 MiB),
// else the whole segment grows: GLake's realloc_block(p, true) returns false for any large request its free blocks still
// cover (blocks of segments in use, which the release keeps), which fails a request below fragLimit on a
// device that holds it (INV-NOSPURIOUSOOM, found by rapid's swarm once it drew reAlloc; spec/FINDINGS.md
// F14); fences still guard releases.
//
// # The chunk size (issue 3 item 6), measured
//
// Every mapped handle costs ~30 us of cuMemSetAccess and ~20 us of cuMemUnmap, whatever its size; stitching
// can only reuse chunks that are wholly free. Small chunks stitch better, large chunks cost less. Replaying
// the three bundled traces with gmlake and each ChunkSize (TestChunkSweep, GMLAKE_SWEEP=1, stitch saving
// 128 MiB; fragmentation = 1 - peak live / peak reserved; time = modeled driver time relative to the
// expandable policy's; % = of the recorded training time):
//
//	chunk      fsdp2-llama1b            llama1b-ckpt             llama3b-lora
//	2 MiB      0.12%  12.9x  10.8%      0.20%  16.0x   7.8%      0.11%  10.0x  15.7%
//	8 MiB      0.43%   3.3x   2.8%      0.72%   4.1x   2.0%      0.19%   2.6x   4.2%
//	32 MiB     1.26%   1.11x  0.94%     1.87%   1.38x  0.67%     0.60%   0.81x  1.28%
//	48 MiB     1.40%   0.88x  0.74%     1.78%   1.07x  0.52%     1.00%   0.62x  0.98%
//	64 MiB     1.59%   0.75x  0.64%     2.52%   0.89x  0.43%     1.09%   0.54x  0.85%
//	128 MiB    2.65%   0.56x  0.47%     2.99%   0.65x  0.32%     1.09%   0.40x  0.63%
//	unlimited  4.25%   0.49x  0.42%    11.01%   0.26x  0.13%     2.20%   0.38x  0.59%
//
// The other knob is how much growth a stitch must save (Config.StitchSave): each stitch maps its chunks again.
// To choose both on more than three traces, TestRobustSweep (GMLAKE_ROBUST=1) replays the bundled traces
// with every request scaled by 0.37, 0.75, 1, 1.3 and 2.1 (15 workloads) and takes the worst case:
//
//	chunk  save      worst fragmentation  worst time/expandable
//	64     64 MiB    3.44%                1.41
//	64     128 MiB   3.02%                1.35
//	32     128 MiB   2.29%                1.64
//	48     64 MiB    2.58%                1.52
//	48     128 MiB   2.48%                1.40   <- the defaults
//	48     192 MiB   10.7%                1.32   (too few stitches: one workload fragments)
//
// So gmlake grows by chunks of at most 48 MiB and stitches when that saves at least 128 MiB of growth:
// under 2% fragmentation on the bundled traces (2.5% worst over the scaled set) and about the driver time
// of expandable (0.5-1% of the training time), where GMLake's 2 MiB chunks cost 10-16x (8-25% of the
// training time with gmlake-paper, its block events included).
//
// # Lock order
//
// One lock, Allocator.mu; the driver's own locks are taken inside it. Every method of Allocator that needs mu
// held ends in Locked: all its unexported methods but five that read only what New set (seeded, quantum,
// sizeErr, allocCount, paperErr). The core's entry points, the Locked methods that exported ones call, start
// with assertLocked, which panics when mu is not held (TestCoreEntryPointsAssertTheLock).
//
// # The host cache
//
// In front of the crossing into Go, the C library keeps per device the blocks freed last that HostClass admits
// (a pBlock of the default pool, no RecordStream, no capture, not gmlake-paper, no trace), and hands one out
// again for a request of the same rounded size on the same stream without entering Go (capi/hostcache.c).
// The engine still owns every block: the cache keeps a log of the frees and hits it served, and every other
// crossing for the device hands the log over first. Replay applies it in order under one hold of the lock, a
// free as Free and a hit as the allocation of exactly that block, split as an Alloc would split it, so every
// statistic and peak is what the separate calls give (TestReplayIsTheSeparateCalls). A hit's block is the one
// just freed on its stream, where best fit might pick an equal block elsewhere: the one decision the cache
// takes from the engine. A miss while the log is not empty is one crossing and one hold of the lock:
// AllocHost replays the log, then allocates and classes the new block (the separate Replay, Alloc and
// HostClass calls, whose answers it gives: TestReplayIsTheSeparateCalls checks it on half the misses).
// GMLAKE_HOST_CACHE=0 turns it off.
//
// A miss empties the cache's freed list, since the crossing may change the engine under any of its blocks.
// So on a ring of mixed sizes the cache serves few requests (18% of bench/abi's mixed ring). Keeping the
// blocks that the engine still had free after the miss was built and measured in session 29: hits rose to
// 80%, and the pair got slower, because a replayed hit still does an allocation's split and block lookup
// (docs/results/hotpath-breakdown.md, session 29). What the mixed pair pays for is that engine work, not the
// crossing.
package impl
