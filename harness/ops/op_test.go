package ops

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/trace"
	"github.com/gmlake/gmlake/vmm"
)

// Ops print as text and parse back to themselves (the saved op list is the reproducer), and so does a
// program with its setup line.
func TestOpsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := Op{Kind: OpKind(rapid.IntRange(0, int(numOpKinds)-1).Draw(t, "kind"))}
		id, s, pool := rapid.IntRange(0, 1000), rapid.IntRange(0, 8), rapid.IntRange(0, 5)
		switch o.Kind {
		case OpAlloc:
			o.ID, o.Size, o.Stream, o.Pool = id.Draw(t, "id"), rapid.Uint64().Draw(t, "size"), s.Draw(t, "s"), pool.Draw(t, "pool")
		case OpFree:
			o.ID = id.Draw(t, "id")
		case OpFreeInterior:
			o.ID, o.Offset = id.Draw(t, "id"), rapid.Uint64().Draw(t, "off")
		case OpRecord:
			o.ID, o.Stream = id.Draw(t, "id"), s.Draw(t, "s")
		case OpLaunch, OpComplete, OpCaptureBegin, OpCaptureEnd, OpForget:
			o.Stream = s.Draw(t, "s")
		case OpPoolCreate, OpPoolRelease:
			o.Pool = pool.Draw(t, "pool")
		case OpFail:
			o.Call = rapid.SampledFrom(FaultCalls).Draw(t, "call")
			o.N = rapid.IntRange(1, 9).Draw(t, "n")
			o.Result = rapid.SampledFrom(append(FaultResults, vmm.Result(rapid.Int32Range(1, 1000).Draw(t, "code")))).Draw(t, "r")
		case OpLimit:
			o.Size = rapid.Uint64().Draw(t, "limit")
		case OpFraction:
			o.Frac = rapid.Float64Range(-2, 2).Draw(t, "fraction") // (NaN prints and parses too, but is no value to compare)
		case OpSyncFail:
			o.N = rapid.IntRange(1, 9).Draw(t, "n")
		}
		back, err := ParseOp(o.String())
		if err != nil {
			t.Fatalf("%q: %v", o.String(), err)
		}
		if back != o {
			t.Fatalf("%q parsed as %+v, want %+v", o.String(), back, o)
		}
		cfg := Config{Policy: rapid.SampledFrom(impl.Policies).Draw(t, "policy"), Capacity: rapid.Uint64Range(2*vmm.MiB, MaxCapacity).Draw(t, "cap"), // in its range (ParseHeader refuses the rest)
			Granularity: 2 * vmm.MiB, Streams: s.Draw(t, "streams"), SyncStreams: rapid.Bool().Draw(t, "sync"),
			Seed: rapid.Int64().Draw(t, "seed"), Knobs: impl.Config{ChunkSize: rapid.Uint64().Draw(t, "chunk"),
				SBlockCache: rapid.IntRange(0, 4).Draw(t, "sbc"), NoCrossStream: rapid.Bool().Draw(t, "nocross")}}
		cfg.Serve = rapid.Bool().Draw(t, "serve")
		cfg.CLib = cfg.Serve && rapid.Bool().Draw(t, "clib")
		p := &Program{Cfg: cfg, Ops: []Op{o, o}}
		q, err := Parse(p.String(), "p")
		if err != nil {
			t.Fatalf("%q: %v", p.String(), err)
		}
		if q.String() != p.String() || q.Cfg.Seed != cfg.Seed || q.Cfg.Knobs != cfg.Knobs {
			t.Fatalf("program %q parsed back as %q", p.String(), q.String())
		}
	})
}

