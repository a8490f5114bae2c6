package clib

// The settings table: every GMLAKE_ environment variable that libgmlake, gmlake_torch or the CUDA driver of
// the C library reads, with its unit, its range, its default and who reads it, and the one parser of them
// (ParseEnv) that engine creation, gmlake_check_settings (gmlake_torch's up-front check) and the docs test
// all use. The engine knobs are the settable fields of impl.Config, found by reflection; knobInfo gives
// each its unit, range and default (a field without an entry is a test failure, not a silent knob).

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// Granule is the granularity the settings are checked against: 2 MiB, the physical granularity of every
// NVIDIA GPU with virtual memory management and of the simulated device. Engine creation checks the knobs
// against the device's own granularity again.
const Granule = 2 * vmm.MiB

// Units of a setting's value.
const (
	UnitBytes    = "bytes"    // a byte count: 1048576, 512KiB, 2MiB, 1.5GiB, 1TiB (binary units; K, M, G, T alone too)
	UnitFraction = "fraction" // a number in (0, 1]
	UnitInteger  = "integer"  // a whole number (decimal, or 0x.. hexadecimal)
	UnitNumber   = "number"   // a finite decimal number
	UnitBoolean  = "boolean"  // 1 or 0 (true or false)
	UnitChoice   = "choice"   // one of Choices
	UnitPath     = "path"     // a file or folder
	UnitList     = "list"     // comma-separated words of Choices
)

// Who reads a setting.
const (
	ReadByLibrary = "library" // libgmlake, when a device's engine starts (its first allocation)
	ReadByPython  = "python"  // gmlake_torch (enable(), the GMLAKE=1 hook, python -m gmlake_torch)
	ReadByTests   = "tests"   // the project's own tests: not a setting of the product (not in the user docs)
)

// Setting is one GMLAKE_ environment variable. An empty value is the same as unset.
type Setting struct {
	Name    string   `json:"name"`              // GMLAKE_...
	Unit    string   `json:"unit"`              // Unit*
	Range   string   `json:"range"`             // the values taken, in words (the docs state exactly this)
	Default string   `json:"default"`           // what unset means
	ReadBy  string   `json:"read_by"`           // ReadBy*
	Doc     string   `json:"doc"`               // what it does, one line
	Choices []string `json:"choices,omitempty"` // UnitChoice and UnitList: the words taken
	Knob    string   `json:"knob,omitempty"`    // the impl.Config field it sets ("" for the others)
	Retired string   `json:"retired,omitempty"` // the variable is gone: what to do instead (any value is refused)

	// Bounds the fuzz target and the docs check (the parser enforces them; Range says them in words).
	MinBytes, MultipleOf uint64  `json:"-"` // UnitBytes: at least MinBytes (unless 0 is allowed), a multiple of MultipleOf
	ZeroOK               bool    `json:"-"` // UnitBytes, UnitNumber: 0 is taken (as the default)
	MinInt, MaxInt       int64   `json:"-"` // UnitInteger
	MinNumber            float64 `json:"-"` // UnitNumber

	_ struct{}
}

