package trace

// The recorder: a process's allocations written as a v2 trace (libgmlake's GMLAKE_TRACE), a write-ahead log
// that survives the ways a process ends. The package doc states its rules.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultFlushEvents and DefaultFlushInterval bound what a Recorder holds unwritten: a block is written
	// every DefaultFlushEvents events or DefaultFlushInterval after the first event it holds, whichever
	// comes first.
	DefaultFlushEvents   = 4096
	DefaultFlushInterval = time.Second
)

var (
	// ErrBusy: another process is writing the trace at that path (it holds the file's lock).
	ErrBusy = errors.New("trace: the path is being written by another process")
	// ErrActive: a trace is already being recorded by this process.
	ErrActive = errors.New("trace: a trace is already being written; stop it first")
	// ErrNoTrace: no trace is being recorded.
	ErrNoTrace = errors.New("trace: no trace is being written")
)

// RecordOptions configure a Recorder; the zero value is the defaults.
type RecordOptions struct {
	FlushEvents   int                 // events per block; 0: DefaultFlushEvents (at most MaxBlockEvents)
	FlushInterval time.Duration       // the longest an event waits unwritten; 0: DefaultFlushInterval
	Getenv        func(string) string // reads RANK and LOCAL_RANK for {rank}; nil: os.Getenv
	// FlushOnSignals writes out every event and an end record when the process gets SIGTERM or SIGINT,
	// and then lets the signal take its course: the handler that was there before (a host's, Python's
	// for SIGINT) runs, or the default action (the process dies by the signal).
	FlushOnSignals bool
	_              struct{}
}

// ExpandPath substitutes {pid} (this process's id) and {rank} (the RANK variable torchrun sets, else
// LOCAL_RANK, else 0) in a trace path; getenv nil reads the environment.
func ExpandPath(template string, getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	rank := getenv("RANK")
	if rank == "" {
		rank = getenv("LOCAL_RANK")
	}
	if rank == "" {
		rank = "0"
	}
	return strings.NewReplacer("{pid}", strconv.Itoa(os.Getpid()), "{rank}", rank).Replace(template)
}

type streamKey struct {
	device int
	stream uint64
}

type ptrKey struct {
	device int
	ptr    uint64
}

// Recorder writes a process's allocations and frees as a v2 trace: an allocation gets the next ID and
// the stream number of its (device, stream) in order of first use; a free of a pointer allocated while
// recording is written, others (allocated before it started, or bad) are skipped. Safe for concurrent use.
//
// A Recorder belongs to the process that opened it: in a child forked from it, every method writes nothing
// and takes none of its locks (Owned is false).
type Recorder struct {
	path     string // expanded
	template string
	pid      int
	opts     RecordOptions
	file     *os.File
	timer    *time.Timer

	mu struct {
		sync.Mutex
		lw      *LogWriter
		nextID  uint64
		ids     map[ptrKey]uint64
		streams map[streamKey]int
		err     error // the first write error; later events are dropped
		closed  bool
		armed   bool // the timer will flush the pending block
	}
}

// Record opens the trace at template with {pid} and {rank} expanded. The file is locked while it is
// written: a path another live process is writing is refused with ErrBusy (and left as it is), naming
// that process and how to give each process its own file.
func Record(template string, opts RecordOptions) (*Recorder, error) {
	if template == "" {
		return nil, errors.New("the trace path is empty")
	}
	if opts.FlushEvents <= 0 {
		opts.FlushEvents = DefaultFlushEvents
	}
	opts.FlushEvents = min(opts.FlushEvents, MaxBlockEvents)
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	path := ExpandPath(template, opts.Getenv)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating the trace %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if !errors.Is(err, ErrBusy) {
			return nil, fmt.Errorf("locking the trace %s: %w", path, err)
		}
		return nil, &BusyError{Path: path, Pid: writerPid(path), Template: template}
	}
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		// a pipe or a terminal (GMLAKE_TRACE=/dev/stderr): nothing to truncate
	} else if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncating the trace %s: %w", path, err)
	}
	pid := os.Getpid()
	lw, err := NewLogWriter(f, strings.HasSuffix(path, ".gz"), "pid="+strconv.Itoa(pid))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the trace %s: %w", path, err)
	}
	r := &Recorder{path: path, template: template, pid: pid, opts: opts, file: f}
	r.mu.lw = lw
	r.mu.ids = make(map[ptrKey]uint64)
	r.mu.streams = make(map[streamKey]int)
	r.timer = time.AfterFunc(time.Hour, r.tick)
	r.timer.Stop()
	if opts.FlushOnSignals {
		watchSignals(r)
	}
	return r, nil
}

