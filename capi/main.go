// Command capi is libgmlake.so: the gmlake allocator as a C shared library with the ABI of PyTorch's
// torch.cuda.memory.CUDAPluggableAllocator (see gmlake.h for the C functions and the environment variables).
// Build it with `make capi`; python/gmlake_torch loads it into PyTorch.
//
// Layers: abi.c holds the C functions (void*, cudaStream_t) and casts to the integer-typed Go exports below
// (gmlakeGo*); throw.cc adds gmlake_alloc_throw for C++ callers; this package keeps one engine per device
// (clib.Engine, created lazily from the environment on the first allocation), per-device counters, the
// last error, and the allocation trace (trace.go). It imports impl/clib, and impl/cudavmm and model/sim
// to open the device (driver.go); never an oracle or test machinery.
//
// Failure rules: every export validates its arguments and fails with a documented error (gmlake.h) before
// it touches an engine; the library writes at most the count a caller gives and never makes a Go slice of a
// caller's count (abi.c's gmlake_copy_out, torch.go's copyPtrs); it exports only gmlake.h's functions (the
// C helpers are hidden: abi_internal.h). Every call sets the calling thread's last error and its kind
// (gmlake_last_error, gmlake_last_error_kind: GMLAKE_ERR_*, abi_errors.go) when it fails and clears them when
// it succeeds, so no error changes its kind across the boundary: an out of memory is GMLAKE_ERR_OOM and
// nothing else is. A Go panic never crosses into C (every export recovers, reports on stderr and in the last
// error, kind GMLAKE_ERR_INTERNAL, and fails the call); after a panic inside an engine, that engine is
// disabled (its locks may be held), so later allocations on the device fail (GMLAKE_ERR_DISABLED) and frees
// are ignored, and gmlake_close fails and says how many allocations it abandons (it never reports them
// released). Test hooks (GMLAKE_TEST_PANIC_SIZE) exist only in a library built with -tags gmlake_testhooks.
package main