// knobInfo is what the table says of each engine knob (an impl.Config field, by its Go name).
var knobInfo = map[string]Setting{
	"StitchMin": {Unit: UnitBytes, MultipleOf: 512, ZeroOK: true, Default: "4MiB (gmlake), 512MiB (gmlake-paper)",
		Doc: "the smallest rounded request served by stitching"},
	"ChunkSize": {Unit: UnitBytes, MultipleOf: Granule, ZeroOK: true,
		Default: "48MiB, or 1/2048 of a smaller device (gmlake); 2MiB (gmlake-paper)",
		Doc:     "the largest physical chunk an arena growth creates (gmlake-paper: its fixed chunk)"},
	"PageSizeSmall": {Unit: UnitBytes, MultipleOf: Granule, ZeroOK: true, Default: "2MiB",
		Doc: "the expandable policy's page of the small pool"},
	"PageSizeLarge": {Unit: UnitBytes, MultipleOf: Granule, ZeroOK: true, Default: "20MiB",
		Doc: "the expandable policy's page of the large pool"},
	"SBlockCache": {Unit: UnitInteger, MinInt: math.MinInt64, MaxInt: math.MaxInt64,
		Default: "256 (gmlake), no limit (gmlake-paper)",
		Doc:     "free stitched blocks kept cached; negative: no limit; 0: the default"},
	"NoCrossStream": {Unit: UnitBoolean, Default: "0", Doc: "1: no stitching or reuse across streams (gmlake)"},
	"StitchSave": {Unit: UnitBytes, MultipleOf: 1, ZeroOK: true, Default: "128MiB, or 1/1024 of a smaller device",
		Doc: "gmlake stitches rather than grows only when that saves more than this"},
	"DebugOOM": {Unit: UnitBoolean, Default: "0", Doc: "1: print the engine's state on stderr on the out-of-memory path"},
	"ReuseLimit": {Unit: UnitNumber, MinNumber: 0, ZeroOK: true, Default: "10",
		Doc: "gmlake-paper: a cached stitched block serves a request when it is at most this many times the request"},
	"DefragLevel": {Unit: UnitInteger, MinInt: 0, MaxInt: 3, Default: "0",
		Doc: "gmlake-paper: stitch attempts below this one are skipped"},
	"AutoGC": {Unit: UnitBytes, MultipleOf: 1, ZeroOK: true, Default: "1000GiB",
		Doc: "gmlake-paper: stitched bytes that start a collection of the cached stitched blocks"},
	"ReAlloc": {Unit: UnitBoolean, Default: "0",
		Doc: "gmlake-paper: 1: grow by the request less the stream's free bytes, then stitch"},
}

