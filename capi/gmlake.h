/* gmlake.h: the C ABI of libgmlake.so, the gmlake GPU caching allocator as a PyTorch pluggable allocator.
 *
 * Build: `make capi` (go build -buildmode=c-shared -o capi/libgmlake.so ./capi). No CUDA headers are needed:
 * cudaStream_t is declared here as void*, which is what it is (a CUstream).
 *
 * Two ways in. PyTorch's CUDAPluggableAllocator (the fallback) calls gmlake_alloc and gmlake_free and the
 * optional hooks (record stream, reset = empty cache, memory fraction, init). python/gmlake_torch's C++
 * CUDAAllocator, built against the installed torch, also uses the torch engine ABI below: PyTorch's statistics,
 * snapshots, segment events, out-of-memory figures, private pools and CUDA graph capture. gmlake's own counters
 * (stitches, driver calls by kind) are in gmlake_stats_json.
 *
 * Errors. Every function is thread-safe, validates every argument, and fails with an error rather than crash
 * or disable an engine: a device outside [0, 64), a NULL output pointer, a pointer, pool or stream the engine
 * does not know, a fraction outside [0, 1], a capture end without its begin are each refused with
 * GMLAKE_ERR_INVALID and change nothing (a device whose engine cannot start: GMLAKE_ERR_CONFIG or
 * GMLAKE_ERR_NO_DEVICE, see the kinds below). Each function but
 * gmlake_last_error, gmlake_last_error_kind and gmlake_last_failure sets the calling thread's last error when
 * it fails (NULL / negative / for the void ones: a bad free, ...) and clears it when it succeeds, so after any
 * call gmlake_last_error_kind() == GMLAKE_ERR_NONE means that call succeeded. Calls made by an event callback
 * do not change the error state of the call that fired it.
 * Buffers: a function given a buffer and its length (len, cap) writes at most that many bytes or entries, and
 * never more than the result it reports (snprintf style: the whole length is returned; call again with a
 * larger buffer); a NULL buffer with any length writes nothing and returns the length. What no library can
 * check is the caller's own promise: that a buffer holds len bytes where the result may need them, that a
 * string is NUL-terminated, and, on the real GPU, that a cudaStream_t is a stream of the device (the CUDA
 * driver judges it); the simulated device maps any stream value to a stream of its own.
 * A Go panic never crosses into C: it is reported on stderr and in gmlake_last_error (GMLAKE_ERR_INTERNAL),
 * the call fails, and the engine of that device is disabled (later calls on it fail with GMLAKE_ERR_DISABLED;
 * gmlake_close then fails, saying how many allocations it abandons). No argument a caller passes makes one.
 * Fork: in a child fork()ed (without exec) from a process that loaded the library, every function but the error
 * readers fails at once, in C, with GMLAKE_ERR_NO_DEVICE and a line saying to spawn instead: neither CUDA nor the
 * library's Go runtime, whose threads the child does not have, works after fork (PyTorch refuses CUDA there
 * too). The child's copy of the engine never changes; the parent is not affected.
 *
 * Configuration, read from the environment when a device's engine is created (first allocation on it):
 *   GMLAKE_POLICY           gmlake (default) | caching | expandable | gmlake-paper
 *   GMLAKE_DEVICE           cuda (default: the real GPU) | sim (the simulated H200, for tests without a GPU)
 *   GMLAKE_SIM_CAPACITY     bytes of the simulated device (sim only), e.g. 8GiB
 *   GMLAKE_MEMORY_FRACTION  cap on the physical memory held, as a fraction of the device's total (0 < f <= 1)
 *   GMLAKE_MEMORY_LIMIT     the same cap in bytes, e.g. 40GiB (at least 2MiB); with both, the stricter is in
 *                           force (said once on stderr; gmlake_stats_json's memory_limit_from names it)
 *   GMLAKE_TRACE            write an allocation trace (the text format of testdata/traces) to this path;
 *                           {pid} and {rank} (env RANK, else LOCAL_RANK) are substituted; a path ending
 *                           in .gz is gzipped. The v2 format: written a block at a time (every 4096 events
 *                           or 1 s), on SIGTERM/SIGINT and at exit, so a killed process's trace reads up to
 *                           its last block; a path another process is writing is refused (one line on stderr)
 *   GMLAKE_VERBOSE          1: print each engine's configuration on stderr when it starts
 *   GMLAKE_<KNOB>           any engine knob (a field of impl.Config), e.g. GMLAKE_CHUNK_SIZE=64MiB;
 *                           gmlake_knobs lists them
 * Every variable's unit, values and default are in one table (gmlake_settings_json; docs/pytorch.md shows it),
 * and one parser reads them (gmlake_check_settings, at the end, runs it for a caller). A bad value (an unknown
 * policy, a knob that does not parse or is out of its range, NaN, Inf, a size that rounds to 0 bytes or is
 * beyond 2^64-1, a simulated device or a memory limit under 2 MiB, a memory fraction whose cap rounds to 0
 * bytes) is a configuration error: said once on stderr when the device's engine would start, naming the
 * variable; every allocation on that device then fails (NULL; gmlake_alloc_throw throws it as it is, not as
 * out of memory).
 */
