package ops

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// The C library's checker (gmlake mutate's "clib"): the one op language run through impl/clib's
// plain-integer surface (Config.CLib), as libgmlake runs it under PyTorch, judged by the same contract,
// spec predicates and history as every other checker, plus INV-SERVE (judge_serve.go). Each sequence
// draws its configuration (DrawSwarm, through the serving layer always) and mixes the generator's rules
// with the layers' own (layerRules): the cap changed at run time, the memory fraction, the statistics and
// snapshot JSON parsed back, a synchronisation that fails, requests larger than the device.

// layerRules are the generator rules for the ops only the layers have, by name:
//   - limit: a cap at what the device holds rounded up to a granule (plus 0-3 granules), half the device, a
//     granule below it, or none; then a request just over the room left and one within it;
//   - fraction: a memory fraction, valid ((0, 1]: a half, a quarter, 1, the fraction the device holds plus
//     a granule) or not (0, -0.5, 1.5, NaN, one so small its cap is 0 bytes);
//   - stats: the statistics and snapshot JSON;
//   - sync-fail: the 1st-3rd next synchronisation fails, then the pressure that makes the layer
//     synchronise: most of the room allocated on stream a, work launched, freed, and asked on stream b;
//   - stream-fail: a stream forgotten through the layer's mapping, a fault on the next cuStreamCreate, and
//     an alloc (maybe into a pool that does not live), a record, a capture-begin or a forget on its caller
//     value: the layer's new stream for it fails, and so must the op (judgeRemap);
//   - oversize: a request larger than the device (by a byte, a granule, the device), maybe in a pool.
func layerRules(e *Env) map[string]func(src Source) []Op {
	gran := e.Cfg.Granularity
	room := func() uint64 { // what the cap or the device leaves
		used := e.Device.State().Used
		return e.Capacity() - min(e.Capacity(), used)
	}
	up := func(n uint64) uint64 { return (n + gran - 1) / gran * gran }
	return map[string]func(src Source) []Op{
		"limit": func(src Source) []Op {
			dev, used := e.Device.Capacity(), e.Device.State().Used
			lim := []uint64{up(used) + uint64(src.Intn(4, "limit-granules"))*gran, dev / 2, dev - gran, 0}[src.Intn(4, "limit")]
			out := []Op{{Kind: OpLimit, Size: lim}}
			if lim != 0 && lim >= used {
				left := lim - used
				id := e.NextID()
				s := src.Intn(e.Cfg.Streams, "limit-stream")
				out = append(out, Op{Kind: OpAlloc, ID: id, Size: left + gran, Stream: s})
				if left > 0 {
					out = append(out, Op{Kind: OpAlloc, ID: id + 1, Size: left, Stream: s}, Op{Kind: OpFree, ID: id + 1})
				}
			}
			return out
		},
		"fraction": func(src Source) []Op {
			dev := float64(e.Device.Capacity())
			fs := []float64{0.5, 0.25, 1, (float64(e.Device.State().Used) + float64(gran)) / dev, 0, -0.5, 1.5, math.NaN(), 0.5 / dev}
			return []Op{{Kind: OpFraction, Frac: fs[src.Intn(len(fs), "fraction")]}}
		},
		"stats": func(Source) []Op { return []Op{{Kind: OpStats}} },
		"sync-fail": func(src Source) []Op {
			a := src.Intn(e.Cfg.Streams, "sync-fail-a")
			b := src.Intn(e.Cfg.Streams, "sync-fail-b")
			size := room() / 8 * 7 / gran * gran
			if size == 0 {
				return nil
			}
			id := e.NextID()
			return []Op{{Kind: OpSyncFail, N: 1 + src.Intn(3, "sync-fail-n")},
				{Kind: OpAlloc, ID: id, Size: size, Stream: a}, {Kind: OpLaunch, Stream: a}, {Kind: OpFree, ID: id},
				{Kind: OpAlloc, ID: id + 1, Size: size, Stream: b}, {Kind: OpStats}}
		},
		"stream-fail": func(src Source) []Op {
			if e.other == 0 || e.Cfg.Streams < 2 {
				return nil // no mapping (a real device), or no stream but the default one to forget
			}
			k := 1 + src.Intn(e.Cfg.Streams-1, "stream-fail-stream")
			var out []Op
			if !e.forgot[e.caller(k)] {
				out = append(out, Op{Kind: OpForget, Stream: k})
			}
			out = append(out, Op{Kind: OpFail, Call: vmm.CallCreateStream, N: 1, Result: vmm.OutOfMemory})
			ops := []Op{{Kind: OpAlloc, ID: e.NextID(), Size: gran, Stream: k}, {Kind: OpCaptureBegin, Stream: k}, {Kind: OpForget, Stream: k},
				{Kind: OpAlloc, ID: e.NextID(), Size: gran, Stream: k, Pool: 1}}
			if live := e.LiveIDs(); len(live) > 0 {
				ops = append(ops, Op{Kind: OpRecord, ID: live[src.Intn(len(live), "stream-fail-id")], Stream: k})
			}
			return append(out, ops[src.Intn(len(ops), "stream-fail-op")], Op{Kind: OpClearFaults})
		},
		"oversize": func(src Source) []Op {
			dev := e.Device.Capacity()
			op := Op{Kind: OpAlloc, ID: e.NextID(), Size: dev + []uint64{1, gran, dev}[src.Intn(3, "oversize")],
				Stream: src.Intn(e.Cfg.Streams, "oversize-stream")}
			if src.Intn(4, "oversize-pool") == 0 {
				op.Pool = 1
				return []Op{{Kind: OpPoolCreate, Pool: 1}, op, {Kind: OpPoolRelease, Pool: 1}}
			}
			return []Op{op}
		},
	}
}

