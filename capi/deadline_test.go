package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// Every program the tests start (the C and C++ hosts of the library, the Python tests, a re-executed test
// binary) runs under a deadline: a host that deadlocks, or a forked grandchild that keeps its output pipe open
// after it exited, fails its test with the program's name, its arguments and what it printed, instead of
// hanging the package until go test's own timeout kills it with a dump of goroutines that names nothing.
// The deadline is generous (the slowest program takes about 10 s on a loaded 2-core machine): it decides
// only "hung", never a verdict on speed.
const hostDeadline = 4 * time.Minute

// pipeGrace is how long Wait waits, after the program exited or was killed, for the pipes a descendant of it
// may still hold (exec.Cmd.WaitDelay).
const pipeGrace = 10 * time.Second

// errHung marks the error of a program killed by its deadline.
type errHung struct {
	args []string
	err  error
}

func (e *errHung) Error() string {
	return fmt.Sprintf("%s did not exit within %v and was killed (a deadlock, or a descendant holding its "+
		"output open; what it printed is below): %v", strings.Join(e.args, " "), hostDeadline, e.err)
}

func (e *errHung) Unwrap() error { return e.err }

// watchdog kills cmd's process (already started) if it is still running after hostDeadline; stop ends the
// watch and reports whether it killed.
func watchdog(cmd *exec.Cmd) (stop func() (killed bool)) {
	var fired atomic.Bool
	tm := time.AfterFunc(hostDeadline, func() {
		fired.Store(true)
		cmd.Process.Kill()
	})
	return func() bool {
		tm.Stop()
		return fired.Load()
	}
}

// runHost is cmd.Run under the deadline.
func runHost(cmd *exec.Cmd) error {
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := watchdog(cmd)
	err := cmd.Wait()
	if stop() {
		return &errHung{args: cmd.Args, err: err}
	}
	return err
}

// hostOutput is cmd.CombinedOutput under the deadline.
func hostOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := runHost(cmd)
	return b.Bytes(), err
}
