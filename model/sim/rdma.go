package sim

import (
	"fmt"

	"github.com/gmlake/gmlake/vmm"
)

// RDMAPattern is one call pattern measured on the H200 (driver 580.159) with GPUDirect-RDMA-capable handles
// (DeviceConfig.RDMAHandles): steps over one granularity-sized handle and three places A, B, C of one
// reservation ("mA" maps the handle at A, "aA" sets access on A, "uA" unmaps A), and whether the last step
// fails with CUDA_ERROR_UNKNOWN because an earlier step made a bad mapping of the handle.
type RDMAPattern struct {
	Name     string
	Steps    []string
	Poisoned bool
}

// RDMAPatterns are the measured patterns (docs/cuda-vmm.md, Shareable handles): the model's rule is checked
// against them here (TestRDMAHandlesPoisonAsTheH200Does) and the GPU against them in harness/conformance
// (TestRDMAPatternsReal).
var RDMAPatterns = []RDMAPattern{
	{"first access of B after A's unmap", []string{"mA", "mB", "uA", "aB", "mC"}, true},
	{"A accessed, B's first access after A's unmap", []string{"mA", "aA", "mB", "uA", "aB", "mC"}, true},
	{"no access after the unmap", []string{"mA", "mB", "uA", "mC"}, false},
	{"B accessed before A's unmap", []string{"mA", "mB", "aB", "uA", "mC"}, false},
	{"B accessed before and again after A's unmap", []string{"mA", "aA", "mB", "aB", "uA", "aB", "mC"}, false},
	{"A unmapped before B is mapped", []string{"mA", "uA", "mB", "aB", "mC"}, false},
	{"the engine's teardown: both accessed, B unmapped", []string{"mA", "aA", "mB", "aB", "uB", "mC", "aC"}, false},
	{"A mapped again before B's first access", []string{"mA", "mB", "uA", "mA", "aB", "mC"}, false},
	{"a third, older mapping A stays at C's first access", []string{"mA", "mB", "mC", "uB", "aC", "mB"}, false},
	{"the bad mapping unmapped: the handle maps again", []string{"mA", "mB", "uA", "aB", "uB", "mC"}, false},
	{"the first mapping, C, stays mapped", []string{"mC", "mA", "mB", "uA", "aB", "uC", "mC"}, false},
	{"the first mapping gone, a newer one's first access", []string{"mA", "mB", "uA", "mC", "uC", "aB", "mC"}, true},
	{"a map after the unmap cleans the handle", []string{"mA", "mB", "uA", "mC", "aB", "uC", "mC"}, false},
	{"with a bad mapping, another mapping's first access fails", []string{"mA", "mB", "mC", "uA", "aB", "aC"}, true},
	{"with a bad mapping, an accessible mapping's access succeeds", []string{"mA", "mB", "mC", "aB", "uA", "aC", "aB"}, false},
}

// RunRDMAPattern runs p on d, which must have room for one handle of d's granularity and 8 of address space,
// and releases what it made. last is the last step's error; err is a failure of any other step or of the
// setup and cleanup, which the pattern does not expect.
func RunRDMAPattern(d vmm.Driver, p RDMAPattern) (last, err error) {
	g := d.Granularity()
	h, err := d.Create(g)
	if err != nil {
		return nil, err
	}
	r, err := d.Reserve(8 * g)
	if err != nil {
		_ = d.Release(h)
		return nil, err
	}
	at := map[byte]vmm.DevicePtr{'A': r, 'B': r.Add(2 * g), 'C': r.Add(4 * g)}
	for i, s := range p.Steps {
		var e error
		switch s[0] {
		case 'm':
			e = d.Map(at[s[1]], g, h, 0)
		case 'a':
			e = d.SetAccess(at[s[1]], g)
		case 'u':
			e = d.Unmap(at[s[1]], g)
		default:
			e = fmt.Errorf("sim: RDMA pattern %q: unknown step %q", p.Name, s)
		}
		if i == len(p.Steps)-1 {
			last = e
		} else if e != nil && err == nil {
			err = fmt.Errorf("sim: RDMA pattern %q: step %d (%s): %w", p.Name, i, s, e)
		}
	}
	for _, e := range []error{d.Unmap(r, 8*g), d.Release(h), d.FreeAddress(r, 8*g)} {
		if e != nil && err == nil {
			err = fmt.Errorf("sim: RDMA pattern %q: cleanup: %w", p.Name, e)
		}
	}
	return last, err
}
