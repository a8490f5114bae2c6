package main

// The errors of the C ABI: every failure has a kind (gmlake.h's GMLAKE_ERR_*) that survives the boundary,
// so that a caller tells an out of memory (shrink the batch) from a bad setting, a missing device, a bad
// argument or a disabled engine; and each call sets or clears the calling thread's last error.

/*
#include <stddef.h>
#include <stdint.h>

void gmlake_set_thread_error(int kind, const char *msg, size_t n);
*/
import "C"

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gmlake/gmlake/impl/clib"
)

// Error kinds (gmlake.h's GMLAKE_ERR_*; 1-3 are the GMLAKE_FAIL_* of gmlake_last_failure).
const (
	errNone     = 0 // the last call succeeded
	errOOM      = 1 // out of memory (also a request larger than the device, or over the memory fraction)
	errInvalid  = 2 // a bad argument: device out of range, NULL output, unknown pointer, pool or stream, ...
	errOther    = 3 // a driver error
	errConfig   = 4 // a bad setting (GMLAKE_* environment variable): fix the setting
	errNoDevice = 5 // the device cannot be opened (no CUDA driver, no such GPU)
	errDisabled = 6 // the device's engine was disabled by an internal error earlier
	errInternal = 7 // an internal error (a recovered panic) in this call
)

// kindNames are the kinds as gmlake.h spells them, for messages.
var kindNames = [...]string{"GMLAKE_ERR_NONE", "GMLAKE_ERR_OOM", "GMLAKE_ERR_INVALID", "GMLAKE_ERR_OTHER",
	"GMLAKE_ERR_CONFIG", "GMLAKE_ERR_NO_DEVICE", "GMLAKE_ERR_DISABLED", "GMLAKE_ERR_INTERNAL"}

// kindError gives err a kind of the C ABI.
type kindError struct {
	kind int
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// withKind returns err with kind (nil stays nil).
func withKind(kind int, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind, err}
}

// invalidf is a bad-argument error.
func invalidf(format string, args ...any) error {
	return withKind(errInvalid, fmt.Errorf(format, args...))
}

// kindOf classifies err: its own kind if it has one, else what the engine's error says.
func kindOf(err error) int {
	var ke *kindError
	switch {
	case err == nil:
		return errNone
	case errors.As(err, &ke):
		return ke.kind
	case clib.IsOutOfMemory(err):
		return errOOM
	case clib.IsConfigError(err):
		return errConfig
	case clib.IsInvalidArgument(err):
		return errInvalid
	}
	return errOther
}

// panicsTotal counts the panics recovered in any call of this process (gmlake_stats_json's panics_total).
var panicsTotal atomic.Uint64

// setError records msg as the calling thread's last error, of kind, and as the device's (if known).
func setError(s *slot, kind int, msg string) {
	if s != nil {
		s.lastError.Store(&msg)
	}
	if msg == "" {
		msg = kindNames[kind]
	}
	b := []byte(msg)
	C.gmlake_set_thread_error(C.int(kind), (*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b)))
}

// fail records err (classified by kindOf) as the calling thread's last error.
func fail(s *slot, err error) { setError(s, kindOf(err), err.Error()) }
