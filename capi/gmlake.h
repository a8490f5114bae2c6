/* gmlake.h: the C ABI of libgmlake.so, the gmlake GPU caching allocator as a PyTorch pluggable allocator.
 *
 * Build: `make capi` (go build -buildmode=c-shared -o capi/libgmlake.so ./capi). No CUDA headers are needed:
 * cudaStream_t is declared here as void*, which is what it is (a CUstream).
 *
 * PyTorch (torch.cuda.memory.CUDAPluggableAllocator) calls gmlake_alloc and gmlake_free; the optional hooks
 * (record stream, reset = empty cache, memory fraction, init) are wired by python/gmlake_torch when it can build
 * its small C++ shim against the installed torch headers. PyTorch's own memory statistics do not work under a
 * plugged allocator: read ours with gmlake_stats_json.
 *
 * Every function is thread-safe and never lets a Go panic cross into C: a panic is reported on stderr and in
 * gmlake_last_error, the call fails (NULL / negative), and the engine of that device is disabled.
 *
 * Configuration, read from the environment when a device's engine is created (first allocation on it):
 *   GMLAKE_POLICY           gmlake (default) | caching | expandable | gmlake-paper
 *   GMLAKE_DEVICE           cuda (default: the real GPU) | sim (the simulated H200, for tests without a GPU)
 *   GMLAKE_SIM_CAPACITY     bytes of the simulated device (sim only), e.g. 8GiB
 *   GMLAKE_MEMORY_FRACTION  cap on the physical memory held, as a fraction of the device's total (0 < f <= 1)
 *   GMLAKE_MEMORY_LIMIT     the same cap in bytes, e.g. 40GiB
 *   GMLAKE_TRACE            write an allocation trace (the text format of testdata/traces) to this path;
 *                           {pid} and {rank} (env RANK) are substituted; a path ending in .gz is gzipped
 *   GMLAKE_VERBOSE          1: print each engine's configuration on stderr when it starts
 *   GMLAKE_<KNOB>           any engine knob (a field of impl.Config), e.g. GMLAKE_CHUNK_SIZE=64MiB;
 *                           gmlake_knobs lists them
 */
#ifndef GMLAKE_H
#define GMLAKE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *cudaStream_t;

/* The CUDAPluggableAllocator ABI. gmlake_alloc returns NULL for size 0 (no error) and on failure (the error
 * text is then in gmlake_last_error; out of memory or otherwise). gmlake_free frees stream-ordered on the
 * stream the block was allocated on; size and stream are ignored (the engine knows them). A bad free (unknown,
 * interior or already freed pointer) is counted, reported on stderr (the first few) and otherwise ignored. */
void *gmlake_alloc(size_t size, int device, cudaStream_t stream);
void gmlake_free(void *ptr, size_t size, int device, cudaStream_t stream);

/* Like gmlake_alloc, but a failed allocation of nonzero size throws a C++ std::runtime_error whose text starts
 * with "CUDA out of memory" (Python sees a RuntimeError, not a crash on a NULL pointer). For PyTorch when the
 * torch-header shim of python/gmlake_torch cannot be built. */
void *gmlake_alloc_throw(size_t size, int device, cudaStream_t stream);

/* Optional hooks of CUDAPluggableAllocator. */
void gmlake_init(int device_count);                        /* set_init_fn: engines start lazily anyway */
void gmlake_empty_cache(void);                             /* set_reset_fn: every device's cache back to CUDA */
void gmlake_set_memory_fraction(double fraction, int device); /* set_memory_fraction_fn */
void gmlake_record_stream(void *ptr, cudaStream_t stream); /* set_record_stream_fn */

/* Statistics of one device as JSON (peak/current requested, allocated, reserved bytes, fragmentation,
 * counters, driver calls by kind). Writes at most len bytes including the terminating NUL and returns the
 * length of the whole JSON text (like snprintf: call again with a larger buffer if the result >= len);
 * negative on error. A device whose engine has not started reports {"initialized": false, ...}. */
int gmlake_stats_json(int device, char *buf, size_t len);

/* The last error of the calling thread (or, if it has none, of the process), like gmlake_stats_json. */
int gmlake_last_error(char *buf, size_t len);

/* Knob names (environment spellings without GMLAKE_), comma-separated, like gmlake_stats_json. */
int gmlake_knobs(char *buf, size_t len);

/* Start writing the allocation trace of every device to path ({pid}, {rank} substituted; a path ending in .gz
 * is gzipped); 0 on success, negative if a trace is already being written or the file cannot be created.
 * gmlake_trace_stop flushes and closes it (also done at process exit); 0 on success. */
int gmlake_trace_start(const char *path);
int gmlake_trace_stop(void);

/* Release everything the engine of device holds and forget it (the next allocation starts a new engine).
 * Only when no other thread uses the device. Returns how many allocations were still live (released
 * anyway), negative on error (text in gmlake_last_error). For tests and orderly shutdown. */
int gmlake_close(int device);

#ifdef __cplusplus
}
#endif

#endif
