package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
)

// pickleWriter writes a protocol 2 pickle as Python's pickler does: every new string and container
// memoized (BINPUT), a string seen before fetched (BINGET), dicts and lists filled with MARK ... SETITEMS
// and APPENDS.
type pickleWriter struct {
	b    bytes.Buffer
	strs map[string]uint32
	n    uint32
}

func (w *pickleWriter) put() {
	if w.n < 256 {
		w.b.Write([]byte{'q', byte(w.n)})
	} else {
		w.b.WriteByte('r')
		binary.Write(&w.b, binary.LittleEndian, w.n)
	}
	w.n++
}

func (w *pickleWriter) str(s string) {
	if k, ok := w.strs[s]; ok {
		if k < 256 {
			w.b.Write([]byte{'h', byte(k)})
		} else {
			w.b.WriteByte('j')
			binary.Write(&w.b, binary.LittleEndian, k)
		}
		return
	}
	w.b.WriteByte('X')
	binary.Write(&w.b, binary.LittleEndian, uint32(len(s)))
	w.b.WriteString(s)
	w.strs[s] = w.n
	w.put()
}

func (w *pickleWriter) int(v uint64) {
	switch {
	case v < 256:
		w.b.Write([]byte{'K', byte(v)})
	case v < 1<<16:
		w.b.WriteByte('M')
		binary.Write(&w.b, binary.LittleEndian, uint16(v))
	case v < 1<<31:
		w.b.WriteByte('J')
		binary.Write(&w.b, binary.LittleEndian, uint32(v))
	default: // LONG1 of 9 bytes: positive, any 64-bit value
		w.b.Write([]byte{0x8a, 9})
		binary.Write(&w.b, binary.LittleEndian, v)
		w.b.WriteByte(0)
	}
}

// dict writes {k: v(), ...} in key order.
func (w *pickleWriter) dict(keys []string, vals []func()) {
	w.b.WriteByte('}')
	w.put()
	w.b.WriteByte('(')
	for i, k := range keys {
		w.str(k)
		vals[i]()
	}
	w.b.WriteByte('u')
}

func (w *pickleWriter) list(n int, item func(i int)) {
	w.b.WriteByte(']')
	w.put()
	if n == 0 {
		return
	}
	w.b.WriteByte('(')
	for i := range n {
		item(i)
	}
	w.b.WriteByte('e')
}

// syntheticSnapshot is a snapshot of entries alloc/free_completed pairs, each entry with the stack of
// frames PyTorch records (12 frames of 200 distinct ones), as _dump_snapshot writes it.
func syntheticSnapshot(entries int) []byte {
	w := &pickleWriter{strs: map[string]uint32{}}
	w.b.Write([]byte{0x80, 2})
	frames := func(j int) func() {
		return func() {
			w.list(12, func(i int) {
				f := (j*7 + i*13) % 200
				w.dict([]string{"filename", "line", "name"}, []func(){
					func() { w.str(fmt.Sprintf("/usr/lib/python3/site-packages/torch/nn/modules/module%d.py", f)) },
					func() { w.int(uint64(f*31 + 7)) },
					func() { w.str(fmt.Sprintf("forward_%d", f)) },
				})
			})
		}
	}
	w.dict([]string{"segments", "device_traces"}, []func(){
		func() { w.list(0, nil) },
		func() {
			w.list(1, func(int) {
				w.list(entries, func(j int) {
					action, addr := "alloc", uint64(1<<40+(j/2)<<21)
					if j%2 == 1 {
						action = "free_completed"
					}
					w.dict([]string{"action", "addr", "size", "stream", "time_us", "frames"}, []func(){
						func() { w.str(action) }, func() { w.int(addr) }, func() { w.int(uint64(1<<20 + j%4096*512)) },
						func() { w.int(0) }, func() { w.int(uint64(1_700_000_000_000 + j)) }, frames(j),
					})
				})
			})
		},
	})
	w.b.WriteByte('.')
	return w.b.Bytes()
}

// maxReadBytesPerInputByte bounds what Read allocates, in all, per byte of snapshot: the input held whole
// (io.ReadAll's doubling buffer, ~2x) and the events, with the stack frames' values transient. gopickle's
// unpickler allocated ~30x on this snapshot (and 90x, 1.85 GB for 20 MB, on a real one), every frame held
// by its memo.
const maxReadBytesPerInputByte = 10

// Property (issue 36 item 9): reading a snapshot allocates memory proportional to its size, at most
// maxReadBytesPerInputByte bytes per byte (a memory bound, not a time one: runtime.MemStats' TotalAlloc
// counts every byte allocated, whatever the machine's speed), and the events come out right.
func TestReadSnapshotMemoryIsBoundedByItsSize(t *testing.T) {
	data := syntheticSnapshot(40_000)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	tr, err := Read(bytes.NewReader(data), "synthetic.pickle", -1)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 40_000 {
		t.Fatalf("%d events, want 40000", len(tr.Events))
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %.1f MB snapshot of %d events: %.1f MB allocated (%.1f bytes per input byte)",
		float64(len(data))/1e6, len(tr.Events), float64(alloc)/1e6, float64(alloc)/float64(len(data)))
	if alloc > maxReadBytesPerInputByte*uint64(len(data)) {
		t.Errorf("reading a %d-byte snapshot allocated %d bytes, more than %d per input byte", len(data), alloc, maxReadBytesPerInputByte)
	}
}