// fixed is the table's entries besides the knobs, in the docs' order.
var fixed = []Setting{
	{Name: "GMLAKE", Unit: UnitBoolean, Default: "0", ReadBy: ReadByPython,
		Doc: "1: enable gmlake in every interpreter that imports torch (the wheel's .pth hook)"},
	{Name: "GMLAKE_MODE", Unit: UnitChoice, Choices: []string{"auto", "cpp", "pluggable"}, Default: "auto", ReadBy: ReadByPython,
		Doc: "the C++ allocator (cpp), the pluggable fallback, or cpp where it can be built (auto)"},
	{Name: "GMLAKE_LIB", Unit: UnitPath, Range: "a libgmlake.so file", Default: "the one in the package", ReadBy: ReadByPython,
		Doc: "use this libgmlake.so"},
	{Name: "GMLAKE_CACHE", Unit: UnitPath, Range: "a folder", Default: "~/.cache/gmlake_torch", ReadBy: ReadByPython,
		Doc: "where the C++ allocator is built and cached"},
	{Name: "GMLAKE_POLICY", Unit: UnitChoice, Choices: impl.Policies, Default: impl.PolicyGMLake, ReadBy: ReadByLibrary,
		Doc: "the allocation policy (caching: PyTorch's native rules)"},
	{Name: "GMLAKE_DEVICE", Unit: UnitChoice, Choices: []string{"cuda", "sim"}, Default: "cuda", ReadBy: ReadByLibrary,
		Doc: "the real GPU, or the simulated H200 (tests without a GPU; refused with PyTorch)"},
	{Name: "GMLAKE_SIM_CAPACITY", Unit: UnitBytes, MinBytes: Granule, MultipleOf: 1, Default: "141000000000 (an H200)",
		ReadBy: ReadByLibrary, Doc: "the simulated device's memory, rounded down to a multiple of 2MiB"},
	{Name: "GMLAKE_MEMORY_FRACTION", Unit: UnitFraction, Default: "1 (no cap)", ReadBy: ReadByLibrary,
		Doc: "a cap on the physical memory held, as a share of the device's; with GMLAKE_MEMORY_LIMIT the stricter is in force"},
	{Name: "GMLAKE_MEMORY_LIMIT", Unit: UnitBytes, MinBytes: Granule, MultipleOf: 1, Default: "no cap", ReadBy: ReadByLibrary,
		Doc: "a cap on the physical memory held; with GMLAKE_MEMORY_FRACTION the stricter is in force"},
	{Name: "GMLAKE_TRACE", Unit: UnitPath, Range: "a file; {pid} and {rank} are substituted; .gz: gzipped", Default: "no trace",
		ReadBy: ReadByLibrary, Doc: "write the allocation trace of the process (what gmlake replay reads)"},
	{Name: "GMLAKE_VERBOSE", Unit: UnitBoolean, Default: "0", ReadBy: ReadByLibrary,
		Doc: "1: print each engine's configuration and the mode chosen on stderr"},
	{Name: "GMLAKE_HOST_CACHE", Unit: UnitBoolean, Default: "1", ReadBy: ReadByLibrary,
		Doc: "0: every free and allocation enters the engine (no C-side cache of freed blocks in front of it)"},
	{Name: "GMLAKE_TIME_DRIVER", Unit: UnitBoolean, Default: "0", ReadBy: ReadByLibrary,
		Doc: "1: time every driver call (stats' driver_seconds by kind: profiling)"},
	{Name: "GMLAKE_CUDA_HANDLES", Unit: UnitList, Choices: []string{"posix_fd", "fabric", "rdma", "none"}, Default: "posix_fd",
		ReadBy: ReadByLibrary, Doc: "the handle types of the physical memory (rdma: GPUDirect RDMA; see docs/cuda-vmm.md)"},
	{Name: "GMLAKE_SHIM", Unit: UnitBoolean, ReadBy: ReadByPython, Doc: "the old out-of-memory shim",
		Retired: "the OOM shim is gone; the C++ allocator raises torch.OutOfMemoryError itself (GMLAKE_MODE=cpp): unset it"},
	{Name: "GMLAKE_SHIM_CACHE", Unit: UnitPath, ReadBy: ReadByPython, Doc: "the old out-of-memory shim's build cache",
		Retired: "the OOM shim is gone; GMLAKE_CACHE is the C++ allocator's build cache: unset it"},
	{Name: "GMLAKE_TEST_PANIC_SIZE", Unit: UnitInteger, MinInt: 0, MaxInt: math.MaxInt64, Default: "0 (none)", ReadBy: ReadByTests,
		Doc: "an allocation of exactly this many bytes panics inside a library built with test hooks"},
	{Name: "GMLAKE_PROFILE", Unit: UnitChoice, Choices: []string{"long", "mutation"}, ReadBy: ReadByTests,
		Doc: "the budget of the project's long tests (make verify) and of mutation runs"},
}

var table = buildTable()

func buildTable() []Setting {
	out := make([]Setting, 0, len(fixed)+len(knobInfo))
	for _, s := range fixed {
		out = append(out, finish(s))
	}
	t := reflect.TypeOf(impl.Config{})
	var knobs []Setting
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !settableKnob(f) {
			continue
		}
		s, ok := knobInfo[f.Name]
		if !ok { // TestEveryKnobIsInTheTable fails; meanwhile the knob is parsed by its kind alone
			s = Setting{Unit: unitOfKind(f.Type.Kind()), MultipleOf: 1, ZeroOK: true, MinInt: math.MinInt64,
				MaxInt: math.MaxInt64, MinNumber: -math.MaxFloat64, Doc: "an engine knob (impl.Config." + f.Name + ")"}
		}
		s.Name, s.Knob, s.ReadBy = "GMLAKE_"+envName(f.Name), f.Name, ReadByLibrary
		knobs = append(knobs, finish(s))
	}
	sort.Slice(knobs, func(i, j int) bool { return knobs[i].Name < knobs[j].Name })
	return append(out, knobs...)
}

