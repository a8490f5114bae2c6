package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"unicode"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/impl/serve"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// serveJudge is what judgeServe remembers between steps (Config.Serve).
type serveJudge struct {
	// want: the layer's counters as the steps so far say they must be.
	want serve.Counters
	// served: the device streams the engine was given work on (an allocation or a RecordStream that
	// succeeded), which an out-of-memory retry must synchronise; a caller's own stream forgotten (no
	// mapping) leaves it, a mapped one stays (the layer made it and still synchronises it).
	served map[vmm.Stream]bool
	// Under Config.CLib: base, the counters at the last reset-acc (PyTorch's num_ooms and
	// num_sync_all_streams count from there); events, what the C library's event hook received during
	// the current step; held, the bytes the segment events say are mapped (maps less unmaps), which must be
	// what the device holds while heldKnown (no fault was ever armed: a failed call may leave an event
	// without its memory, or memory without its event, which says nothing of the hook).
	base      serve.Counters
	events    []clibEvent
	held      uint64
	heldKnown bool
}

// clibEvent is one call of the C library's event hook.
type clibEvent struct {
	action int
	addr   uintptr
	size   uint64
	stream uintptr
}

// judgeServe judges, under the serving layer (Config.Serve), what the layer itself promises (impl/serve),
// after the step and before its synchronisations are told to the judges (e.synced holds them):
//   - an out of memory that Alloc returns for a request no larger than the device, outside a capture,
//     comes after a synchronisation of the default stream and of every stream the engine was given work
//     on: the retry waited for everything, so the out of memory is real;
//   - a request larger than the device (into a pool that lives) is an out of memory, as PyTorch says, not
//     the engine's invalid size;
//   - its error says so: an *impl.OOMError with the bytes asked for and what the engine holds (reserved,
//     live, cached), as PyTorch's out-of-memory message tells them;
//   - EmptyCache outside a capture synchronises first (torch.cuda.empty_cache);
//   - the layer's counters (the C library's oom_sync_retries and sync_errors) say what the steps did:
//     one synchronisation per step that synchronised, one retry per Alloc that succeeded after it, one OOM
//     per Alloc answered out of memory, no synchronisation error (the Env's synchroniser never fails);
//   - under the mapping, each device stream stands for its caller's value (CallerStream);
//   - on the simulated device, the engine never holds more physical memory than its cap now (MemoryLimit,
//     then the limit and fraction ops);
//   - a synchronisation that fails (fail-sync) counts as tried: the retry still comes after it, and the
//     layer counts it among its sync errors;
//   - through the C library (Config.CLib, judgeCLibEvents): one out-of-memory event per out-of-memory
//     answer, with the bytes asked for and the caller's stream, none otherwise; segment events on the
//     caller's streams, whose maps less unmaps are the bytes the device holds; and the fraction and stats
//     ops judged in layerOp.
func (e *Env) judgeServe(op Op, res StepResult, refused bool) []spec.Violation {
	if e.S == nil {
		return nil
	}
	var out []spec.Violation
	bad := func(format string, args ...any) {
		out = append(out, spec.Violation{Inv: spec.InvServe, Msg: fmt.Sprintf(format, args...)})
	}
	j := &e.serve
	if j.served == nil {
		j.served = map[vmm.Stream]bool{}
	}
	synced := len(e.synced)-e.devWaited+len(e.syncFailed) > 0 // the layer's own: not the engine's device waits
	if synced {
		j.want.Syncs++
	}
	j.want.SyncErrors += uint64(len(e.syncFailed))
	capturing := e.A.Capturing()
	switch {
	case refused:
	case op.Kind == OpEmptyCache:
		if !capturing && !synced {
			bad("%v outside a capture did not synchronise the streams first", op)
		}
	case op.Kind == OpAlloc:
		oom := errors.Is(res.Err, vmm.ErrOutOfMemory)
		if oom {
			j.want.OOMs++
		}
		if res.Err == nil && synced {
			j.want.SyncRetries++
		}
		if oom && !capturing && op.Size <= e.Device.Capacity() {
			var missing []vmm.Stream
			for _, s := range append([]vmm.Stream{vmm.DefaultStream}, sortedStreams(j.served)...) {
				if !slices.Contains(e.synced, s) && !slices.Contains(e.syncFailed, s) {
					missing = append(missing, s)
				}
			}
			if len(missing) > 0 {
				bad("%v answered out of memory without synchronising streams %v first (synchronised %v): the retry did not wait for their work", op, missing, e.synced)
			}
		}
		if op.Size > e.Device.Capacity() && !e.closed && (op.Pool == 0 || e.pools[op.Pool] > 0) && !oom {
			bad("%v: %v for more than the device's %d bytes, want an out of memory (as PyTorch says; the engine alone says invalid size)", op, res.Err, e.Device.Capacity())
		}
		var oe *impl.OOMError
		if oom && errors.As(res.Err, &oe) && !e.closed {
			// The error says what the caller is told (PyTorch's out-of-memory message): what was asked
			// for, and what the engine holds now (nothing changed since the error was made).
			st := e.A.Stats()
			if oe.Requested != op.Size || !oomHoldingsAre(oe, st) {
				bad("%v: the out-of-memory error says requested %d, reserved %d, live %d, cached %d; the engine holds %d reserved, %d allocated",
					op, oe.Requested, oe.Reserved, oe.Live, oe.Cached, st.ReservedBytes, st.AllocatedBytes)
			}
		}
		if res.Err == nil {
			j.served[e.stream(op.Stream)] = true
		}
	case op.Kind == OpRecord:
		if res.Err == nil {
			j.served[e.stream(op.Stream)] = true
		}
	case op.Kind == OpForget:
		if res.Err == nil && e.other == 0 {
			delete(j.served, e.stream(op.Stream))
		}
	}
	if e.other != 0 {
		// Under the mapping, each stream the layer made stands for its caller's value (what the C library's
		// snapshot and segment events show), while that value is mapped.
		for i, c := range e.callers[:len(e.Streams)] {
			if !e.forgot[c] {
				if back := e.S.CallerStream(e.Streams[i]); back != c {
					bad("CallerStream(%d) = %#x after %v, want caller stream %#x (stream index %d)", e.Streams[i], uint64(back), op, uint64(c), i)
				}
			}
		}
	}
	if e.C != nil {
		out = append(out, e.judgeCLibEvents(op, res, refused)...)
		if op.Kind == OpAlloc && res.Err != nil && !refused && !e.closed {
			out = append(out, e.judgeCLibFailure(op, res.Err)...)
		}
	}
	if got := e.S.Counters(); got != j.want {
		bad("the layer's counters are %+v after %v, want %+v", got, op, j.want)
		j.want = got // one report per disagreement
	}
	if e.Dev != nil && e.capped {
		if used := e.Dev.State().Used; used > e.limit {
			bad("the engine holds %d physical bytes after %v, over the memory limit of %d", used, op, e.limit)
		}
	}
	return out
}