// Bad lines are refused with a *trace.ParseError (errors.Is trace.ErrSyntax) that names the line.
func TestParseRefusesBadLines(t *testing.T) {
	for _, bad := range []string{"alloc a1 12", "fail create 0 CUDA_ERROR_OUT_OF_MEMORY", "fail create 1 0", "free 3",
		"alloc a1 12 s0 q1", "launch", "x 3", "a 1 2", "a 1 -2 0", "# policy=gmlake streams=two", "# policy=gmlake colour=red",
		"pool-create s1", "free a-1", "fail-sync 0", "fraction half", "limit -1", "stats 1"} {
		_, err := Parse("alloc a0 1 s0\n"+bad+"\n", "bad.ops")
		var pe *trace.ParseError
		if !errors.As(err, &pe) || !errors.Is(err, trace.ErrSyntax) || pe.Line != 2 || pe.File != "bad.ops" {
			t.Errorf("%q: got %v, want a *trace.ParseError at bad.ops:2", bad, err)
		}
	}
	if _, err := Parse("alloc a0 1 s0\n# policy=gmlake\n", "late"); err == nil {
		t.Error("a setup line after the first op must be refused")
	}
}

// The trace format is a subset: `a`/`f` lines are alloc/free, `r` is no op (the block stays allocated until
// its f, as gmlake replay has it), and a file without a setup line runs on an H200 with the streams it uses.
func TestTraceLinesAreOps(t *testing.T) {
	p, err := Parse("# a comment\na 7 4096 2\nr 7\nf 7 // ok\nalloc a8 1 s0\n", "t.trace")
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{{Kind: OpAlloc, ID: 7, Size: 4096, Stream: 2}, {Kind: OpFree, ID: 7}, {Kind: OpAlloc, ID: 8, Size: 1}}
	if !reflect.DeepEqual(p.Ops, want) || p.Cfg.Streams != 3 || p.Cfg.Capacity != sim.H200Capacity {
		t.Fatalf("got %+v on %+v, want %+v on an H200 with 3 streams", p.Ops, p.Cfg, want)
	}
	if ev := p.Events(); len(ev) != 3 || ev[0].String() != "a 7 4096 2" || ev[1].String() != "f 7" {
		t.Fatalf("Events: %v", ev)
	}
}

// INV-SELFCHECK: a panic inside a step (the engine's own invariant checks panic) is reported as a
// violation, not a crash of the checker.
func TestStepReportsEnginePanic(t *testing.T) {
	env, err := NewEnv(Config{Capacity: 64 * vmm.MiB})
	if err != nil {
		t.Fatal(err)
	}
	env.A = nil // every engine call now panics
	r := env.Step(Op{Kind: OpAlloc, Size: 4096})
	if len(r.Violations) != 1 || r.Violations[0].Inv != "INV-SELFCHECK" {
		t.Fatalf("a panic must be reported as INV-SELFCHECK, got %v", r.Violations)
	}
}

