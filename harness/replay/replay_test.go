package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmlake/gmlake/harness/snapshot"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
	"github.com/gmlake/gmlake/vmm"
	"github.com/gmlake/gmlake/vmm/wrap"
)

// bumpAlloc is a trivially predictable allocator for testing the harness on its own: blocks are requests
// rounded to 512 B, every allocation reserves fresh memory rounded to 2 MiB and nothing is ever reused, so
// reserved is the sum of all rounded requests. Each Alloc makes one MemInfo call on the driver, so driver
// counters can be checked. It fails with out of memory past limit (when non-zero).
type bumpAlloc struct {
	d     vmm.Driver
	next  vmm.DevicePtr
	live  map[vmm.DevicePtr]uint64
	st    impl.Stats
	limit uint64
}

func (b *bumpAlloc) Alloc(size uint64, s vmm.Stream) (vmm.DevicePtr, error) {
	if _, _, err := b.d.MemInfo(); err != nil {
		return 0, err
	}
	blk, res := vmm.AlignUp(size, 512), vmm.AlignUp(size, 2*vmm.MiB)
	if b.limit != 0 && b.st.ReservedBytes+res > b.limit {
		return 0, &impl.OOMError{Requested: size, Rounded: blk, Reserved: b.st.ReservedBytes}
	}
	b.next += vmm.DevicePtr(res)
	b.live[b.next] = blk
	b.st.AllocatedBytes += blk
	b.st.ReservedBytes += res
	b.st.PeakAllocatedBytes = max(b.st.PeakAllocatedBytes, b.st.AllocatedBytes)
	b.st.PeakReservedBytes = max(b.st.PeakReservedBytes, b.st.ReservedBytes)
	return b.next, nil
}

func (b *bumpAlloc) Free(p vmm.DevicePtr) error {
	blk, ok := b.live[p]
	if !ok {
		return impl.ErrUnknownPointer
	}
	delete(b.live, p)
	b.st.AllocatedBytes -= blk
	return nil
}

func (b *bumpAlloc) RecordStream(vmm.DevicePtr, vmm.Stream) error { return nil }
func (b *bumpAlloc) Stats() impl.Stats                            { return b.st }
func (b *bumpAlloc) Close() (impl.CloseReport, error)             { return impl.CloseReport{}, nil }

// withBumpAllocator makes Replay use bumpAlloc for the rest of the test.
func withBumpAllocator(t *testing.T, limit uint64) {
	t.Helper()
	old := newReplayAllocator
	newReplayAllocator = func(d vmm.Driver, cfg impl.Config) (replayAllocator, error) {
		return &bumpAlloc{d: d, live: map[vmm.DevicePtr]uint64{}, limit: limit}, nil
	}
	t.Cleanup(func() { newReplayAllocator = old })
}