// syncDriver is the Env's driver as the C library is given it: clib.New takes no synchroniser, so the
// serving layer finds the Env's on its driver (the vmm.StreamSyncer path it takes with impl/cudavmm).
type syncDriver struct {
	vmm.Driver
	clockSync
	deviceWait
}

// Inner returns the Env's device driver (vmm.Wrapper: the engine finds its optional interfaces there).
func (d syncDriver) Inner() vmm.Driver { return d.Driver }

// openCLib opens the C library over drv (Config.CLib) and returns its serving layer. The knobs go over as
// text (KnobText), which must parse back to the Config the Env holds (the Env's judges read Knobs).
func (e *Env) openCLib(drv vmm.Driver, kc impl.Config, mapped bool) (*serve.Engine, error) {
	knobs := KnobText(kc)
	back := impl.Config{Policy: kc.Policy}
	if err := clib.ApplyKnobs(&back, knobs); err != nil {
		return nil, fmt.Errorf("ops: the knobs as text %v: %w", knobs, err)
	}
	if !reflect.DeepEqual(back, kc) {
		return nil, fmt.Errorf("ops: the knobs as text %v parse to %+v; the Env holds %+v", knobs, back, kc)
	}
	name := "sim"
	if e.Dev == nil {
		name = "cuda"
	}
	c, err := clib.New(syncDriver{drv, clockSync{e}, deviceWait{e}}, clib.Config{Driver: name, Policy: kc.Policy, OwnStreams: mapped,
		Knobs: knobs, MemoryLimit: e.Cfg.MemoryLimit})
	if err != nil {
		return nil, fmt.Errorf("ops: opening policy %q through the C library: %w", kc.Policy, err)
	}
	e.C = c
	if e.Cfg.HostCache && e.hc == nil {
		e.hc = newHostStandIn()
	}
	e.serve.heldKnown = true
	c.SetEventHook(func(action int, addr uintptr, size uint64, stream uintptr) {
		e.serve.events = append(e.serve.events, clibEvent{action, addr, size, stream})
	})
	return c.Serve(), nil
}

