// Package serve owns the engine as a process serves it to a framework, exactly what libgmlake runs under
// PyTorch, below the C-facing shell (impl/clib): an impl.Allocator behind a cap on the physical bytes it may
// hold (vmm/wrap.Limit: the memory fraction), an out-of-memory path that synchronises every stream the
// engine has met and retries once (PyTorch's allocator synchronises the device before it gives up), and,
// for a driver that knows only streams it created (the simulated device), the mapping of a caller's stream
// values to the driver's own streams.
//
// The op executor of the harness drives an Engine the way the C library does, so rapid, porcupine and the
// explorer judge what libgmlake runs: a synchronisation moves the stream clock (the work of every stream it
// waited for has completed), and the executor tells the oracle so (Config.Sync), which is why a retry may
// succeed where the bare engine runs out of memory, and why an out of memory after the retry is judged
// against a state with that work completed.
//
// What an Engine adds, step by step, to an Alloc(size, s):
//  1. s is mapped to the driver's stream (Config.MapStreams; a new value gets a new stream) and remembered
//     among the streams to synchronise (so are the streams of RecordStream).
//  2. A request larger than the device's total memory is an out of memory (as in PyTorch), not the engine's
//     invalid size (a closed engine still answers that it is closed).
//  3. The engine allocates; if it runs out of memory and a synchroniser is there (Config.Sync, or the
//     driver's vmm.StreamSyncer), the default stream and every remembered stream are synchronised (not
//     during a graph capture, where that is illegal) and the engine allocates once more.
//
// EmptyCache synchronises the same way first, as torch.cuda.empty_cache does. ForgetStream (a caller's
// stream about to be destroyed) goes through the layer too: it unmaps the caller's value, or stops
// synchronising the caller's own stream (see Engine.ForgetStream).
package serve
