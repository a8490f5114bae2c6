package trace

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Property: many goroutines allocating and freeing through one Recorder at once (blocks written by count and
// by the timer meanwhile) leave a legal, complete trace holding every event once, each goroutine's in its
// order. Run it under -race.
func TestRecorderConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conc.trace.gz")
	r, err := Record(path, RecordOptions{FlushEvents: 100, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const workers, pairs = 8, 1500
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < pairs; i++ {
				ptr := uint64(w)<<32 | uint64(i)
				r.Alloc(w%2, uint64(w), uint64(i+1), ptr)
				if i%50 == 0 {
					r.Flush()
				}
				r.Free(w%2, ptr)
			}
		}()
	}
	wg.Wait()
	if err := r.Close("close"); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 2*workers*pairs || tr.Streams != workers {
		t.Fatalf("%d events on %d streams, want %d on %d", len(tr.Events), tr.Streams, 2*workers*pairs, workers)
	}
	// Each stream is one goroutine's: its sizes come in the order it allocated them.
	next := map[int]uint64{}
	for _, e := range tr.Events {
		if e.Op == OpAlloc {
			if e.Size != next[e.Stream]+1 {
				t.Fatalf("stream %d: allocation of %d after %d", e.Stream, e.Size, next[e.Stream])
			}
			next[e.Stream] = e.Size
		}
	}
}

// Property: an event waits at most FlushInterval before it is written: without reaching FlushEvents or a
// Close, a reader of the file soon sees it (polled for up to 60 s: nothing here depends on the machine's
// speed but how soon the test ends).
func TestRecorderWritesWithinItsInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tick.trace")
	r, err := Record(path, RecordOptions{FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close("close")
	r.Alloc(0, 0, 4096, 1)
	r.Free(0, 1)
	r.Free(0, 2) // not allocated while recording: skipped
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tr, err := ReadFile(path)
		if tr != nil && len(tr.Events) == 2 && errors.Is(err, ErrCut) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the file reads as %v, %v; want the 2 events, not yet closed", tr, err)
		}
	}
}

// Property: Flush writes every event recorded before it at once: a reader of the file sees them while the
// recorder is open, with neither the block's count nor its interval reached. (Flush is the package's API for
// a Go program that records; libgmlake flushes on count, time, signal and close instead. blind-s27's dropped
// Commit survived every checker.)
func TestFlushWritesEveryEventBeforeIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flush.trace")
	r, err := Record(path, RecordOptions{FlushEvents: MaxBlockEvents, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close("close")
	r.Alloc(0, 0, 4096, 1)
	r.Alloc(0, 3, 512, 2)
	r.Free(0, 1)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadFile(path)
	if tr == nil || len(tr.Events) != 3 || !errors.Is(err, ErrCut) {
		t.Fatalf("after Flush the file reads as %v, %v; want the 3 events, not yet closed", tr, err)
	}
	if e := tr.Events[1]; e.Op != OpAlloc || e.Size != 512 || e.Stream != 1 {
		t.Errorf("second event %+v, want the 512 B allocation on the second stream", e)
	}
}

// {rank} comes from RANK, else LOCAL_RANK (as torchrun sets them), else 0; {pid} is the process's.
func TestExpandPathSubstitutesRankAndPid(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	pid := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RANK": "3", "LOCAL_RANK": "1"}, "t.3." + pid + ".gz"},
		{map[string]string{"LOCAL_RANK": "1"}, "t.1." + pid + ".gz"},
		{nil, "t.0." + pid + ".gz"},
	} {
		if got := ExpandPath("t.{rank}.{pid}.gz", env(c.env)); got != c.want {
			t.Errorf("%v: %q, want %q", c.env, got, c.want)
		}
	}
}

// helperEnv marks a re-execution of this test binary as a recorder child (see TestMain's helper).
const helperEnv = "GMLAKE_TRACE_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Getenv("GMLAKE_TRACE_TEST_PATH")))
	}
	os.Exit(m.Run())
}