// KnobText is knobs as the C library's environment gives them: the fields that are not zero, each named
// by its Go name, its environment spelling or that with the GMLAKE_ prefix (by turns; always the
// environment spelling when the C library does not list it, so that the parse refuses it), sizes with a
// binary unit where they are whole (KiB, MiB, M, GiB, ...).
func KnobText(knobs impl.Config) map[string]string {
	settable := map[string]bool{} // the C library's knob names
	for _, n := range clib.KnobNames() {
		settable[n] = true
	}
	out := map[string]string{}
	v := reflect.ValueOf(knobs)
	for i, k := 0, 0; i < v.NumField(); i++ {
		f, x := v.Type().Field(i), v.Field(i)
		env := envSpelling(f.Name)
		if f.Name == "Policy" || f.Name == "TestOnlyMutations" || x.IsZero() {
			continue // not a knob, or the default
		}
		// The judge's own spelling, whether or not the C library lists it (clib.KnobNames): a knob it
		// spells otherwise is refused as unknown, and openCLib says which (the names a user types are
		// the documented ones, not whatever the library derives).
		name := []string{env, "GMLAKE_" + env, f.Name}[k%3]
		if !settable[env] {
			name = env
		}
		k++
		switch x.Kind() {
		case reflect.Bool:
			out[name] = strconv.FormatBool(x.Bool())
		case reflect.Float32, reflect.Float64:
			out[name] = strconv.FormatFloat(x.Float(), 'g', -1, 64)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[name] = strconv.FormatInt(x.Int(), 10)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[name] = byteText(x.Uint(), i)
		default:
			out[name] = fmt.Sprint(x.Interface())
		}
	}
	return out
}

// envSpelling is the environment spelling of a Go field name, written here apart from the C library's
// (the judge's own): an underscore before a capital that follows a lower-case letter, or that ends a run of
// two or more capitals and is followed by a lower-case one; then upper case (SBlockCache: SBLOCK_CACHE).
func envSpelling(name string) string {
	rs := []rune(name)
	var out []rune
	for i, r := range rs {
		caps := i >= 2 && unicode.IsUpper(rs[i-1]) && unicode.IsUpper(rs[i-2])
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || caps && i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			out = append(out, '_')
		}
		out = append(out, unicode.ToUpper(r))
	}
	return string(out)
}

// byteText writes n bytes with the largest binary unit that divides it, in one of the spellings the C
// library reads (by turns on k).
func byteText(n uint64, k int) string {
	for _, u := range []struct {
		m     uint64
		names [3]string
	}{{vmm.GiB, [3]string{"GiB", "G", "GB"}}, {vmm.MiB, [3]string{"MiB", "M", "MB"}}, {vmm.KiB, [3]string{"KiB", "K", "KB"}}} {
		if n%u.m == 0 {
			return strconv.FormatUint(n/u.m, 10) + u.names[k%3]
		}
	}
	return strconv.FormatUint(n, 10)
}

// close is Close through the layers (the C library's returns what was live and released; the Env judges
// Close from the device, C-CLOSE).
func (e *Env) close() (closeReport, error) {
	if e.C != nil {
		n, released, err := e.C.Close()
		if e.hc != nil {
			e.hc = newHostStandIn() // gmlake_hc_close forgets the table: a new engine may start
		}
		return closeReport{nLive: n, released: released}, err
	}
	rep, err := e.A.Close()
	r := closeReport{nLive: len(rep.Live), released: rep.ReleasedBytes, live: []vmm.DevicePtr{}}
	for _, l := range rep.Live {
		r.live = append(r.live, l.Ptr)
	}
	return r, err
}