func parseTrace(t testing.TB, text string) *trace.Trace {
	t.Helper()
	tr, err := trace.Read(strings.NewReader(text), "synthetic.trace")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The harness's own accounting: live bytes rounded to 512 B, 'r' keeping a block until its 'f', streams
// created once each, driver counters taken as a difference, the timeline and unfreed count.
func TestReplayHarnessAccounting(t *testing.T) {
	withBumpAllocator(t, 0)
	tr := parseTrace(t, `a 0 1000 0
a 1 3145728 1
r 1
a 2 100 2
f 0
f 1
a 3 1 1
`)
	d := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	if _, _, err := d.MemInfo(); err != nil { // a call before the replay must not be counted
		t.Fatal(err)
	}
	var calls []int
	r, err := Run(context.Background(), tr, Options{Policy: "p", Driver: d, SampleEvery: 2,
		Progress: func(done, total int) { calls = append(calls, done) }})
	if err != nil {
		t.Fatal(err)
	}
	// live: 1024, +3 MiB, (r keeps it), +512 = 3 MiB + 1536 peak; then -1024, -3 MiB, +512.
	if want := 3*vmm.MiB + 1536; r.PeakLiveBytes != want {
		t.Errorf("PeakLiveBytes = %d, want %d", r.PeakLiveBytes, want)
	}
	if want := 3*vmm.MiB + 1536; r.PeakAllocatedBytes != want {
		t.Errorf("PeakAllocatedBytes = %d, want %d", r.PeakAllocatedBytes, want)
	}
	if want := 2*vmm.MiB + 4*vmm.MiB + 2*vmm.MiB + 2*vmm.MiB; r.PeakReservedBytes != want {
		t.Errorf("PeakReservedBytes = %d, want %d", r.PeakReservedBytes, want)
	}
	if want := 1 - float64(3*vmm.MiB+1536)/float64(10*vmm.MiB); r.Fragmentation != want {
		t.Errorf("Fragmentation = %v, want %v", r.Fragmentation, want)
	}
	if r.DriverCalls[vmm.CallMemInfo] != 4 || r.DriverCalls[vmm.CallCreateStream] != 2 {
		t.Errorf("driver calls %v: want 4 mem_info (one per alloc) and 2 create_stream (streams 1, 2)", r.DriverCalls.Map())
	}
	if want := 4*time.Microsecond + 2*5*time.Microsecond; r.ModeledDriverTime != want {
		t.Errorf("ModeledDriverTime = %v, want %v", r.ModeledDriverTime, want)
	}
	if r.Events != 7 || r.Unfreed != 2 || r.Policy != "p" || r.Trace != "synthetic" || r.Device != "sim" {
		t.Errorf("result %+v", r)
	}
	wantTL := []Sample{
		{Event: 1, Live: 1024 + 3*vmm.MiB, Allocated: 1024 + 3*vmm.MiB, Reserved: 6 * vmm.MiB},
		{Event: 3, Live: 1536 + 3*vmm.MiB, Allocated: 1536 + 3*vmm.MiB, Reserved: 8 * vmm.MiB},
		{Event: 5, Live: 512, Allocated: 512, Reserved: 8 * vmm.MiB},
		{Event: 6, Live: 1024, Allocated: 1024, Reserved: 10 * vmm.MiB},
	}
	if len(r.Timeline) != len(wantTL) {
		t.Fatalf("timeline %+v, want %+v", r.Timeline, wantTL)
	}
	for i := range wantTL {
		if r.Timeline[i] != wantTL[i] {
			t.Errorf("timeline[%d] = %+v, want %+v", i, r.Timeline[i], wantTL[i])
		}
	}
	if len(calls) == 0 || calls[len(calls)-1] != 7 {
		t.Errorf("progress calls %v: want a final call with 7", calls)
	}
}

// Sparse IDs (a trace converted from addresses, say) are renumbered, not used as slice indexes.
func TestReplaySparseIDs(t *testing.T) {
	withBumpAllocator(t, 0)
	tr := parseTrace(t, "a 18446744073709551615 4096 0\na 77 10 0\nf 18446744073709551615\n")
	r, err := Run(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.PeakLiveBytes != 4096+512 || r.Unfreed != 1 || r.Policy != impl.PolicyGMLake {
		t.Errorf("result %+v", r)
	}
}

// An engine failure names the trace, the policy and the event, and keeps the engine's error kind.
func TestReplayErrorNamesEvent(t *testing.T) {
	withBumpAllocator(t, 4*vmm.MiB)
	tr := parseTrace(t, "a 0 2097152 0\na 1 2097152 0\na 2 1 0\n")
	_, err := Run(context.Background(), tr, Options{Policy: "caching"})
	if !errors.Is(err, vmm.ErrOutOfMemory) || !errors.Is(err, ErrReplay) {
		t.Fatalf("err = %v, want out of memory wrapped in ErrReplay", err)
	}
	for _, want := range []string{"synthetic", "caching", "event 3 of 3", "a 2 1 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestReplayStopsOnCancel(t *testing.T) {
	withBumpAllocator(t, 0)
	var sb strings.Builder
	for i := 0; i < 40000; i++ {
		sb.WriteString("a " + strconv.Itoa(i) + " 512 0\nf " + strconv.Itoa(i) + "\n")
	}
	tr := parseTrace(t, sb.String())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, tr, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// The bundled traces are complete: their live peak (each request rounded to 512 B) is within 0.5% of the
// peak_allocated PyTorch measured on the native run (testdata/traces/README.md).
func TestBundledTracesLivePeakMatchesTorch(t *testing.T) {
	withBumpAllocator(t, 0)
	peaks, err := LoadTorchPeaks("../../testdata/traces/peaks.json")
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob("../../testdata/traces/*.trace.gz")
	if len(paths) == 0 {
		t.Fatal("no bundled traces")
	}
	for _, p := range paths {
		tr, err := snapshot.LoadTrace(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(context.Background(), tr, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ref, ok := peaks[tr.Name][ConfNative]
		if !ok {
			t.Errorf("%s: not in peaks.json", tr.Name)
			continue
		}
		d := (float64(r.PeakLiveBytes) - float64(ref.PeakAllocated)) / float64(ref.PeakAllocated)
		t.Logf("%s: %d events, %d streams, live peak %d, torch peak_allocated %d (%+.3f%%)", tr.Name, len(tr.Events), tr.Streams, r.PeakLiveBytes, ref.PeakAllocated, 100*d)
		if d < -0.005 || d > 0.005 {
			t.Errorf("%s: live peak %d differs from torch's peak_allocated %d by %+.2f%%", tr.Name, r.PeakLiveBytes, ref.PeakAllocated, 100*d)
		}
	}
}

// twoTraceResults is sampleReplayResults and one replay of a second trace: a plot of two panels.
func twoTraceResults() []*Result {
	return append(sampleReplayResults(), &Result{Trace: "other", Policy: impl.PolicyGMLake, Device: "sim",
		PeakReservedBytes: 1 << 30,
		Timeline:          []Sample{{0, 1 << 20, 1 << 20, 1 << 30}, {10, 1 << 29, 1 << 29, 1 << 30}, {20, 1 << 20, 1 << 20, 1 << 30}}})
}

func sampleReplayResults() []*Result {
	var calls vmm.CallCounts
	calls[vmm.CallCreate], calls[vmm.CallMap], calls[vmm.CallSetAccess] = 3, 3, 2
	return []*Result{{
		Trace: "llama1b-ckpt", Policy: impl.PolicyCaching, Device: "sim", Events: 74251,
		PeakLiveBytes: 12 << 30, PeakAllocatedBytes: 12<<30 + 1<<20, PeakReservedBytes: 17 << 30,
		Fragmentation: 0.29, LiveFragmentation: 0.3, DriverCalls: calls, ModeledDriverTime: 60 * time.Millisecond,
		ReplaySeconds: 0.05,
		Timeline:      []Sample{{0, 1 << 30, 1 << 30, 2 << 30}, {100, 12 << 30, 12 << 30, 17 << 30}, {74250, 1 << 30, 1 << 30, 17 << 30}},
	}, {
		Trace: "llama1b-ckpt", Policy: impl.PolicyGMLake, Device: "sim", Events: 74251,
		PeakLiveBytes: 12 << 30, PeakAllocatedBytes: 12 << 30, PeakReservedBytes: 12<<30 + 100<<20,
		DriverCalls: calls, ReplaySeconds: 0.05,
		Timeline: []Sample{{0, 1 << 30, 1 << 30, 1 << 30}, {74250, 1 << 30, 1 << 30, 12 << 30}},
	}}
}

func TestWriteJSONFields(t *testing.T) {
	peaks, err := LoadTorchPeaks("../../testdata/traces/peaks.json")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleReplayResults(), peaks); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rows); err != nil {
		t.Fatalf("output is not a JSON array of objects: %v\n%s", err, buf.String())
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, k := range []string{"trace", "policy", "peak_live_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
		"fragmentation", "driver_calls", "modeled_driver_seconds", "events", "replay_seconds"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("row has no %q: %v", k, rows[0])
		}
	}
	r := rows[0]
	if r["trace"] != "llama1b-ckpt" || r["policy"] != "caching" || r["peak_reserved_bytes"] != float64(17<<30) ||
		r["modeled_driver_seconds"] != 0.06 || r["events"] != float64(74251) {
		t.Errorf("row values %v", r)
	}
	if dc, _ := r["driver_calls"].(map[string]any); dc["create"] != float64(3) || dc["set_access"] != float64(2) || len(dc) != 3 {
		t.Errorf("driver_calls = %v, want create=3 map=3 set_access=2", r["driver_calls"])
	}
	// caching is compared with PyTorch's native run: 17 GiB against 18803064832 B.
	if r["torch_conf"] != ConfNative || r["torch_peak_reserved_bytes"] != float64(18803064832) {
		t.Errorf("torch reference %v %v", r["torch_conf"], r["torch_peak_reserved_bytes"])
	}
	if rows[1]["torch_conf"] != ConfExpandable {
		t.Errorf("gmlake compared with %v, want expandable segments", rows[1]["torch_conf"])
	}
	if f, _ := r["driver_time_fraction"].(float64); f < 0.0117 || f > 0.0118 { // 0.06 s of 5.1 s
		t.Errorf("driver_time_fraction = %v, want 0.06/5.1", r["driver_time_fraction"])
	}
}

func TestWriteTableHasOneRowPerResult(t *testing.T) {
	peaks, _ := LoadTorchPeaks("../../testdata/traces/peaks.json")
	var buf bytes.Buffer
	if err := WriteWideTable(&buf, sampleReplayResults(), peaks); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table has %d lines, want header + 2:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"frag", "torch GiB", "set_access", "modeled ms", "%train"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header lacks %q: %s", want, lines[0])
		}
	}
	// 17 GiB vs torch native 17.51 GiB: -2.92%.
	if !strings.Contains(lines[1], "17.51 nat") || !strings.Contains(lines[1], "-2.92%") || !strings.Contains(lines[1], "29.0%") {
		t.Errorf("caching row: %s", lines[1])
	}
}

func TestWritePlotPNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"p.png", "p.svg"} {
		path := filepath.Join(dir, name)
		if err := WritePlot(path, sampleReplayResults()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 1000 {
			t.Errorf("%s: only %d bytes", name, len(b))
		}
		if name == "p.png" && !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", name)
		}
		if name == "p.svg" && !bytes.Contains(b[:min(len(b), 400)], []byte("<svg")) {
			t.Errorf("%s is not an SVG", name)
		}
	}
	if err := WritePlot(filepath.Join(dir, "p.gif"), sampleReplayResults()); err == nil {
		t.Error("WritePlot accepted a .gif")
	}
	noTL := sampleReplayResults()
	noTL[0].Timeline = nil
	if err := WritePlot(filepath.Join(dir, "q.png"), noTL); err == nil {
		t.Error("WritePlot accepted a result without a timeline")
	}
}