// helper is a child process using the recorder: it records 3000 allocations and frees (fewer than one
// block, so that only a flush on the signal writes them), says "ready", and waits: for stdin to close
// ("hold"), or forever ("signal").
func helper(mode, path string) int {
	r, err := Record(path, RecordOptions{FlushOnSignals: true, FlushInterval: time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Println("refused")
		return 3
	}
	for i := uint64(1); i <= 1500; i++ {
		r.Alloc(0, 0, i, i)
		r.Free(0, i)
	}
	fmt.Println("ready")
	if mode == "hold" {
		bufio.NewReader(os.Stdin).ReadString('\n')
		if err := r.Close("exit"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	select {}
}

// startHelper starts a recorder child on path and waits for its first line.
func startHelper(t *testing.T, mode, path string) (*exec.Cmd, string, *strings.Builder, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GMLAKE_TRACE_TEST_PATH="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	return cmd, strings.TrimSpace(line), &stderr, func() { stdin.Close() }
}

// Property: a recorder killed by SIGTERM or SIGINT (how torchrun and Ctrl-C stop a worker) writes every
// event and an end record naming the signal, and the process still dies by that signal.
func TestRecorderFlushesOnSignalAndDiesByIt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts processes")
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		for _, name := range []string{"sig.trace", "sig.trace.gz"} {
			path := filepath.Join(t.TempDir(), name)
			cmd, line, stderr, _ := startHelper(t, "signal", path)
			if line != "ready" {
				cmd.Process.Kill()
				t.Fatalf("helper: %q\n%s", line, stderr)
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("%v: the helper exited with %v", sig, err)
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("%v: the helper ended with %v, want death by %v", sig, ws, sig)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			rd, _ := NewReader(f, path)
			n := 0
			for {
				_, ok, err := rd.Next()
				if err != nil {
					t.Fatalf("%v %s: after %d events: %v", sig, name, n, err)
				}
				if !ok {
					break
				}
				n++
			}
			f.Close()
			if want := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[sig]; n != 3000 || rd.Ended() != want {
				t.Errorf("%v %s: %d events, ended by %q; want 3000, %q", sig, name, n, rd.Ended(), want)
			}
		}
	}
}

// Property: a path another live process is writing is refused, loudly (naming the writer and {rank} or
// {pid}), and the writer's trace is left whole; once that process is done the path is free again.
func TestRecorderRefusesAPathAnotherProcessWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts processes")
	}
	path := filepath.Join(t.TempDir(), "run.trace.gz")
	a, line, aerr, release := startHelper(t, "hold", path)
	if line != "ready" {
		t.Fatalf("first writer: %q\n%s", line, aerr)
	}
	b, line, berr, releaseB := startHelper(t, "hold", path)
	releaseB()
	b.Wait()
	msg := berr.String()
	if line != "refused" || !strings.Contains(msg, "process "+strconv.Itoa(a.Process.Pid)) || !strings.Contains(msg, "run.{rank}.trace.gz") {
		t.Errorf("the second writer said %q on stdout and %q on stderr; want a refusal naming pid %d and {rank}", line, msg, a.Process.Pid)
	}
	release()
	if err := a.Wait(); err != nil {
		t.Fatalf("first writer: %v\n%s", err, aerr)
	}
	tr, err := ReadFile(path)
	if err != nil || len(tr.Events) != 3000 {
		t.Fatalf("the first writer's trace: %v", err)
	}
	r, err := Record(path, RecordOptions{})
	if err != nil {
		t.Fatalf("the path once free: %v", err)
	}
	r.Close("close")
}

// Property: a trace Record creates is an ordinary data file: readable and writable by its owner, readable by
// the others the umask allows, executable by nobody (mode 0644 under umask 022), whatever the path's suffix.
func TestRecordedTraceIsAPlainDataFile(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, name := range []string{"t.trace", "t.trace.gz"} {
		path := filepath.Join(t.TempDir(), name)
		r, err := Record(path, RecordOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Alloc(0, 0, 512, 1<<20)
		if err := r.Close("test"); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o644 {
			t.Errorf("%s: mode %#o, want 0644 (rw-r--r--) under umask 022", name, got)
		}
	}
}
