package ops

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/serve"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// serveJudge is what judgeServe remembers between steps (Config.Serve).
type serveJudge struct {
	// want: the layer's counters as the steps so far say they must be.
	want serve.Counters
	// served: the device streams the engine was given work on (an allocation or a RecordStream that
	// succeeded), which an out-of-memory retry must synchronise; a caller's own stream forgotten (no
	// mapping) leaves it, a mapped one stays (the layer made it and still synchronises it).
	served map[vmm.Stream]bool
}

// judgeServe judges, under the serving layer (Config.Serve), what the layer itself promises (impl/serve),
// after the step and before its synchronisations are told to the judges (e.synced holds them):
//   - an out of memory that Alloc returns for a request no larger than the device, outside a capture,
//     comes after a synchronisation of the default stream and of every stream the engine was given work
//     on: the retry waited for everything, so the out of memory is real;
//   - a request larger than the device (into a pool that lives) is an out of memory, as PyTorch says, not
//     the engine's invalid size;
//   - its error says so: an *impl.OOMError with the bytes asked for and what the engine holds (reserved,
//     live, cached), as PyTorch's out-of-memory message tells them;
//   - EmptyCache outside a capture synchronises first (torch.cuda.empty_cache);
//   - the layer's counters (the C library's oom_sync_retries and sync_errors) say what the steps did:
//     one synchronisation per step that synchronised, one retry per Alloc that succeeded after it, one OOM
//     per Alloc answered out of memory, no synchronisation error (the Env's synchroniser never fails);
//   - under the mapping, each device stream stands for its caller's value (CallerStream);
//   - on the simulated device, the engine never holds more physical memory than MemoryLimit.
func (e *Env) judgeServe(op Op, res StepResult, refused bool) []spec.Violation {
	if e.S == nil {
		return nil
	}
	var out []spec.Violation
	bad := func(format string, args ...any) {
		out = append(out, spec.Violation{Inv: spec.InvServe, Msg: fmt.Sprintf(format, args...)})
	}
	j := &e.serve
	if j.served == nil {
		j.served = map[vmm.Stream]bool{}
	}
	synced := len(e.synced) > 0
	if synced {
		j.want.Syncs++
	}
	capturing := e.A.Capturing()
	switch {
	case refused:
	case op.Kind == OpEmptyCache:
		if !capturing && !synced {
			bad("%v outside a capture did not synchronise the streams first", op)
		}
	case op.Kind == OpAlloc:
		oom := errors.Is(res.Err, vmm.ErrOutOfMemory)
		if oom {
			j.want.OOMs++
		}
		if res.Err == nil && synced {
			j.want.SyncRetries++
		}
		if oom && !capturing && op.Size <= e.Device.Capacity() {
			var missing []vmm.Stream
			for _, s := range append([]vmm.Stream{vmm.DefaultStream}, sortedStreams(j.served)...) {
				if !slices.Contains(e.synced, s) {
					missing = append(missing, s)
				}
			}
			if len(missing) > 0 {
				bad("%v answered out of memory without synchronising streams %v first (synchronised %v): the retry did not wait for their work", op, missing, e.synced)
			}
		}
		if op.Size > e.Device.Capacity() && !e.closed && (op.Pool == 0 || e.pools[op.Pool] > 0) && !oom {
			bad("%v: %v for more than the device's %d bytes, want an out of memory (as PyTorch says; the engine alone says invalid size)", op, res.Err, e.Device.Capacity())
		}
		var oe *impl.OOMError
		if oom && errors.As(res.Err, &oe) && !e.closed {
			// The error says what the caller is told (PyTorch's out-of-memory message): what was asked
			// for, and what the engine holds now (nothing changed since the error was made).
			st := e.A.Stats()
			if oe.Requested != op.Size || oe.Reserved != st.ReservedBytes || oe.Live != st.AllocatedBytes ||
				oe.Cached != st.ReservedBytes-min(st.ReservedBytes, st.AllocatedBytes) {
				bad("%v: the out-of-memory error says requested %d, reserved %d, live %d, cached %d; the engine holds %d reserved, %d allocated",
					op, oe.Requested, oe.Reserved, oe.Live, oe.Cached, st.ReservedBytes, st.AllocatedBytes)
			}
		}
		if res.Err == nil {
			j.served[e.stream(op.Stream)] = true
		}
	case op.Kind == OpRecord:
		if res.Err == nil {
			j.served[e.stream(op.Stream)] = true
		}
	case op.Kind == OpForget:
		if res.Err == nil && e.other == 0 {
			delete(j.served, e.stream(op.Stream))
		}
	}
	if e.other != 0 {
		// Under the mapping, each stream the layer made stands for its caller's value (what the C library's
		// snapshot and segment events show), while that value is mapped.
		for i, c := range e.callers[:len(e.Streams)] {
			if !e.forgot[c] {
				if back := e.S.CallerStream(e.Streams[i]); back != c {
					bad("CallerStream(%d) = %#x after %v, want caller stream %#x (stream index %d)", e.Streams[i], uint64(back), op, uint64(c), i)
				}
			}
		}
	}
	if got := e.S.Counters(); got != j.want {
		bad("the layer's counters are %+v after %v, want %+v", got, op, j.want)
		j.want = got // one report per disagreement
	}
	if e.Dev != nil && e.Cfg.MemoryLimit != 0 {
		if used := e.Dev.State().Used; used > e.Cfg.MemoryLimit {
			bad("the engine holds %d physical bytes after %v, over the memory limit of %d", used, op, e.Cfg.MemoryLimit)
		}
	}
	return out
}

func sortedStreams(m map[vmm.Stream]bool) []vmm.Stream {
	out := make([]vmm.Stream, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
