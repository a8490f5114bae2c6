// Package gmlake is the Go API of the gmlake GPU memory allocator: a caching allocator that defragments
// with virtual memory stitching (GMLake, ASPLOS 2024, improved), with PyTorch's native and
// expandable-segments allocators as policies of the same engine.
//
// It is a thin facade over package impl (the engine), and owns nothing else: the device is always named.
// NewSimulated runs on a fresh simulated H200 (model/sim: no GPU is touched); New runs on the vmm.Driver it
// is given, for example the real GPU from OpenCUDA.
//
//	a, err := gmlake.NewSimulated(gmlake.Options{})   // policy "gmlake" on a simulated H200
//	d, err := gmlake.OpenCUDA(0)                      // or the real GPU 0 (libcuda.so.1, loaded at run time)
//	a, err := gmlake.New(d, gmlake.Options{})
//	p, err := a.Alloc(64<<20, vmm.DefaultStream)
//	err = a.Free(p)
//	rep, err := a.Close()
package gmlake

import (
	"fmt"
	"strings"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Policy names (see impl.Policies).
const (
	PolicyGMLake      = impl.PolicyGMLake      // ours, the default
	PolicyCaching     = impl.PolicyCaching     // PyTorch's native caching allocator
	PolicyExpandable  = impl.PolicyExpandable  // PyTorch's expandable_segments:True
	PolicyGMLakePaper = impl.PolicyGMLakePaper // the original GMLake defaults
)

// Policies lists the policy names, the default first.
func Policies() []string { return append([]string(nil), impl.Policies...) }

// Re-exported types and errors, so that most users need only this package.
type (
	Config      = impl.Config
	Stats       = impl.Stats
	Snapshot    = impl.Snapshot
	CloseReport = impl.CloseReport
	OOMError    = impl.OOMError
)

// Errors (errors.Is). Out-of-memory errors are *OOMError and match vmm.ErrOutOfMemory.
var (
	ErrInvalidSize     = impl.ErrInvalidSize
	ErrUnknownPointer  = impl.ErrUnknownPointer
	ErrInteriorPtr     = impl.ErrInteriorPtr
	ErrDoubleFree      = impl.ErrDoubleFree
	ErrUnknownStream   = impl.ErrUnknownStream
	ErrClosed          = impl.ErrClosed
	ErrUnknownPolicy   = impl.ErrUnknownPolicy
	ErrBadConfig       = impl.ErrBadConfig
	ErrStreamCapturing = impl.ErrStreamCapturing
	ErrOutOfMemory     = vmm.ErrOutOfMemory
	ErrBadKnob         = clib.ErrBadKnob
)

// Options configures New and NewSimulated. The zero value is the default policy with its defaults.
type Options struct {
	// Policy names the policy; it overrides Config.Policy when not empty.
	Policy string
	// Config holds the engine's knobs (zero fields take the policy's defaults).
	Config Config
	// Knobs are knobs as text, applied over Config (see ParseConfig for the names).
	Knobs map[string]string

	_ struct{}
}

// Allocator is a GPU memory allocator. Safe for concurrent use.
type Allocator struct {
	a *impl.Allocator
	d vmm.Driver
}

// NewSimulated makes an allocator on a fresh simulated H200 (model/sim, an H200's capacity, streams whose
// work completes at once): no GPU is touched. Driver returns the device (a *sim.Device).
func NewSimulated(opts Options) (*Allocator, error) {
	return New(sim.NewDevice(sim.DeviceConfig{SyncStreams: true, UniqueAddresses: true}), opts)
}

// OpenCUDA opens GPU `device` (an ordinal) through libcuda.so.1, loaded at run time; on a machine without a
// driver the error wraps vmm.ErrDriverNotLoaded (or says no cgo).
func OpenCUDA(device int) (vmm.Driver, error) { return cudavmm.New(device) }

// New makes an allocator on the device d: the real GPU (OpenCUDA), a simulated one (model/sim), or any
// vmm.Driver. The allocator uses d from then on; Close releases what it holds on d but does not close d.
func New(d vmm.Driver, opts Options) (*Allocator, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: gmlake.New needs a device (OpenCUDA, or NewSimulated for the simulated H200)",
			ErrBadConfig)
	}
	cfg := opts.Config
	if len(opts.Knobs) > 0 {
		var err error
		if cfg, err = parseInto(cfg, opts.Knobs); err != nil {
			return nil, err
		}
	}
	if opts.Policy != "" {
		cfg.Policy = opts.Policy
	}
	a, err := impl.New(d, cfg)
	if err != nil {
		return nil, err
	}
	return &Allocator{a: a, d: d}, nil
}

// ParseConfig builds a Config from text knobs, as found in environment variables: "policy" (or "POLICY")
// names the policy, and every other key names a Config field by its Go name ("ChunkSize") or its
// environment spelling ("CHUNK_SIZE"); an optional "GMLAKE_" prefix is ignored. Sizes accept KiB/MiB/GiB
// suffixes. Unknown names and bad values are errors wrapping ErrBadKnob.
func ParseConfig(knobs map[string]string) (Config, error) {
	return parseInto(Config{}, knobs)
}

func parseInto(cfg Config, knobs map[string]string) (Config, error) {
	rest := map[string]string{}
	for k, v := range knobs {
		k = strings.TrimPrefix(k, "GMLAKE_")
		if strings.EqualFold(k, "policy") {
			cfg.Policy = strings.TrimSpace(v)
			continue
		}
		rest[k] = v
	}
	if err := clib.ApplyKnobs(&cfg, rest); err != nil {
		return cfg, err
	}
	if cfg.Policy != "" {
		known := false
		for _, p := range impl.Policies {
			known = known || p == cfg.Policy
		}
		if !known {
			return cfg, fmt.Errorf("%w %q (want one of %v)", ErrUnknownPolicy, cfg.Policy, impl.Policies)
		}
	}
	return cfg, nil
}

// Alloc returns a pointer to at least size bytes for use on stream s.
func (x *Allocator) Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error) {
	return x.a.Alloc(size, s)
}

// Free frees the allocation at p (stream-ordered on its allocation stream).
func (x *Allocator) Free(p vmm.DevicePtr) error { return x.a.Free(p) }

// RecordStream marks the allocation at p as used on stream s too.
func (x *Allocator) RecordStream(p vmm.DevicePtr, s vmm.Stream) error { return x.a.RecordStream(p, s) }

// DestroyStream destroys stream s of the allocator's device, telling the engine first (impl's
// ForgetStream), so that memory used on s is reused only once the work s still runs has completed. Alloc and
// RecordStream on s are ErrUnknownStream afterwards.
func (x *Allocator) DestroyStream(s vmm.Stream) error {
	if err := x.a.ForgetStream(s); err != nil {
		return err
	}
	return x.d.DestroyStream(s)
}

// EmptyCache returns the cached free memory to the device.
func (x *Allocator) EmptyCache() error { return x.a.EmptyCache() }

// Stats returns the counters.
func (x *Allocator) Stats() Stats { return x.a.Stats() }

// Snapshot returns the full state (for checkers and humans).
func (x *Allocator) Snapshot() Snapshot { return x.a.Snapshot() }

// Close releases everything and reports what was still live.
func (x *Allocator) Close() (CloseReport, error) { return x.a.Close() }

// Policy names the allocator's policy.
func (x *Allocator) Policy() string { return x.a.Policy() }

// Driver returns the device the allocator runs on (a *sim.Device after NewSimulated).
func (x *Allocator) Driver() vmm.Driver { return x.d }

// Engine returns the underlying engine.
func (x *Allocator) Engine() *impl.Allocator { return x.a }