#ifndef GMLAKE_H
#define GMLAKE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *cudaStream_t;

/* Error kinds of gmlake_last_error_kind (1-3 are also gmlake_last_failure's GMLAKE_FAIL_* kinds). Only
 * GMLAKE_ERR_OOM means "the memory does not suffice" (shrink the batch); the others need another fix. */
enum {
	GMLAKE_ERR_NONE = 0,      /* the calling thread's last call succeeded */
	GMLAKE_ERR_OOM = 1,       /* out of memory: the device, or the memory fraction / limit, cannot serve it */
	GMLAKE_ERR_INVALID = 2,   /* a bad argument (device out of range, NULL output, unknown pointer/pool/stream,
	                             fraction outside [0, 1], capture end without begin, close inside a callback) */
	GMLAKE_ERR_OTHER = 3,     /* a driver error */
	GMLAKE_ERR_CONFIG = 4,    /* a bad setting: a GMLAKE_* environment variable (the text names it) */
	GMLAKE_ERR_NO_DEVICE = 5, /* the device cannot be opened: no CUDA driver, no such GPU */
	GMLAKE_ERR_DISABLED = 6,  /* the device's engine was disabled by an earlier internal error */
	GMLAKE_ERR_INTERNAL = 7   /* an internal error (a bug: please report it with the stack on stderr) */
};

/* The last error of the calling thread: the text of why its last call failed, "" if that call succeeded
 * (snprintf style, like gmlake_stats_json). Never another thread's. */
int gmlake_last_error(char *buf, size_t len);

/* The kind (GMLAKE_ERR_*) of the calling thread's last error; GMLAKE_ERR_NONE if its last call succeeded. */
int gmlake_last_error_kind(void);

/* The CUDAPluggableAllocator ABI. gmlake_alloc returns NULL for size 0 (no error) and on failure (the error
 * text is then in gmlake_last_error, its kind in gmlake_last_error_kind: GMLAKE_ERR_OOM only for out of
 * memory). gmlake_free frees stream-ordered on the stream the block was allocated on; size and stream are
 * ignored (the engine knows them); NULL is a no-op. A bad free (unknown, interior or already freed pointer, a
 * device out of range or without an engine) sets GMLAKE_ERR_INVALID, is counted, reported on stderr (the
 * first few) and otherwise ignored; on a disabled engine a free is ignored (GMLAKE_ERR_DISABLED). */
void *gmlake_alloc(size_t size, int device, cudaStream_t stream);
void gmlake_free(void *ptr, size_t size, int device, cudaStream_t stream);

