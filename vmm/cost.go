package vmm

import (
	"math"
	"time"
)

// CostPoint is the latency of one call at one size.
type CostPoint struct {
	Size    uint64
	Latency time.Duration
}

// CostModel gives the latency of each driver call by the size it touches. For range calls (Unmap, SetAccess)
// the cost is per mapping covered: the simulated device charges Cost(kind, mappingSize) for each mapping in
// the range, because on the H200 the cost is per handle, not per byte (docs/cuda-vmm.md).
//
// Between table points latency is interpolated linearly in log2(size); beyond the ends it is extrapolated
// from the last two points (never below zero). A kind with one point costs that point at every size; a kind
// with none costs Flat[kind].
type CostModel struct {
	Points [NumCallKinds][]CostPoint // sorted by Size
	Flat   [NumCallKinds]time.Duration
}

func us(f float64) time.Duration { return time.Duration(f * float64(time.Microsecond)) }

func row(v2, v20, v256, v1g float64) []CostPoint {
	return []CostPoint{{2 * MiB, us(v2)}, {20 * MiB, us(v20)}, {256 * MiB, us(v256)}, {GiB, us(v1g)}}
}

// H200Costs returns the cost model with the medians measured on NVIDIA H200s (driver 580.159, CUDA 13.0).
// The size-dependent rows are `gmlake probe` (harness/probe: create, reserve, map, set access,
// unmap, release, free address, 50 repetitions each, through impl/cudavmm, context set per call) on four
// H200 machines on 2026-11-29; each cell is the median over the machines, which differed by up to 2x
// (docs/gpu.md). They replace the first notes' single-machine table (docs/cuda-vmm.md), which was more than 25% off in
// 16 of 28 cells (create and map at large sizes most: 1 GiB create 88.7 us, not 24.4). The event calls
// (what gmlake-paper makes per block operation, as GMLake does) are `gmlake probe`'s event rows, medians of
// 1000 create/record/query/destroy rounds on an idle stream, on one H200 on 2026-12-01
// (docs/results/probe-h200-events.txt; that machine ran the VMM calls at 0.3-0.7x of the rows below, map
// at 1.5-3.5x, so the event cells may be on the fast side). Stream calls: a few hundred nanoseconds to a few
// microseconds (not re-measured).
func H200Costs() *CostModel {
	m := &CostModel{}
	m.Points[CallCreate] = row(15.1, 14.4, 24.2, 88.7)
	m.Points[CallReserve] = row(1.7, 1.9, 6.3, 8.9)
	m.Points[CallMap] = row(1.6, 1.5, 2.4, 3.8)
	m.Points[CallSetAccess] = row(29.1, 29.8, 55.1, 93.2)
	m.Points[CallUnmap] = row(19.7, 20.2, 30.9, 45.9)
	m.Points[CallRelease] = row(14.2, 30.4, 140.7, 489.0)
	m.Points[CallFreeAddress] = row(1.1, 1.2, 4.7, 7.6)
	m.Flat[CallGranularity] = us(0.1)
	m.Flat[CallMemInfo] = us(1)
	m.Flat[CallCreateStream] = us(5)
	m.Flat[CallDestroyStream] = us(5)
	m.Flat[CallStreamQuery] = us(0.3)
	m.Flat[CallCreateEvent] = us(0.38)
	m.Flat[CallRecordEvent] = us(0.39)
	m.Flat[CallQueryEvent] = us(0.29)
	m.Flat[CallStreamWaitEvent] = us(0.5)
	m.Flat[CallDestroyEvent] = us(0.19)
	m.Flat[CallMemset] = us(3)
	m.Flat[CallRead] = us(10)
	return m
}

// Cost returns the modeled latency of one call of kind k touching size bytes (one handle's worth for range
// calls; see the type doc).
func (m *CostModel) Cost(k CallKind, size uint64) time.Duration {
	if k < 0 || k >= NumCallKinds {
		return 0
	}
	pts := m.Points[k]
	switch len(pts) {
	case 0:
		return m.Flat[k]
	case 1:
		return pts[0].Latency
	}
	if size == 0 {
		size = 1
	}
	x := math.Log2(float64(size))
	i := 1
	for i < len(pts)-1 && size > pts[i].Size {
		i++
	}
	a, b := pts[i-1], pts[i]
	xa, xb := math.Log2(float64(a.Size)), math.Log2(float64(b.Size))
	if size <= a.Size && i == 1 {
		// Below the table: flat at the smallest point (small calls cost what the smallest measured did).
		return a.Latency
	}
	ya, yb := float64(a.Latency), float64(b.Latency)
	y := ya + (yb-ya)*(x-xa)/(xb-xa)
	if y < 0 {
		y = 0
	}
	return time.Duration(y)
}