/*
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "gmlake.h"
#include "hostcache.h"

int gmlake_copy_out(const char *s, size_t n, char *buf, size_t len);
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/vmm"
)

func main() {}

// maxDevices bounds the device ordinals the library serves (CUDA machines have at most a few dozen).
const maxDevices = 64

// slot is the state of one device. Created once, under createMu; read without a lock after.
type slot struct {
	device int
	eng    *clib.Engine
	drv    vmm.Driver // the device eng runs on (eng owns it); read for the leak report after Close

	// disabled holds the reason the engine may no longer be used (a panic inside it); nil while healthy.
	disabled atomic.Pointer[string]

	allocFailures atomic.Uint64 // allocations of nonzero size that returned NULL
	badFrees      atomic.Uint64 // frees of unknown, interior or already freed pointers
	panics        atomic.Uint64 // panics recovered in calls on this device
	lastError     atomic.Pointer[string]

	// live counts the allocations this library handed out and not yet freed on this engine, kept apart
	// from the engine so that gmlake_close can say what it abandons when the engine is disabled.
	live atomic.Int64
	// hostHits and hostFrees count the host cache's hits and cached frees the engine replayed (hostcache.c).
	hostHits, hostFrees atomic.Uint64
	// hostOps is the buffer gmlakeGoHostReplay converts the host cache's log into, reused from one replay to
	// the next; only a replay touches it, and replays of one device run under hostcache.c's mutex of that device.
	hostOps []clib.HostOp
	// inCallback counts the event callbacks running for this engine: gmlake_close refuses to close an
	// engine under its own callback (the call that fired it would go on in a dead engine).
	inCallback atomic.Int32
	// capturing holds the streams that began a capture (gmlake_set_capturing) and have not ended it.
	captureMu sync.Mutex
	capturing map[uintptr]bool
}

var (
	// slots[d] is device d's slot once its engine started; read lock-free on the hot path. gmlake_close
	// empties it at any time (under createMu): a call loads it once and uses only that copy.
	slots [maxDevices]atomic.Pointer[slot]

	createMu sync.Mutex // serialises engine creation and gmlake_close

	badFreeReports atomic.Int64 // bad frees reported on stderr so far (the first few are)
)

const maxBadFreeReports = 10

// copyOut writes s into a C buffer the snprintf way.
func copyOut(s string, buf *C.char, n C.size_t) C.int {
	if len(s) == 0 {
		return C.gmlake_copy_out(nil, 0, buf, n)
	}
	b := []byte(s)
	return C.gmlake_copy_out((*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b)), buf, n)
}

// recovered turns a panic into an error report; the caller's result stays the failure value.
func recovered(s *slot, call string, r any) {
	what := "the engine of this device is now disabled"
	if s == nil {
		what = "no engine was disabled" // a call that had not reached a device's engine
	}
	msg := fmt.Sprintf("gmlake: internal error in %s: %v (%s; please report this with the stack on stderr)", call, r, what)
	fmt.Fprintf(os.Stderr, "%s\n%s\n", msg, debug.Stack())
	panicsTotal.Add(1)
	if s != nil {
		s.panics.Add(1)
		s.disabled.CompareAndSwap(nil, &msg)
	}
	setError(s, errInternal, msg)
}

// getenv reads the live environment (the C one: Go's copy is taken when the library loads, before a host
// such as Python may have set variables).
func getenv(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.getenv(cs)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}

// engineConfig builds device's engine configuration from the environment, through the one parser of the
// settings (clib.ParseEnv over the settings table, which gmlake_check_settings runs too): the device kind
// (GMLAKE_DEVICE) and the simulated device's capacity (GMLAKE_SIM_CAPACITY) are for openDriver; the rest
// configures the engine, GMLAKE_MEMORY_FRACTION included (cfg.MemoryFraction: clib.New takes the stricter of
// it and GMLAKE_MEMORY_LIMIT and says which won, once, on stderr). A GMLAKE_ variable the table does not
// know is said once on stderr and ignored.
func engineConfig(device int) (cfg clib.Config, kind string, simCapacity uint64, err error) {
	env, err := clib.ParseEnv(liveEnviron(), settingChecks)
	if err != nil {
		return cfg, "", 0, err
	}
	cfg = env.Engine
	cfg.Device = device
	cfg.Note = func(msg string) { noteOnce.Do(func() { fmt.Fprintln(os.Stderr, msg) }) }
	warnUnknownOnce.Do(func() {
		for _, name := range env.Unknown {
			fmt.Fprintf(os.Stderr, "gmlake: ignoring unknown environment variable %s (the settings: docs/pytorch.md, "+
				"gmlake_settings_json; knobs: %v)\n", name, clib.KnobNames())
		}
	})
	return cfg, env.Device, env.SimCapacity, nil
}

var warnUnknownOnce, noteOnce sync.Once

// configErrorPrefix starts the text of every configuration error (throw.cc tells them from out of memory
// by it).
const configErrorPrefix = "gmlake: configuration error"

// configReported holds the configuration errors already said on stderr, so each is said once. Under createMu.
var configReported = map[string]bool{}

// configError says a configuration error once on stderr and returns it as the error of the engine's start.
// Called with createMu held.
func configError(device int, err error) error {
	msg := fmt.Sprintf("%s on device %d: %v (every allocation on this device fails until it is fixed)", configErrorPrefix, device, err)
	if !configReported[msg] {
		configReported[msg] = true
		fmt.Fprintln(os.Stderr, msg)
	}
	return errors.New(msg)
}

// slotFor returns device's slot, starting its engine on first use. Its errors carry their kind (kindOf):
// a bad device is GMLAKE_ERR_INVALID, a bad setting GMLAKE_ERR_CONFIG, a device that cannot be opened
// GMLAKE_ERR_NO_DEVICE.
func slotFor(device int) (*slot, error) {
	if device < 0 || device >= maxDevices {
		return nil, invalidf("gmlake: device %d out of range [0, %d)", device, maxDevices)
	}
	if s := slots[device].Load(); s != nil {
		return s, nil
	}
	createMu.Lock()
	defer createMu.Unlock()
	if s := slots[device].Load(); s != nil {
		return s, nil
	}
	cfg, kind, simCapacity, err := engineConfig(device)
	if err != nil {
		return nil, withKind(errConfig, configError(device, err))
	}
	loadTestHooks()
	drv, err := openDriver(kind, device, simCapacity, &cfg)
	if err != nil {
		return nil, withKind(errNoDevice, fmt.Errorf("%w (set GMLAKE_DEVICE=sim to run on the simulated device)", err))
	}
	eng, err := clib.New(drv, cfg)
	switch {
	case err != nil && clib.IsUnknownPolicy(err):
		return nil, withKind(errConfig, configError(device, fmt.Errorf("GMLAKE_POLICY=%q: %w", cfg.Policy, err)))
	case err != nil && clib.IsConfigError(err):
		return nil, withKind(errConfig, configError(device, err))
	case err != nil:
		return nil, withKind(errNoDevice, err)
	}
	s := &slot{device: device, eng: eng, drv: drv}
	applyEvents(s)
	slots[device].Store(s)
	if settingOn("GMLAKE_VERBOSE") {
		fmt.Fprintf(os.Stderr, "gmlake: device %d: engine started: driver %s, policy %s, knobs %v, memory limit %d bytes\n",
			device, cfg.Driver, eng.Policy(), cfg.Knobs, eng.MemoryLimit())
	}
	if p := getenv("GMLAKE_TRACE"); p != "" {
		if err := startTrace(p); err != nil && err != errTraceActive {
			fmt.Fprintf(os.Stderr, "gmlake: GMLAKE_TRACE: %s\n", strings.TrimPrefix(err.Error(), "gmlake: "))
		}
	}
	return s, nil
}

// usable returns an error (GMLAKE_ERR_DISABLED) if the slot's engine was disabled by a panic.
func (s *slot) usable() error {
	if why := s.disabled.Load(); why != nil {
		return withKind(errDisabled, fmt.Errorf("gmlake: the engine of device %d is disabled after an internal error "+
			"(restart the process; gmlake_close(%d) abandons its memory): %s", s.device, s.device, *why))
	}
	return nil
}

//export gmlakeGoAlloc
func gmlakeGoAlloc(size C.size_t, device C.int, stream C.uintptr_t) (ret C.uintptr_t) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = 0
			recovered(s, "gmlake_alloc", r)
		}
	}()
	if size == 0 {
		return 0
	}
	s, err := slotFor(int(device))
	if err == nil {
		err = s.usable()
	}
	if err != nil {
		if s != nil {
			s.allocFailures.Add(1)
		}
		setFailure(s, uint64(size), err)
		setError(s, kindOf(err), fmt.Sprintf("gmlake_alloc(%d bytes, device %d): %v", uint64(size), int(device), err))
		return 0
	}
	testHookAlloc(uint64(size))
	p, err := s.eng.Alloc(uint64(size), uintptr(stream))
	if err != nil {
		allocFailed(s, uint64(size), int(device), uintptr(stream), err)
		return 0
	}
	s.live.Add(1)
	if t := tracing.Load(); t != nil {
		t.alloc(int(device), uintptr(stream), uint64(size), p)
	}
	return C.uintptr_t(p)
}

// allocFailed records a failed allocation of size bytes on s (device, stream): its figures for
// gmlake_last_failure, the failure count, and the calling thread's error.
func allocFailed(s *slot, size uint64, device int, stream uintptr, err error) {
	setFailure(s, size, err)
	s.allocFailures.Add(1)
	setError(s, kindOf(err), fmt.Sprintf("gmlake_alloc(%d bytes, device %d, stream %#x): %v", size, device, stream, err))
}

//export gmlakeGoFree
func gmlakeGoFree(ptr C.uintptr_t, device C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			recovered(s, "gmlake_free", r)
		}
	}()
	if ptr == 0 {
		return
	}
	var err error
	if device >= 0 && device < maxDevices {
		s = slots[device].Load() // once: gmlake_close may empty the slot at any time
	}
	switch {
	case device < 0 || device >= maxDevices:
		err = invalidf("device %d out of range [0, %d)", int(device), maxDevices)
	case s == nil:
		err = invalidf("no engine runs on device %d (no gmlake_alloc on it since the start or the last gmlake_close)", int(device))
	case s.usable() != nil:
		// Leak rather than touch a broken engine.
		setError(s, errDisabled, fmt.Sprintf("gmlake_free(%#x, device %d): %v (ignored)", uintptr(ptr), int(device), s.usable()))
		return
	default:
		if t := tracing.Load(); t != nil {
			t.free(int(device), uintptr(ptr))
		}
		if err = s.eng.Free(uintptr(ptr)); err == nil {
			s.live.Add(-1)
		}
	}
	if err != nil {
		if s != nil {
			s.badFrees.Add(1)
		}
		msg := fmt.Sprintf("gmlake_free(%#x, device %d): %v", uintptr(ptr), int(device), err)
		setError(s, kindOf(err), msg)
		if badFreeReports.Add(1) <= maxBadFreeReports {
			fmt.Fprintf(os.Stderr, "%s (ignored)\n", msg)
		}
	}
}

//export gmlakeGoInit
func gmlakeGoInit(deviceCount C.int) {}

//export gmlakeGoStart
func gmlakeGoStart(device C.int) (ret C.int) {
	var s *slot
	defer guard(&s, "gmlake_start", &ret)
	s, err := poolSlot("gmlake_start", device)
	if err != nil {
		fail(s, err)
		return -1
	}
	return 0
}

//export gmlakeGoEmptyCache
func gmlakeGoEmptyCache() (ret C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_empty_cache", r)
		}
	}()
	for d := range slots {
		if s = slots[d].Load(); s != nil && s.usable() == nil {
			if err := s.eng.EmptyCache(); err != nil {
				setError(s, kindOf(err), fmt.Sprintf("gmlake_empty_cache(device %d): %v", d, err))
				ret = -1
			}
		}
	}
	return ret
}

// checkFraction validates a memory fraction as torch.cuda.set_per_process_memory_fraction does: a number
// in [0, 1] (0: a cap of 0 bytes; 1: no cap).
func checkFraction(call string, f float64, device C.int) error {
	if !(f >= 0 && f <= 1) {
		return invalidf("%s(%g, device %d): the fraction must be a number in [0, 1] (0: no new memory; 1: no cap)", call, f, int(device))
	}
	return nil
}

//export gmlakeGoSetMemoryFraction
func gmlakeGoSetMemoryFraction(fraction C.double, device C.int) (ret C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_set_memory_fraction", r)
		}
	}()
	f := float64(fraction)
	if err := checkFraction("gmlake_set_memory_fraction", f, device); err != nil {
		fail(nil, err)
		return -1
	}
	// The device's engine starts here if it has not (a device that does not exist is refused now, not at
	// the first allocation).
	s, err := poolSlot("gmlake_set_memory_fraction", device)
	if err == nil {
		if err = s.eng.SetMemoryFraction(f); err != nil {
			err = withKind(errInvalid, fmt.Errorf("gmlake_set_memory_fraction(%g, device %d): %w", f, int(device), err))
		}
	}
	if err != nil {
		fail(s, err)
		return -1
	}
	return 0
}

//export gmlakeGoRecordStream
func gmlakeGoRecordStream(ptr C.uintptr_t, stream C.uintptr_t) (ret C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_record_stream", r)
		}
	}()
	if ptr == 0 {
		return 0 // an empty tensor's block, as PyTorch's recordStream
	}
	var err error = invalidf("no engine holds this pointer")
	for d := range slots {
		if s = slots[d].Load(); s == nil || s.usable() != nil {
			continue
		}
		if err = s.eng.RecordStream(uintptr(ptr), uintptr(stream)); err == nil || !clib.IsUnknownPointer(err) {
			break
		}
	}
	if err != nil {
		setError(s, kindOf(err), fmt.Sprintf("gmlake_record_stream(%#x, stream %#x): %v", uintptr(ptr), uintptr(stream), err))
		return -1
	}
	return 0
}

//export gmlakeGoClose
func gmlakeGoClose(device C.int) (ret C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_close", r)
		}
	}()
	if device < 0 || device >= maxDevices {
		fail(nil, invalidf("gmlake_close(%d): device out of range [0, %d)", int(device), maxDevices))
		return -1
	}
	createMu.Lock()
	defer createMu.Unlock()
	if s = slots[device].Load(); s == nil {
		return 0
	}
	if s.inCallback.Load() > 0 {
		fail(s, invalidf("gmlake_close(%d): called while an event callback of device %d runs; close after the "+
			"call that fired it returns (nothing was closed)", int(device), int(device)))
		return -1
	}
	slots[device].Store(nil)
	if err := s.usable(); err != nil {
		// A broken engine is abandoned, not closed (its locks may be held): say what is lost.
		fail(s, withKind(errDisabled, fmt.Errorf("gmlake_close(%d): %d allocations were live and are abandoned with "+
			"the engine's memory, not released: %w", int(device), s.live.Load(), err)))
		return -1
	}
	live, _, err := s.eng.Close()
	if err == nil {
		if leaks := simLeaks(s.drv); leaks != "" {
			err = fmt.Errorf("the simulated device still holds memory after Close: %s", leaks)
		}
	}
	if err != nil {
		setError(s, kindOf(err), fmt.Sprintf("gmlake_close(device %d): %v", int(device), err))
		return -1
	}
	return C.int(live)
}

//export gmlakeGoStatsJSON
func gmlakeGoStatsJSON(device C.int, buf *C.char, n C.size_t) (ret C.int) {
	var s *slot
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(s, "gmlake_stats_json", r)
		}
	}()
	if device < 0 || device >= maxDevices {
		fail(nil, invalidf("gmlake_stats_json(%d): device out of range [0, %d)", int(device), maxDevices))
		return -1
	}
	s = slots[device].Load()
	if s == nil {
		return copyOut(fmt.Sprintf(`{"device":%d,"initialized":false,"panics_total":%d}`, int(device), panicsTotal.Load()), buf, n)
	}
	if err := s.usable(); err != nil {
		// The slot's own counters go on (what the disabled engine refused counts); the engine's are not read.
		return copyOut(fmt.Sprintf(`{"device":%d,"initialized":true,"disabled":true,"panics":%d,"panics_total":%d,`+
			`"alloc_failures":%d,"bad_frees":%d,"live_allocations":%d,"error":%q}`,
			int(device), s.panics.Load(), panicsTotal.Load(), s.allocFailures.Load(), s.badFrees.Load(), s.live.Load(),
			err.Error()), buf, n)
	}
	extra := map[string]any{
		"alloc_failures": s.allocFailures.Load(), "bad_frees": s.badFrees.Load(), "panics": s.panics.Load(),
		"panics_total": panicsTotal.Load(), "disabled": false, "tracing": tracing.Load() != nil,
		"live_allocations": s.live.Load(), "test_hooks": testHooksBuilt,
		"host_cache_hits": s.hostHits.Load(), "host_cache_frees": s.hostFrees.Load(),
	}
	var hc C.gmlake_hc_state
	C.gmlake_hc_info(device, &hc)
	// The host cache's own state (hostcache.c's invariants, judged by FuzzABI): live counts its table's entries
	// (live_scanned: a scan's count, equal), none past the device's live allocations; the entry's own
	// flush leaves no cached free and no log; findable 1: every entry lies where its probe run finds it.
	extra["host_cache_live"], extra["host_cache_live_scanned"] = uint64(hc.n), uint64(hc.scanned)
	extra["host_cache_slots"], extra["host_cache_freed"] = uint64(hc.slots), uint64(hc.freed)
	extra["host_cache_log"], extra["host_cache_findable"] = uint64(hc.log), uint64(hc.findable)
	if e := s.lastError.Load(); e != nil {
		extra["last_error"] = *e
	}
	return copyOut(string(s.eng.StatsJSON(extra)), buf, n)
}

//export gmlakeGoKnobs
func gmlakeGoKnobs(buf *C.char, n C.size_t) C.int {
	return copyOut(strings.Join(clib.KnobNames(), ","), buf, n)
}

//export gmlakeGoTraceStart
func gmlakeGoTraceStart(path *C.char) (ret C.int) {
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(nil, "gmlake_trace_start", r)
		}
	}()
	if path == nil {
		fail(nil, invalidf("gmlake_trace_start: path is NULL"))
		return -1
	}
	if err := startTrace(C.GoString(path)); err != nil {
		fail(nil, fmt.Errorf("gmlake_trace_start: %w", err))
		return -1
	}
	return 0
}

//export gmlakeGoTraceStop
func gmlakeGoTraceStop() (ret C.int) {
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(nil, "gmlake_trace_stop", r)
		}
	}()
	if err := stopTrace(); err != nil {
		fail(nil, fmt.Errorf("gmlake_trace_stop: %w", err))
		return -1
	}
	return 0
}

//export gmlakeGoAtExit
func gmlakeGoAtExit() {
	defer func() { _ = recover() }()
	if err := stopTrace(); err != nil && err != errNoTrace {
		fmt.Fprintf(os.Stderr, "gmlake: closing the trace at exit: %v\n", err)
	}
}
