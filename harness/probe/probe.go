package probe

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gmlake/gmlake/vmm"
)

// Config says how many times the cost probe repeats each measurement (the median is kept).
type Config struct {
	Reps       int      // repetitions per call kind and size (default 25)
	StitchReps int      // repetitions per stitched-range size (default 5)
	Sizes      []uint64 // default 2 MiB, 20 MiB, 256 MiB, 1 GiB
	StitchK    []int    // default 8, 64, 512 handles of one granularity each
	EventReps  int      // repetitions of each event call (default 1000)

	_ struct{}
}

// Row is one call kind's median latency at each probed size.
type Row struct {
	Name   string       // as in docs/cuda-vmm.md
	Kind   vmm.CallKind // the cost model's kind; -1 for the cuMemAlloc/cuMemFree comparison rows
	Median []time.Duration
}

// StitchRow is the cost of stitching K granularity-sized handles into one range.
type StitchRow struct {
	K            int
	MapPerHandle time.Duration // median cuMemMap of one handle
	SetAccess    time.Duration // median cuMemSetAccess over the whole range
	Unmap        time.Duration // median cuMemUnmap of the whole range in one call
}

// EventRow is the median latency of one event call, the calls GMLake makes per block operation
// (cudaEventCreateWithFlags, cudaEventRecord, cudaEventQuery, cudaEventDestroy).
type EventRow struct {
	Kind   vmm.CallKind
	Median time.Duration
}