// remapFails reports whether the next stream creation fails by an armed fault (streamFaults), so that an
// op on a forgotten caller value may run: the layer tries to map the value to a new stream and fails.
func (e *Env) remapFails() bool { return e.S != nil && slices.Contains(e.streamFaults, 1) }

// remap runs op, on a forgotten caller value, through the layers (see remapFails): the stream creation
// it makes fails, and the armed faults count it.
func (e *Env) remap(op Op) (p vmm.DevicePtr, err error) {
	switch op.Kind {
	case OpAlloc:
		p, err = e.allocPool(op.Size, op.Stream, op.Pool)
	case OpRecord:
		err = e.recordStream(e.Ptr(op.ID), op.Stream)
	case OpCaptureBegin, OpCaptureEnd:
		err = e.setCapturing(op.Stream, op.Kind == OpCaptureBegin)
	case OpForget:
		err = e.forgetStream(op.Stream)
	}
	left := e.streamFaults[:0]
	for _, n := range e.streamFaults {
		if n > 1 {
			left = append(left, n-1)
		}
	}
	e.streamFaults = left
	return p, err
}

// judgeRemap judges an op on a forgotten caller value whose new stream the driver failed to create
// (remap): the layer returns the driver's error (injected) and no pointer, and maps nothing; the Env then
// treats the op as refused (nothing changed).
func (e *Env) judgeRemap(op Op, res StepResult) []spec.Violation {
	if (res.Err != nil && sim.Injected(res.Err) || e.closed) && res.Ptr == 0 {
		return nil
	}
	return []spec.Violation{{Inv: spec.InvServe, Msg: fmt.Sprintf("%v on a forgotten caller stream, its new stream's creation failing: %#x, %v; want no pointer and the driver's error (a stream the layer could not make serves nothing)", op, uint64(res.Ptr), res.Err)}}
}

// setLimit notes the serving layer's cap now (capped false: none), and the fraction that set it (-1: set
// in bytes): the judges' capacity follows it (the contract's too).
func (e *Env) setLimit(v uint64, capped bool, fraction float64) {
	e.limit, e.capped, e.fraction = v, capped, fraction
	e.Contract.Config().Capacity = e.Capacity()
}

// resetAcc notes a reset-acc through the C library: PyTorch's num_ooms and num_sync_all_streams count
// from the layer's counters now.
func (j *serveJudge) resetAcc(e *Env) { j.base = e.S.Counters() }

