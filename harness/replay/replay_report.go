package replay

// This file turns replay results into what users read: the comparison table, the JSON array, and the
// memory-over-time plot, with PyTorch's own measurements (testdata/traces/peaks.json) set beside ours.

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// TorchRun is one entry of peaks.json: what PyTorch itself reported for a recorded run.
type TorchRun struct {
	Workload      string  `json:"workload"`
	Conf          string  `json:"conf"` // "native" or "expandable_segments:True"
	Steps         int     `json:"steps"`
	Seconds       float64 `json:"seconds"` // wall time of all steps
	PeakAllocated uint64  `json:"peak_allocated"`
	PeakReserved  uint64  `json:"peak_reserved"`
}

// Conf names for TorchRun.Conf.
const (
	ConfNative     = "native"
	ConfExpandable = "expandable_segments:True"
)

// TorchPeaks indexes peaks.json by workload (trace name) and conf.
type TorchPeaks map[string]map[string]TorchRun

// LoadTorchPeaks reads a peaks.json file.
func LoadTorchPeaks(path string) (TorchPeaks, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var runs []TorchRun
	if err := json.Unmarshal(b, &runs); err != nil {
		// The decoder's message names Go types ([]replay.TorchRun); say what the file should hold.
		at := ""
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			at = fmt.Sprintf(": not JSON at byte %d", se.Offset)
		case errors.As(err, &te) && te.Field != "":
			at = fmt.Sprintf(": %q is a JSON %s at byte %d", te.Field, te.Value, te.Offset)
		case errors.As(err, &te):
			at = fmt.Sprintf(": a JSON %s at byte %d", te.Value, te.Offset)
		}
		return nil, fmt.Errorf("%s%s: want PyTorch's measured peaks, a JSON list of "+
			`{"workload": NAME, "conf": "native" or "expandable_segments:True", "steps": N, "seconds": S, "peak_allocated": BYTES, "peak_reserved": BYTES}`+
			" (testdata/traces/peaks.json; --peaks FILE)", path, at)
	}
	p := TorchPeaks{}
	for _, r := range runs {
		if p[r.Workload] == nil {
			p[r.Workload] = map[string]TorchRun{}
		}
		p[r.Workload][r.Conf] = r
	}
	return p, nil
}

// Reference returns the PyTorch run a policy is compared with: the native allocator for caching, and
// expandable segments for every other policy (expandable itself, and the stitching policies, whose target is
// to beat it). ok is false when the trace has no such run.
func (p TorchPeaks) Reference(trace, policy string) (TorchRun, bool) {
	conf := ConfExpandable
	if policy == impl.PolicyCaching {
		conf = ConfNative
	}
	r, ok := p[trace][conf]
	return r, ok
}

// TrainingSeconds returns the recorded training time of a trace: the shortest of its recorded runs (the
// conservative denominator for "driver time as a share of training time"), 0 when unknown.
func (p TorchPeaks) TrainingSeconds(trace string) float64 {
	best := 0.0
	for _, r := range p[trace] {
		if r.Seconds > 0 && (best == 0 || r.Seconds < best) {
			best = r.Seconds
		}
	}
	return best
}

// ReportRow is one (trace, policy) result as written to JSON.
type ReportRow struct {
	Input                string             `json:"input,omitempty"` // the path the trace was read from
	Trace                string             `json:"trace"`
	Policy               string             `json:"policy"`
	Device               string             `json:"device"`
	Events               int                `json:"events"`
	PeakLiveBytes        uint64             `json:"peak_live_bytes"`
	PeakAllocatedBytes   uint64             `json:"peak_allocated_bytes"`
	PeakReservedBytes    uint64             `json:"peak_reserved_bytes"`
	Fragmentation        float64            `json:"fragmentation"`
	LiveFragmentation    float64            `json:"live_fragmentation"`
	DriverCalls          map[string]uint64  `json:"driver_calls"`
	ModeledDriverSeconds float64            `json:"modeled_driver_seconds"`
	MeasuredDriverSecs   *float64           `json:"measured_driver_seconds,omitempty"`
	ModeledByKind        map[string]float64 `json:"modeled_driver_seconds_by_kind,omitempty"`
	MeasuredByKind       map[string]float64 `json:"measured_driver_seconds_by_kind,omitempty"`
	ReplaySeconds        float64            `json:"replay_seconds"`
	EventsPerSecond      float64            `json:"events_per_second"`
	Unfreed              int                `json:"unfreed"`
	Stitches             uint64             `json:"stitches"`
	TorchConf            string             `json:"torch_conf,omitempty"`
	TorchPeakReserved    uint64             `json:"torch_peak_reserved_bytes,omitempty"`
	TorchReservedDiff    *float64           `json:"torch_reserved_diff,omitempty"` // (ours - torch) / torch
	TrainingSeconds      float64            `json:"training_seconds,omitempty"`
	DriverTimeFraction   *float64           `json:"driver_time_fraction,omitempty"` // modeled driver / training
	// DoesNotFit is set when the trace did not fit the device under this policy: the figures above are
	// those up to that event.
	DoesNotFit *NoFitRow `json:"does_not_fit,omitempty"`
	// Cut says where a cut input ended (its writer stopped mid-trace): the figures are those of the
	// complete events before the cut.
	Cut string `json:"cut,omitempty"`
}

