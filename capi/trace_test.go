package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gmlake/gmlake/trace"
)

var (
	traceHostOnce sync.Once
	traceHostBin  string
	traceHostErr  error
)

// traceHost builds testdata/trace_host.c against libgmlake.so once and returns the program.
func traceHost(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on this machine")
	}
	dir := buildLib(t)
	traceHostOnce.Do(func() {
		traceHostBin = filepath.Join(dir, "trace_host")
		out, err := exec.Command(cc, "-O1", "-o", traceHostBin, filepath.Join("testdata", "trace_host.c"), "-I.", "-L"+dir,
			"-lgmlake", "-Wl,-rpath,"+dir).CombinedOutput()
		if err != nil {
			traceHostErr = fmt.Errorf("compiling trace_host.c: %v\n%s", err, out)
		}
	})
	if traceHostErr != nil {
		t.Fatal(traceHostErr)
	}
	return traceHostBin
}

// hostCmd is trace_host with args on the simulated device, writing GMLAKE_TRACE=path.
func hostCmd(t *testing.T, path string, args ...string) *exec.Cmd {
	cmd := exec.Command(traceHost(t), args...)
	cmd.Env = append(simEnv(), "GMLAKE_TRACE="+path)
	return cmd
}

// readTrace reads the trace at path to its end: its events, how it ended, and the error that ended it.
func readTrace(t *testing.T, path string) (events int, ended string, err error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	rd, err := trace.NewReader(f, path)
	if err != nil {
		return 0, "", err
	}
	for {
		_, ok, err := rd.Next()
		if err != nil || !ok {
			return rd.Events(), rd.Ended(), err
		}
	}
}

// startHost starts cmd and waits for its "ready"; stdout has the rest of what it prints.
func startHost(t *testing.T, cmd *exec.Cmd) (stdin io.WriteCloser, stderr *strings.Builder, stdout *bufio.Reader) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &strings.Builder{}
	cmd.Stderr = stderr
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := watchdog(cmd) // (the test's own Wait then returns the kill's error)
	t.Cleanup(func() {
		if stop() {
			t.Errorf("%v", &errHung{args: cmd.Args, err: fmt.Errorf("stderr: %s", stderr)})
		}
	})
	stdout = bufio.NewReader(out)
	if line, _ := stdout.ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("trace_host said %q\n%s", line, stderr)
	}
	return stdin, stderr, stdout
}

// diedBy reports whether err is the exit of a process killed by sig.
func diedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Property: a C host process killed by SIGTERM (how torchrun stops the other workers when one fails) leaves a
// complete trace of every event it made, ended by SIGTERM, and still dies by SIGTERM. Before the fix the
// gzip trace ended in "unexpected EOF" with every buffered event lost (here all 10,000).
func TestTraceSurvivesSIGTERM(t *testing.T) {
	for _, name := range []string{"run.trace.gz", "run.trace"} {
		path := filepath.Join(t.TempDir(), name)
		cmd := hostCmd(t, path, "signal", "5000")
		_, stderr, _ := startHost(t, cmd)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); !diedBy(err, syscall.SIGTERM) {
			t.Errorf("%s: trace_host ended with %v, want death by SIGTERM\n%s", name, err, stderr)
		}
		n, ended, err := readTrace(t, path)
		if err != nil || n != 10000 || ended != "SIGTERM" {
			t.Errorf("%s: %d events, ended %q, error %v; want all 10000 events ended by SIGTERM", name, n, ended, err)
		}
	}
}

// Property: SIGINT (Ctrl-C) writes the trace out and then reaches the host's own handler (Python installs
// one for SIGINT), which here dies by SIGINT: the library neither swallows the signal nor skips the handler.
func TestTraceSIGINTReachesTheHostHandler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "int.trace.gz")
	cmd := hostCmd(t, path, "signal", "3000", "handler")
	stdin, stderr, stdout := startHost(t, cmd)
	defer stdin.Close()
	cmd.Process.Signal(syscall.SIGINT)
	said, _ := io.ReadAll(stdout)
	err := cmd.Wait()
	if !diedBy(err, syscall.SIGINT) || !strings.Contains(string(said), "host handler ran") {
		t.Errorf("trace_host ended with %v, said %q; want its own handler to run and death by SIGINT\n%s", err, said, stderr)
	}
	n, ended, err := readTrace(t, path)
	if err != nil || n != 6000 || ended != "SIGINT" {
		t.Errorf("%d events, ended %q, error %v; want all 6000 events ended by SIGINT", n, ended, err)
	}
}

