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
// the range, because on the H200 the cost is per handle, not per byte (notes/cuda-vmm.md).
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

// H200Costs returns the cost model with the medians measured on an NVIDIA H200 (driver 580.159, CUDA 13.0),
// the table of notes/cuda-vmm.md. Event and stream calls cost a few hundred nanoseconds there.
func H200Costs() *CostModel {
	m := &CostModel{}
	m.Points[CallCreate] = row(11.8, 11.7, 14.0, 24.4)
	m.Points[CallReserve] = row(0.9, 4.4, 2.8, 2.8)
	m.Points[CallMap] = row(1.0, 1.0, 1.0, 1.1)
	m.Points[CallSetAccess] = row(29.6, 29.4, 48.2, 66.4)
	m.Points[CallUnmap] = row(18.4, 19.5, 25.7, 31.2)
	m.Points[CallRelease] = row(13.5, 27.4, 135.9, 582.9)
	m.Points[CallFreeAddress] = row(0.9, 3.4, 3.1, 3.5)
	m.Flat[CallGranularity] = us(0.1)
	m.Flat[CallMemInfo] = us(1)
	m.Flat[CallCreateStream] = us(5)
	m.Flat[CallDestroyStream] = us(5)
	m.Flat[CallStreamQuery] = us(0.3)
	m.Flat[CallCreateEvent] = us(0.5)
	m.Flat[CallRecordEvent] = us(0.5)
	m.Flat[CallQueryEvent] = us(0.3)
	m.Flat[CallStreamWaitEvent] = us(0.5)
	m.Flat[CallDestroyEvent] = us(0.5)
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
