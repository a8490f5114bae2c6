package trace

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// A Reader keeps what it needs in memory that does not grow with the trace (issue 14 item 11): after a
// million events in the usual ID order, one run of IDs and the live IDs only.
func TestReaderStateBoundedByLive(t *testing.T) {
	var b bytes.Buffer
	const n = 1_000_000
	id := 0
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&b, "a %d 4096 %d\n", id, i%3)
		if i >= 10 {
			fmt.Fprintf(&b, "f %d\n", id-10) // 10 live at any time
		}
		id++
	}
	rd, err := NewReader(&b, "long.trace")
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for {
		_, ok, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		events++
	}
	if events != rd.Events() || rd.Live() != 10 || len(rd.seen.runs) != 1 || rd.seen.extra != nil || rd.Streams() != 3 {
		t.Fatalf("after %d events: %d counted, %d live, %d runs of IDs, %d streams; want 10 live in 1 run, 3 streams",
			events, rd.Events(), rd.Live(), len(rd.seen.runs), rd.Streams())
	}
}

// The run set of IDs answers as a plain set would, in any insertion order, past the switch to a map too.
func TestIDRunsIsASet(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var s idRuns
	ref := map[uint64]bool{}
	for i := 0; i < 40_000; i++ {
		id := uint64(rng.Intn(30_000))
		if i%3 == 0 {
			id = uint64(i)
		}
		if got, want := s.add(id), !ref[id]; got != want {
			t.Fatalf("add(%d) = %v, want %v (step %d)", id, got, want, i)
		}
		ref[id] = true
	}
	for i := 1; i < len(s.runs); i++ {
		if s.runs[i-1].hi+1 >= s.runs[i].lo {
			t.Fatalf("runs %v and %v overlap or touch", s.runs[i-1], s.runs[i])
		}
	}
}

// Read (all events in memory) and a Reader agree, errors included.
func TestReadIsReaderCollected(t *testing.T) {
	for _, text := range []string{"a 0 10 0\na 1 20 1\nr 0\nf 0\nf 1\n", "a 0 10 0\nf 0\nf 0\n", "a 0 10 0\na 0 1 0\n"} {
		tr, rerr := Read(strings.NewReader(text), "x.trace")
		rd, _ := NewReader(strings.NewReader(text), "x.trace")
		var evs []Event
		var err error
		for {
			ev, ok, e := rd.Next()
			if e != nil || !ok {
				err = e
				break
			}
			evs = append(evs, ev)
		}
		if (rerr == nil) != (err == nil) || (err != nil && rerr.Error() != err.Error()) {
			t.Fatalf("%q: Read: %v, Reader: %v", text, rerr, err)
		}
		if rerr == nil && !reflect.DeepEqual(tr.Events, evs) {
			t.Fatalf("%q: Read %v, Reader %v", text, tr.Events, evs)
		}
	}
}