/* Like gmlake_alloc, but a failed allocation of nonzero size throws a C++ exception (Python sees a RuntimeError,
 * not a crash on a NULL pointer): for out of memory (GMLAKE_ERR_OOM) a std::runtime_error whose text starts
 * with "CUDA out of memory (gmlake):", as PyTorch's; for any other kind one whose text is the library's
 * followed by the kind's name, e.g. "... [GMLAKE_ERR_NO_DEVICE]" (std::invalid_argument for
 * GMLAKE_ERR_INVALID), never "out of memory": batch-size finders would shrink the batch for a missing driver. For PyTorch when the torch-header shim of python/gmlake_torch cannot be built. */
void *gmlake_alloc_throw(size_t size, int device, cudaStream_t stream);

/* Optional hooks of CUDAPluggableAllocator (PyTorch calls them as void functions; the int result is for
 * other callers: 0 on success, negative on error with the last error set).
 * gmlake_set_memory_fraction: fraction must be a number in [0, 1] (1: no cap; 0: a cap of 0 bytes, as
 * PyTorch's allocator reads it; NaN, negative or above 1: GMLAKE_ERR_INVALID, nothing changes); it starts the device's engine if it has not started, so a device that
 * cannot be opened fails here (GMLAKE_ERR_NO_DEVICE / GMLAKE_ERR_CONFIG), not at the first allocation.
 * gmlake_record_stream: NULL is a no-op; a pointer no engine handed out is GMLAKE_ERR_INVALID. */
void gmlake_init(int device_count);                          /* set_init_fn: engines start lazily anyway */
int gmlake_start(int device); /* start device's engine now: 0, or the error its first allocation would get */
int gmlake_empty_cache(void);                                /* set_reset_fn: every device's cache back to CUDA */
int gmlake_set_memory_fraction(double fraction, int device); /* set_memory_fraction_fn */
int gmlake_record_stream(void *ptr, cudaStream_t stream);    /* set_record_stream_fn */

/* Statistics of one device as JSON (peak/current requested, allocated, reserved bytes, fragmentation,
 * counters, driver calls by kind; "panics_total": internal errors recovered in this process, 0 unless there is
 * a bug). Writes at most len bytes including the terminating NUL and returns the length of the whole JSON
 * text (like snprintf: call again with a larger buffer if the result >= len); negative on error (a device out
 * of range). A device whose engine has not started reports {"initialized": false, ...}. */
int gmlake_stats_json(int device, char *buf, size_t len);

/* Knob names (environment spellings without GMLAKE_), comma-separated, like gmlake_stats_json. */
int gmlake_knobs(char *buf, size_t len);

/* Start writing the allocation trace of every device to path ({pid}, {rank} substituted; a path ending in .gz
 * is gzipped); 0 on success, negative if a trace is already being written, another process is writing that
 * path, or the file cannot be created. gmlake_trace_stop writes it out and closes it (also done at process
 * exit, by the process that started it: a forked child is refused everything, see Fork above); 0 on success. */
int gmlake_trace_start(const char *path);
int gmlake_trace_stop(void);

/* Release everything the engine of device holds and forget it (the next allocation starts a new engine).
 * Only when no other thread uses the device. Returns how many allocations were still live (released
 * anyway; 0 for a device whose engine has not started), negative on error (text in gmlake_last_error):
 * a device out of range, a call from inside an event callback of that device (GMLAKE_ERR_INVALID: nothing
 * is closed), or a disabled engine (GMLAKE_ERR_DISABLED: it is forgotten, and the text says how many
 * allocations it abandons without releasing their memory). For tests and orderly shutdown. */
int gmlake_close(int device);

/* ---- The torch engine ABI (issue 15): what a full c10::cuda::CUDACachingAllocator::CUDAAllocator needs. ----
 * Every function below is thread-safe and returns negative on error with the text in gmlake_last_error (unless
 * said otherwise). A device whose engine has not started yet is started by the calls that need it (pools,
 * capture, stats of a device are all zero until its first allocation: they do not start it). */

