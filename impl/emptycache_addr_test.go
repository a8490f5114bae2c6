package impl

import (
	"errors"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// Property (F18): EmptyCache reports an address it could not free: it either succeeds with no reservation
// left or answers the driver's error with the reservation kept, never succeeds with a reservation that
// nothing maps. A fixed segment released (and, under gmlake-paper, a stitched block collected) whose
// cuMemAddressFree fails past its retries leaves an orphan reservation, which EmptyCache tries again before
// it returns (an arena's reservation stays the arena's at once). Once the driver recovers, the next
// EmptyCache frees it.
func TestEmptyCacheReportsAnAddressItCouldNotFree(t *testing.T) {
	for _, pol := range []string{PolicyCaching, PolicyGMLake, PolicyExpandable, PolicyGMLakePaper} {
		for _, refused := range []int{4, 7, 8, 12} { // the first try and its retries; and the tries again after
			a, dev := newTest(t, pol, 64*MiB, true /* sync */)
			p, err := a.Alloc(1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Free(p); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= refused; i++ {
				dev.FailNth(vmm.CallFreeAddress, i, vmm.UnknownCUDAError)
			}
			err = a.EmptyCache()
			left := len(dev.State().Reservations)
			fixed := pol == PolicyCaching || pol == PolicyGMLakePaper // a fixed segment's address free is retried; an arena's is not
			switch {
			case err == nil && left != 0:
				t.Errorf("%s, %d address frees refused: EmptyCache succeeded with %d reservations left that nothing maps", pol, refused, left)
			case err != nil && (!errors.Is(err, vmm.UnknownCUDAError) || left != 1):
				t.Errorf("%s, %d address frees refused: EmptyCache = %v with %d reservations left; want the driver's error and the reservation kept", pol, refused, err, left)
			case fixed && refused < 8 && err != nil:
				t.Errorf("%s, %d address frees refused: EmptyCache = %v; want the reservation freed on the tries again", pol, refused, err)
			case fixed && refused >= 8 && err == nil:
				t.Errorf("%s, %d address frees refused: EmptyCache succeeded; want the driver's error", pol, refused)
			}
			dev.ClearFaults()
			if err := a.EmptyCache(); err != nil || len(dev.State().Reservations) != 0 {
				t.Errorf("%s, %d refused: EmptyCache once the driver recovered = %v, %d reservations left", pol, refused, err, len(dev.State().Reservations))
			}
			if _, err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
