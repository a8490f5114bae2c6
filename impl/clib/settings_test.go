package clib

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Property: every settable field of impl.Config is a knob of the table with its unit, range and default
// (knobInfo), knobInfo names no field that is not one, the knobs are KnobNames, and every entry has a name, a
// unit, a range, a reader and a doc.
func TestEveryKnobIsInTheTable(t *testing.T) {
	ty := reflect.TypeOf(impl.Config{})
	fields := map[string]bool{}
	for i := 0; i < ty.NumField(); i++ {
		if f := ty.Field(i); settableKnob(f) {
			fields[f.Name] = true
			if _, ok := knobInfo[f.Name]; !ok {
				t.Errorf("impl.Config.%s is a knob (GMLAKE_%s) without an entry in knobInfo (impl/clib/settings.go): "+
					"give its unit, range and default", f.Name, envName(f.Name))
			}
		}
	}
	for name := range knobInfo {
		if !fields[name] {
			t.Errorf("knobInfo has %s, which is no settable field of impl.Config", name)
		}
	}
	var knobs []string
	names := map[string]bool{}
	for _, s := range Settings() {
		if names[s.Name] {
			t.Errorf("%s is in the table twice", s.Name)
		}
		names[s.Name] = true
		if s.Knob != "" {
			knobs = append(knobs, strings.TrimPrefix(s.Name, "GMLAKE_"))
		}
		if s.Name == "" || s.Unit == "" || s.ReadBy == "" || s.Doc == "" || (s.Range == "" && s.Retired == "") {
			t.Errorf("incomplete entry %+v", s)
		}
	}
	if !slices.Equal(knobs, KnobNames()) {
		t.Errorf("the table's knobs %v are not KnobNames %v", knobs, KnobNames())
	}
}