// Run through a Meter reports measured time and the inner device's modeled time.
func TestReplayOnMeter(t *testing.T) {
	withBumpAllocator(t, 0)
	tr := parseTrace(t, "a 0 10 0\na 1 10 0\n")
	td := wrap.NewTimer(sim.NewDevice(sim.DeviceConfig{SyncStreams: true}))
	r, err := Run(context.Background(), tr, Options{Driver: td})
	if err != nil {
		t.Fatal(err)
	}
	if r.MeasuredDriverTime <= 0 || r.ModeledDriverTime != 2*time.Microsecond || r.DriverCalls[vmm.CallMemInfo] != 2 {
		t.Errorf("measured %v modeled %v calls %v", r.MeasuredDriverTime, r.ModeledDriverTime, r.DriverCalls.Map())
	}
	if r.Device != "sim" {
		t.Errorf("device %q", r.Device)
	}
}

func TestWriteTargetsJudgesGMLakeAgainstExpandable(t *testing.T) {
	rs := sampleReplayResults() // caching and gmlake on llama1b-ckpt
	var buf bytes.Buffer
	if err := WriteTargets(&buf, rs, nil); err != nil || buf.Len() != 0 {
		t.Fatalf("without expandable: %q, %v; want nothing", buf.String(), err)
	}
	exp := *rs[0]
	exp.Policy, exp.PeakReservedBytes, exp.ModeledDriverTime = impl.PolicyExpandable, 13<<30, 40*time.Millisecond
	rs[1].LiveFragmentation = 0.01
	rs[1].ModeledDriverTime = 50 * time.Millisecond
	WriteTargets(&buf, append(rs, &exp), nil)
	if got := buf.String(); !strings.Contains(got, "gmlake on llama1b-ckpt: reserved 0.931x expandable") || !strings.HasSuffix(got, "targets met\n") {
		t.Errorf("got %q", got)
	}
	buf.Reset()
	rs[1].ModeledDriverTime = 70 * time.Millisecond // 1.75x expandable
	rs[1].LiveFragmentation = 0.05
	WriteTargets(&buf, append(rs, &exp), nil)
	if got := buf.String(); !strings.Contains(got, "MISSED: frag/live above 3%, driver time above 1.5x expandable") {
		t.Errorf("got %q", got)
	}
}