// NoFitRow is NoFit as written to JSON.
type NoFitRow struct {
	Event          int    `json:"event"`
	Of             int    `json:"of"`
	LiveBytes      uint64 `json:"live_bytes"`
	RequestedBytes uint64 `json:"requested_bytes"`
	Message        string `json:"message"`
	Error          string `json:"error"`
}

// key is what a result is keyed by: its input (the path), or its trace name when no input was set.
func (r *Result) key() string {
	if r.Input != "" {
		return r.Input
	}
	return r.Trace
}

// Row builds the JSON row of a result, with PyTorch's reference when peaks knows the trace (peaks may be nil).
func Row(r *Result, peaks TorchPeaks) ReportRow {
	row := ReportRow{
		Input: r.Input, Trace: r.Trace, Policy: r.Policy, Device: r.Device, Events: r.Events,
		PeakLiveBytes: r.PeakLiveBytes, PeakAllocatedBytes: r.PeakAllocatedBytes,
		PeakReservedBytes: r.PeakReservedBytes, Fragmentation: r.Fragmentation,
		LiveFragmentation: r.LiveFragmentation, DriverCalls: r.DriverCalls.Map(),
		ModeledDriverSeconds: r.ModeledDriverTime.Seconds(), ReplaySeconds: r.ReplaySeconds,
		Unfreed: r.Unfreed, Stitches: r.Stats.NumStitches, Cut: r.Cut,
	}
	if r.ReplaySeconds > 0 {
		row.EventsPerSecond = float64(r.Events) / r.ReplaySeconds
	}
	if n := r.NoFit; n != nil {
		row.DoesNotFit = &NoFitRow{Event: n.Event, Of: n.Of, LiveBytes: n.Live, RequestedBytes: n.Requested, Message: n.String(), Error: n.Err}
	}
	if r.MeasuredDriverTime > 0 {
		s := r.MeasuredDriverTime.Seconds()
		row.MeasuredDriverSecs = &s
		row.MeasuredByKind = secondsByKind(r.MeasuredByKind)
	}
	if r.ModeledDriverTime > 0 {
		row.ModeledByKind = secondsByKind(r.ModeledByKind)
	}
	if ref, ok := peaks.Reference(r.Trace, r.Policy); ok && ref.PeakReserved > 0 {
		row.TorchConf, row.TorchPeakReserved = ref.Conf, ref.PeakReserved
		d := (float64(r.PeakReservedBytes) - float64(ref.PeakReserved)) / float64(ref.PeakReserved)
		row.TorchReservedDiff = &d
	}
	if s := peaks.TrainingSeconds(r.Trace); s > 0 {
		row.TrainingSeconds = s
		f := r.ModeledDriverTime.Seconds() / s
		row.DriverTimeFraction = &f
	}
	return row
}

