//go:build gmlake_testhooks

package main

// The C ABI's threaded C and C++ test programs, compiled into the test binary under the test-hooks tag, so
// that `go test -race -tags gmlake_testhooks ./capi` watches their threads' calls into the library with the
// race detector: a libgmlake.so built with -race cannot be loaded by a C program (ThreadSanitizer cannot map
// its shadow memory there), but a Go test binary is a host it can watch. TestHostProgramsUnderRace
// re-executes the test binary once per program (CAPI_HOST_PROGRAM), so that each runs in a fresh process as
// it does on its own.

/*
#include <stdio.h>
#include <stdlib.h>
extern int gm_close_race_main(int argc, char **argv);
extern int gm_abi_test_main(int argc, char **argv);
extern int gm_torch_abi_test_main(int argc, char **argv);
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// hostPrograms are the programs a test may run in this binary, by name.
var hostPrograms = map[string]func(argc C.int, argv **C.char) C.int{
	"close_race":     func(c C.int, v **C.char) C.int { return C.gm_close_race_main(c, v) },
	"abi_test":       func(c C.int, v **C.char) C.int { return C.gm_abi_test_main(c, v) },
	"torch_abi_test": func(c C.int, v **C.char) C.int { return C.gm_torch_abi_test_main(c, v) },
}

// runHostProgram runs the named program with args (args[0] its name) and returns its exit status.
func runHostProgram(name string, args []string) int {
	prog, ok := hostPrograms[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "CAPI_HOST_PROGRAM=%q: no such program (want close_race, abi_test or torch_abi_test)\n", name)
		return 2
	}
	argv := C.malloc(C.size_t(len(args)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(argv)
	vs := unsafe.Slice((**C.char)(argv), len(args)+1)
	for i, a := range args {
		vs[i] = C.CString(a)
		defer C.free(unsafe.Pointer(vs[i]))
	}
	vs[len(args)] = nil
	code := int(prog(C.int(len(args)), (**C.char)(argv)))
	C.fflush(nil) // the program's stdout is a pipe: buffered, and os.Exit does not flush C's streams
	return code
}