// A clean sequence through every op kind passes every check, and the contract state follows it.
func TestEnvCleanSequence(t *testing.T) {
	ops, err := ParseOps(`
alloc a0 4096 s0
alloc a1 8388608 s1
record a0 s1
launch s1
free a0
free a0
free-interior a1 +512
complete s1
alloc a2 4096 s1
emptycache
fail create 1 CUDA_ERROR_OUT_OF_MEMORY
alloc a3 33554432 s0
clearfaults
completeall
free a1
free a2
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"gmlake", "caching", "expandable", "gmlake-paper"} {
		i, vs, env, err := Run(Config{Policy: p, Capacity: 256 * vmm.MiB}, ops)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 0 {
			t.Fatalf("%s: step %d violates %v\n%s", p, i, vs, env.Describe())
		}
	}
}

// Ops naming streams the environment does not have are harmless: launch/complete do nothing, alloc and
// record must be refused by the engine (ErrUnknownStream), which the contract checks.
func TestEnvUnknownStreamOps(t *testing.T) {
	ops, err := ParseOps("launch s9\ncomplete s9\nalloc a0 4096 s9\nalloc a1 4096 s0\nrecord a1 s9\nfree a1\n")
	if err != nil {
		t.Fatal(err)
	}
	if i, vs, env, err := Run(Config{Capacity: 64 * vmm.MiB}, ops); err != nil || i >= 0 {
		t.Fatalf("step %d: %v %v\n%s", i, vs, err, env.Describe())
	}
}

// A choice written with PutChoice reads back from a ByteSource as itself, for any n (the fuzz corpus is
// the generator's choices written this way).
func TestByteSourceReadsWhatPutChoiceWrote(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ns := rapid.SliceOfN(rapid.IntRange(1, 1<<40), 1, 20).Draw(t, "n")
		var b []byte
		var vs []int
		for i, n := range ns {
			v := rapid.IntRange(0, n-1).Draw(t, fmt.Sprintf("v%d", i))
			vs = append(vs, v)
			b = PutChoice(b, v, n)
		}
		src := NewByteSource(b)
		for i, n := range ns {
			if got := src.Intn(n, ""); got != vs[i] {
				t.Fatalf("choice %d among %d read back as %d", vs[i], n, got)
			}
		}
		if src.More() {
			t.Fatal("bytes left over")
		}
	})
}

// The setup line carries every field of Config that changes what a run does: each set alone to a value that
// is not its zero prints into Header and parses back to the same Config. The fields it leaves out say why.
func TestHeaderCarriesEverySetupField(t *testing.T) {
	notInHeader := map[string]string{
		"Knobs":        "its own keys (TestHeaderCarriesEveryKnob)",
		"NoChecks":     "skips judging, not the run: a reproducer is replayed to be judged",
		"Ignore":       "TestMutationsCaught's bookkeeping of what it sets aside",
		"Differential": "TestMutationsCaught's second run without the mutations",
		"Device":       "the device the run is given (a real GPU), not a value a text can carry",
		"Decisions":    "what the Env records of the run (DecisionHistory), not what it runs",
	}
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() || notInHeader[f.Name] != "" {
			continue
		}
		base := Config{Policy: impl.PolicyGMLake, Capacity: 1 << 30, Granularity: 2 << 20, Streams: 2}
		in := base
		v := reflect.ValueOf(&in).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(impl.PolicyCaching)
		case reflect.Uint64, reflect.Uint32:
			v.SetUint(8 << 20) // a power of two: a granularity
		case reflect.Int, reflect.Int64:
			v.SetInt(5)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		default:
			t.Fatalf("Config.%s is a %v: teach setupKeys to carry it, or say in notInHeader why not", f.Name, v.Kind())
		}
		line := in.Header()
		var out Config
		if err := ParseHeader(line, &out); err != nil {
			t.Fatalf("Config.%s: the header %q does not parse: %v", f.Name, line, err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Errorf("Config.%s is lost by the header: %q parses to %+v, want %+v", f.Name, line, out, in)
		}
	}
}

// ParseHeader refuses a key it does not know and a value that does not parse, naming the key: a typo in a
// saved reproducer must not silently run another setup.
func TestParseHeaderRefusesUnknownKeysAndBadValues(t *testing.T) {
	for line, want := range map[string]string{
		"# policy=gmlake capacity=1073741824 colour=blue": `unknown setup key "colour"`,
		"# policy=gmlake streams=two":                     `bad value for setup key streams: "two"`,
		"# policy=gmlake sync":                            `setup wants key=value pairs, got "sync"`,
		"# capacity=1 policy=gmlake":                      `not a setup line`,
	} {
		var cfg Config
		err := ParseHeader(line, &cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHeader(%q) = %v, want an error containing %q", line, err, want)
		}
	}
}

// The setup line carries every knob of impl.Config: each field set alone to a value that is not its zero
// prints into Header and parses back to the same Config. A knob added to impl.Config and left out of the
// header fails here, instead of a saved reproducer silently replaying under the default.
func TestHeaderCarriesEveryKnob(t *testing.T) {
	notKnobs := map[string]string{
		"Policy":            "the header's policy=",
		"TestOnlyMutations": "the header's mutations= (Config.Mutations)",
		"DebugOOM":          "prints the engine's state on out of memory, changes no decision",
	}
	typ := reflect.TypeOf(impl.Config{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() || notKnobs[f.Name] != "" {
			continue
		}
		var k impl.Config
		v := reflect.ValueOf(&k).Elem().Field(i)
		switch v.Kind() {
		case reflect.Uint64:
			v.SetUint(3 << 20)
		case reflect.Int:
			v.SetInt(3)
		case reflect.Float64:
			v.SetFloat(2.5)
		case reflect.Bool:
			v.SetBool(true)
		default:
			t.Fatalf("impl.Config.%s is a %v: teach KnobString and ParseHeader to carry it", f.Name, v.Kind())
		}
		in := Config{Policy: impl.PolicyGMLakePaper, Capacity: 1 << 30, Granularity: 2 << 20, Streams: 2, Knobs: k}
		line := in.Header()
		var out Config
		if err := ParseHeader(line, &out); err != nil {
			t.Fatalf("impl.Config.%s: the header %q does not parse: %v", f.Name, line, err)
		}
		if !reflect.DeepEqual(out.Knobs, k) {
			t.Errorf("impl.Config.%s is lost by the header: %q parses to knobs %+v, want %+v", f.Name, line, out.Knobs, k)
		}
	}
}

// TestDefaultNameReplaysThroughTheEmptyName: an Env that asks for gmlake by the empty name (as rapid's swarm
// does a quarter of the time) prints defaultname=true in its reproducer, so the replay asks the same way; a
// default name with another policy is refused, not run as that policy.
func TestDefaultNameReplaysThroughTheEmptyName(t *testing.T) {
	for _, cfg := range []Config{{}, {Policy: impl.PolicyGMLake, DefaultName: true}} {
		e, err := NewEnv(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.Step(Op{Kind: OpAlloc, ID: 0, Size: 3 << 20})
		text := e.Describe()
		if _, err := e.A.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, "defaultname=true") {
			t.Fatalf("Config%+v: the reproducer does not say the policy was asked for by the empty name:\n%s", cfg, text)
		}
		p, err := Parse(text, "repro")
		if err != nil {
			t.Fatal(err)
		}
		if !p.Cfg.DefaultName || p.Cfg.Policy != impl.PolicyGMLake {
			t.Fatalf("the reproducer parses back as policy %q default-name %v", p.Cfg.Policy, p.Cfg.DefaultName)
		}
		if i, vs, _, err := Run(p.Cfg, p.Ops); err != nil || i >= 0 {
			t.Fatalf("the reproducer replays with %v (step %d: %v)", err, i, vs)
		}
	}
	if _, err := NewEnv(Config{Policy: impl.PolicyCaching, DefaultName: true}); err == nil {
		t.Fatal("DefaultName with policy caching was accepted: the empty name runs gmlake")
	}
}

// A header names the seeded bugs it runs (mutations=no-merge+spurious-oom), each by its own name, and reads
// the names (or the bits in hex) back to the same bugs; an unknown name is refused.
func TestHeaderNamesTheSeededBugs(t *testing.T) {
	all := impl.AllMutations()
	seen := map[string]bool{}
	for i, m := range all {
		name := m.String()
		if seen[name] || strings.HasPrefix(name, "Mutation(") {
			t.Fatalf("seeded bug %d is named %q: every bug needs a name of its own", i, name)
		}
		seen[name] = true
		pair := m | all[(i+1)%len(all)]
		for _, text := range []string{mutationText(m), mutationText(pair), fmt.Sprintf("%#x", uint32(pair))} {
			want := m
			if text != mutationText(m) {
				want = pair
			}
			got, err := parseMutations(text)
			if err != nil || got != want {
				t.Errorf("mutations=%s parses to %v (%v), want %#x", text, got, err, uint32(want))
			}
		}
	}
	if got := mutationText(all[0] | all[3]); got != all[0].String()+"+"+all[3].String() {
		t.Errorf("mutationText = %q, want the two names joined by +", got)
	}
	if _, err := parseMutations("no-such-bug"); err == nil {
		t.Error("an unknown seeded bug's name parsed")
	}
}
