package conformance

// Engine integrity on any vmm.Driver (the real GPU included): a random workload of allocations and frees
// through one policy, where every allocation is filled with its own pattern (Memset) right after Alloc and
// checked (Read) before Free, and live allocations are spot-checked along the way. A mapping bug in the
// engine (a chunk backing two live blocks, a stitched range over the wrong handles, a view torn down too
// early) shows up as a corrupted pattern, with the allocation and the byte that went wrong.

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// IntegrityConfig sizes an integrity run.
type IntegrityConfig struct {
	Policy  string
	Seed    int64
	Ops     int    // allocations + frees; default 2000
	MaxLive uint64 // bound on the requested bytes live at once; default 4 GiB
	MaxSize uint64 // largest single request; default 512 MiB
	Streams int    // created streams besides the default one; default 2

	_ struct{}
}

// IntegrityReport says what ran and what was found.
type IntegrityReport struct {
	Policy                      string
	Allocs, Frees, Checks, OOMs int
	CrossStream                 int // allocations also written on a second stream (RecordStream)
	PeakLive                    uint64
	Corruptions                 []string
	Stats                       impl.Stats
	Close                       impl.CloseReport
}

type liveAlloc struct {
	p    vmm.DevicePtr
	size uint64
	s    vmm.Stream
	v    byte // head value; the tail (last quarter, if >= 2 bytes) holds ^v
}

func (a liveAlloc) expect(off, n uint64) []byte {
	out := bytes.Repeat([]byte{a.v}, int(n))
	tail := a.size - a.size/4
	if a.size >= 2 {
		for i := uint64(0); i < n; i++ {
			if off+i >= tail {
				out[i] = ^a.v
			}
		}
	}
	return out
}