// layerOp runs one of the layers' own ops (limit, fraction, stats, fail-sync) and judges it (INV-SERVE),
// or refuses it (refused: not run) where the layer is not there, or where the cap it sets is below what
// the device holds now (memory held beyond a new cap stays until freed and released, and the judges'
// capacity cannot be below what is held).
func (e *Env) layerOp(op Op, res *StepResult) (refused bool, err error) {
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, spec.Violation{Inv: spec.InvServe, Msg: fmt.Sprintf(format, args...)})
	}
	used := e.Device.State().Used
	switch op.Kind {
	case OpSyncFail: // the layer's synchronisations, or the bare engine's wait on its out-of-memory path (F6)
		e.syncFail = op.N
	case OpLimit:
		if e.S == nil || op.Size != 0 && op.Size < used {
			return true, nil
		}
		if e.C != nil {
			e.C.SetMemoryLimit(op.Size)
		} else {
			e.S.SetMemoryLimit(op.Size)
		}
		e.setLimit(op.Size, op.Size != 0, -1)
		if got := e.S.MemoryLimit(); got != op.Size {
			bad("%v: the layer's cap is %d, want %d", op, got, op.Size)
		}
	case OpFraction:
		if e.C == nil {
			return true, nil
		}
		// As torch.cuda.set_per_process_memory_fraction: [0, 1], 1 no cap, 0 a cap of 0 bytes.
		f, total := op.Frac, e.C.TotalMemory()
		valid, lim := f >= 0 && f <= 1, uint64(0)
		if valid && f != 1 {
			lim = uint64(f * float64(total))
			if lim < used {
				return true, nil
			}
		}
		// As GMLAKE_MEMORY_FRACTION gives it at the library's start: the text parses back to f exactly
		// when f is in (0, 1] (clib.ParseFraction), else it is refused with ErrBadKnob.
		text := strconv.FormatFloat(f, 'g', -1, 64)
		switch pf, perr := clib.ParseFraction(text); {
		case f > 0 && f <= 1 && (perr != nil || pf != f):
			bad("GMLAKE_MEMORY_FRACTION=%s parses to %v, %v; want %v", text, pf, perr, f)
		case !(f > 0 && f <= 1) && !errors.Is(perr, clib.ErrBadKnob):
			bad("GMLAKE_MEMORY_FRACTION=%s parses to %v, %v; want an error wrapping ErrBadKnob", text, pf, perr)
		}
		was, wasFrac := e.C.MemoryLimit(), e.C.MemoryFraction()
		err = e.C.SetMemoryFraction(f)
		switch {
		case !valid && (!errors.Is(err, clib.ErrBadKnob) || e.C.MemoryLimit() != was || e.C.MemoryFraction() != wasFrac):
			bad("%v on a device of %d bytes: %v, cap %d (was %d); want an error wrapping ErrBadKnob that changes nothing", op, total, err, e.C.MemoryLimit(), was)
		case valid && (err != nil || e.C.MemoryLimit() != lim):
			bad("%v on a device of %d bytes: %v, cap %d; want the cap %d", op, total, err, e.C.MemoryLimit(), lim)
		}
		if valid {
			e.setLimit(lim, f != 1, f)
		}
		want := e.fraction
		if want < 0 {
			want = 1.0
			if e.capped && total != 0 && e.limit < total {
				want = float64(e.limit) / float64(total)
			}
		}
		if got := e.C.MemoryFraction(); got != want {
			bad("%v: MemoryFraction() = %g under the cap %d of %d bytes, want %g", op, got, e.limit, total, want)
		}
	case OpStats:
		if e.C == nil {
			return true, nil
		}
		e.judgeStats(op, bad)
	}
	return false, err
}