// runCLib is one rapid sequence through the C library.
func runCLib(t *rapid.T, policy string, steps *int) {
	sw := DrawSwarm(t, policy, false /* noFaults */)
	sw.Serve = true
	e, err := NewEnv(Config{Policy: policy, Capacity: sw.Capacity, Streams: sw.Streams, SyncStreams: sw.Sync,
		Knobs: sw.Knobs, Serve: true, CLib: true, MemoryLimit: sw.MemoryLimit, HostCache: rapid.Bool().Draw(t, "hostcache")})
	if err != nil {
		t.Fatalf("%v", err)
	}
	gen := NewGen(sw, policy, e.Capacity(), e.Cfg.Granularity)
	fail := func(vs []spec.Violation) {
		path := saveProgram(e)
		t.Fatalf("invariant violated after %d steps: %v\nreplay: GMLAKE_OPS=%s go test ./harness -run TestOpsFile -v (shrink: add GMLAKE_SHRINK=1)\n%s",
			e.Steps, vs, path, e.History())
	}
	run := func(seq []Op) {
		for _, o := range seq {
			*steps++
			if r := e.Step(o); len(r.Violations) > 0 {
				fail(r.Violations)
			}
		}
	}
	actions := map[string]func(*rapid.T){"": func(*rapid.T) {}}
	for _, rule := range gen.On() {
		rule := rule
		actions[rule.Name] = func(t *rapid.T) {
			seq := gen.Make(rule, e, RapidSource(t))
			if seq == nil {
				t.Skip(rule.Name + " does not apply now")
			}
			run(seq)
		}
	}
	for name, make := range layerRules(e) {
		make := make
		for w := 1; w <= 2; w++ { // the layers' rules weigh as two rules of the generator's each
			actions[fmt.Sprintf("layer-%s%d", name, w)] = func(t *rapid.T) {
				seq := make(RapidSource(t))
				if seq == nil {
					t.Skip(name + " does not apply now")
				}
				run(seq)
			}
		}
	}
	t.Repeat(actions)
	if vs := e.Finish(); len(vs) > 0 {
		fail(vs)
	}
}

