package main

// The allocation trace (GMLAKE_TRACE, gmlake_trace_start/stop): a thin shell over trace.Active and
// trace.Recorder, which own the format (a v2 trace: blocks with checksums, an end record), the flush bounds
// (trace.DefaultFlushEvents events or trace.DefaultFlushInterval), flushing on SIGTERM and SIGINT, the lock
// that refuses a path another process is writing, {pid} and {rank}, and the rule that a trace belongs to the
// process that opened it. What this file adds is C: the exit hook, which closes the trace only in the process
// that owns it, so that a forked child's exit never enters Go to write its parent's buffer; and a fork handler
// that gives a child the host's SIGTERM and SIGINT handling back (a child's signals are its own). A forked
// child never records anything: abi.c's fork rule refuses it every entry before Go (gmlake.h, Fork).
//
// Lines: `a ID SIZE STREAM` (SIZE as requested; STREAM numbered 0, 1, 2 in order of first use of a (device,
// stream)) and `f ID`. A free is written when PyTorch frees the block, which is when the block becomes
// reusable on its allocation stream; blocks used on other streams (RecordStream) are reused later by the
// engine, but the trace records no separate completion for them. Pointers live when the trace starts are not
// traced; blocks live when it stops have no f line. With several devices in one process, every device's
// events go to the one file.
//
// Ordering: a free is written (under the recorder's lock) before the engine frees the block, and an
// allocation after the engine returned it, so a pointer reused by another thread never has its lines out of
// order.

/*
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

extern void gmlakeGoAtExit(void);
extern void gmlake_hc_flush(int device);

static pid_t gmlake_trace_owner = -1; // the process whose trace the exit hook closes
static int gmlake_trace_exiting;       // set while the exit hook runs: the trace's end record says "exit"

static void gmlake_trace_at_exit(void) {
	if (getpid() != gmlake_trace_owner) {
		return; // a forked child: the trace is its parent's
	}
	gmlake_trace_exiting = 1;
	gmlake_hc_flush(-1); // the frees the host cache holds reach the trace before it closes
	gmlakeGoAtExit();
}

// gmlake_trace_own makes the calling process the owner of the trace, and registers the exit hook once.
static void gmlake_trace_own(void) {
	static int registered;
	gmlake_trace_owner = getpid();
	if (!registered) {
		registered = 1;
		atexit(gmlake_trace_at_exit);
	}
}

static int gmlake_trace_is_exiting(void) { return gmlake_trace_exiting; }

// The host's SIGTERM and SIGINT handling before the recorder watched them (trace.RecordOptions.FlushOnSignals),
// given back to every forked child: the watcher is a goroutine of the parent's Go runtime, whose threads a
// child does not have, so a child keeping it would swallow its SIGTERM and live on.
static struct sigaction gmlake_saved_term, gmlake_saved_int;

static void gmlake_trace_child_signals(void) {
	sigaction(SIGTERM, &gmlake_saved_term, NULL);
	sigaction(SIGINT, &gmlake_saved_int, NULL);
}

// gmlake_trace_save_signals saves them, once, before the first trace starts watching.
static void gmlake_trace_save_signals(void) {
	static int saved;
	if (saved) {
		return;
	}
	saved = 1;
	sigaction(SIGTERM, NULL, &gmlake_saved_term);
	sigaction(SIGINT, NULL, &gmlake_saved_int);
	pthread_atfork(NULL, NULL, gmlake_trace_child_signals);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"

	"github.com/gmlake/gmlake/trace"
)

var (
	errTraceActive = errors.New("gmlake: a trace is already being written; stop it first (gmlake_trace_stop)")
	errNoTrace     = errors.New("gmlake: no trace is being written")

	// tracing is the process's active trace, as the exported functions read it.
	tracing = traceSlot{a: trace.Active{OnChildTrace: childTrace}}
)

type traceSlot struct{ a trace.Active }

// Load returns the active trace of this process, nil if none (in a forked child: its own, if the path has
// {pid}, else none).
func (s *traceSlot) Load() *tracer { return (*tracer)(s.a.Get()) }

// tracer is the recorder as the exported functions call it (plain C integers).
type tracer trace.Recorder

func (t *tracer) alloc(device int, stream uintptr, size uint64, ptr uintptr) {
	(*trace.Recorder)(t).Alloc(device, uint64(stream), size, uint64(ptr))
}

func (t *tracer) free(device int, ptr uintptr) { (*trace.Recorder)(t).Free(device, uint64(ptr)) }

func traceOptions() trace.RecordOptions {
	return trace.RecordOptions{Getenv: getenv, FlushOnSignals: true}
}

// startTrace starts the trace at path ({pid}, {rank} expanded).
func startTrace(path string) error {
	if path == "" {
		return errors.New("gmlake: trace path is empty")
	}
	C.gmlake_trace_save_signals()
	if _, err := tracing.a.Start(path, traceOptions()); err != nil {
		if errors.Is(err, trace.ErrActive) {
			return errTraceActive
		}
		return fmt.Errorf("gmlake: %w", err)
	}
	C.gmlake_trace_own()
	return nil
}

// childTrace hears of a forked child's own trace (a path with {pid}).
func childTrace(path string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "gmlake: GMLAKE_TRACE: the forked child %d writes no trace: %v\n", os.Getpid(), err)
		return
	}
	C.gmlake_trace_own()
}

// stopTrace closes the active trace: its end record says "exit" from the exit hook, "stop" otherwise.
func stopTrace() error {
	reason := "stop"
	if C.gmlake_trace_is_exiting() != 0 {
		reason = "exit"
	}
	if err := tracing.a.Stop(reason); err != nil {
		if errors.Is(err, trace.ErrNoTrace) {
			return errNoTrace
		}
		return fmt.Errorf("gmlake: %w", err)
	}
	return nil
}