// Property: ParseEnv reads the first value of a name (as getenv), takes an empty value as unset, lists the
// GMLAKE_ variables the table does not know and ignores other variables, and fills the configuration:
// policy, device, capacities, caps, booleans and knobs under their variable names.
func TestParseEnvReadsEachSetting(t *testing.T) {
	c, err := ParseEnv([]string{"GMLAKE_POLICY=caching", "GMLAKE_POLICY=nope", "GMLAKE_DEVICE=sim",
		"GMLAKE_SIM_CAPACITY=1GiB", "GMLAKE_MEMORY_LIMIT=256MiB", "GMLAKE_MEMORY_FRACTION=0.5",
		"GMLAKE_VERBOSE=true", "GMLAKE_TIME_DRIVER=1", "GMLAKE_CHUNK_SIZE=4MiB", "GMLAKE_TRACE=/tmp/x.trace",
		"GMLAKE_DEBUG_OOM=", "GMLAKE_NO_SUCH=1", "GMLAKEY=1", "PATH=/bin", "GMLAKE_CUDA_HANDLES=posix_fd,rdma"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := EnvConfig{Engine: Config{Policy: "caching", MemoryLimit: 256 * vmm.MiB, MemoryFraction: 0.5, TimeDriver: true,
		Knobs: map[string]string{"GMLAKE_CHUNK_SIZE": "4MiB"}}, Device: "sim", SimCapacity: vmm.GiB, Verbose: true,
		Trace: "/tmp/x.trace", Unknown: []string{"GMLAKE_NO_SUCH"}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ParseEnv = %+v\nwant %+v", c, want)
	}
	// extra checks run on the values the table accepts, and name the variable.
	_, err = ParseEnv([]string{"GMLAKE_CUDA_HANDLES=rdma"}, map[string]func(string) error{
		"GMLAKE_CUDA_HANDLES": func(string) error { return errors.New("the device says no") }})
	var se *SettingError
	if !errors.As(err, &se) || se.Name != "GMLAKE_CUDA_HANDLES" || !strings.Contains(err.Error(), "the device says no") {
		t.Errorf("extra check: %v", err)
	}
}

// Property: each listed instance of issue 36 item 3 is refused by the parser with an error naming the
// variable (and kind ErrBadKnob): a memory limit that rounds to 0 bytes or is under one granule, limits and
// sizes beyond 2^64, a non-numeric or misaligned chunk size, a simulated device under 2 MiB, a retired
// variable, a boolean that is neither 1 nor 0; and TiB is a unit, as gmlake_torch's old check had it.
func TestParseEnvRefusesTheListedInstances(t *testing.T) {
	for _, kv := range []string{"GMLAKE_MEMORY_LIMIT=0.5", "GMLAKE_MEMORY_LIMIT=0", "GMLAKE_MEMORY_LIMIT=1MiB",
		"GMLAKE_MEMORY_LIMIT=17179869184GiB", "GMLAKE_MEMORY_LIMIT=99999999999999999999", "GMLAKE_CHUNK_SIZE=lots",
		"GMLAKE_CHUNK_SIZE=3MiB", "GMLAKE_SIM_CAPACITY=1MiB", "GMLAKE_SHIM=1", "GMLAKE_VERBOSE=2",
		"GMLAKE_TIME_DRIVER=yes", "GMLAKE_MEMORY_FRACTION=1e-12", "GMLAKE_MODE=c", "GMLAKE=maybe",
		"GMLAKE_CUDA_HANDLES=posix_fd,rmda", "GMLAKE_DEFRAG_LEVEL=4", "GMLAKE_TEST_PANIC_SIZE=x"} {
		name, _, _ := strings.Cut(kv, "=")
		_, err := ParseEnv([]string{kv, "GMLAKE_DEVICE=sim", "GMLAKE_SIM_CAPACITY=256MiB"}, nil)
		var se *SettingError
		if !errors.As(err, &se) || se.Name != name || !errors.Is(err, ErrBadKnob) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line naming %s", kv, err, name)
		}
	}
	c, err := ParseEnv([]string{"GMLAKE_MEMORY_LIMIT=1TiB", "GMLAKE_SIM_CAPACITY=2MiB"}, nil)
	if err != nil || c.Engine.MemoryLimit != 1<<40 || c.SimCapacity != 2*vmm.MiB {
		t.Errorf("1TiB and 2MiB: %+v, %v", c, err)
	}
}

// Property: with both caps set, New keeps the stricter, names it (MemoryLimitFrom) and says so once through
// Note; a fraction of 1 is no cap; one cap alone is taken silently.
func TestNewTakesTheStricterCap(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		frac  float64
		cap   uint64
		from  string
		note  bool
	}{
		{32 * vmm.MiB, 0.5, 32 * vmm.MiB, "GMLAKE_MEMORY_LIMIT", true},
		{200 * vmm.MiB, 0.25, 64 * vmm.MiB, "GMLAKE_MEMORY_FRACTION", true},
		{200 * vmm.MiB, 1, 200 * vmm.MiB, "GMLAKE_MEMORY_LIMIT", false},
		{0, 0.25, 64 * vmm.MiB, "GMLAKE_MEMORY_FRACTION", false},
		{0, 0, 0, "none", false},
	} {
		var notes []string
		e, err := New(newSim(256*vmm.MiB), simConfig(Config{MemoryLimit: c.limit, MemoryFraction: c.frac,
			Note: func(s string) { notes = append(notes, s) }}))
		if err != nil {
			t.Fatal(err)
		}
		if e.MemoryLimit() != c.cap || e.MemoryLimitFrom() != c.from || e.Stats(nil)["memory_limit_from"] != c.from {
			t.Errorf("limit %d, fraction %g: cap %d from %s; want %d from %s", c.limit, c.frac, e.MemoryLimit(),
				e.MemoryLimitFrom(), c.cap, c.from)
		}
		if c.note != (len(notes) == 1) || len(notes) > 1 || c.note && !strings.Contains(notes[0], c.from+"=") {
			t.Errorf("limit %d, fraction %g: notes %q", c.limit, c.frac, notes)
		}
		if err := e.SetMemoryFraction(0.5); err != nil || e.MemoryLimitFrom() != "gmlake_set_memory_fraction" {
			t.Errorf("SetMemoryFraction after start: %v, from %s", err, e.MemoryLimitFrom())
		}
		e.Close()
	}
	if _, err := New(newSim(256*vmm.MiB), simConfig(Config{MemoryFraction: 1e-12})); !errors.Is(err, ErrBadKnob) ||
		!strings.Contains(err.Error(), "GMLAKE_MEMORY_FRACTION") {
		t.Errorf("a fraction that caps at 0 bytes: %v", err)
	}
}