// saveProgram writes the Env's program to a fresh temporary file and returns its path.
func saveProgram(e *Env) string {
	f, err := os.CreateTemp("", "gmlake-clib-*.ops")
	if err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	defer f.Close()
	_, _ = f.WriteString(e.Describe())
	return f.Name()
}

// TestCLibSwarm is the C library's checker: every policy, swarm-drawn sequences through impl/clib (see
// runCLib). make test: a fixed seed and 40 sequences a policy; make verify (GMLAKE_PROFILE=long): fresh
// seeds and 1000. A failure prints the rapid seed, the history and the saved program (TestOpsFile replays
// and shrinks it).
func TestCLibSwarm(t *testing.T) {
	checks := "40"
	if os.Getenv("GMLAKE_PROFILE") == "long" {
		checks = "1000"
	} else {
		defer SetRapidDefault("seed", "20261201")()
		defer SetRapidDefault("shrinktime", "10s")()
	}
	defer SetRapidDefault("checks", checks)()
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			seqs, steps := 0, 0
			rapid.Check(t, func(rt *rapid.T) { seqs++; runCLib(rt, p, &steps) })
			t.Logf("policy %s: %d sequences, %d steps through the C library", p, seqs, steps)
		})
	}
}

// TestCLibRetryIsJudgedWithTheWorkCompleted: through the C library, as through the serving layer, the
// request on the other stream succeeds after the layer synchronised (its synchroniser found on the
// driver, the path impl/cudavmm takes), the statistics JSON says one retry, and a fail-sync makes the
// retry wait for nothing: an out of memory, with one sync error counted.
func TestCLibRetryIsJudgedWithTheWorkCompleted(t *testing.T) {
	cfg := Config{Capacity: 64 * vmm.MiB, Streams: 3, CLib: true}
	e, rs := runText(t, cfg, pendingThenOtherStream+"stats\n")
	if rs[3].Err != nil || e.S.Counters().SyncRetries != 1 {
		t.Fatalf("through the C library: %v, counters %+v; want success after one retry", rs[3].Err, e.S.Counters())
	}
	noViolations(t, e, rs)
	if !strings.Contains(e.Describe(), "clib=true") {
		t.Fatalf("the reproducer's header does not say the C library was on:\n%s", e.Describe())
	}

	e, rs = runText(t, cfg, "fail-sync 2\n"+pendingThenOtherStream+"stats\n")
	if !errors.Is(rs[4].Err, vmm.ErrOutOfMemory) || e.S.Counters().SyncErrors != 1 {
		t.Fatalf("with stream 1's synchronisation failing: %v, counters %+v; want an out of memory and one sync error", rs[4].Err, e.S.Counters())
	}
	noViolations(t, e, rs)
}

// TestCLibLayerOps: the layers' own ops through the C library: a cap lowered at run time refuses what no
// longer fits and raised again serves it, a fraction sets the cap (an invalid one changes nothing), a
// request larger than the device is an out of memory with its event, the statistics JSON agrees, and a
// cap below what the device holds is refused (not run).
func TestCLibLayerOps(t *testing.T) {
	e, rs := runText(t, Config{Capacity: 64 * vmm.MiB, Streams: 2, CLib: true, Knobs: impl.Config{ChunkSize: 4 * vmm.MiB, SBlockCache: 2}}, `alloc a0 8388608 s1
limit 16777216
alloc a1 16777216 s1
limit 33554432
alloc a2 16777216 s1
stats
fraction 0.75
fraction 1.5
fraction NaN
fraction 0
alloc a3 67108865 s0
stats
limit 4194304
fraction 1
free a0
free a2
emptycache
stats
`)
	if !errors.Is(rs[2].Err, vmm.ErrOutOfMemory) || rs[4].Err != nil {
		t.Fatalf("under a 16 MiB cap then a 32 MiB one: %v, %v; want an out of memory then success", rs[2].Err, rs[4].Err)
	}
	if !errors.Is(rs[10].Err, vmm.ErrOutOfMemory) {
		t.Fatalf("a request larger than the device: %v, want an out of memory", rs[10].Err)
	}
	if e.C.MemoryLimit() != 0 {
		t.Fatalf("after fraction 1 the cap is %d, want none (the limit 4194304 below what the device held is refused)", e.C.MemoryLimit())
	}
	noViolations(t, e, rs)
	if e.Ops[12].Kind != OpLimit || e.outcomes[12] != "ok" {
		t.Fatalf("op 12 %v: %q", e.Ops[12], e.outcomes[12])
	}
}