/* One statistic with PyTorch's meaning (c10::CachingDeviceAllocator::Stat): current value, its peak since the
 * last reset_peak, and the accumulated increases (allocated) and decreases (freed) since the last
 * reset_accumulated. current == allocated - freed until reset_accumulated (which zeroes allocated and freed). */
typedef struct {
	int64_t current, peak, allocated, freed;
} gmlake_stat;

/* PyTorch's DeviceStats. Every array is indexed 0 all, 1 small_pool, 2 large_pool (a request <= 1 MiB after
 * rounding to 512 B is small, as in PyTorch). See docs/pytorch.md (or capi/torch.go) for how gmlake's blocks
 * map onto these: a stitched block is one allocation / one active block of the large pool whose bytes are the
 * physical chunks it views (counted once: reserved bytes count physical memory, never a view again). */
typedef struct {
	gmlake_stat allocation[3];           /* live allocations (blocks handed out) */
	gmlake_stat segment[3];              /* segments: fixed segments, and contiguous mapped runs of arenas */
	gmlake_stat active[3];               /* allocations not yet reusable (live, or freed with events pending) */
	gmlake_stat inactive_split[3];       /* free mapped blocks that share their segment with another block */
	gmlake_stat allocated_bytes[3];      /* block bytes (rounded) of live allocations */
	gmlake_stat reserved_bytes[3];       /* physical bytes held (cuMemCreate'd chunks) */
	gmlake_stat active_bytes[3];         /* block bytes of active allocations */
	gmlake_stat inactive_split_bytes[3]; /* bytes of inactive_split blocks */
	gmlake_stat requested_bytes[3];      /* bytes asked for by live allocations (before rounding) */
	int64_t num_alloc_retries;           /* allocations that released the cache and retried */
	int64_t num_ooms;                    /* allocations that failed with out of memory (reported to the caller) */
	int64_t num_sync_all_streams;        /* synchronisations of every stream (empty_cache, out-of-memory path) */
	int64_t num_device_alloc;            /* successful cuMemCreate calls */
	int64_t num_device_free;             /* successful cuMemRelease calls */
	gmlake_stat oversize_allocations;    /* always 0: gmlake has no max_split_size */
	gmlake_stat oversize_segments;       /* always 0 */
	int64_t max_split_size;              /* -1: unlimited, as PyTorch reports an unset max_split_size */
} gmlake_device_stats;

int gmlake_get_device_stats(int device, gmlake_device_stats *out); /* 0; not started: all zero; out NULL: error */
int gmlake_reset_peak_stats(int device);        /* every peak := current */
int gmlake_reset_accumulated_stats(int device); /* every allocated/freed := 0 and the num_* counters := 0 */

/* Segments and blocks as JSON, like gmlake_stats_json (snprintf convention):
 * {"device":D,"segments":[{"device","address","total_size","stream","segment_type":"small"|"large",
 *   "allocated_size","active_size","requested_size","stitched":bool,"pool_id":[a,b],"is_expandable":bool,
 *   "registration_counter":N (creation order: a later segment has a larger N; an arena's runs share theirs),
 *   "blocks":[{"address","size","requested_size","state":"active_allocated"|"active_pending_free"|"inactive",
 *              "stitched_into":ADDR (only for a block held by a stitched block)}]}],
 *  "stitched_blocks":[{"address","size","requested_size","stream","pool_id":[a,b],
 *              "state":"active_allocated"|"active_pending_free"|"inactive","parts":[ADDR,...]}]}
 * A segment is a fixed segment or a contiguous mapped run of an arena (as PyTorch reports expandable segments).
 * A stitched block is its own virtual range viewing chunks of other segments: it is listed in stitched_blocks,
 * and the blocks under its chunks appear in their segments with stitched_into set (and, while it is live,
 * state active_allocated and requested_size 0: its request is on the stitched block), so the bytes are counted
 * once; a segment's "stitched" says that some of its blocks are viewed by a stitched block. Addresses, sizes
 * and streams are JSON numbers (integers below 2^64). */