// Property: the driver time of a replay split by call kind sums to the total, and a GPU row (measured) prints
// its per-kind comparison with the modeled time.
func TestReplayDriverTimeByKindSumsToTotal(t *testing.T) {
	tr := &trace.Trace{Name: "bykind", Events: []trace.Event{
		{Op: trace.OpAlloc, ID: 0, Size: 64 << 20}, {Op: trace.OpAlloc, ID: 1, Size: 3 << 20},
		{Op: trace.OpFree, ID: 0}, {Op: trace.OpAlloc, ID: 2, Size: 200 << 20}, {Op: trace.OpFree, ID: 1},
	}}
	res, err := Run(context.Background(), tr, Options{Policy: "gmlake"})
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, d := range res.ModeledByKind {
		sum += d
	}
	if sum != res.ModeledDriverTime || sum == 0 {
		t.Fatalf("modeled by kind sums to %v, total %v", sum, res.ModeledDriverTime)
	}
	res.Device, res.MeasuredDriverTime, res.MeasuredByKind = "cuda:0", 2*sum, res.ModeledByKind
	res.MeasuredByKind[vmm.CallCreate] += sum
	var out strings.Builder
	if err := WriteDriverTimeByKind(&out, []*Result{res}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "bykind gmlake on cuda:0") || !strings.Contains(out.String(), " create ") {
		t.Fatalf("per-kind comparison missing: %q", out.String())
	}
}