// TestCLibStreamCreationFails: through the serving layer and through the C library, every op on a
// forgotten caller value whose new stream the driver fails to create fails with the driver's error and
// maps nothing; without the fault the op is refused (not run), as before.
func TestCLibStreamCreationFails(t *testing.T) {
	for _, clib := range []bool{false, true} {
		e, rs := runText(t, Config{Capacity: 64 * vmm.MiB, Streams: 3, CLib: clib, Serve: true}, `alloc a0 2097152 s2
forget s1
fail create_stream 1 CUDA_ERROR_OUT_OF_MEMORY
alloc a1 2097152 s1
fail create_stream 1 CUDA_ERROR_OUT_OF_MEMORY
record a0 s1
fail create_stream 1 CUDA_ERROR_OUT_OF_MEMORY
capture-begin s1
fail create_stream 1 CUDA_ERROR_OUT_OF_MEMORY
forget s1
clearfaults
alloc a2 2097152 s1
free a0
`)
		for _, i := range []int{3, 5, 7, 9} {
			if rs[i].Err == nil || rs[i].Ptr != 0 {
				t.Fatalf("clib=%v: %v with the stream creation failing: %#x, %v; want the driver's error", clib, rs[i].Op, rs[i].Ptr, rs[i].Err)
			}
		}
		if rs[11].Err != nil || rs[11].Ptr != 0 {
			t.Fatalf("clib=%v: %v without a fault: %#x, %v; want it refused (not run)", clib, rs[11].Op, rs[11].Ptr, rs[11].Err)
		}
		noViolations(t, e, rs)
		vs := e.judgeRemap(Op{Kind: OpAlloc, Stream: 1}, StepResult{Ptr: 0x1000})
		if len(vs) != 1 || vs[0].Inv != spec.InvServe {
			t.Fatalf("a pointer from a stream the layer could not make: %v, want an %s violation", vs, spec.InvServe)
		}
	}
}