// Result is the measured cost table.
type Result struct {
	Granularity uint64
	Sizes       []uint64
	Rows        []Row
	Stitch      []StitchRow
	Events      []EventRow
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

// PlainAllocator is the optional interface of a driver that also has the plain, non-VMM allocation calls
// (impl/cudavmm: cuMemAlloc_v2/cuMemFree_v2, what cudaMalloc/cudaFree do); Run then times them too, for
// comparison.
type PlainAllocator interface {
	MemAlloc(size uint64) (vmm.DevicePtr, error)
	MemFree(p vmm.DevicePtr) error
}

// Run measures the median latency of every VMM call kind at each size, of cuMemAlloc/cuMemFree for
// comparison (when d is a PlainAllocator), of stitching K handles into one range, and of the event calls.
// It needs about 1.1 GiB of free device memory at a time with the default sizes. Single-threaded, as in
// docs/cuda-vmm.md. Everything it creates is released.
func Run(d vmm.Driver, cfg Config) (*Result, error) {
	plain, hasPlain := d.(PlainAllocator)
	if cfg.Reps <= 0 {
		cfg.Reps = 25
	}
	if cfg.StitchReps <= 0 {
		cfg.StitchReps = 5
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []uint64{2 * vmm.MiB, 20 * vmm.MiB, 256 * vmm.MiB, vmm.GiB}
	}
	if len(cfg.StitchK) == 0 {
		cfg.StitchK = []int{8, 64, 512}
	}
	g := d.Granularity()
	res := &Result{Granularity: g, Sizes: cfg.Sizes}
	order := []vmm.CallKind{vmm.CallCreate, vmm.CallReserve, vmm.CallMap, vmm.CallSetAccess, vmm.CallUnmap,
		vmm.CallRelease, vmm.CallFreeAddress}
	names := map[vmm.CallKind]string{
		vmm.CallCreate: "cuMemCreate", vmm.CallReserve: "cuMemAddressReserve", vmm.CallMap: "cuMemMap (one handle)",
		vmm.CallSetAccess: "cuMemSetAccess (one handle's range)", vmm.CallUnmap: "cuMemUnmap (one handle)",
		vmm.CallRelease: "cuMemRelease", vmm.CallFreeAddress: "cuMemAddressFree",
	}
	samples := make(map[vmm.CallKind][][]time.Duration)
	var mallocS, freeS [][]time.Duration
	for _, size := range cfg.Sizes {
		size = vmm.AlignUp(size, g)
		per := make(map[vmm.CallKind][]time.Duration)
		var ma, mf []time.Duration
		// One warm-up round, not kept.
		for rep := -1; rep < cfg.Reps; rep++ {
			var h vmm.Handle
			var p vmm.DevicePtr
			steps := []func() error{
				func() (err error) { h, err = d.Create(size); return },
				func() (err error) { p, err = d.Reserve(size); return },
				func() error { return d.Map(p, size, h, 0) },
				func() error { return d.SetAccess(p, size) },
				func() error { return d.Unmap(p, size) },
				func() error { return d.Release(h) },
				func() error { return d.FreeAddress(p, size) },
			}
			for i, f := range steps {
				dt, err := timed(f)
				if err != nil {
					return nil, fmt.Errorf("probe at %s: %w", vmm.FormatBytes(size), err)
				}
				if rep >= 0 {
					per[order[i]] = append(per[order[i]], dt)
				}
			}
			if !hasPlain {
				continue
			}
			var mp vmm.DevicePtr
			dt, err := timed(func() (err error) { mp, err = plain.MemAlloc(size); return })
			if err != nil {
				return nil, fmt.Errorf("probe at %s: %w", vmm.FormatBytes(size), err)
			}
			dt2, err := timed(func() error { return plain.MemFree(mp) })
			if err != nil {
				return nil, fmt.Errorf("probe at %s: %w", vmm.FormatBytes(size), err)
			}
			if rep >= 0 {
				ma, mf = append(ma, dt), append(mf, dt2)
			}
		}
		for _, k := range order {
			samples[k] = append(samples[k], per[k])
		}
		mallocS, freeS = append(mallocS, ma), append(freeS, mf)
	}
	for _, k := range order {
		row := Row{Name: names[k], Kind: k}
		for _, s := range samples[k] {
			row.Median = append(row.Median, median(s))
		}
		res.Rows = append(res.Rows, row)
	}
	if hasPlain {
		ra := Row{Name: "cuMemAlloc (cudaMalloc, for comparison)", Kind: -1}
		rf := Row{Name: "cuMemFree (cudaFree)", Kind: -1}
		for i := range mallocS {
			ra.Median = append(ra.Median, median(mallocS[i]))
			rf.Median = append(rf.Median, median(freeS[i]))
		}
		res.Rows = append(res.Rows, ra, rf)
	}

	for _, k := range cfg.StitchK {
		row, err := probeStitch(d, k, cfg.StitchReps)
		if err != nil {
			return nil, err
		}
		res.Stitch = append(res.Stitch, row)
	}
	if cfg.EventReps <= 0 {
		cfg.EventReps = 1000
	}
	evs, err := probeEvents(d, cfg.EventReps)
	if err != nil {
		return nil, err
	}
	res.Events = evs
	return res, nil
}

// probeEvents times GMLake's per-block event pattern on the default stream, reps times after a warm-up:
// create, record, query (the event has completed: the stream is idle), destroy.
func probeEvents(d vmm.Driver, reps int) ([]EventRow, error) {
	kinds := []vmm.CallKind{vmm.CallCreateEvent, vmm.CallRecordEvent, vmm.CallQueryEvent, vmm.CallDestroyEvent}
	samples := make([][]time.Duration, len(kinds))
	for rep := -10; rep < reps; rep++ {
		var e vmm.Event
		steps := []func() error{
			func() (err error) { e, err = d.CreateEvent(); return },
			func() error { return d.RecordEvent(e, vmm.DefaultStream) },
			func() error { _, err := d.QueryEvent(e); return err },
			func() error { return d.DestroyEvent(e) },
		}
		for i, f := range steps {
			dt, err := timed(f)
			if err != nil {
				return nil, fmt.Errorf("event probe: %w", err)
			}
			if rep >= 0 {
				samples[i] = append(samples[i], dt)
			}
		}
	}
	out := make([]EventRow, len(kinds))
	for i, k := range kinds {
		out[i] = EventRow{Kind: k, Median: median(samples[i])}
	}
	return out, nil
}

func probeStitch(d vmm.Driver, k, reps int) (StitchRow, error) {
	g := d.Granularity()
	var maps, sets, unmaps []time.Duration
	for rep := -1; rep < reps; rep++ {
		hs := make([]vmm.Handle, k)
		for i := range hs {
			h, err := d.Create(g)
			if err != nil {
				return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
			}
			hs[i] = h
		}
		size := uint64(k) * g
		p, err := d.Reserve(size)
		if err != nil {
			return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
		}
		for i, h := range hs {
			dt, err := timed(func() error { return d.Map(p.Add(uint64(i)*g), g, h, 0) })
			if err != nil {
				return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
			}
			if rep >= 0 {
				maps = append(maps, dt)
			}
		}
		dt, err := timed(func() error { return d.SetAccess(p, size) })
		if err != nil {
			return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
		}
		dt2, err := timed(func() error { return d.Unmap(p, size) })
		if err != nil {
			return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
		}
		if rep >= 0 {
			sets, unmaps = append(sets, dt), append(unmaps, dt2)
		}
		for _, h := range hs {
			if err := d.Release(h); err != nil {
				return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
			}
		}
		if err := d.FreeAddress(p, size); err != nil {
			return StitchRow{}, fmt.Errorf("stitch probe K=%d: %w", k, err)
		}
	}
	return StitchRow{K: k, MapPerHandle: median(maps), SetAccess: median(sets), Unmap: median(unmaps)}, nil
}

func usStr(d time.Duration) string {
	v := float64(d) / float64(time.Microsecond)
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// writeHeader writes a title line and the header of a table with one column per probed size.
func (r *Result) writeHeader(b *strings.Builder, title string) {
	b.WriteString(title + "\n| call |")
	for _, s := range r.Sizes {
		fmt.Fprintf(b, " %s |", sizeLabel(s))
	}
	b.WriteString("\n|---|")
	for range r.Sizes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
}

// Table prints the result in the shape of the tables in docs/cuda-vmm.md (median microseconds).
func (r *Result) Table() string {
	var b strings.Builder
	r.writeHeader(&b, "Cost of each call (median microseconds, single thread)")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s |", row.Name)
		for _, m := range row.Median {
			fmt.Fprintf(&b, " %s |", usStr(m))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nStitching K separate %s handles into one range (map each, then ONE cuMemSetAccess over the range):\n", sizeLabel(r.Granularity))
	b.WriteString("| K | map, per handle | setAccess over the range | unmap of the range in one call |\n|---|---|---|---|\n")
	for _, s := range r.Stitch {
		fmt.Fprintf(&b, "| %d | %s | %s (%s/handle) | %s |\n", s.K, usStr(s.MapPerHandle), usStr(s.SetAccess),
			usStr(s.SetAccess/time.Duration(s.K)), usStr(s.Unmap))
	}
	if len(r.Events) > 0 {
		b.WriteString("\nEvent calls, GMLake's per-block pattern on an idle stream (median microseconds):\n| call | us |\n|---|---|\n")
		for _, e := range r.Events {
			fmt.Fprintf(&b, "| %s | %s |\n", e.Kind, nsStr(e.Median))
		}
	}
	return b.String()
}

// nsStr prints a sub-microsecond duration with two decimals of a microsecond.
func nsStr(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Microsecond)) }

func sizeLabel(s uint64) string {
	if s >= vmm.GiB && s%vmm.GiB == 0 {
		return fmt.Sprintf("%d GiB", s/vmm.GiB)
	}
	return fmt.Sprintf("%d MiB", s/vmm.MiB)
}

// Deviation is one cell of the cost model that differs from the measurement.
type Deviation struct {
	Kind     vmm.CallKind
	Size     uint64
	Measured time.Duration
	Model    time.Duration
	Ratio    float64 // measured / model
}

// Compare sets the measured medians beside the model's costs and returns the cells whose measured value
// differs from the model's by more than tol (0.25: 25%) of the model's. Cells under 2 us are compared with
// an absolute tolerance of 1 us instead (timer and call overhead dominate there).
func (r *Result) Compare(m *vmm.CostModel, tol float64) (string, []Deviation) {
	var b strings.Builder
	var devs []Deviation
	r.writeHeader(&b, "Measured vs cost model (us; ratio measured/model; * = off by more than the tolerance)")
	for _, row := range r.Rows {
		if row.Kind < 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s |", row.Kind.Short())
		for i, meas := range row.Median {
			mod := m.Cost(row.Kind, r.Sizes[i])
			ratio := float64(meas) / math.Max(float64(mod), 1)
			off := math.Abs(float64(meas-mod)) > tol*float64(mod)
			if mod < 2*time.Microsecond && meas < 2*time.Microsecond {
				off = math.Abs(float64(meas-mod)) > float64(time.Microsecond)
			}
			mark := ""
			if off {
				mark = " *"
				devs = append(devs, Deviation{Kind: row.Kind, Size: r.Sizes[i], Measured: meas, Model: mod, Ratio: ratio})
			}
			fmt.Fprintf(&b, " %s vs %s (%.2f)%s |", usStr(meas), usStr(mod), ratio, mark)
		}
		b.WriteString("\n")
	}
	for _, s := range r.Stitch {
		perSet := s.SetAccess / time.Duration(s.K)
		perUnmap := s.Unmap / time.Duration(s.K)
		fmt.Fprintf(&b, "stitch K=%d: setAccess/handle %s vs model %s, unmap/handle %s vs model %s, map %s vs model %s\n",
			s.K, usStr(perSet), usStr(m.Cost(vmm.CallSetAccess, r.Granularity)), usStr(perUnmap),
			usStr(m.Cost(vmm.CallUnmap, r.Granularity)), usStr(s.MapPerHandle), usStr(m.Cost(vmm.CallMap, r.Granularity)))
	}
	for _, e := range r.Events {
		mod := m.Cost(e.Kind, 0)
		ratio := float64(e.Median) / math.Max(float64(mod), 1)
		mark := ""
		if math.Abs(float64(e.Median-mod)) > tol*float64(mod) {
			mark = " *"
			devs = append(devs, Deviation{Kind: e.Kind, Measured: e.Median, Model: mod, Ratio: ratio})
		}
		fmt.Fprintf(&b, "%s: %s vs model %s (%.2f)%s\n", e.Kind.Short(), nsStr(e.Median), nsStr(mod), ratio, mark)
	}
	return b.String(), devs
}