// forkHost runs trace_host's fork mode with the trace at path (the child calls every entry of gmlake.h) and
// returns what it printed; it fails the test unless every entry refused the child.
func forkHost(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, err := hostOutput(hostCmd(t, path, append([]string{"fork", "100"}, args...)...))
	entries := childEntries(t)
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("child refused %d entries", len(entries))) || strings.Contains(string(out), "FAIL") {
		t.Fatalf("trace_host fork: %v; want the child refused at all %d entries\n%s", err, len(entries), out)
	}
	return string(out)
}

// childEntries returns the entries trace_host's forked child calls (its refused("NAME", ...) lines).
func childEntries(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "trace_host.c"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`refused\("(gmlake_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	return names
}

// Property: the forked child's list is the whole ABI: every function gmlake.h declares but the error
// readers (which only read the calling thread's error state, in C) and gmlake_alloc_throw (gmlake_alloc
// for C++ callers) is called by trace_host's forked child, so an entry added later without the fork rule
// (GMLAKE_ENTER) fails TestForkedChildIsRefusedAtEveryEntry.
func TestForkedChildCallsEveryEntry(t *testing.T) {
	hdr, err := os.ReadFile("gmlake.h")
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	for _, n := range childEntries(t) {
		called[n] = true
	}
	readers := map[string]bool{"gmlake_last_error": true, "gmlake_last_error_kind": true, "gmlake_last_failure": true, "gmlake_alloc_throw": true}
	declared := regexp.MustCompile(`(?m)^[a-z][a-z0-9_ *]*[ *](gmlake_[a-z_]+)\(`).FindAllStringSubmatch(string(hdr), -1)
	if len(declared) < 25 {
		t.Fatalf("found %d functions in gmlake.h; the pattern no longer reads it", len(declared))
	}
	for _, m := range declared {
		if !readers[m[1]] && !called[m[1]] {
			t.Errorf("%s (gmlake.h) is not called by trace_host's forked child (capi/testdata/trace_host.c, child_entries)", m[1])
		}
	}
}

// Property: a child fork()ed from a process that loaded libgmlake is refused at every entry of gmlake.h, in
// C, before it reaches the Go runtime (whose threads the child does not have: entering it could hang, as it
// did in CI) or the host cache: each returns NULL or negative with GMLAKE_ERR_NO_DEVICE and a line naming
// fork() and spawn. The parent goes on, and its trace stays a legal, complete trace of its own events alone
// (the child's refused free of the parent's live block writes nothing). Before the fork rule a child's exit
// wrote the parent's buffer a second time ("id allocated twice"), and a child's allocation could hang.
func TestForkedChildIsRefusedAtEveryEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fork.trace")
	out := forkHost(t, path)
	if !strings.Contains(out, "exited 0") {
		t.Fatalf("want the child to exit 0\n%s", out)
	}
	n, ended, err := readTrace(t, path)
	if err != nil || n != 402 || ended != "exit" {
		t.Errorf("%d events, ended %q, error %v; want the parent's 402 events, ended at exit", n, ended, err)
	}
}

// Property: a forked child's signals are its own, as before the library watched them: SIGTERM kills it (the
// parent's flush-on-signal handler, inherited by fork, would hand the signal to a Go runtime whose threads the
// child does not have, and the child would live on), and the parent's trace stays whole.
func TestTraceForkedChildDiesBySIGTERM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fork.trace.gz")
	out := forkHost(t, path, "term")
	if !strings.Contains(out, "killed by signal 15") {
		t.Fatalf("want the child killed by signal 15 (SIGTERM)\n%s", out)
	}
	n, ended, err := readTrace(t, path)
	if err != nil || n != 402 || ended != "exit" {
		t.Errorf("%d events, ended %q, error %v; want the parent's 402 events, ended at exit", n, ended, err)
	}
}

// Property: with {pid} in the path the parent's trace is its own file, and a forked child, refused at every
// entry, opens none.
func TestTraceForkedChildWithPidOpensNone(t *testing.T) {
	dir := t.TempDir()
	forkHost(t, filepath.Join(dir, "p{pid}.trace.gz"))
	files, _ := filepath.Glob(filepath.Join(dir, "p*.trace.gz"))
	if len(files) != 1 {
		t.Fatalf("files %v, want the parent's alone", files)
	}
	n, ended, err := readTrace(t, files[0])
	if err != nil || n != 402 || ended != "exit" {
		t.Errorf("%s: %d events, ended %q, error %v; want 402 ended at exit", files[0], n, ended, err)
	}
}

// Property: two processes given one GMLAKE_TRACE (torchrun without {rank}): the second is refused with one
// line on stderr naming GMLAKE_TRACE, the first writer's pid and {rank}, and allocates on untraced; the
// first's trace holds its events alone. Before the fix the second truncated the first's file and said nothing.
func TestTraceTwoProcessesOnOnePathRefusedLoudly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.trace.gz")
	a := hostCmd(t, path, "hold", "100")
	aIn, aErr, _ := startHost(t, a)
	b := hostCmd(t, path, "hold", "50")
	bIn, bErr, _ := startHost(t, b)
	bIn.Close()
	if err := b.Wait(); err != nil {
		t.Fatalf("second: %v\n%s", err, bErr)
	}
	lines := strings.Split(strings.TrimSpace(bErr.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "gmlake: GMLAKE_TRACE: ") || strings.Count(lines[0], "gmlake:") != 1 || !strings.Contains(lines[0], "{rank}") ||
		!strings.Contains(lines[0], "process "+strconv.Itoa(a.Process.Pid)) {
		t.Errorf("the second process said %q; want one line naming GMLAKE_TRACE, pid %d and {rank}", bErr.String(), a.Process.Pid)
	}
	aIn.Close()
	if err := a.Wait(); err != nil {
		t.Fatalf("first: %v\n%s", err, aErr)
	}
	n, ended, err := readTrace(t, path)
	if err != nil || n != 200 || ended != "exit" {
		t.Errorf("%d events, ended %q, error %v; want the first process's 200, ended at exit", n, ended, err)
	}
}

// pySIGINT is a Python host of libgmlake: it traces N allocations and frees through ctypes, says "ready",
// sleeps until Ctrl-C (Python's own SIGINT handler raises KeyboardInterrupt), then makes one more pair and
// exits normally.
const pySIGINT = `
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
lib.gmlake_alloc.restype = ctypes.c_void_p
lib.gmlake_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
lib.gmlake_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
def pair(n):
    for i in range(n):
        lib.gmlake_free(lib.gmlake_alloc(4096 + i, 0, None), 0, 0, None)
pair(int(sys.argv[2]))
print("ready", flush=True)
try:
    time.sleep(60)
    print("no KeyboardInterrupt", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
pair(1)
`

// Property: in a Python process, Ctrl-C writes the trace out and still reaches Python's own handler: the
// program gets its KeyboardInterrupt, goes on (its later events are traced), and at its exit the trace is
// complete.
func TestTraceSIGINTInPythonRaisesKeyboardInterrupt(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this machine")
	}
	path := filepath.Join(t.TempDir(), "py.trace.gz")
	cmd := exec.Command(py, "-c", pySIGINT, filepath.Join(buildLib(t), "libgmlake.so"), "2000")
	cmd.Env = append(simEnv(), "GMLAKE_TRACE="+path)
	stdin, stderr, stdout := startHost(t, cmd)
	defer stdin.Close()
	cmd.Process.Signal(syscall.SIGINT)
	said, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil || string(said) != "KeyboardInterrupt\n" {
		t.Fatalf("python: %v, said %q; want KeyboardInterrupt and a normal exit\n%s", err, said, stderr)
	}
	n, ended, err := readTrace(t, path)
	if err != nil || n != 4002 || ended != "exit" {
		t.Errorf("%d events, ended %q, error %v; want 4002 events, ended at exit", n, ended, err)
	}
}