// WriteJSON writes the results as a JSON array of ReportRow, one per (trace, policy).
func WriteJSON(w io.Writer, results []*Result, peaks TorchPeaks) error {
	rows := make([]ReportRow, len(results))
	for i, r := range results {
		rows[i] = Row(r, peaks)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// replayTableKinds are the driver call kinds that get their own column; the rest are summed under "other".
var replayTableKinds = []vmm.CallKind{vmm.CallCreate, vmm.CallMap, vmm.CallSetAccess, vmm.CallUnmap, vmm.CallRelease,
	vmm.CallReserve, vmm.CallFreeAddress}

func fmtGiB(n uint64) string { return fmt.Sprintf("%.2f", float64(n)/float64(vmm.GiB)) }

func fmtPct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// WriteTable prints the comparison table that fits a 120-column terminal: one row per result, in the order
// given, with the trace, the policy, peak live and reserved GiB (2^30 B), frag (1 - peak allocated / peak
// reserved) and frag/live (1 - peak live / peak reserved), "vs exp" (peak reserved over the expandable
// policy's on the same trace and device, "-" when it was not replayed) and the modeled driver time (the
// measured one too, on a GPU). WriteWideTable has every column.
func WriteTable(w io.Writer, results []*Result, peaks TorchPeaks) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	measured := false
	exp := map[[2]string]*Result{}
	for _, r := range results {
		measured = measured || r.MeasuredDriverTime > 0
		if r.Policy == impl.PolicyExpandable && r.NoFit == nil {
			exp[[2]string{r.key(), r.Device}] = r
		}
	}
	devices := showDevices(results)
	head := []string{"trace", "policy"}
	if devices {
		head = append(head, "device")
	}
	head = append(head, "live GiB", "resv GiB", "frag", "frag/live", "vs exp", "driver ms")
	if measured {
		head = append(head, "measured ms")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range results {
		if r.NoFit != nil {
			cells := []string{r.Trace, r.Policy}
			if devices {
				cells = append(cells, r.Device)
			}
			cells = append(cells, fmtGiB(r.NoFit.Live))
			for len(cells) < len(head) {
				cells = append(cells, "-")
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t "+r.NoFit.String())
			continue
		}
		vs := "-"
		if e := exp[[2]string{r.key(), r.Device}]; e != nil && e.PeakReservedBytes > 0 {
			vs = fmt.Sprintf("%.3fx", float64(r.PeakReservedBytes)/float64(e.PeakReservedBytes))
		}
		cells := []string{r.Trace, r.Policy}
		if devices {
			cells = append(cells, r.Device)
		}
		cells = append(cells, fmtGiB(r.PeakLiveBytes), fmtGiB(r.PeakReservedBytes),
			fmtPct(r.Fragmentation), fmtPct(r.LiveFragmentation), vs, fmt.Sprintf("%.1f", msOf(r.ModeledDriverTime)))
		if measured {
			m := "-"
			if r.MeasuredDriverTime > 0 {
				m = fmt.Sprintf("%.1f", msOf(r.MeasuredDriverTime))
			}
			cells = append(cells, m)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// WriteWideTable prints the full comparison table: one row per result, in the order given. Sizes are GiB
// (2^30 B). frag is 1 - peak allocated / peak reserved; frag/live is 1 - peak live / peak reserved. "torch"
// is PyTorch's measured peak reserved for the reference run (Reference) and "Δ" our difference to it;
// driver calls by kind; "%train" is the modeled driver time as a share of the recorded training time
// (TrainingSeconds).
func WriteWideTable(w io.Writer, results []*Result, peaks TorchPeaks) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	devices := showDevices(results)
	head := []string{"trace", "policy"}
	if devices {
		head = append(head, "device")
	}
	head = append(head, "events", "live GiB", "alloc GiB", "resv GiB", "frag", "frag/live", "torch GiB", "Δ torch")
	for _, k := range replayTableKinds {
		head = append(head, k.Short())
	}
	head = append(head, "other", "modeled ms", "%train")
	measured := false
	for _, r := range results {
		if r.MeasuredDriverTime > 0 {
			measured = true
		}
	}
	if measured {
		head = append(head, "measured ms", "meas/model")
	}
	head = append(head, "Mev/s")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range results {
		row := Row(r, peaks)
		cells := []string{r.Trace, r.Policy}
		if devices {
			cells = append(cells, r.Device)
		}
		if r.NoFit != nil {
			cells = append(cells, fmt.Sprint(r.Events), fmtGiB(r.NoFit.Live))
			for len(cells) < len(head) {
				cells = append(cells, "-")
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t "+r.NoFit.String())
			continue
		}
		cells = append(cells, fmt.Sprint(r.Events), fmtGiB(r.PeakLiveBytes), fmtGiB(r.PeakAllocatedBytes),
			fmtGiB(r.PeakReservedBytes), fmtPct(r.Fragmentation), fmtPct(r.LiveFragmentation))
		if row.TorchReservedDiff != nil {
			conf := "nat"
			if row.TorchConf == ConfExpandable {
				conf = "exp"
			}
			cells = append(cells, fmtGiB(row.TorchPeakReserved)+" "+conf, fmt.Sprintf("%+.2f%%", 100**row.TorchReservedDiff))
		} else {
			cells = append(cells, "-", "-")
		}
		other := r.DriverCalls.Total()
		for _, k := range replayTableKinds {
			cells = append(cells, fmt.Sprint(r.DriverCalls[k]))
			other -= r.DriverCalls[k]
		}
		cells = append(cells, fmt.Sprint(other), fmt.Sprintf("%.1f", msOf(r.ModeledDriverTime)))
		if row.DriverTimeFraction != nil {
			cells = append(cells, fmt.Sprintf("%.2f%%", 100**row.DriverTimeFraction))
		} else {
			cells = append(cells, "-")
		}
		if measured {
			if r.MeasuredDriverTime > 0 {
				ratio := "-"
				if r.ModeledDriverTime > 0 {
					ratio = fmt.Sprintf("%.2f", float64(r.MeasuredDriverTime)/float64(r.ModeledDriverTime))
				}
				cells = append(cells, fmt.Sprintf("%.1f", msOf(r.MeasuredDriverTime)), ratio)
			} else {
				cells = append(cells, "-", "-")
			}
		}
		cells = append(cells, fmt.Sprintf("%.2f", row.EventsPerSecond/1e6))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// showDevices reports whether the table needs a device column: some result is not on the default
// simulated device ("sim"), as the rows of --device-size and --device cuda are.
func showDevices(results []*Result) bool {
	for _, r := range results {
		if r.Device != "sim" {
			return true
		}
	}
	return false
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// replayPolicyColors gives each policy a fixed color in plots.
var replayPolicyColors = map[string]color.RGBA{
	impl.PolicyCaching:     {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	impl.PolicyExpandable:  {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	impl.PolicyGMLakePaper: {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	impl.PolicyGMLake:      {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// WritePlot draws reserved (solid) and allocated (dashed) memory over each trace for each policy, with the
// live bytes (thin black), one panel per trace, to path: PNG or SVG by its extension. Results need a
// Timeline (ReplayOptions.SampleEvery > 0).
func WritePlot(path string, results []*Result) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("plot %s: unsupported format %q (want .png or .svg)", path, ext)
	}
	var order []string
	byTrace := map[string][]*Result{}
	for _, r := range results {
		if len(r.Timeline) == 0 {
			return fmt.Errorf("plot %s: result %s/%s has no timeline (set SampleEvery)", path, r.Trace, r.Policy)
		}
		if _, ok := byTrace[r.key()]; !ok {
			order = append(order, r.key())
		}
		byTrace[r.key()] = append(byTrace[r.key()], r)
	}
	if len(order) == 0 {
		return fmt.Errorf("plot %s: no results to plot", path)
	}
	plots := make([][]*plot.Plot, len(order))
	for i, key := range order {
		p, err := tracePlot(byTrace[key][0].Trace, byTrace[key])
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		plots[i] = []*plot.Plot{p}
	}
	w, h := 11*vg.Inch, vg.Length(len(order))*4*vg.Inch
	var canvas vg.CanvasWriterTo
	switch ext {
	case ".png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	case ".svg":
		canvas = vgsvg.New(w, h)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(order), Cols: 1, PadTop: 4, PadBottom: 4, PadLeft: 4, PadRight: 8, PadY: 12}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

func tracePlot(name string, rs []*Result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = name + "   (solid: reserved, dashed: allocated, black: live)"
	p.X.Label.Text = "trace event"
	p.Y.Label.Text = "GiB"
	p.Legend.Top = true
	p.Legend.Left = true
	g := float64(vmm.GiB)
	line := func(r *Result, val func(Sample) uint64) (*plotter.Line, error) {
		pts := make(plotter.XYs, len(r.Timeline))
		for i, s := range r.Timeline {
			pts[i].X, pts[i].Y = float64(s.Event), float64(val(s))/g
		}
		return plotter.NewLine(pts)
	}
	maxY := 0.0
	for _, r := range rs {
		c, ok := replayPolicyColors[r.Policy]
		if !ok {
			c = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
		}
		res, err := line(r, func(s Sample) uint64 { return s.Reserved })
		if err != nil {
			return nil, err
		}
		res.Color, res.Width = c, vg.Points(1.2)
		al, err := line(r, func(s Sample) uint64 { return s.Allocated })
		if err != nil {
			return nil, err
		}
		al.Color, al.Width, al.Dashes = c, vg.Points(0.8), []vg.Length{vg.Points(3), vg.Points(2)}
		p.Add(res, al)
		p.Legend.Add(r.Policy, res)
		maxY = math.Max(maxY, float64(r.PeakReservedBytes)/g)
	}
	// The live bytes are the same for every policy: drawn once, last, on top.
	l, err := line(rs[0], func(s Sample) uint64 { return s.Live })
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = color.Black, vg.Points(0.5)
	p.Add(l)
	p.Y.Min, p.Y.Max = 0, maxY*1.3+0.01 // headroom for the legend
	return p, nil
}

// Targets for the gmlake policy on every trace (issue 6): peak reserved no more than expandable's, waste
// against the live bytes at most 3%, modeled driver time at most 2% of training time and at most 1.5 times
// expandable's.
const (
	TargetLiveFragmentation = 0.03
	TargetDriverFraction    = 0.02
	TargetDriverVsExpand    = 1.5
)

// WriteTargets prints, for each trace replayed with both gmlake and expandable, whether gmlake meets the
// targets, one line per trace. It prints nothing when no trace has both.
func WriteTargets(w io.Writer, results []*Result, peaks TorchPeaks) error {
	type pair struct{ ours, exp *Result }
	var order []string
	pairs := map[string]*pair{}
	names := map[string]string{} // key -> trace name
	for _, r := range results {
		if r.Device != "sim" || r.NoFit != nil {
			continue
		}
		p := pairs[r.key()]
		if p == nil {
			p = &pair{}
			pairs[r.key()] = p
			order = append(order, r.key())
			names[r.key()] = r.Trace
		}
		switch r.Policy {
		case impl.PolicyGMLake:
			p.ours = r
		case impl.PolicyExpandable:
			p.exp = r
		}
	}
	for _, key := range order {
		p, name := pairs[key], names[key]
		if p.ours == nil || p.exp == nil || p.exp.PeakReservedBytes == 0 {
			continue
		}
		var miss []string
		resv := float64(p.ours.PeakReservedBytes) / float64(p.exp.PeakReservedBytes)
		if p.ours.PeakReservedBytes > p.exp.PeakReservedBytes {
			miss = append(miss, "reserved above expandable")
		}
		if p.ours.LiveFragmentation > TargetLiveFragmentation {
			miss = append(miss, fmt.Sprintf("frag/live above %.0f%%", 100*TargetLiveFragmentation))
		}
		drv := math.Inf(1)
		if p.exp.ModeledDriverTime > 0 {
			drv = float64(p.ours.ModeledDriverTime) / float64(p.exp.ModeledDriverTime)
		}
		if drv > TargetDriverVsExpand {
			miss = append(miss, fmt.Sprintf("driver time above %.1fx expandable", TargetDriverVsExpand))
		}
		share := "-"
		if s := peaks.TrainingSeconds(name); s > 0 {
			f := p.ours.ModeledDriverTime.Seconds() / s
			share = fmt.Sprintf("%.2f%%", 100*f)
			if f > TargetDriverFraction {
				miss = append(miss, fmt.Sprintf("driver time above %.0f%% of training", 100*TargetDriverFraction))
			}
		}
		verdict := "targets met"
		if len(miss) > 0 {
			verdict = "MISSED: " + strings.Join(miss, ", ")
		}
		if _, err := fmt.Fprintf(w, "gmlake on %s: reserved %.3fx expandable, frag/live %.2f%%, driver time %.2fx expandable and %s of training: %s\n",
			name, resv, 100*p.ours.LiveFragmentation, drv, share, verdict); err != nil {
			return err
		}
	}
	return nil
}

func secondsByKind(t [vmm.NumCallKinds]time.Duration) map[string]float64 {
	m := make(map[string]float64)
	for k, d := range t {
		if d > 0 {
			m[vmm.CallKind(k).Short()] = d.Seconds()
		}
	}
	return m
}

// WriteDriverTimeByKind prints, for each replay measured on a real GPU, the measured and modeled driver
// time of each call kind that costs at least 1% of the total, so a disagreement between the cost model and
// the GPU points at the calls responsible.
func WriteDriverTimeByKind(w io.Writer, results []*Result) error {
	var b strings.Builder
	for _, r := range results {
		if r.MeasuredDriverTime <= 0 || r.ModeledDriverTime <= 0 {
			continue
		}
		fmt.Fprintf(&b, "%s %s on %s: measured/modeled ms by call:", r.Trace, r.Policy, r.Device)
		for k := vmm.CallKind(0); k < vmm.NumCallKinds; k++ {
			meas, mod := r.MeasuredByKind[k], r.ModeledByKind[k]
			if meas < r.MeasuredDriverTime/100 && mod < r.ModeledDriverTime/100 {
				continue
			}
			fmt.Fprintf(&b, " %s %.1f/%.1f", k.Short(), msOf(meas), msOf(mod))
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%s", b.String())
	return err
}
