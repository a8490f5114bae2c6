package impl

// A minimal trace replay for the engine's own tuning and the baseline check (harness/replay is the
// project's full replay; this one keeps impl's tests independent of it).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
	"github.com/gmlake/gmlake/vmm"
)

type replayResult struct {
	Trace, Policy string
	PeakLive      uint64 // peak of the sum of live requests rounded to 512 B
	Stats         Stats
	Modeled       time.Duration
	Events        int
	Wall          time.Duration
}

func (r replayResult) frag() float64 {
	if r.Stats.PeakReservedBytes == 0 {
		return 0
	}
	return 1 - float64(r.PeakLive)/float64(r.Stats.PeakReservedBytes)
}

var traceCache sync.Map

func loadTrace(t testing.TB, name string) *trace.Trace {
	if v, ok := traceCache.Load(name); ok {
		return v.(*trace.Trace)
	}
	tr, err := trace.ReadFile(filepath.Join("..", "testdata", "traces", name+".trace.gz"))
	if err != nil {
		t.Fatalf("reading trace: %v", err)
	}
	traceCache.Store(name, tr)
	return tr
}

func bundledTraces(t testing.TB) []string {
	m, err := filepath.Glob(filepath.Join("..", "testdata", "traces", "*.trace.gz"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no bundled traces: %v", err)
	}
	var out []string
	for _, p := range m {
		out = append(out, trace.Name(p))
	}
	return out
}

// replay runs tr through a fresh allocator of cfg on a fresh simulated H200 with synchronous streams.
func replay(t testing.TB, tr *trace.Trace, cfg Config) replayResult {
	dev := sim.NewDevice(sim.DeviceConfig{SyncStreams: true})
	a, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	streams := []vmm.Stream{vmm.DefaultStream}
	for len(streams) < tr.Streams {
		s, err := dev.CreateStream()
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	ptrs := make(map[uint64]vmm.DevicePtr, 1024)
	sizes := make(map[uint64]uint64, 1024)
	var live, peak uint64
	start := time.Now()
	c0 := cpuTime()
	for i, ev := range tr.Events {
		switch ev.Op {
		case trace.OpAlloc:
			p, err := a.Alloc(ev.Size, streams[ev.Stream])
			if err != nil {
				t.Fatalf("%s/%s: event %d (%v): %v", tr.Name, a.Policy(), i, ev, err)
			}
			ptrs[ev.ID] = p
			rs := uint64(roundSize(vmm.Bytes(ev.Size)))
			sizes[ev.ID] = rs
			live += rs
			peak = max(peak, live)
		case trace.OpFree:
			p, ok := ptrs[ev.ID]
			if !ok {
				continue
			}
			if err := a.Free(p); err != nil {
				t.Fatalf("%s/%s: event %d (%v): %v", tr.Name, a.Policy(), i, ev, err)
			}
			delete(ptrs, ev.ID)
			live -= sizes[ev.ID]
		}
	}
	wall := time.Since(start)
	if cpu := cpuTime() - c0; cpu > 0 && cpu < wall {
		wall = cpu // on a loaded machine, CPU time is the fairer measure of the replay's own speed
	}
	res := replayResult{Trace: tr.Name, Policy: a.Policy(), PeakLive: peak, Stats: a.Stats(),
		Modeled: dev.ModeledTime(), Events: len(tr.Events), Wall: wall}
	if _, err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if l := dev.Leaks(); !l.Empty() {
		t.Fatalf("%s/%s: leaks after Close: %v", tr.Name, res.Policy, l)
	}
	return res
}

type peakEntry struct {
	Workload      string  `json:"workload"`
	Conf          string  `json:"conf"`
	Seconds       float64 `json:"seconds"`
	PeakAllocated uint64  `json:"peak_allocated"`
	PeakReserved  uint64  `json:"peak_reserved"`
}

func loadPeaks(t testing.TB) []peakEntry {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "traces", "peaks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []peakEntry
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func findPeak(ps []peakEntry, workload, conf string) (peakEntry, bool) {
	for _, p := range ps {
		if p.Workload == workload && p.Conf == conf {
			return p, true
		}
	}
	return peakEntry{}, false
}

// TestReplayTable prints the replay table (GMLAKE_REPLAY=1): per trace and policy, peak reserved against
// PyTorch's, fragmentation and modeled driver time.
func TestReplayTable(t *testing.T) {
	if os.Getenv("GMLAKE_REPLAY") == "" {
		t.Skip("set GMLAKE_REPLAY=1 to print the replay table")
	}
	peaks := loadPeaks(t)
	fmt.Printf("%-14s %-13s %9s %9s %8s %7s %9s %7s %7s %8s %7s\n", "trace", "policy", "peakLive", "reserved",
		"torch", "vsTorch", "frag", "drvms", "%train", "stitches", "Mev/s")
	for _, name := range bundledTraces(t) {
		tr := loadTrace(t, name)
		var expTime time.Duration
		var expRes uint64
		for _, pol := range []string{PolicyCaching, PolicyExpandable, PolicyGMLakePaper, PolicyGMLake} {
			r := replay(t, tr, Config{Policy: pol})
			conf := "native"
			if pol != PolicyCaching {
				conf = "expandable_segments:True"
			}
			pk, _ := findPeak(peaks, name, conf)
			nat, _ := findPeak(peaks, name, "native")
			vs := ""
			if pol == PolicyCaching || pol == PolicyExpandable {
				vs = fmt.Sprintf("%+.2f%%", 100*(float64(r.Stats.PeakReservedBytes)/float64(pk.PeakReserved)-1))
			}
			if pol == PolicyExpandable {
				expTime, expRes = r.Modeled, r.Stats.PeakReservedBytes
			}
			extra := ""
			if pol == PolicyGMLake {
				extra = fmt.Sprintf(" res/exp=%.3f time/exp=%.2f", float64(r.Stats.PeakReservedBytes)/float64(expRes),
					float64(r.Modeled)/float64(expTime))
			}
			fmt.Printf("%-14s %-13s %9.3f %9.3f %8.3f %7s %8.2f%% %7.1f %6.3f%% %8d %7.2f%s\n", name, pol,
				float64(r.PeakLive)/1e9, float64(r.Stats.PeakReservedBytes)/1e9, float64(pk.PeakReserved)/1e9, vs,
				100*r.frag(), float64(r.Modeled)/1e6, 100*r.Modeled.Seconds()/nat.Seconds, r.Stats.NumStitches,
				float64(r.Events)/r.Wall.Seconds()/1e6, extra)
		}
	}
}

// TestChunkSweep prints gmlake's fragmentation and modeled driver time by knob values (GMLAKE_SWEEP=1).
func TestChunkSweep(t *testing.T) {
	if os.Getenv("GMLAKE_SWEEP") == "" {
		t.Skip("set GMLAKE_SWEEP=1")
	}
	peaks := loadPeaks(t)
	cfgs := []Config{{ChunkSize: 2 << 20}, {ChunkSize: 8 << 20}, {ChunkSize: 32 << 20}, {ChunkSize: 48 << 20}, {ChunkSize: 64 << 20}, {ChunkSize: 128 << 20}, {ChunkSize: 1 << 40}}
	for _, name := range bundledTraces(t) {
		tr := loadTrace(t, name)
		exp := replay(t, tr, Config{Policy: PolicyExpandable})
		nat, _ := findPeak(peaks, name, "native")
		for _, c := range cfgs {
			r := replay(t, tr, c)
			fmt.Printf("%-14s chunk=%-4d stitchMin=%-4d frag=%6.2f%% res/exp=%.3f time/exp=%.2f %%train=%.3f%% stitches=%d reuses=%d sfree=%d\n",
				name, c.ChunkSize>>20, c.StitchMin>>20, 100*r.frag(),
				float64(r.Stats.PeakReservedBytes)/float64(exp.Stats.PeakReservedBytes), float64(r.Modeled)/float64(exp.Modeled),
				100*r.Modeled.Seconds()/nat.Seconds, r.Stats.NumStitches, r.Stats.NumStitchReuses, r.Stats.NumStitchFrees)
		}
	}
}

// TestScaledTraces replays the bundled traces with every size scaled (GMLAKE_SCALED=1): a robustness check of
// gmlake's targets on workloads the bundled traces do not cover.
func TestScaledTraces(t *testing.T) {
	if os.Getenv("GMLAKE_SCALED") == "" {
		t.Skip("set GMLAKE_SCALED=1")
	}
	for _, name := range bundledTraces(t) {
		tr := loadTrace(t, name)
		fs := []float64{0.37, 0.75, 1.3, 2.1}
		if os.Getenv("GMLAKE_SCALED") == "detail" {
			fs = []float64{0.37}
		}
		for _, f := range fs {
			st := *tr
			st.Events = make([]trace.Event, len(tr.Events))
			for i, e := range tr.Events {
				if e.Op == trace.OpAlloc {
					e.Size = max(1, uint64(float64(e.Size)*f))
				}
				st.Events[i] = e
			}
			exp := replay(t, &st, Config{Policy: PolicyExpandable})
			g := replay(t, &st, Config{})
			fmt.Printf("%-14s x%.2f gmlake frag %5.2f%% (exp %5.2f%%) res/exp %.3f time/exp %.2f drv %.1fms\n", name, f,
				100*g.frag(), 100*exp.frag(), float64(g.Stats.PeakReservedBytes)/float64(exp.Stats.PeakReservedBytes),
				float64(g.Modeled)/float64(exp.Modeled), float64(g.Modeled)/1e6)
			if os.Getenv("GMLAKE_SCALED") == "detail" {
				fmt.Printf("   gmlake calls %v stitches %d reuses %d sfree %d\n   expand calls %v\n", g.Stats.DriverCalls.Map(),
					g.Stats.NumStitches, g.Stats.NumStitchReuses, g.Stats.NumStitchFrees, exp.Stats.DriverCalls.Map())
			}
		}
	}
}

// TestRobustSweep (GMLAKE_ROBUST=1): for chunk sizes and stitch savings, the worst fragmentation and driver
// time ratio over the bundled traces scaled by several factors.
func TestRobustSweep(t *testing.T) {
	if os.Getenv("GMLAKE_ROBUST") == "" {
		t.Skip()
	}
	type key struct {
		name string
		f    float64
	}
	exps := map[key]replayResult{}
	scaled := map[key]*trace.Trace{}
	for _, name := range bundledTraces(t) {
		tr := loadTrace(t, name)
		for _, f := range []float64{0.37, 0.75, 1, 1.3, 2.1} {
			st := *tr
			st.Events = make([]trace.Event, len(tr.Events))
			for i, e := range tr.Events {
				if e.Op == trace.OpAlloc {
					e.Size = max(1, uint64(float64(e.Size)*f))
				}
				st.Events[i] = e
			}
			k := key{name, f}
			scaled[k] = &st
			exps[k] = replay(t, &st, Config{Policy: PolicyExpandable})
		}
	}
	for _, chunk := range []uint64{32 << 20, 48 << 20, 64 << 20} {
		for _, save := range []uint64{64 << 20, 128 << 20} {
			var worstFrag, worstTime, sumFrag float64
			for k, st := range scaled {
				g := replay(t, st, Config{ChunkSize: chunk, StitchSave: save})
				fr := g.frag()
				tm := float64(g.Modeled) / float64(exps[k].Modeled)
				worstFrag = max(worstFrag, fr)
				worstTime = max(worstTime, tm)
				sumFrag += fr
			}
			fmt.Printf("chunk=%3d save=%3d worst frag %5.2f%% mean %5.2f%% worst time/exp %.2f\n", chunk>>20, save>>20,
				100*worstFrag, 100*sumFrag/float64(len(scaled)), worstTime)
		}
	}
}