// BusyError is Record's refusal of a path another live process is writing (errors.Is(err, ErrBusy)).
type BusyError struct {
	Path     string // the expanded path
	Pid      int    // the writer, from the trace's header; 0 if unknown
	Template string // the path as given
}

func (e *BusyError) Error() string {
	who := "another process"
	if e.Pid > 0 {
		who = "process " + strconv.Itoa(e.Pid)
	}
	hint := "put {rank} or {pid} in the path so that each process writes its own"
	if !strings.Contains(e.Template, "{rank}") && !strings.Contains(e.Template, "{pid}") {
		hint += fmt.Sprintf(" (e.g. %s)", withRank(e.Template))
	}
	return fmt.Sprintf("%s is being written by %s, so this process writes no trace: %s", e.Path, who, hint)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// withRank suggests template with {rank} before its extensions.
func withRank(template string) string {
	dir, base := "", template
	if i := strings.LastIndexByte(template, '/'); i >= 0 {
		dir, base = template[:i+1], template[i+1:]
	}
	if i := strings.IndexByte(base, '.'); i > 0 {
		return dir + base[:i] + ".{rank}" + base[i:]
	}
	return template + ".{rank}"
}

// writerPid reads the pid from the header of the trace at path, 0 if there is none.
func writerPid(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	rd, err := NewReader(f, path)
	if err != nil {
		return 0
	}
	defer rd.Close()
	for _, field := range strings.Fields(rd.Header()) {
		if v, ok := strings.CutPrefix(field, "pid="); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	return 0
}

// Path returns the trace's path, {pid} and {rank} expanded.
func (r *Recorder) Path() string { return r.path }

// Owned reports whether the calling process is the one that opened the trace (false in a forked child).
func (r *Recorder) Owned() bool { return os.Getpid() == r.pid }

// lockOpen takes r's lock when the calling process owns the trace and the trace is still open (not closed,
// no write failed), and says whether it did: the entry of every event a process records.
func (r *Recorder) lockOpen() bool {
	if !r.Owned() {
		return false
	}
	r.mu.Lock()
	if r.mu.closed || r.mu.err != nil {
		r.mu.Unlock()
		return false
	}
	return true
}

// Alloc records an allocation of size bytes at ptr on (device, stream).
func (r *Recorder) Alloc(device int, stream uint64, size uint64, ptr uint64) {
	if !r.lockOpen() {
		return
	}
	defer r.mu.Unlock()
	sk := streamKey{device, stream}
	sn, ok := r.mu.streams[sk]
	if !ok {
		sn = len(r.mu.streams)
		r.mu.streams[sk] = sn
	}
	id := r.mu.nextID
	r.mu.nextID++
	r.mu.ids[ptrKey{device, ptr}] = id
	r.addLocked(Event{Op: OpAlloc, ID: id, Size: size, Stream: sn})
}

// Free records the free of ptr on device, if it was allocated while recording.
func (r *Recorder) Free(device int, ptr uint64) {
	if !r.lockOpen() {
		return
	}
	defer r.mu.Unlock()
	k := ptrKey{device, ptr}
	id, ok := r.mu.ids[k]
	if !ok {
		return // allocated before the trace started, or a bad free
	}
	delete(r.mu.ids, k)
	r.addLocked(Event{Op: OpFree, ID: id})
}

// addLocked buffers e, writes the block when it is full, and otherwise makes sure the timer will.
func (r *Recorder) addLocked(e Event) {
	lw := r.mu.lw
	lw.Add(e)
	if lw.Buffered() >= r.opts.FlushEvents {
		r.mu.err = lw.Commit()
		return
	}
	if !r.mu.armed {
		r.mu.armed = true
		r.timer.Reset(r.opts.FlushInterval)
	}
}

// tick is the timer's flush: the pending block, at most FlushInterval after its first event.
func (r *Recorder) tick() {
	if !r.Owned() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.armed = false
	if !r.mu.closed && r.mu.err == nil {
		r.mu.err = r.mu.lw.Commit()
	}
}

// Flush writes the pending events as a block.
func (r *Recorder) Flush() error {
	if !r.Owned() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed || r.mu.err != nil {
		return r.errLocked()
	}
	r.mu.err = r.mu.lw.Commit()
	return r.errLocked()
}

// checkpoint writes every pending event and an end record for reason; recording goes on.
func (r *Recorder) checkpoint(reason string) {
	if !r.Owned() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.closed && r.mu.err == nil {
		r.mu.err = r.mu.lw.End(reason)
	}
}

// Close writes the pending events and an end record for reason ("stop", "exit"), and closes the file
// (which releases its lock). Later events are dropped; a second Close does nothing. It returns the first
// write error of the trace. In a forked child it writes nothing.
func (r *Recorder) Close(reason string) error {
	if !r.Owned() {
		return nil
	}
	unwatchSignals(r)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil
	}
	r.mu.closed = true
	r.timer.Stop()
	if r.mu.err == nil {
		r.mu.err = r.mu.lw.End(reason)
	}
	if e := r.file.Close(); r.mu.err == nil {
		r.mu.err = e
	}
	return r.errLocked()
}

func (r *Recorder) errLocked() error {
	if r.mu.err != nil {
		return fmt.Errorf("writing the trace %s: %w", r.path, r.mu.err)
	}
	return nil
}

// Active is the slot of a process's one recorder, as libgmlake keeps it: Start and Stop under a lock, Get
// on the allocation path without one. Get keeps the rule that a trace belongs to the process that opened
// it: in a forked child it returns nil, or, when the path has {pid}, the child's own new trace.
type Active struct {
	mu sync.Mutex
	p  atomic.Pointer[Recorder]
	// OnChildTrace, if set, hears of a forked child's own trace: its path, or why it could not be opened.
	OnChildTrace func(path string, err error)
}

// Start opens a recorder at template (see Record) and makes it the active one; ErrActive if this process
// has one.
func (a *Active) Start(template string, opts RecordOptions) (*Recorder, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.p.Load(); r != nil && r.Owned() {
		return nil, ErrActive
	}
	r, err := Record(template, opts)
	if err != nil {
		return nil, err
	}
	a.p.Store(r)
	return r, nil
}

// Stop closes the active recorder with reason; ErrNoTrace if there is none.
func (a *Active) Stop(reason string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.p.Load()
	if r == nil || !r.Owned() {
		a.p.Store(nil)
		return ErrNoTrace
	}
	a.p.Store(nil)
	return r.Close(reason)
}

// Get returns this process's active recorder, nil if none.
func (a *Active) Get() *Recorder {
	r := a.p.Load()
	if r == nil || r.Owned() {
		return r
	}
	// A forked child: the parent's recorder is not ours, and its lock may be held by a thread that does
	// not exist here, so only atomics from now on.
	var child *Recorder
	if strings.Contains(r.template, "{pid}") {
		c, err := Record(r.template, r.opts)
		if a.OnChildTrace != nil {
			a.OnChildTrace(ExpandPath(r.template, r.opts.Getenv), err)
		}
		child = c
	}
	if a.p.CompareAndSwap(r, child) {
		return child
	}
	if child != nil {
		child.Close("lost")
	}
	return a.p.Load()
}