// judgeStats parses the C library's statistics JSON and snapshot JSON back and compares them with the
// Env's own record: the live allocations the ops hold and the bytes they asked for, what the device
// holds, the cap and the device's size the ops set, the layer's counters as the steps say they must be
// (serveJudge.want), PyTorch's counters from the last reset-acc; and each segment's stream is a caller's.
func (e *Env) judgeStats(op Op, bad func(string, ...any)) {
	var st map[string]any
	dec := json.NewDecoder(bytes.NewReader(e.C.StatsJSON(nil /* extra */)))
	dec.UseNumber()
	if err := dec.Decode(&st); err != nil {
		bad("%v: the statistics JSON does not parse: %v", op, err)
		return
	}
	num := func(k string) uint64 {
		n, ok := st[k].(json.Number)
		v, err := strconv.ParseUint(n.String(), 10, 64)
		if !ok || err != nil {
			bad("%v: statistics %q = %v, want a byte count", op, k, st[k])
		}
		return v
	}
	live, requested := e.liveRequested()
	j := &e.serve
	want := map[string]uint64{
		"memory_limit_bytes": e.limit, "device_total_bytes": e.Device.Capacity(),
		"oom_sync_retries": j.want.SyncRetries, "sync_errors": j.want.SyncErrors,
	}
	if !e.closed {
		want["num_live"], want["requested_bytes"] = uint64(live), requested
		want["reserved_bytes"] = e.Device.State().Used
		want["allocated_bytes"] = e.A.Stats().AllocatedBytes // (INV-STATS judges the engine's figure)
	}
	for k, w := range want {
		if got := num(k); got != w {
			bad("%v: statistics JSON %s = %d, want %d", op, k, got, w)
		}
	}
	if !e.closed {
		// Fragmentation: 1 - peak allocated (peak requested) / peak reserved, 0 before anything was reserved.
		es := e.A.Stats()
		frag := func(used uint64) float64 {
			if es.PeakReservedBytes == 0 {
				return 0
			}
			return 1 - float64(used)/float64(es.PeakReservedBytes)
		}
		for k, w := range map[string]float64{"fragmentation": frag(es.PeakAllocatedBytes), "fragmentation_requested": frag(es.PeakRequestedBytes)} {
			n, _ := st[k].(json.Number)
			if got, err := n.Float64(); err != nil || got != w {
				bad("%v: statistics JSON %s = %v, want %g (peaks: allocated %d, requested %d, reserved %d)", op, k, st[k], w,
					es.PeakAllocatedBytes, es.PeakRequestedBytes, es.PeakReservedBytes)
			}
		}
	}
	if _, timed := st["driver_seconds"]; timed {
		bad("%v: the statistics JSON has driver_seconds: the Env did not ask the C library to time the driver", op)
	}
	if st["policy"] != e.Cfg.Policy || st["initialized"] != true {
		bad("%v: statistics JSON policy %v initialized %v, want %q and true", op, st["policy"], st["initialized"], e.Cfg.Policy)
	}
	ts := e.C.TorchStats()
	if ts.NumOOMs != int64(j.want.OOMs-j.base.OOMs) || ts.NumSyncAllStreams != int64(j.want.Syncs-j.base.Syncs) {
		bad("%v: PyTorch's num_ooms %d and num_sync_all_streams %d, want %d and %d (since the last reset-acc)",
			op, ts.NumOOMs, ts.NumSyncAllStreams, j.want.OOMs-j.base.OOMs, j.want.Syncs-j.base.Syncs)
	}
	if e.closed {
		return
	}
	var snap struct {
		Segments []struct {
			TotalSize uint64 `json:"total_size"`
			Stream    uint64 `json:"stream"`
			Address   uint64 `json:"address"`
			Allocated uint64 `json:"allocated_size"`
			Active    uint64 `json:"active_size"`
			Requested uint64 `json:"requested_size"`
			Blocks    []struct {
				Size      uint64 `json:"size"`
				Requested uint64 `json:"requested_size"`
				State     string `json:"state"`
			} `json:"blocks"`
		} `json:"segments"`
		Stitched []struct {
			Stream uint64 `json:"stream"`
		} `json:"stitched_blocks"`
	}
	if err := json.Unmarshal(e.C.SnapshotJSON(), &snap); err != nil {
		bad("%v: the snapshot JSON does not parse: %v", op, err)
		return
	}
	var segBytes uint64
	for _, sg := range snap.Segments {
		segBytes += sg.TotalSize // (Stitched: some block of it is a part of a stitched block, listed apart)
		// A segment's totals are its blocks' (PyTorch's memory_snapshot(): allocated_size counts the
		// active_allocated blocks, active_size those and the active_pending_free ones, requested_size every
		// block's request), as what reads them (torch.cuda.memory._snapshot's users) adds them up.
		var alloc, active, req uint64
		for _, b := range sg.Blocks {
			switch b.State {
			case "active_allocated":
				alloc += b.Size
				active += b.Size
			case "active_pending_free":
				active += b.Size
			}
			req += b.Requested
		}
		if alloc != sg.Allocated || active != sg.Active || req != sg.Requested {
			bad("%v: the snapshot JSON's segment at %#x says allocated %d, active %d, requested %d; its blocks add up to %d, %d, %d",
				op, sg.Address, sg.Allocated, sg.Active, sg.Requested, alloc, active, req)
		}
		if !e.callerValue(uintptr(sg.Stream)) {
			bad("%v: a segment of the snapshot JSON is on stream %#x, no caller's stream", op, sg.Stream)
		}
	}
	for _, sb := range snap.Stitched {
		if !e.callerValue(uintptr(sb.Stream)) {
			bad("%v: a stitched block of the snapshot JSON is on stream %#x, no caller's stream", op, sb.Stream)
		}
	}
	if used := e.Device.State().Used; segBytes != used && e.serve.heldKnown { // (a failed call may leave memory no segment holds)
		bad("%v: the snapshot JSON's segments hold %d bytes, the device %d", op, segBytes, used)
	}
}

