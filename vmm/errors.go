package vmm

import (
	"fmt"
)

// Result is a CUDA driver result code (CUresult). Every value except Success is also an error, so a Result
// can be used as an errors.Is target: errors.Is(err, vmm.ErrOutOfMemory).
type Result int32

// The CUDA results this project meets, with the values of cuda.h.
const (
	Success          Result = 0
	InvalidValue     Result = 1
	OutOfMemory      Result = 2
	NotInitialized   Result = 3
	Deinitialized    Result = 4
	NoDevice         Result = 100
	InvalidDevice    Result = 101
	InvalidContext   Result = 201
	AlreadyMapped    Result = 208
	NotMapped        Result = 211
	InvalidHandle    Result = 400
	NotFound         Result = 500
	NotReady         Result = 600
	IllegalAddress   Result = 700
	NotPermitted     Result = 800
	NotSupported     Result = 801
	DriverNotLoaded  Result = 9998 // not a CUDA code: libcuda.so.1 could not be loaded (no driver on this machine)
	UnknownCUDAError Result = 999
)

// Sentinels for errors.Is. Each is the Result itself, so errors.Is(err, ErrOutOfMemory) is true for any
// error chain that contains a CallError with Result OutOfMemory, or OutOfMemory itself.
var (
	ErrInvalidValue    error = InvalidValue
	ErrOutOfMemory     error = OutOfMemory
	ErrNotInitialized  error = NotInitialized
	ErrNoDevice        error = NoDevice
	ErrInvalidDevice   error = InvalidDevice
	ErrInvalidContext  error = InvalidContext
	ErrNotMapped       error = NotMapped
	ErrInvalidHandle   error = InvalidHandle
	ErrNotFound        error = NotFound
	ErrNotReady        error = NotReady
	ErrIllegalAddress  error = IllegalAddress
	ErrNotPermitted    error = NotPermitted
	ErrNotSupported    error = NotSupported
	ErrDriverNotLoaded error = DriverNotLoaded
)

var resultNames = map[Result]string{
	Success:          "CUDA_SUCCESS",
	InvalidValue:     "CUDA_ERROR_INVALID_VALUE",
	OutOfMemory:      "CUDA_ERROR_OUT_OF_MEMORY",
	NotInitialized:   "CUDA_ERROR_NOT_INITIALIZED",
	Deinitialized:    "CUDA_ERROR_DEINITIALIZED",
	NoDevice:         "CUDA_ERROR_NO_DEVICE",
	InvalidDevice:    "CUDA_ERROR_INVALID_DEVICE",
	InvalidContext:   "CUDA_ERROR_INVALID_CONTEXT",
	AlreadyMapped:    "CUDA_ERROR_ALREADY_MAPPED",
	NotMapped:        "CUDA_ERROR_NOT_MAPPED",
	InvalidHandle:    "CUDA_ERROR_INVALID_HANDLE",
	NotFound:         "CUDA_ERROR_NOT_FOUND",
	NotReady:         "CUDA_ERROR_NOT_READY",
	IllegalAddress:   "CUDA_ERROR_ILLEGAL_ADDRESS",
	NotPermitted:     "CUDA_ERROR_NOT_PERMITTED",
	NotSupported:     "CUDA_ERROR_NOT_SUPPORTED",
	DriverNotLoaded:  "GMLAKE_DRIVER_NOT_LOADED",
	UnknownCUDAError: "CUDA_ERROR_UNKNOWN",
}

// Name returns the CUDA name of the result, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

// Error prints the CUDA name and code.
func (r Result) Error() string { return fmt.Sprintf("%s (%d)", r.Name(), int32(r)) }

// Err returns nil for Success and the Result as an error otherwise.
func (r Result) Err() error {
	if r == Success {
		return nil
	}
	return r
}

// CallError is a failed driver call: which call, on what, and the CUDA result. It unwraps to its Result.
type CallError struct {
	Call   CallKind // the driver call that failed
	Result Result   // what CUDA (or the simulated device) answered
	Detail string   // the arguments and the rule broken, for humans
}

// Error says which call failed, why, and with which CUDA result.
func (e *CallError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: %v", e.Call, e.Result)
	}
	return fmt.Sprintf("%s: %v: %s", e.Call, e.Result, e.Detail)
}

// Unwrap returns the Result, so errors.Is(err, vmm.ErrX) works.
func (e *CallError) Unwrap() error { return e.Result }

// Errorf builds a CallError with a formatted detail.
func Errorf(call CallKind, r Result, format string, args ...any) error {
	return &CallError{Call: call, Result: r, Detail: fmt.Sprintf(format, args...)}
}

// ResultOf returns the CUDA result carried by err: Success for nil, the Result of the first CallError or
// Result in the chain, UnknownCUDAError otherwise.
func ResultOf(err error) Result {
	if err == nil {
		return Success
	}
	for e := err; e != nil; {
		switch v := e.(type) {
		case Result:
			return v
		case *CallError:
			return v.Result
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return UnknownCUDAError
}
