package trace

// Flushing on SIGTERM and SIGINT (RecordOptions.FlushOnSignals). The Go runtime in a c-shared library (libgmlake)
// installs no handler for these signals until Notify is called, and then does not forward them to the handler
// that was there before (os/signal, "Non-Go programs that call Go code"); so on a signal the recorders write
// everything and an end record, Stop gives the signal back to the handler that was there before Notify
// (the host's, or the default action, or in a Go program the runtime's, which dies by it), and the signal is
// raised again for it. If the process lives on (a host handler ran: Python's SIGINT raises KeyboardInterrupt)
// the recorders watch again once the raised signal is no longer pending.

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

var sigWatch struct {
	sync.Mutex
	recs    map[*Recorder]struct{}
	started bool
	ch      chan os.Signal
}

var watched = []os.Signal{syscall.SIGTERM, syscall.SIGINT}

// watchSignals adds r to the recorders flushed on SIGTERM and SIGINT.
func watchSignals(r *Recorder) {
	sigWatch.Lock()
	defer sigWatch.Unlock()
	if sigWatch.recs == nil {
		sigWatch.recs = map[*Recorder]struct{}{}
	}
	sigWatch.recs[r] = struct{}{}
	if !sigWatch.started {
		sigWatch.started = true
		sigWatch.ch = make(chan os.Signal, 1)
		signal.Notify(sigWatch.ch, watched...)
		go sigLoop(sigWatch.ch)
	}
}

// unwatchSignals removes r. The handler stays installed (a later trace reuses it); with no recorder to
// flush it only passes the signal on.
func unwatchSignals(r *Recorder) {
	sigWatch.Lock()
	defer sigWatch.Unlock()
	delete(sigWatch.recs, r)
}

func sigLoop(ch chan os.Signal) {
	for s := range ch {
		sig, _ := s.(syscall.Signal)
		name := "SIGTERM"
		if sig == syscall.SIGINT {
			name = "SIGINT"
		}
		sigWatch.Lock()
		for r := range sigWatch.recs {
			r.checkpoint(name)
		}
		sigWatch.Unlock()
		signal.Stop(ch)
		syscall.Kill(syscall.Getpid(), sig)
		if !waitDelivered(sig) {
			return // blocked everywhere: leave it pending for its handler, and watch no more
		}
		signal.Notify(ch, watched...)
	}
}

// waitDelivered waits (up to 5 s) until sig is no longer pending for the process, so that watching again
// cannot catch the signal just raised; it reports whether it was delivered.
func waitDelivered(sig syscall.Signal) bool {
	for i := 0; i < 5000; i++ {
		if !pending(sig) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