// A converted snapshot replays like any trace.
func TestReplaySnapshot(t *testing.T) {
	withBumpAllocator(t, 0)
	tr, err := snapshot.LoadTrace("../snapshot/testdata/snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// live: 3M + 4M, -3M, +1024, +5M, +8M, -1024, +2M = 19M peak (the r keeps the 8 MiB until its f)
	if want := uint64(19 << 20); r.PeakLiveBytes != want {
		t.Errorf("PeakLiveBytes = %d, want %d", r.PeakLiveBytes, want)
	}
	if r.Unfreed != 3 {
		t.Errorf("Unfreed = %d, want 3", r.Unfreed)
	}
}

// TestWritePlotLayout: the PNG is 11 by 4 inches a trace at 110 dpi (one panel per trace, stacked), and each
// panel's legend sits in the headroom at the top left (the curves start near 0 at the left and the y axis
// leaves 30% above the highest peak for it).
func TestWritePlotLayout(t *testing.T) {
	rs := sampleReplayResults()
	for panels, in := range map[int][]*Result{1: rs, 2: twoTraceResults()} {
		path := filepath.Join(t.TempDir(), "p.png")
		if err := WritePlot(path, in); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Width != 11*110 || cfg.Height != panels*4*110 {
			t.Errorf("%d panels: %dx%d px, want %dx%d", panels, cfg.Width, cfg.Height, 11*110, panels*4*110)
		}
	}
	p, err := tracePlot("llama1b-ckpt", rs)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Legend.Top || !p.Legend.Left {
		t.Errorf("legend top %v left %v, want the top left", p.Legend.Top, p.Legend.Left)
	}
	if want := float64(rs[0].PeakReservedBytes)/float64(vmm.GiB)*1.3 + 0.01; p.Y.Min != 0 || p.Y.Max != want {
		t.Errorf("y axis [%v, %v], want [0, %v]", p.Y.Min, p.Y.Max, want)
	}
}