// inRange says whether value v of setting s, accepted by the parser, lies in the range the table states,
// judged from the setting's bounds with parsers of this test's own (strconv), not ParseEnv's.
func inRange(s Setting, v string) bool {
	t := strings.TrimSpace(v)
	switch s.Unit {
	case UnitBytes:
		n, err := ParseBytes(v) // the unit syntax is ParseBytes' (TestParseBytes pins it)
		if err != nil {
			return false
		}
		if n == 0 {
			return s.ZeroOK
		}
		return n >= s.MinBytes && n%max(s.MultipleOf, 1) == 0
	case UnitFraction:
		f, err := strconv.ParseFloat(t, 64)
		return err == nil && f > 0 && f <= 1
	case UnitInteger:
		base := 10
		if s.Knob != "" {
			base = 0
		}
		n, err := strconv.ParseInt(t, base, 64)
		return err == nil && n >= s.MinInt && n <= s.MaxInt
	case UnitNumber:
		f, err := strconv.ParseFloat(t, 64)
		return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && f >= s.MinNumber
	case UnitBoolean:
		return slices.Contains([]string{"0", "1", "true", "false"}, strings.ToLower(t))
	case UnitChoice:
		return slices.Contains(s.Choices, v)
	case UnitList:
		for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if !slices.Contains(s.Choices, w) {
				return false
			}
		}
		return true
	case UnitPath:
		return true
	}
	return false
}

// FuzzParseEnv is the generic check of the settings: for arbitrary values of any two settings (by their
// index in the table) on the simulated device, the parser either refuses with one line naming a variable
// that was set (errors.Is ErrBadKnob), or accepts values that lie in the ranges the table states, and then
// engine creation accepts them too and the first allocation is not refused as a configuration error (no
// refusal deferred to the first allocation). make test runs the seeds; `go test -fuzz FuzzParseEnv
// ./impl/clib` looks further.
func FuzzParseEnv(f *testing.F) {
	vals := []string{"", "0", "1", "-1", "0.5", "2", "3", "true", "yes", "x", "2MiB", "3MiB", "1MiB", "1TiB", "0.5KiB",
		"1e300", "NaN", "-0", "0x10", "18446744073709551615", "99999999999999999999", "gmlake", "sim", "cuda", "auto",
		"posix_fd,rdma", "1e-12", "256MiB", " 4 MiB ", "1.3GiB", "0.0625GiB", "4", "long"}
	for i := range table {
		for j, v := range vals {
			f.Add(uint8(i), v, uint8((i+j)%len(table)), vals[(i+j)%len(vals)])
			f.Add(uint8(i), v, uint8(i), v) // the setting alone (twice: the first counts), so no partner's refusal hides it
		}
	}
	f.Fuzz(func(t *testing.T, i uint8, v string, j uint8, w string) {
		a, b := table[int(i)%len(table)], table[int(j)%len(table)]
		env := []string{a.Name + "=" + v, b.Name + "=" + w, "GMLAKE_DEVICE=sim", "GMLAKE_SIM_CAPACITY=256MiB"}
		c, err := ParseEnv(env, nil)
		if err != nil {
			var se *SettingError
			if !errors.As(err, &se) || se.Name != a.Name && se.Name != b.Name || !errors.Is(err, ErrBadKnob) ||
				!strings.Contains(err.Error(), se.Name) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: the refusal %v does not name %s or %s in one line", env, err, a.Name, b.Name)
			}
			return
		}
		given := map[string]string{}
		for _, kv := range env {
			name, val, _ := strings.Cut(kv, "=")
			if _, seen := given[name]; !seen {
				given[name] = val
			}
		}
		for _, s := range []Setting{a, b} {
			if val := given[s.Name]; val != "" && (s.Retired != "" || !inRange(s, val)) {
				t.Fatalf("%q: %s=%q accepted, outside the table's range %q", env, s.Name, val, s.Range)
			}
		}
		// An accepted setting takes effect: what the EnvConfig holds for it is what its value says.
		for _, s := range []Setting{a, b} {
			val := given[s.Name]
			if val == "" {
				continue
			}
			if got, ok := effective(c, s); ok && got != canonical(s, val) {
				t.Fatalf("%q: %s=%q accepted, but the configuration holds %q for it, want %q", env, s.Name, val,
					got, canonical(s, val))
			}
		}
		cfg := c.Engine
		cfg.Driver, cfg.OwnStreams = "sim", true
		dev := sim.NewDevice(sim.DeviceConfig{Capacity: c.SimCapacity, SyncStreams: true}) // as libgmlake opens it
		e, err := New(dev, cfg)
		if err != nil {
			t.Fatalf("%q: parsed, but engine creation refuses: %v", env, err)
		}
		p, err := e.Alloc(4096, 0)
		if err != nil && (IsConfigError(err) || !IsOutOfMemory(err)) {
			t.Fatalf("%q: the first allocation is refused: %v", env, err)
		}
		if err == nil {
			if err := e.Free(p); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := e.Close(); err != nil {
			t.Fatalf("%q: close: %v", env, err)
		}
		if l := dev.Leaks(); !l.Empty() {
			t.Fatalf("%q: leaks %s", env, l)
		}
	})
}
