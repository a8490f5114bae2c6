package impl

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// A cached chunk whose release fails past the retries inside EmptyCache (spec/FINDINGS.md F11) is still on the
// device: EmptyCache reports the driver's error (PyTorch's emptyCache raises it), ReservedBytes keeps
// counting the handle (INV-STATS: reserved = the device's used bytes), the snapshot lists it with its size,
// and the next EmptyCache releases it. Every policy (gmlake and expandable unmap chunks of an arena,
// caching and gmlake-paper release whole segments).
func TestEmptyCacheReportsAReleaseThatFailsPastItsRetries(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, dev := newTest(t, pol, 256*MiB, true /* sync */)
			keep, err := a.Alloc(4*MiB, 0 /* stream */)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Alloc(20*MiB, 0 /* stream */)
			if err != nil {
				t.Fatal(err)
			}
			mustFree(t, a, p)
			for i := 1; i <= 4; i++ { // the call and its three retries
				dev.FailNth(vmm.CallRelease, i, vmm.UnknownCUDAError)
			}
			err = a.EmptyCache()
			if !errors.Is(err, vmm.UnknownCUDAError) {
				t.Fatalf("EmptyCache with every try of a release failing = %v, want the driver's error", err)
			}
			st := a.Stats()
			if st.ReservedBytes != dev.Used() {
				t.Fatalf("after the failed release: ReservedBytes %d, device used %d", st.ReservedBytes, dev.Used())
			}
			var listed uint64
			for _, c := range a.Snapshot().Chunks {
				listed += c.Size
			}
			if listed != dev.Used() {
				t.Fatalf("after the failed release: the snapshot's chunks hold %d B, the device %d B", listed, dev.Used())
			}
			dev.ClearFaults()
			if err := a.EmptyCache(); err != nil {
				t.Fatalf("EmptyCache once the driver recovered: %v", err)
			}
			if st := a.Stats(); st.ReservedBytes != dev.Used() || st.ReservedBytes >= listed {
				t.Fatalf("after the second EmptyCache: ReservedBytes %d, device used %d (was %d)", st.ReservedBytes, dev.Used(), listed)
			}
			mustFree(t, a, keep)
			closeClean(t, a, dev)
		})
	}
}