// EngineIntegrity runs the workload on d through a fresh allocator of cfg.Policy and closes it. The error
// is for setup and driver failures; corruptions are in the report.
func EngineIntegrity(d vmm.Driver, cfg IntegrityConfig) (*IntegrityReport, error) {
	if cfg.Ops <= 0 {
		cfg.Ops = 2000
	}
	if cfg.MaxLive == 0 {
		cfg.MaxLive = 4 * vmm.GiB
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 512 * vmm.MiB
	}
	if cfg.Streams == 0 {
		cfg.Streams = 2
	}
	rep := &IntegrityReport{Policy: cfg.Policy}
	streams := []vmm.Stream{vmm.DefaultStream}
	for i := 0; i < cfg.Streams; i++ {
		s, err := d.CreateStream()
		if err != nil {
			return nil, fmt.Errorf("integrity: %w", err)
		}
		streams = append(streams, s)
	}
	defer func() {
		for _, s := range streams[1:] {
			_ = d.DestroyStream(s)
		}
	}()
	a, err := impl.New(d, impl.Config{Policy: cfg.Policy})
	if err != nil {
		return nil, fmt.Errorf("integrity: impl.New(%q): %w", cfg.Policy, err)
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x696e74))
	var live []liveAlloc
	var liveBytes uint64
	buf := make([]byte, 4096)

	check := func(x liveAlloc, what string) error {
		windows := [][2]uint64{{0, min(x.size, 4096)}}
		if x.size > 4096 {
			windows = append(windows, [2]uint64{x.size - 4096, 4096})
			mid := uint64(rng.Int64N(int64(x.size - 4096)))
			windows = append(windows, [2]uint64{mid, 4096})
		}
		for _, w := range windows {
			dst := buf[:w[1]]
			if err := d.Read(x.p.Add(w[0]), dst, x.s); err != nil {
				return fmt.Errorf("integrity: reading allocation %v (%s): %w", x.p, vmm.FormatBytes(x.size), err)
			}
			rep.Checks++
			want := x.expect(w[0], w[1])
			if !bytes.Equal(dst, want) {
				i := 0
				for dst[i] == want[i] {
					i++
				}
				rep.Corruptions = append(rep.Corruptions, fmt.Sprintf("%s: allocation %v (%s, stream %d) byte %d is %#x, want %#x",
					what, x.p, vmm.FormatBytes(x.size), x.s, w[0]+uint64(i), dst[i], want[i]))
				return nil
			}
		}
		return nil
	}
	size := func() uint64 {
		// Log-uniform from 512 B to MaxSize, with a bias to sizes that are not granularity multiples.
		lo, hi := 9.0, 0.0
		for s := cfg.MaxSize; s > 1; s >>= 1 {
			hi++
		}
		e := lo + rng.Float64()*(hi-lo)
		n := uint64(1) << uint(e)
		return min(n+uint64(rng.Int64N(int64(n))), cfg.MaxSize)
	}

	free := func(i int) error {
		x := live[i]
		if err := check(x, "before free"); err != nil {
			return err
		}
		if err := a.Free(x.p); err != nil {
			return fmt.Errorf("integrity: Free(%v): %w", x.p, err)
		}
		rep.Frees++
		live[i] = live[len(live)-1]
		live = live[:len(live)-1]
		liveBytes -= x.size
		return nil
	}
	alloc := func(n uint64, s vmm.Stream) error {
		p, err := a.Alloc(n, s)
		if err != nil {
			if vmm.ResultOf(err) == vmm.OutOfMemory || isOOM(err) {
				rep.OOMs++
				return nil
			}
			return fmt.Errorf("integrity: Alloc(%s): %w", vmm.FormatBytes(n), err)
		}
		rep.Allocs++
		x := liveAlloc{p: p, size: n, s: s, v: byte(1 + rng.IntN(254))}
		tail := n - n/4
		if err := d.Memset(p, tail, x.v, s); err != nil {
			return fmt.Errorf("integrity: Memset of allocation %v (%s): %w", p, vmm.FormatBytes(n), err)
		}
		if err := d.Memset(p.Add(tail), n-tail, ^x.v, s); err != nil {
			return fmt.Errorf("integrity: Memset of allocation %v (%s): %w", p, vmm.FormatBytes(n), err)
		}
		if len(streams) > 1 && rng.IntN(4) == 0 {
			// Use it on a second stream too (the same bytes again, asynchronously) and tell the allocator:
			// its block must not be handed out again before that work completes (RecordStream). A reuse
			// that does not wait lets this late write land in the next allocation's pattern.
			other := streams[rng.IntN(len(streams))]
			if other != s {
				if err := d.Memset(p, tail, x.v, other); err != nil {
					return fmt.Errorf("integrity: Memset on a second stream: %w", err)
				}
				if err := a.RecordStream(p, other); err != nil {
					return fmt.Errorf("integrity: RecordStream(%v, %d): %w", p, other, err)
				}
				rep.CrossStream++
			}
		}
		live = append(live, x)
		liveBytes += n
		rep.PeakLive = max(rep.PeakLive, liveBytes)
		if rng.IntN(8) == 0 { // spot-check an older allocation: a new one must not have overwritten it
			if err := check(live[rng.IntN(len(live))], "spot check"); err != nil {
				return err
			}
		}
		return nil
	}

	for op := 0; op < cfg.Ops; op++ {
		if op%150 == 149 {
			// A fragmenting burst: 12 blocks of S, every other one freed, then one of 6 S. No free block
			// fits it, the freed ones together do: stitching policies stitch here (gmlake-paper when
			// 6 S >= 512 MiB).
			sz := 48*vmm.MiB + uint64(rng.Int64N(int64(80*vmm.MiB)))
			s := streams[rng.IntN(len(streams))]
			base := len(live)
			for j := 0; j < 12; j++ {
				if err := alloc(sz, s); err != nil {
					return rep, err
				}
			}
			for j := len(live) - 1; j >= base; j -= 2 {
				if err := free(j); err != nil {
					return rep, err
				}
			}
			if err := alloc(6*sz, s); err != nil {
				return rep, err
			}
			continue
		}
		if len(live) > 0 && (rng.IntN(2) == 0 || liveBytes > cfg.MaxLive) {
			if err := free(rng.IntN(len(live))); err != nil {
				return rep, err
			}
			continue
		}
		if err := alloc(size(), streams[rng.IntN(len(streams))]); err != nil {
			return rep, err
		}
	}
	for _, x := range live {
		if err := check(x, "at the end"); err != nil {
			return rep, err
		}
		if err := a.Free(x.p); err != nil {
			return rep, fmt.Errorf("integrity: Free(%v): %w", x.p, err)
		}
		rep.Frees++
	}
	rep.Stats = a.Stats()
	cr, err := a.Close()
	rep.Close = cr
	if err != nil {
		return rep, fmt.Errorf("integrity: Close: %w", err)
	}
	if hz, ok := d.(interface{ HazardError() error }); ok { // the simulated device's rule-9 report
		if err := hz.HazardError(); err != nil {
			return rep, fmt.Errorf("integrity: %w", err)
		}
	}
	return rep, nil
}

func isOOM(err error) bool {
	_, ok := err.(*impl.OOMError)
	return ok
}

// String prints the report in one line plus any corruption.
func (r *IntegrityReport) String() string {
	s := fmt.Sprintf("policy %s: %d allocs (%d also used on a second stream), %d frees, %d windows checked, %d OOMs, peak live %s, %d stitches (%d reuses), %d driver calls, %d corruptions",
		r.Policy, r.Allocs, r.CrossStream, r.Frees, r.Checks, r.OOMs, vmm.FormatBytes(r.PeakLive), r.Stats.NumStitches, r.Stats.NumStitchReuses,
		r.Stats.DriverCalls.Total(), len(r.Corruptions))
	for _, c := range r.Corruptions {
		s += "\n  " + c
	}
	return s
}