int gmlake_snapshot_json(int device, char *buf, size_t len);

/* Segment events for memory history (the C++ side records alloc/free with PyTorch's context itself).
 * action: GMLAKE_EVENT_SEGMENT_MAP (new physical memory mapped at [addr, addr+size)), SEGMENT_UNMAP (released),
 * OOM (an allocation of size bytes failed with out of memory; addr is 0, stream the request's). Every event is
 * delivered by the call that caused it, before that call returns (a free that gives a released pool's memory
 * back delivers its SEGMENT_UNMAP), on its thread, after the engine's lock is released, so the callback may
 * call into gmlake (its calls do not change the caller's last error); gmlake_close of the device from inside
 * the callback is refused (the call that fired it still runs in that engine). NULL fn switches it off. Set
 * it before the first allocation or accept missing early events. */
enum { GMLAKE_EVENT_SEGMENT_MAP = 0, GMLAKE_EVENT_SEGMENT_UNMAP = 1, GMLAKE_EVENT_OOM = 2 };
typedef void (*gmlake_event_fn)(void *ctx, int device, int action, uint64_t addr, uint64_t size, void *stream);
void gmlake_set_event_callback(gmlake_event_fn fn, void *ctx);

/* After a failed gmlake_alloc / gmlake_alloc_pool on this thread: why, with the figures an out-of-memory
 * message needs (bytes). kind: GMLAKE_FAIL_OOM (also a request larger than the device), GMLAKE_FAIL_INVALID
 * (bad argument: device out of range, unknown pool), GMLAKE_FAIL_OTHER (driver error, disabled engine).
 * allocated: block bytes of live allocations; reserved: physical bytes held; cached = reserved - allocated;
 * limit: the memory-fraction cap in bytes (0: none). Returns 0, or negative if this thread has no failure. */
enum { GMLAKE_FAIL_OOM = 1, GMLAKE_FAIL_INVALID = 2, GMLAKE_FAIL_OTHER = 3 };
typedef struct {
	int kind;
	uint64_t requested, device_total, device_free, allocated, reserved, cached, limit;
} gmlake_alloc_failure;
int gmlake_last_failure(gmlake_alloc_failure *out);

/* Pools: PyTorch's MempoolId_t {id0, id1}; {0, 0} is the default pool. A private pool's blocks never serve,
 * get stitched into, or are released (empty_cache, out-of-memory release) under another pool's requests while
 * the pool lives, and its memory stays mapped (a CUDA graph's addresses stay valid) until the pool is released.
 * gmlake_alloc_pool allocates from the pool (which must exist: create it first); gmlake_free frees any block.
 * gmlake_pool_release decrements the use count; at 0 the pool's free memory returns to the device, and so does
 * the memory of its remaining allocations as they are freed. Returns: create/release the new use count,
 * use_count the use count (0: no such pool), live the number of live allocations of the pool (ptrs gets the
 * first min(live, cap) of them, in address order; ptrs NULL: none, whatever cap). An unknown pool has use
 * count 0 and no live allocations; releasing it or allocating from it is GMLAKE_ERR_INVALID. */
void *gmlake_alloc_pool(size_t size, int device, cudaStream_t stream, uint64_t id0, uint64_t id1);
int gmlake_pool_create_or_incref(int device, uint64_t id0, uint64_t id1);
int gmlake_pool_release(int device, uint64_t id0, uint64_t id1);
int gmlake_pool_use_count(int device, uint64_t id0, uint64_t id1);
int gmlake_pool_live(int device, uint64_t id0, uint64_t id1, uint64_t *ptrs, size_t cap);

