package cudavmm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// open returns a driver on device 0, or skips the test with the reason when this machine has no usable GPU.
func open(t testing.TB) *Driver {
	t.Helper()
	d, err := New(0)
	if err != nil {
		t.Skipf("no CUDA GPU here, skipping the real-driver test: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewWithoutDriverSaysNoDriverFound(t *testing.T) {
	err := Load()
	if err == nil {
		t.Skip("a CUDA driver is installed here; the no-driver path cannot be exercised")
	}
	_, err = New(0)
	if !errors.Is(err, vmm.ErrDriverNotLoaded) {
		t.Fatalf("New without a driver: %v, want an error matching vmm.ErrDriverNotLoaded", err)
	}
	if !strings.Contains(err.Error(), "no CUDA driver was found") {
		t.Fatalf("New without a driver says %q; it must say that no CUDA driver was found", err)
	}
}

func TestStreamHandleRoundTrips(t *testing.T) {
	for _, p := range []uintptr{0, 0x7f00deadbe00} {
		if got := StreamHandle(StreamFromHandle(p)); got != p {
			t.Fatalf("StreamHandle(StreamFromHandle(%#x)) = %#x", p, got)
		}
	}
	if StreamFromHandle(0) != vmm.DefaultStream {
		t.Fatal("the null cudaStream_t must be the default stream")
	}
}

func TestNoSuchDeviceIsAnError(t *testing.T) {
	if Load() != nil {
		t.Skip("no CUDA driver here")
	}
	_, err := New(4096)
	if err == nil {
		t.Fatal("New(4096) succeeded")
	}
	if r := vmm.ResultOf(err); r != vmm.InvalidDevice && r != vmm.NoDevice {
		t.Fatalf("New(4096): %v, want CUDA_ERROR_INVALID_DEVICE or NO_DEVICE", err)
	}
}

// TestRealDriverRules checks, on the GPU, the rules of docs/cuda-vmm.md that vmm's package doc lists:
// granularity, offset 0, partial unmap, access before SetAccess is needed, aliasing, and the error values.
func TestRealDriverRules(t *testing.T) {
	d := open(t)
	g := d.Granularity()
	if g == 0 || g%(64*vmm.KiB) != 0 {
		t.Fatalf("granularity %d is not a positive multiple of 64 KiB", g)
	}
	t.Logf("granularity %s", vmm.FormatBytes(g))

	_, err := d.Create(g + 4096)
	if vmm.ResultOf(err) != vmm.InvalidValue {
		t.Errorf("Create(granularity+4096): %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
	var ce *vmm.CallError
	if !errors.As(err, &ce) || ce.Call != vmm.CallCreate || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_VALUE (1)") {
		t.Errorf("the error %q does not name the call and the CUDA result with its code", err)
	}

	h1, err := d.Create(2 * g)
	must(t, err)
	h2, err := d.Create(g)
	must(t, err)
	p, err := d.Reserve(8 * g)
	must(t, err)

	if err := d.Map(p, g, h2, g); vmm.ResultOf(err) == vmm.Success {
		t.Errorf("Map at offset %d succeeded, want an error (offset must be 0)", g)
	} else {
		t.Logf("Map with offset != 0: %v", err)
	}
	must(t, d.Map(p, 2*g, h1, 0))
	must(t, d.Map(p.Add(4*g), g, h2, 0))
	if err := d.Unmap(p, g); vmm.ResultOf(err) != vmm.InvalidValue {
		t.Errorf("Unmap of half a mapping: %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
	if err := d.SetAccess(p, 8*g); err == nil {
		t.Errorf("SetAccess over a partly mapped range succeeded")
	}
	must(t, d.SetAccess(p, 2*g))
	// h1 aliased: mapped again at p+5g? No: p+5g..p+7g.
	must(t, d.Map(p.Add(5*g), 2*g, h1, 0))
	must(t, d.SetAccess(p.Add(5*g), 2*g))

	s, err := d.CreateStream()
	must(t, err)
	must(t, d.Memset(p, 2*g, 0xa5, s))
	must(t, d.Memset(p.Add(g+100), 1000, 0x3c, s))
	buf := make([]byte, 2*g)
	must(t, d.Read(p.Add(5*g), buf, s)) // read through the alias
	want := bytes.Repeat([]byte{0xa5}, int(2*g))
	copy(want[g+100:g+1100], bytes.Repeat([]byte{0x3c}, 1000))
	if !bytes.Equal(buf, want) {
		i := 0
		for buf[i] == want[i] {
			i++
		}
		t.Fatalf("aliased read differs at byte %d: %#x, want %#x", i, buf[i], want[i])
	}

	e, err := d.CreateEvent()
	must(t, err)
	must(t, d.Memset(p, 2*g, 1, s))
	must(t, d.RecordEvent(e, s))
	must(t, d.StreamWaitEvent(vmm.DefaultStream, e))
	if _, err := d.QueryEvent(e); err != nil {
		t.Errorf("QueryEvent: %v", err)
	}
	if _, err := d.StreamQuery(s); err != nil {
		t.Errorf("StreamQuery: %v", err)
	}
	must(t, d.Read(p, buf[:16], s))
	if buf[0] != 1 || buf[15] != 1 {
		t.Errorf("read after memset 1 on the stream: %v", buf[:16])
	}
	if err := d.DestroyStream(vmm.DefaultStream); vmm.ResultOf(err) != vmm.InvalidHandle {
		t.Errorf("DestroyStream(default): %v, want CUDA_ERROR_INVALID_HANDLE", err)
	}

	if err := d.FreeAddress(p, 8*g); err == nil {
		t.Fatalf("FreeAddress of a reservation with mappings in it succeeded")
	} else {
		t.Logf("FreeAddress with mappings: %v", err)
	}
	free0, total, err := d.MemInfo()
	must(t, err)
	if free0 == 0 || free0 > total {
		t.Errorf("MemInfo: free %d total %d", free0, total)
	}
	// Release while mapped: the memory stays until the last mapping goes.
	must(t, d.Release(h1))
	must(t, d.Read(p, buf[:16], s))
	must(t, d.Unmap(p, 2*g))
	must(t, d.Unmap(p.Add(4*g), 3*g)) // one unmap over two whole, adjacent mappings
	must(t, d.Release(h2))
	must(t, d.FreeAddress(p, 8*g))
	must(t, d.DestroyEvent(e))
	must(t, d.DestroyStream(s))
}

// TestRealDriverFromManyGoroutines runs driver calls from goroutines that may land on any OS thread: the
// primary context must be made current for every call.
func TestRealDriverFromManyGoroutines(t *testing.T) {
	d := open(t)
	g := d.Granularity()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.CreateStream()
			if err != nil {
				errs <- err
				return
			}
			defer d.DestroyStream(s)
			for i := 0; i < 20; i++ {
				h, err := d.Create(g)
				if err != nil {
					errs <- err
					return
				}
				p, err := d.Reserve(g)
				if err != nil {
					errs <- err
					return
				}
				v := byte(w*31 + i)
				var buf [64]byte
				for _, f := range []func() error{
					func() error { return d.Map(p, g, h, 0) },
					func() error { return d.SetAccess(p, g) },
					func() error { return d.Memset(p, g, v, s) },
					func() error { return d.Read(p.Add(g-64), buf[:], s) },
					func() error { return d.Unmap(p, g) },
					func() error { return d.Release(h) },
					func() error { return d.FreeAddress(p, g) },
				} {
					if err := f(); err != nil {
						errs <- err
						return
					}
				}
				if !bytes.Equal(buf[:], bytes.Repeat([]byte{v}, 64)) {
					errs <- fmt.Errorf("worker %d round %d read %v, want %#x", w, i, buf[:4], v)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// gatedStream returns a non-blocking stream held back behind WaitValue32, an event recorded on it behind the
// gate, and the function that opens the gate (WriteValue32 from a second stream); t.Cleanup frees them.
func gatedStream(t *testing.T, d *Driver) (s vmm.Stream, ev vmm.Event, open func()) {
	t.Helper()
	word, err := d.MemAlloc(64 * vmm.KiB)
	must(t, err)
	t.Cleanup(func() { must(t, d.MemFree(word)) })
	s, err = d.CreateStreamNonBlocking()
	must(t, err)
	sig, err := d.CreateStreamNonBlocking()
	must(t, err)
	t.Cleanup(func() { must(t, d.DestroyStream(s)); must(t, d.DestroyStream(sig)) })
	must(t, d.Memset(word, 4, 0, sig))
	must(t, d.Synchronize(sig))
	if err := d.WaitValue32(s, word, 1); err != nil {
		t.Fatalf("WaitValue32: %v (stream memory operations unsupported here?)", err)
	}
	ev, err = d.CreateEvent()
	must(t, err)
	t.Cleanup(func() { must(t, d.DestroyEvent(ev)) })
	must(t, d.RecordEvent(ev, s))
	return s, ev, func() { must(t, d.WriteValue32(sig, word, 1)) }
}

// TestWaitValueHoldsAStreamUntilWritten: work queued behind WaitValue32 on a non-blocking stream does not
// complete until WriteValue32 from another stream releases it (the stream clock of harness/gpu), and a
// non-blocking stream held back holds back neither the legacy default stream nor another stream.
func TestWaitValueHoldsAStreamUntilWritten(t *testing.T) {
	d := open(t)
	s, ev, release := gatedStream(t, d)
	other, err := d.CreateEvent()
	must(t, err)
	defer func() { must(t, d.DestroyEvent(other)) }()
	must(t, d.RecordEvent(other, vmm.DefaultStream))
	must(t, d.Synchronize(vmm.DefaultStream)) // must not wait for s
	for i := 0; i < 3; i++ {
		if done, err := d.QueryEvent(ev); err != nil || done {
			t.Fatalf("the event behind a closed gate: done=%v err=%v, want not done", done, err)
		}
	}
	release()
	must(t, d.Synchronize(s))
	if done, err := d.QueryEvent(ev); err != nil || !done {
		t.Fatalf("after the gate opened and the stream synchronised: done=%v err=%v", done, err)
	}
}

// Property (on the GPU): SynchronizeDevice waits for work on every stream, a stream the caller never named
// to it included: work held back behind WaitValue32 on a non-blocking stream is complete once the gate
// opens and SynchronizeDevice returns. StreamCapturing says false for an idle stream.
func TestSynchronizeDeviceWaitsForEveryStreamAndStreamCapturingChecks(t *testing.T) {
	d := open(t)
	s, ev, release := gatedStream(t, d)
	if done, err := d.QueryEvent(ev); err != nil || done {
		t.Fatalf("the event behind a closed gate: done=%v err=%v, want not done", done, err)
	}
	release()
	must(t, d.SynchronizeDevice())
	if done, err := d.QueryEvent(ev); err != nil || !done {
		t.Fatalf("after SynchronizeDevice: the held-back stream's event done=%v err=%v, want done", done, err)
	}
	if c, err := d.StreamCapturing(s); err != nil || c {
		t.Fatalf("StreamCapturing(idle stream) = %v, %v; want false, nil", c, err)
	}
}

// Property (CUDA IPC, on the GPU): ExportFD of a POSIX-fd handle (the default request) gives an open
// descriptor, the same one on a second call, and Release closes it; a driver asked for plain handles
// (RequestHandles("none")) refuses with ErrNotSupported, and the handle stays usable.
func TestExportFDOpensOncePerHandleAndReleaseClosesIt(t *testing.T) {
	d := open(t)
	if !strings.Contains(d.HandleTypes(), "posix_fd") {
		t.Skipf("this device does not create POSIX-fd handles (%s)", d.HandleTypes())
	}
	h, err := d.Create(d.Granularity())
	must(t, err)
	fd, err := d.ExportFD(h)
	must(t, err)
	if again, err := d.ExportFD(h); err != nil || again != fd {
		t.Fatalf("a second ExportFD: %d, %v; want %d", again, err, fd)
	}
	if !fdOpen(fd) {
		t.Fatalf("descriptor %d is not open", fd)
	}
	must(t, d.Release(h))
	if fdOpen(fd) {
		t.Fatalf("descriptor %d still open after Release", fd)
	}
	must(t, d.RequestHandles("none"))
	p, err := d.Create(d.Granularity())
	must(t, err)
	if _, err := d.ExportFD(p); !errors.Is(err, vmm.ErrNotSupported) {
		t.Errorf("ExportFD of a plain handle: %v, want %v", err, vmm.ErrNotSupported)
	}
	must(t, d.Release(p))
}

func fdOpen(fd int) bool {
	_, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	return e == 0
}