func unitOfKind(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return UnitBoolean
	case reflect.Float32, reflect.Float64:
		return UnitNumber
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return UnitInteger
	case reflect.String:
		return UnitPath
	}
	return UnitBytes
}

// finish fills a setting's Range from its bounds (where not given in words).
func finish(s Setting) Setting {
	if s.Range != "" || s.Retired != "" {
		return s
	}
	switch s.Unit {
	case UnitBytes:
		var parts []string
		if s.MinBytes > 0 {
			parts = append(parts, ">= "+bytesText(s.MinBytes))
		}
		if s.MultipleOf > 1 {
			parts = append(parts, "a multiple of "+bytesText(s.MultipleOf))
		}
		s.Range = strings.Join(append(parts, "< 2^64"), ", ")
		if s.ZeroOK {
			s.Range += "; 0: the default"
		}
	case UnitFraction:
		s.Range = "0 < f <= 1"
	case UnitInteger:
		switch {
		case s.MinInt == math.MinInt64 && s.MaxInt == math.MaxInt64:
			s.Range = "any integer"
		case s.MaxInt == math.MaxInt64:
			s.Range = fmt.Sprintf(">= %d", s.MinInt)
		default:
			s.Range = fmt.Sprintf("%d to %d", s.MinInt, s.MaxInt)
		}
	case UnitNumber:
		s.Range = fmt.Sprintf(">= %g", s.MinNumber)
		if s.ZeroOK {
			s.Range += "; 0: the default"
		}
	case UnitBoolean:
		s.Range = "1 or 0 (true or false)"
	case UnitChoice:
		s.Range = "one of " + strings.Join(s.Choices, ", ")
	case UnitList:
		s.Range = strings.Join(s.Choices, ", ") + ", comma-separated"
	}
	return s
}