/* Stream capture (CUDA graphs): while any stream of the device captures, the engine records and queries no
 * event and synchronises no stream; frees of blocks used on other streams (record_stream) are deferred until
 * no stream captures. Call with capturing=1 before cudaStreamBeginCapture's first allocation and with 0 after
 * cudaStreamEndCapture. The engine's driver calls (cuMemCreate, cuMemMap...) during capture need the calling
 * thread in relaxed capture mode (cudaThreadExchangeStreamCaptureMode), as PyTorch does around cudaMalloc.
 * Ending a capture the stream has not begun (or already ended) is GMLAKE_ERR_INVALID and changes nothing. */
int gmlake_set_capturing(int device, cudaStream_t stream, int capturing);

/* cacheInfo (cuDNN benchmark mode): the largest block that an allocation on the default pool could get from
 * the cache without new memory (0 if the device has not started). largest_free_block NULL: GMLAKE_ERR_INVALID. */
int gmlake_cache_info(int device, size_t *largest_free_block);

/* getBaseAllocation: the live allocation holding ptr (its start and block size; a NULL base or size is not
 * written). A pointer inside no live allocation: GMLAKE_ERR_INVALID. */
int gmlake_base_allocation(void *ptr, void **base, size_t *size);

/* CUDA IPC (PyTorch's shareIpcHandle): the physical memory under the live allocation that starts at ptr, for
 * another process to map. Every mapping gmlake makes maps a whole physical handle, so an allocation (a stitched
 * one too) lies over a run of whole handles side by side: pieces[0..*n) are those handles in address order,
 * each as a POSIX file descriptor of this process (cuMemExportToShareableHandle) and its bytes, and the
 * allocation is the *size bytes at *offset into their run. The other process duplicates each descriptor
 * (pidfd_getfd), imports it (cuMemImportFromShareableHandle), maps the handles side by side in a reservation
 * of its own and sets access; its imports hold the memory until it releases them. The descriptors belong to
 * gmlake: the same for a handle every time, open until gmlake releases the handle; never close them.
 * Returns 0; -1 with GMLAKE_ERR_INVALID for a NULL output, a ptr that is not the start of a live allocation,
 * or cap below the pieces needed (*n is then the number needed, and nothing else is written), and
 * GMLAKE_ERR_OTHER when the device's memory is not exportable (GMLAKE_CUDA_HANDLES=none). On the simulated
 * device (GMLAKE_DEVICE=sim) the descriptors are stand-ins (an open /dev/null per handle, closed with it):
 * enough to test the calls, nothing to map. */
typedef struct {
	int fd;        /* this process's descriptor for the handle */
	int reserved;  /* 0 */
	uint64_t size; /* the handle's bytes (a multiple of the granularity) */
} gmlake_ipc_piece;
int gmlake_ipc_export(void *ptr, gmlake_ipc_piece *pieces, size_t cap, size_t *n, uint64_t *offset,
                      uint64_t *size);

/* The memory fraction in force on device (1.0 without a cap; a cap set as GMLAKE_MEMORY_LIMIT is reported as
 * limit / total); negative on a bad device or a bad GMLAKE_MEMORY_FRACTION. Before the device's engine
 * starts, the fraction GMLAKE_MEMORY_FRACTION gives (1.0 without it): a limit in bytes applies from the start. */
double gmlake_get_memory_fraction(int device);

/* ---- Settings (issue 36): the one parser of the GMLAKE_ environment variables, for callers that check them
 * up front (gmlake_torch does, before it enables gmlake). gmlake_check_settings parses env (an array of
 * "NAME=VALUE" strings ended by NULL, as envp; NULL: the process's environment now) exactly as a device's
 * engine start does, and starts an engine with it on a simulated device; it writes "" and returns 0 when the
 * settings are good, else one line naming the first bad variable (snprintf convention: the result is the
 * text's length); a GMLAKE_ variable the table does not know is refused here (an engine's start only says it
 * on stderr). Negative on an internal error. gmlake_settings_json writes the settings table as JSON (snprintf
 * convention): [{"name","unit","range","default","read_by","doc","choices","knob","retired"}, ...]. */
int gmlake_check_settings(const char *const *env, char *buf, size_t len);
int gmlake_settings_json(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
