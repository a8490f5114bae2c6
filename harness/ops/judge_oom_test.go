package ops

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// INV-CONTRACT (the out-of-memory error's figures): the judge passes an error that tells the request, the
// engine's holdings and the device's free bytes as they are, and flags each figure that is wrong.
func TestOOMErrorJudgeBites(t *testing.T) {
	const mb = 1 << 20
	st := impl.Stats{ReservedBytes: 10 * mb, AllocatedBytes: 6 * mb}
	good := func() *impl.OOMError {
		return &impl.OOMError{Requested: 3 * mb, Rounded: 4 * mb, Reserved: 10 * mb, Live: 6 * mb, Cached: 4 * mb, DeviceFree: 2 * mb, Stream: 1}
	}
	if vs := judgeOOMError(good(), 3*mb, 1, st, 2*mb, true); len(vs) != 0 {
		t.Fatalf("a true error judged wrong: %v", vs)
	}
	if vs := judgeOOMError(fmt.Errorf("wrapped: %w", good()), 3*mb, 1, st, 2*mb, true); len(vs) != 0 {
		t.Fatalf("a true wrapped error judged wrong: %v", vs)
	}
	if vs := judgeOOMError(vmm.ErrOutOfMemory, 3*mb, 1, st, 2*mb, true); len(vs) != 0 {
		t.Fatalf("an error without figures judged: %v", vs)
	}
	for name, bend := range map[string]func(*impl.OOMError){
		"requested":   func(e *impl.OOMError) { e.Requested = 4 * mb },
		"rounded":     func(e *impl.OOMError) { e.Rounded = 2 * mb },
		"stream":      func(e *impl.OOMError) { e.Stream = 0 },
		"reserved":    func(e *impl.OOMError) { e.Reserved = 0 },
		"live":        func(e *impl.OOMError) { e.Live = 10 * mb },
		"cached":      func(e *impl.OOMError) { e.Cached = 0 },
		"device free": func(e *impl.OOMError) { e.DeviceFree = 0 },
	} {
		e := good()
		bend(e)
		vs := judgeOOMError(e, 3*mb, 1, st, 2*mb, true)
		if len(vs) != 1 || vs[0].Inv != spec.InvContract {
			t.Errorf("a wrong %s: want one INV-CONTRACT, got %v", name, vs)
		}
	}
	e := good()
	e.DeviceFree = 0
	if vs := judgeOOMError(e, 3*mb, 1, st, 2*mb, false); len(vs) != 0 {
		t.Errorf("the device's free bytes judged where they are not known: %v", vs)
	}
	if !errors.Is(good(), vmm.ErrOutOfMemory) {
		t.Fatal("an OOMError is not an out of memory")
	}
}