// bytesText says n in the largest binary unit that divides it (2MiB, 512B).
func bytesText(n uint64) string {
	for _, u := range []struct {
		s string
		m uint64
	}{{"TiB", 1 << 40}, {"GiB", vmm.GiB}, {"MiB", vmm.MiB}, {"KiB", vmm.KiB}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// Settings returns the table: every GMLAKE_ variable read by the library, gmlake_torch or the project's
// tests (ReadByTests), the fixed ones first in the docs' order, then the engine knobs by name.
func Settings() []Setting { return slices.Clone(table) }

// SettingsJSON is Settings as JSON (gmlake_settings_json, gmlake_torch.settings()).
func SettingsJSON() []byte {
	b, err := json.Marshal(table)
	if err != nil { // strings only: cannot happen
		return []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return b
}

// SettingsMarkdown is the table as docs/pytorch.md shows it (the docs test compares the two): a Markdown
// table of the settings a user sets (not the project's tests' nor the retired ones), one row each.
func SettingsMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | unit | values | default | read by | what it does |\n|---|---|---|---|---|---|\n")
	for _, s := range table {
		if s.ReadBy == ReadByTests || s.Retired != "" {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", s.Name, s.Unit, s.Range, s.Default, s.ReadBy, s.Doc)
	}
	return b.String()
}

// LookupSetting returns the table's entry of the variable name (GMLAKE_...).
func LookupSetting(name string) (Setting, bool) {
	for _, s := range table {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// SettingError is a refused setting: the variable, its value and why, in one line. errors.Is(err,
// ErrBadKnob) holds.
type SettingError struct {
	Name, Value string
	Err         error // why (its text is the rest of the line)
}

func (e *SettingError) Error() string { return fmt.Sprintf("%s=%s: %v", e.Name, quote(e.Value), e.Err) }

// quote quotes a value for an error line, cut after 60 bytes (the line stays one readable line).
func quote(v string) string {
	if len(v) > 80 {
		return fmt.Sprintf("%q... (%d bytes)", v[:60], len(v))
	}
	return strconv.Quote(v)
}

// Unwrap returns why.
func (e *SettingError) Unwrap() error { return e.Err }

// Is makes every SettingError an ErrBadKnob.
func (e *SettingError) Is(target error) bool { return target == ErrBadKnob }

// refusal is why a value is refused; errors.Is(err, ErrBadKnob) holds.
type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == ErrBadKnob }

func refuse(format string, a ...any) error { return refusal(fmt.Sprintf(format, a...)) }

// outOfRange is why a value that parses is refused: outside the setting's range. It is an invalid
// configuration too (errors.Is impl.ErrBadConfig, as engine creation would say of it).
type outOfRange string

func (r outOfRange) Error() string { return string(r) }
func (r outOfRange) Is(target error) bool {
	return target == ErrBadKnob || target == impl.ErrBadConfig
}

func refuseRange(format string, a ...any) error { return outOfRange(fmt.Sprintf(format, a...)) }

// ParseBool parses a boolean setting: 1, true (on) or 0, false (off), any case, spaces around ignored.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, refuse("want 1 or 0 (true or false)")
}

// ParseBytes parses a byte count: "1048576", "512KiB", "2MiB", "1.5GiB", "1TiB", "2M", "1G" (binary units,
// any case). A fraction of a byte is rounded down, but a value that is not 0 and rounds to 0 bytes is
// refused (0.5 is not "0 bytes"), and so is anything at or beyond 2^64 bytes. Errors wrap ErrBadKnob.
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"KiB", vmm.KiB}, {"MiB", vmm.MiB}, {"GiB", vmm.GiB}, {"TiB", 1 << 40}, {"KB", vmm.KiB}, {"MB", vmm.MiB},
		{"GB", vmm.GiB}, {"TB", 1 << 40}, {"K", vmm.KiB}, {"M", vmm.MiB}, {"G", vmm.GiB}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suf)) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suf)]), u.m
			break
		}
	}
	if n, err := strconv.ParseUint(t, 10, 64); err == nil {
		if n > math.MaxUint64/mult {
			return 0, refuse("%s is more than 2^64-1 bytes", quote(s))
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) ||
		strings.ContainsAny(t, "xXpP_") { // hexadecimal floats and digit separators are not byte counts
		return 0, refuse("%s is not a byte count (examples: 1048576, 2MiB, 1.5GiB)", quote(s))
	}
	// 2^64 as a float64: anything at or above it does not fit (uint64 conversion would saturate silently).
	b := f * float64(mult)
	if err != nil || b >= 1<<64 {
		return 0, refuse("%s is more than 2^64-1 bytes", quote(s))
	}
	if b > 0 && b < 1 {
		return 0, refuse("%s is %g bytes, which rounds to 0", quote(s), b)
	}
	return uint64(b), nil
}

// ParseFraction parses a memory fraction: a finite number in (0, 1] (GMLAKE_MEMORY_FRACTION, PyTorch's
// set_per_process_memory_fraction).
func ParseFraction(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, refuse("memory fraction %s: want a number in (0, 1]", quote(s))
	}
	return f, nil
}

// KnobNames lists the environment spellings (without the GMLAKE_ prefix) of the settable impl.Config fields.
func KnobNames() []string {
	var out []string
	t := reflect.TypeOf(impl.Config{})
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); settableKnob(f) {
			out = append(out, envName(f.Name))
		}
	}
	sort.Strings(out)
	return out
}

