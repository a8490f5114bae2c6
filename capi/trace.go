package main

// The allocation trace: while a trace is active, every successful allocation and every free of a pointer
// allocated during the trace is written in the text format of testdata/traces/README.md, so that a user's
// own training run can be replayed with `gmlake replay`:
//
//	a ID SIZE STREAM   (SIZE as requested; STREAM numbered 0, 1, 2 in order of first use)
//	f ID
//
// The lines are trace's format, written by its Writer. A free is written when PyTorch frees the block, which is when the block becomes reusable on its
// allocation stream; blocks used on other streams (RecordStream) are reused later by the engine, but the
// trace records no separate completion for them. Pointers live when the trace starts are not traced; blocks
// live when it stops have no f line. With several devices in one process, every device's events go to the
// one file, streams numbered per (device, stream).
//
// Ordering: a free is written (under the tracer's lock) before the engine frees the block, and an allocation
// after the engine returned it, so a pointer reused by another thread never has its lines out of order.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gmlake/gmlake/trace"
)

var (
	errTraceActive = errors.New("gmlake: a trace is already being written; stop it first")
	errNoTrace     = errors.New("gmlake: no trace is being written")

	tracing      atomic.Pointer[tracer] // the active trace, nil when none
	traceMu      sync.Mutex             // serialises start and stop
	exitHookOnce sync.Once
)

type streamKey struct {
	device int
	stream uintptr
}

type tracer struct {
	path string

	mu struct {
		sync.Mutex
		w       *trace.Writer // to the file, gzip-compressed when the path ends in .gz
		nextID  uint64
		ids     map[streamKeyPtr]uint64 // live traced allocations: (device, pointer) -> ID
		streams map[streamKey]int       // stream numbers in order of first use
		err     error                   // the first write error; later events are dropped
		closed  bool
	}
}

type streamKeyPtr struct {
	device int
	ptr    uintptr
}

// expandTracePath substitutes {pid} and {rank} (env RANK, or 0) in a trace path.
func expandTracePath(p string) string {
	rank := getenv("RANK")
	if rank == "" {
		rank = "0"
	}
	r := strings.NewReplacer("{pid}", strconv.Itoa(os.Getpid()), "{rank}", rank)
	return r.Replace(p)
}

func startTrace(path string) error {
	if path == "" {
		return fmt.Errorf("gmlake: trace path is empty")
	}
	traceMu.Lock()
	defer traceMu.Unlock()
	if tracing.Load() != nil {
		return errTraceActive
	}
	path = expandTracePath(path)
	w, err := trace.Create(path)
	if err != nil {
		return fmt.Errorf("gmlake: creating trace file: %w", err)
	}
	t := &tracer{path: path}
	t.mu.w = w
	t.mu.ids = make(map[streamKeyPtr]uint64)
	t.mu.streams = make(map[streamKey]int)
	exitHookOnce.Do(registerExitHook)
	tracing.Store(t)
	return nil
}

func stopTrace() error {
	traceMu.Lock()
	defer traceMu.Unlock()
	t := tracing.Swap(nil)
	if t == nil {
		return errNoTrace
	}
	return t.close()
}

func (t *tracer) alloc(device int, stream uintptr, size uint64, ptr uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed || t.mu.err != nil {
		return
	}
	sk := streamKey{device, stream}
	sn, ok := t.mu.streams[sk]
	if !ok {
		sn = len(t.mu.streams)
		t.mu.streams[sk] = sn
	}
	id := t.mu.nextID
	t.mu.nextID++
	t.mu.ids[streamKeyPtr{device, ptr}] = id
	t.mu.err = t.mu.w.Write(trace.Event{Op: trace.OpAlloc, ID: id, Size: size, Stream: sn})
}

func (t *tracer) free(device int, ptr uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed || t.mu.err != nil {
		return
	}
	k := streamKeyPtr{device, ptr}
	id, ok := t.mu.ids[k]
	if !ok {
		return // allocated before the trace started, or a bad free
	}
	delete(t.mu.ids, k)
	t.mu.err = t.mu.w.Write(trace.Event{Op: trace.OpFree, ID: id})
}

func (t *tracer) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil
	}
	t.mu.closed = true
	err := t.mu.err
	if e := t.mu.w.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("gmlake: writing trace %s: %w", t.path, err)
	}
	return nil
}