// callerValue reports whether s is a stream value the C library's caller knows: one of the Env's caller
// values, or (a value forgotten through the layer's mapping) the device stream it stood for.
func (e *Env) callerValue(s uintptr) bool {
	for i, c := range e.callers {
		if uintptr(c) == s {
			return true
		}
		if e.forgot[c] && i < len(e.Streams) && uintptr(e.Streams[i]) == s || e.forgot[c] && i == len(e.Streams) && uintptr(e.other) == s {
			return true
		}
	}
	return false
}

// judgeCLibEvents judges what the C library's event hook received during the step (Config.CLib).
func (e *Env) judgeCLibEvents(op Op, res StepResult, refused bool) []spec.Violation {
	var out []spec.Violation
	bad := func(format string, args ...any) {
		out = append(out, spec.Violation{Inv: spec.InvServe, Msg: fmt.Sprintf(format, args...)})
	}
	j := &e.serve
	evs := j.events
	j.events = j.events[:0]
	if op.Kind == OpFail {
		j.heldKnown = false
	}
	ooms := 0
	for _, ev := range evs {
		switch ev.action {
		case clib.EventOOM:
			ooms++
			if op.Kind != OpAlloc || ev.size != op.Size || ev.addr != 0 || ev.stream != uintptr(e.caller(op.Stream)) {
				bad("%v: the out-of-memory event (addr %#x, %d bytes, stream %#x), want one for the %d bytes asked on caller stream %#x",
					op, ev.addr, ev.size, ev.stream, op.Size, uint64(e.caller(op.Stream)))
			}
		case clib.EventSegmentMap, clib.EventSegmentUnmap:
			if ev.action == clib.EventSegmentMap {
				j.held += ev.size
			} else {
				j.held -= ev.size
			}
			if !e.callerValue(ev.stream) {
				bad("%v: a segment event on stream %#x, no caller's stream", op, ev.stream)
			}
		default:
			bad("%v: an event of action %d, no action of the C library's", op, ev.action)
		}
	}
	if want := op.Kind == OpAlloc && errors.Is(res.Err, vmm.ErrOutOfMemory); (ooms == 1) != want || ooms > 1 { // (an op refused without running has no error)
		bad("%v -> %v: %d out-of-memory events, want %d", op, res.Err, ooms, map[bool]int{true: 1}[want])
	}
	if j.heldKnown && !e.closed {
		if used := e.Device.State().Used; j.held != used {
			bad("%v: the segment events say %d bytes are mapped (maps less unmaps), the device holds %d", op, j.held, used)
			j.held = used // one report per disagreement
		}
	}
	return out
}

func sortedStreams(m map[vmm.Stream]bool) []vmm.Stream {
	out := make([]vmm.Stream, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// judgeCLibFailure judges the C library's account of a failed allocation (Engine.Failure: the kind and figures
// the throwing entry and PyTorch's OutOfMemoryError message are made from): out of memory exactly when the
// error is one (vmm.ErrOutOfMemory, whether the engine's *OOMError or the layer's), a bad argument for an
// invalid size, an unknown stream or pool, anything else the other kind; the request as asked; and the
// device's total as the layer knows it.
func (e *Env) judgeCLibFailure(op Op, err error) []spec.Violation {
	f := e.C.Failure(op.Size, err)
	want := clib.FailOther
	switch {
	case errors.Is(err, vmm.ErrOutOfMemory):
		want = clib.FailOOM
	case errors.Is(err, impl.ErrInvalidSize), errors.Is(err, impl.ErrUnknownStream), errors.Is(err, impl.ErrUnknownPool):
		want = clib.FailInvalid
	}
	if f.Kind != want || f.Requested != op.Size || f.DeviceTotal != e.C.TotalMemory() {
		return []spec.Violation{{Inv: spec.InvServe, Msg: fmt.Sprintf(
			"%v failed with %v; the C library's account is kind %d, request %d, device total %d: want kind %d, request %d, total %d",
			op, err, f.Kind, f.Requested, f.DeviceTotal, want, op.Size, e.C.TotalMemory())}}
	}
	return nil
}