func settableKnob(f reflect.StructField) bool {
	if !f.IsExported() || f.Name == "Policy" || f.Name == "TestOnlyMutations" {
		return false
	}
	switch f.Type.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// envName spells a Go field name the environment way: ChunkSize -> CHUNK_SIZE, SBlockCache -> SBLOCK_CACHE,
// HTTPServer -> HTTP_SERVER. A word break is a lower-to-upper step, or the end of a run of at least two
// capitals followed by a lower-case letter (a one-letter prefix such as the S of SBlock stays attached).
func envName(field string) string {
	var b strings.Builder
	rs := []rune(field)
	run := 0 // capitals immediately before position i
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			lowerBefore := unicode.IsLower(rs[i-1])
			acronymEnd := run >= 2 && i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if lowerBefore || acronymEnd {
				b.WriteByte('_')
			}
		}
		if unicode.IsUpper(r) {
			run++
		} else {
			run = 0
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// ApplyKnobs sets cfg's fields from knobs, keyed by the Go field name ("ChunkSize"), its environment
// spelling ("CHUNK_SIZE") or that with the GMLAKE_ prefix. Every knob must name a settable field, and its
// value must parse as the table's unit says and lie in the range it states where that range does not depend
// on the device (a byte count's granularity does: engine creation checks it). Errors are *SettingError
// naming the key (errors.Is ErrBadKnob); cfg may be partly set after one.
func ApplyKnobs(cfg *impl.Config, knobs map[string]string) error {
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	byName := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if settableKnob(t.Field(i)) {
			byName[t.Field(i).Name] = i
			byName[envName(t.Field(i).Name)] = i
		}
	}
	keys := make([]string, 0, len(knobs))
	for k := range knobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, ok := byName[strings.TrimPrefix(k, "GMLAKE_")]
		if !ok {
			return &SettingError{Name: k, Value: knobs[k], Err: refuse("unknown knob; settable knobs: %v", KnobNames())}
		}
		s, _ := LookupSetting("GMLAKE_" + envName(t.Field(i).Name))
		if err := setKnob(v.Field(i), s, knobs[k], 0); err != nil {
			return &SettingError{Name: k, Value: knobs[k], Err: err}
		}
	}
	return nil
}

// setKnob parses text into field f as setting s says, and checks the range; gran > 0 also checks byte
// counts against that granularity (MultipleOf Granule stands for the device's granularity).
func setKnob(f reflect.Value, s Setting, text string, gran uint64) error {
	switch f.Kind() {
	case reflect.Bool:
		b, err := ParseBool(text)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.String:
		f.SetString(text)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return refuse("not a number (examples: 10, 2.5)")
		}
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || f.OverflowFloat(x) {
			return refuse("not a finite number")
		}
		if s.Unit == UnitNumber && x < s.MinNumber {
			return refuseRange("want %s", s.Range)
		}
		f.SetFloat(x)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(strings.TrimSpace(text), 0, 64)
		if err != nil && errors.Is(err, strconv.ErrRange) || err == nil && f.OverflowInt(x) {
			return refuse("out of range: want %s", s.Range)
		}
		if err != nil {
			return refuse("not an integer (want %s)", s.Range)
		}
		if s.Unit == UnitInteger && (x < s.MinInt || x > s.MaxInt) {
			return refuseRange("want %s", s.Range)
		}
		f.SetInt(x)
	default: // unsigned: a byte count
		x, err := ParseBytes(text)
		if err != nil {
			return err
		}
		if f.OverflowUint(x) {
			return refuse("out of range")
		}
		if err := bytesInRange(s, x, gran); err != nil {
			return err
		}
		f.SetUint(x)
	}
	return nil
}

// bytesInRange checks byte count x against setting s's bounds; a MultipleOf of Granule is checked only when
// gran > 0, against gran.
func bytesInRange(s Setting, x, gran uint64) error {
	if x == 0 && s.ZeroOK {
		return nil
	}
	if x < max(s.MinBytes, 1) {
		return refuseRange("%d bytes: want %s", x, s.Range)
	}
	m := s.MultipleOf
	if m == Granule {
		m = gran
	}
	if m > 1 && x%m != 0 {
		return refuseRange("%d bytes is not a multiple of %s: want %s", x, bytesText(m), s.Range)
	}
	return nil
}