// TestCLibJudgeBites: the C library's judges flag a statistics JSON, an event and a fraction that
// disagree with the Env's record (each case breaks one record the judge compares with).
func TestCLibJudgeBites(t *testing.T) {
	cfg := Config{Capacity: 64 * vmm.MiB, Streams: 2, CLib: true}
	cases := []struct {
		name   string
		ops    string
		break_ func(e *Env)
		want   string
	}{
		{"a sync error the layer did not count", "alloc a0 1048576 s1\nstats\n", func(e *Env) { e.serve.want.SyncErrors++ }, "sync_errors"},
		{"a cap the JSON does not say", "alloc a0 1048576 s1\nstats\n", func(e *Env) { e.limit = 32 * vmm.MiB }, "memory_limit_bytes"},
		{"an out-of-memory event missing", "alloc a0 1048576 s1\nalloc a1 134217728 s1\n", func(e *Env) {
			e.C.SetEventHook(func(int, uintptr, uint64, uintptr) {})
		}, "out-of-memory events"},
		{"segment events short of the device", "alloc a0 1048576 s1\nalloc a1 4194304 s1\n", func(e *Env) { e.serve.held += vmm.MiB }, "segment events say"},
		{"PyTorch's num_ooms from the wrong base", "alloc a0 134217728 s1\nstats\n", func(e *Env) { e.serve.base.OOMs++ }, "num_ooms"},
	}
	for _, c := range cases {
		ops, err := ParseOps(c.ops)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEnv(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r := e.Step(ops[0]); len(r.Violations) > 0 {
			t.Fatalf("%s: %v", c.name, r.Violations)
		}
		c.break_(e)
		var vs []spec.Violation
		for _, o := range ops[1:] {
			vs = append(vs, e.Step(o).Violations...)
		}
		found := false
		for _, v := range vs {
			found = found || v.Inv == spec.InvServe && strings.Contains(v.Msg, c.want)
		}
		if !found {
			t.Errorf("%s: violations %v, want an %s saying %q\n%s", c.name, vs, spec.InvServe, c.want, e.History())
		}
	}
}

// TestKnobTextParsesBack: every knob the swarm draws, as the C library's text (units, the three
// spellings), parses back to the same Config (clib.ApplyKnobs), and a knob that does not parse is refused
// at NewEnv naming it.
func TestKnobTextParsesBack(t *testing.T) {
	k := impl.Config{ChunkSize: 4 * vmm.MiB, StitchMin: 2*vmm.MiB + 512, SBlockCache: 3, NoCrossStream: true,
		StitchSave: vmm.GiB, ReuseLimit: 1.5, PageSizeSmall: 2 * vmm.MiB}
	text := KnobText(k)
	if len(text) != 7 {
		t.Fatalf("KnobText(%+v) = %v: want the 7 fields that are set", k, text)
	}
	var back impl.Config
	if err := clib.ApplyKnobs(&back, text); err != nil || back != k {
		t.Fatalf("the knobs as text %v parse to %+v (%v), want %+v", text, back, err, k)
	}
	for name, want := range map[string]string{"SBlockCache": "SBLOCK_CACHE", "HTTPServer": "HTTP_SERVER", "AutoGC": "AUTO_GC", "ReAlloc": "RE_ALLOC"} {
		if got := envSpelling(name); got != want {
			t.Errorf("envSpelling(%s) = %s, want %s", name, got, want)
		}
	}
	units := 0
	for _, v := range text {
		if strings.ContainsAny(v, "KMG") {
			units++
		}
	}
	if units < 3 {
		t.Fatalf("the knobs as text %v: want sizes with units", text)
	}
}

// TestHostCacheStandInServesFromTheLog: under Config.HostCache a freed block the engine classed as
// cacheable stays live in the engine until the next op that reaches it (the cache's log), a request on its
// stream in its class takes it back without the engine, one on another stream or of another class does not,
// RecordStream takes a block out of the cache, and every judge passes throughout.
func TestHostCacheStandInServesFromTheLog(t *testing.T) {
	e, rs := runText(t, Config{Capacity: 64 * vmm.MiB, Streams: 2, HostCache: true}, `alloc a0 1048576 s0
free a0
alloc a1 1048000 s0
free a1
alloc a2 1048576 s1
alloc a3 1048576 s0
record a3 s1
free a3
stats
`)
	if len(e.hc.live) != 1 || len(e.hc.log) != 0 {
		t.Fatalf("the cache holds %d live blocks and a log of %d; want a2's alone (a3 left it at record), the log handed over at stats", len(e.hc.live), len(e.hc.log))
	}
	noViolations(t, e, rs) // (it closes the Env)
	if rs[2].Ptr != rs[0].Ptr {
		t.Fatalf("a1 (same stream, same class) got %v, want a0's block %v from the cache", rs[2].Ptr, rs[0].Ptr)
	}
	if rs[4].Ptr == rs[0].Ptr {
		t.Fatalf("a2 on another stream got a0's cached block %v", rs[4].Ptr)
	}
}
