package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// abiFuzzSeed and abiFuzzGenerated make the inputs FuzzABI adds to its committed corpus (testdata/fuzz/FuzzABI)
// in every `go test` run: abiFuzzGenerated sequences from math/rand seeded abiFuzzSeed+i, a fixed budget by
// count (a few seconds on 2 cores); GMLAKE_PROFILE=long multiplies it. `go test -fuzz FuzzABI` (make verify)
// mutates them for as long as it is given.
const (
	abiFuzzSeed      = 3600
	abiFuzzGenerated = 160
	abiFuzzLen       = 600 // bytes of a generated input (about 200 calls)
)

// abiHarness is one running abi_fuzz --serve (testdata/abi_fuzz.cc) over the shipped library.
type abiHarness struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *strings.Builder
}

var (
	abiMu   sync.Mutex
	abiBin  string
	abiProc *abiHarness
)

// abiEnv is the harness's environment: two simulated devices of 1 GiB, nothing else of gmlake's set.
func abiEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GMLAKE_") {
			env = append(env, kv)
		}
	}
	return append(env, "GMLAKE_DEVICE=sim", "GMLAKE_SIM_CAPACITY=1GiB")
}

func (h *abiHarness) start() error {
	h.cmd = exec.Command(abiBin, "--serve")
	h.cmd.WaitDelay = pipeGrace
	h.cmd.Env = abiEnv()
	h.stderr = &strings.Builder{}
	h.cmd.Stderr = h.stderr
	var err error
	if h.in, err = h.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	h.out = bufio.NewReader(stdout)
	return h.cmd.Start()
}

// run sends one input and returns the harness's report and whether it passed. A failed run ends the
// process (its state is suspect); the next input starts a new one.
func (h *abiHarness) run(data []byte) (report string, pass bool) {
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(data)))
	if _, err := h.in.Write(append(hdr[:], data...)); err != nil {
		return fmt.Sprintf("writing to the harness: %v (it died; stderr:\n%s)", err, h.stderr.String()), false
	}
	var b strings.Builder
	stop := watchdog(h.cmd) // one input's deadline: a deadlocked harness is a failing input, not a hung test
	defer stop()
	for {
		line, err := h.out.ReadString('\n')
		if err != nil {
			h.cmd.Wait()
			why := fmt.Sprintf("the harness died (%v, %v)", err, h.cmd.ProcessState)
			if stop() {
				why = (&errHung{args: h.cmd.Args, err: err}).Error()
			}
			return fmt.Sprintf("%s%s; stderr:\n%.4000s", b.String(), why, h.stderr.String()), false
		}
		if line == "END\n" {
			break
		}
		b.WriteString(line)
	}
	report = b.String()
	return report, strings.HasPrefix(report, "ok ")
}

func (h *abiHarness) stop() {
	h.in.Close()
	h.cmd.Wait()
}

// abiRun runs data through the harness (started on first use, again after a failure).
func abiRun(t *testing.T, data []byte) (string, bool) {
	abiMu.Lock()
	defer abiMu.Unlock()
	if abiProc == nil {
		abiProc = &abiHarness{}
		if err := abiProc.start(); err != nil {
			abiProc = nil
			t.Fatalf("starting %s: %v", abiBin, err)
		}
	}
	report, pass := abiProc.run(data)
	if !pass {
		abiProc.stop()
		abiProc = nil
	}
	return report, pass
}

// abiGenerated is the i-th generated input.
func abiGenerated(i int) []byte {
	r := rand.New(rand.NewSource(abiFuzzSeed + int64(i)))
	b := make([]byte, abiFuzzLen)
	r.Read(b)
	return b
}

// Property (issue 36 item 1): no sequence of calls of the C ABI, whatever its arguments, disables an engine,
// panics inside the library, or leaves the statistics or close's report untrue. abi_fuzz.cc turns the input
// into calls of every function of gmlake.h (both ABIs) with hostile arguments and judges after each call:
// the call's own answer and last error (kind, text, per-call clearing), guard bytes past every buffer, no
// panic (panics_total), the engine still serving, PyTorch's and gmlake's statistics against the harness's
// ledger of live allocations, segment events against reserved bytes (each delivered by the call that caused
// it), and gmlake_close's live count. Runs on the shipped library (no test hooks).
func FuzzABI(f *testing.F) {
	dir := buildLib(f)
	bin := compileC(f, "abi_fuzz.cc", dir)
	abiMu.Lock()
	abiBin = bin
	abiMu.Unlock()
	f.Cleanup(func() {
		abiMu.Lock()
		defer abiMu.Unlock()
		if abiProc != nil {
			abiProc.stop()
			abiProc = nil
		}
	})
	n := abiFuzzGenerated
	if os.Getenv("GMLAKE_PROFILE") == "long" {
		n *= 25
	}
	for i := 0; i < n; i++ {
		f.Add(abiGenerated(i))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		report, pass := abiRun(t, data)
		if pass {
			return
		}
		how := fmt.Sprintf("go test -count=1 -run '^FuzzABI$/^%s$' ./capi", regexp.QuoteMeta(strings.TrimPrefix(t.Name(), "FuzzABI/")))
		if m := regexp.MustCompile(`^FuzzABI/seed#(\d+)$`).FindStringSubmatch(t.Name()); m != nil {
			how += fmt.Sprintf(" (generated: math/rand seed %d+%s, %d bytes)", abiFuzzSeed, m[1], abiFuzzLen)
		}
		t.Fatalf("%s\ninput (%d bytes): %s\nreproduce: %s\n  or by hand: write the input's bytes to FILE, then "+
			"GMLAKE_DEVICE=sim GMLAKE_SIM_CAPACITY=1GiB %s FILE (library in %s)",
			report, len(data), hex.EncodeToString(data), how, bin, dir)
	})
}

// Property: the fuzz harness calls every function gmlake.h declares, so a new function of either ABI is
// fuzzed from the day it is added (FuzzABI's generic check finds the instances nobody listed only if it
// calls them).
func TestABIFuzzCallsEveryFunction(t *testing.T) {
	h, err := os.ReadFile("gmlake.h")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "abi_fuzz.cc"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^[a-z_ ]+[ *](gmlake_[a-z_]+)\(`)
	var names, missing []string
	for _, m := range decl.FindAllStringSubmatch(string(h), -1) {
		names = append(names, m[1])
		if !regexp.MustCompile(`\b` + m[1] + `\(`).Match(src) {
			missing = append(missing, m[1])
		}
	}
	sort.Strings(missing)
	if len(names) < 25 {
		t.Fatalf("found only %d functions in gmlake.h (%v): the declaration pattern is stale", len(names), names)
	}
	if len(missing) > 0 {
		t.Fatalf("testdata/abi_fuzz.cc never calls %v of gmlake.h: add them to its step()", missing)
	}
}
