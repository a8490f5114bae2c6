package impl

import (
	"errors"
	"syscall"
	"testing"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// checkExport judges an export against the device: the pieces are the device's mappings side by side from
// p-Offset, each the whole handle mapped there with that handle's descriptor, and they cover the allocation.
func checkExport(t *testing.T, dev *sim.Device, p vmm.DevicePtr, size uint64, ex IPCExport) {
	t.Helper()
	if ex.Size != size || len(ex.Pieces) == 0 {
		t.Fatalf("export of %v: %+v, want %d bytes over at least one piece", p, ex, size)
	}
	maps := map[vmm.DevicePtr]sim.DeviceMapping{}
	for _, m := range dev.State().Mappings {
		maps[m.VA.Base] = m
	}
	addr, total := p-vmm.DevicePtr(ex.Offset), uint64(0)
	for i, pc := range ex.Pieces {
		m, ok := maps[addr]
		if !ok || m.VA.Size != pc.Size {
			t.Fatalf("export of %v: piece %d (%d bytes) at %v: the device maps %+v there", p, i, pc.Size, addr, m)
		}
		if fd, err := dev.ExportFD(m.Handle); err != nil || fd != pc.FD {
			t.Fatalf("export of %v: piece %d has descriptor %d, the handle mapped there %d (%v)", p, i, pc.FD, fd, err)
		}
		addr, total = addr.Add(pc.Size), total+pc.Size
	}
	if ex.Offset >= ex.Pieces[0].Size || ex.Offset+ex.Size > total || total-ex.Pieces[len(ex.Pieces)-1].Size >= ex.Offset+ex.Size {
		t.Fatalf("export of %v: offset %d size %d over pieces of %d bytes: not the run that just covers it", p, ex.Offset, ex.Size, total)
	}
}

func fdOpen(fd int) bool {
	_, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	return e == 0
}

// Property: ExportIPC gives, for a small block, a large one and a stitched one, exactly the handles mapped
// under the allocation, in address order, with the allocation's offset into them; the same descriptor for the
// same handle each time; the engine's state and driver calls unchanged; an interior or unknown pointer is
// refused by kind; and a handle's descriptor is closed when the engine releases the handle.
func TestExportIPCGivesTheHandlesUnderTheAllocation(t *testing.T) {
	a, dev := newStitchTest(t, 0, true)
	live := stitchScene(t, a, 0)
	small := mustAlloc(t, a, 512, 0)
	stitched := mustAlloc(t, a, 256*MiB, 0)
	before, calls := a.Stats(), dev.Counts()
	var fds []int
	for _, c := range []struct {
		p    vmm.DevicePtr
		size uint64
	}{{live[0], 16 * MiB}, {small, 512}, {stitched, 256 * MiB}} {
		r, err := a.AllocationAt(c.p)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := a.ExportIPC(c.p)
		if err != nil {
			t.Fatalf("ExportIPC(%v): %v", c.p, err)
		}
		checkExport(t, dev, c.p, r.Size, ex)
		again, err := a.ExportIPC(c.p)
		if err != nil || len(again.Pieces) != len(ex.Pieces) || again.Pieces[0] != ex.Pieces[0] {
			t.Fatalf("a second ExportIPC(%v): %+v (%v), want %+v", c.p, again, err, ex)
		}
		for _, pc := range ex.Pieces {
			fds = append(fds, pc.FD)
		}
	}
	if ex, _ := a.ExportIPC(stitched); len(ex.Pieces) != 2 {
		t.Fatalf("the stitched block's export %+v: want its two 128 MiB chunks", ex)
	}
	if _, err := a.ExportIPC(stitched.Add(4096)); !errors.Is(err, ErrInteriorPtr) {
		t.Errorf("ExportIPC inside an allocation: %v, want %v", err, ErrInteriorPtr)
	}
	if _, err := a.ExportIPC(0x10); !errors.Is(err, ErrUnknownPointer) {
		t.Errorf("ExportIPC of no allocation: %v, want %v", err, ErrUnknownPointer)
	}
	if after := a.Stats(); after != before || dev.Counts() != calls {
		t.Fatalf("ExportIPC changed the engine: stats %+v -> %+v, driver calls %v -> %v", before, after, calls, dev.Counts())
	}
	checkState(t, a, dev)
	for _, p := range append(live, small, stitched) {
		mustFree(t, a, p)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if fdOpen(fd) {
			t.Errorf("descriptor %d still open after EmptyCache released every handle", fd)
		}
	}
	closeClean(t, a, dev)
}

// Property: an export the driver cannot make is ErrNoExport, not a misleading error and not a change.
func TestExportIPCWithoutAnExporterSaysSo(t *testing.T) {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, err := New(noExport{dev}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := mustAlloc(t, a, 4*MiB, 0)
	if _, err := a.ExportIPC(p); !errors.Is(err, ErrNoExport) {
		t.Fatalf("ExportIPC on a driver without export: %v, want %v", err, ErrNoExport)
	}
	mustFree(t, a, p)
	closeClean(t, a, dev)
}

// noExport hides the simulated device's ExportFD (and says nothing of what it wraps).
type noExport struct{ *sim.Device }

func (noExport) ExportFD() {}

// Property (gmlake-paper's partial hold): a cached stitched block reused for a smaller request exports only
// the chunks under the request (the unheld tail is free for others, so handing it to another process would
// share memory the engine may give out again).
func TestExportIPCOfAPartlyHeldStitchedBlock(t *testing.T) {
	a, dev := newPaper(t, Config{}, 0, true)
	separate(t, a, 300*MiB, 300*MiB)
	p := mustAlloc(t, a, 600*MiB, 0)
	mustFree(t, a, p)
	q := mustAlloc(t, a, 400*MiB, 0) // the cached sBlock, holding the first 400 MiB of its chunks
	if q != p || a.Stats().NumStitchReuses != 1 {
		t.Fatalf("the 400 MiB request did not reuse the cached 600 MiB sBlock (at %v, got %v)", p, q)
	}
	ex, err := a.ExportIPC(q)
	if err != nil {
		t.Fatal(err)
	}
	checkExport(t, dev, q, 400*MiB, ex)
	mustFree(t, a, q)
	closeClean(t, a, dev)
}