// EnvConfig is the C library's configuration as the environment gives it (ParseEnv).
type EnvConfig struct {
	// Engine has Policy, Knobs (keyed by variable name, GMLAKE_CHUNK_SIZE), MemoryLimit, MemoryFraction and
	// TimeDriver set; Driver, Device and OwnStreams are the device opener's.
	Engine      Config
	Device      string // GMLAKE_DEVICE: "cuda" or "sim" ("": unset, the real GPU)
	SimCapacity uint64 // GMLAKE_SIM_CAPACITY (0: an H200's)
	Verbose     bool   // GMLAKE_VERBOSE
	Trace       string // GMLAKE_TRACE
	// Unknown lists the GMLAKE_ variables set that the table does not know, sorted: the library says so on
	// stderr and goes on; gmlake_check_settings refuses them.
	Unknown []string

	_ struct{}
}

// ParseEnv is the one parser of the settings: it reads the GMLAKE_ variables of env ("NAME=VALUE" strings,
// as os.Environ gives them; the first of a name counts, as getenv finds it; an empty value is unset) and
// checks every one against the table: unit, range (a byte count's granularity against Granule) and
// retirement. extra checks variables other packages parse (GMLAKE_CUDA_HANDLES: the CUDA driver's). The
// error is a *SettingError naming the first bad variable in the table's order. What it accepts, engine
// creation accepts (FuzzParseEnv).
func ParseEnv(env []string, extra map[string]func(string) error) (EnvConfig, error) {
	vars := map[string]string{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if _, seen := vars[name]; ok && !seen && strings.HasPrefix(name, "GMLAKE") {
			vars[name] = value
		}
	}
	c := EnvConfig{Engine: Config{Knobs: map[string]string{}}}
	for name := range vars {
		if _, ok := LookupSetting(name); !ok && (name == "GMLAKE" || strings.HasPrefix(name, "GMLAKE_")) {
			c.Unknown = append(c.Unknown, name)
		}
	}
	sort.Strings(c.Unknown)
	var scratch impl.Config
	sv := reflect.ValueOf(&scratch).Elem()
	for _, s := range table {
		v, ok := vars[s.Name]
		if !ok || v == "" {
			continue
		}
		if err := parseOne(&c, s, v, sv); err != nil {
			return c, &SettingError{Name: s.Name, Value: v, Err: err}
		}
		if check := extra[s.Name]; check != nil {
			if err := check(v); err != nil {
				return c, &SettingError{Name: s.Name, Value: v, Err: refusal(err.Error())}
			}
		}
	}
	if f := c.Engine.MemoryFraction; f > 0 && f < 1 && c.Device == "sim" {
		if err := fractionCap(f, simTotal(c.SimCapacity)); err != nil {
			return c, &SettingError{Name: "GMLAKE_MEMORY_FRACTION", Value: vars["GMLAKE_MEMORY_FRACTION"], Err: err}
		}
	}
	return c, nil
}

// simTotal is the memory of a simulated device of capacity bytes (model/sim: 0 is an H200's 141 GB; rounded
// down to the granularity).
func simTotal(capacity uint64) uint64 {
	if capacity == 0 {
		capacity = 141_000_000_000
	}
	return capacity - capacity%Granule
}

// fractionCap refuses a fraction f < 1 of a device of total bytes whose cap is 0 bytes.
func fractionCap(f float64, total uint64) error {
	if uint64(f*float64(total)) == 0 {
		return refuse("%g of the device's %d bytes caps it at 0 bytes: want at least %g", f, total, 1/float64(max(total, 1)))
	}
	return nil
}

// parseOne parses value v of setting s into c (knobs through sv, a scratch impl.Config).
func parseOne(c *EnvConfig, s Setting, v string, sv reflect.Value) error {
	if s.Retired != "" {
		return refusal(s.Retired)
	}
	if s.Knob != "" {
		if err := setKnob(sv.FieldByName(s.Knob), s, v, Granule); err != nil {
			return err
		}
		c.Engine.Knobs[s.Name] = v
		return nil
	}
	switch s.Unit {
	case UnitBoolean:
		b, err := ParseBool(v)
		if err != nil {
			return err
		}
		switch s.Name {
		case "GMLAKE_VERBOSE":
			c.Verbose = b
		case "GMLAKE_TIME_DRIVER":
			c.Engine.TimeDriver = b
		case "GMLAKE_HOST_CACHE":
			c.Engine.NoHostCache = !b
		}
	case UnitChoice:
		if !slices.Contains(s.Choices, v) {
			return refuse("want one of %s", strings.Join(s.Choices, ", "))
		}
		switch s.Name {
		case "GMLAKE_POLICY":
			c.Engine.Policy = v
		case "GMLAKE_DEVICE":
			c.Device = v
		}
	case UnitList:
		for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if !slices.Contains(s.Choices, w) {
				return refuse("unknown word %q: want %s", w, s.Range)
			}
		}
	case UnitBytes:
		n, err := ParseBytes(v)
		if err == nil {
			err = bytesInRange(s, n, Granule)
		}
		if err != nil {
			if s.Name == "GMLAKE_MEMORY_LIMIT" {
				err = refuse("%v (a cap below one 2MiB granule admits no allocation; unset it for no cap)", err)
			}
			return err
		}
		switch s.Name {
		case "GMLAKE_SIM_CAPACITY":
			c.SimCapacity = n
		case "GMLAKE_MEMORY_LIMIT":
			c.Engine.MemoryLimit = n
		}
	case UnitFraction:
		f, err := ParseFraction(v)
		if err != nil {
			return refuse("want a number in (0, 1]")
		}
		c.Engine.MemoryFraction = f
	case UnitInteger:
		x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || x < s.MinInt || x > s.MaxInt {
			return refuse("want %s", s.Range)
		}
	case UnitPath:
		if s.Name == "GMLAKE_TRACE" {
			c.Trace = v
		}
	}
	return nil
}

// memoryCap is the cap New starts an engine with on d: cfg.MemoryLimit and cfg.MemoryFraction of the
// device's memory, the stricter where both are set (a fraction of 1 is no cap), the setting it came from,
// and a note saying which won when both capped. A fraction out of (0, 1] or whose cap is 0 bytes is an
// error naming GMLAKE_MEMORY_FRACTION.
func memoryCap(d vmm.Driver, cfg Config) (limit uint64, from, note string, err error) {
	limit, from = cfg.MemoryLimit, "none"
	if limit != 0 {
		from = "GMLAKE_MEMORY_LIMIT"
	}
	f := cfg.MemoryFraction
	if f == 0 || f == 1 {
		return limit, from, "", nil
	}
	text := strconv.FormatFloat(f, 'g', -1, 64)
	if !(f > 0 && f < 1) {
		return 0, "", "", &SettingError{Name: "GMLAKE_MEMORY_FRACTION", Value: text, Err: refuse("want a number in (0, 1]")}
	}
	_, total, err := d.MemInfo()
	if err != nil {
		return 0, "", "", fmt.Errorf("gmlake: asking the device its size: %w", err)
	}
	if err := fractionCap(f, total); err != nil {
		return 0, "", "", &SettingError{Name: "GMLAKE_MEMORY_FRACTION", Value: text, Err: err}
	}
	fl := uint64(f * float64(total))
	switch {
	case limit == 0:
		return fl, "GMLAKE_MEMORY_FRACTION", "", nil
	case fl < limit:
		note = fmt.Sprintf("gmlake: device %d: GMLAKE_MEMORY_FRACTION=%s (%d bytes of the device's %d) is stricter than "+
			"GMLAKE_MEMORY_LIMIT=%d bytes: the cap is %d bytes", cfg.Device, text, fl, total, limit, fl)
		return fl, "GMLAKE_MEMORY_FRACTION", note, nil
	default:
		note = fmt.Sprintf("gmlake: device %d: GMLAKE_MEMORY_LIMIT=%d bytes is stricter than GMLAKE_MEMORY_FRACTION=%s "+
			"(%d bytes of the device's %d): the cap is %d bytes", cfg.Device, limit, text, fl, total, limit)
		return limit, from, note, nil
	}
}
