package ops

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gmlake/gmlake/impl"
)

// The setup line of a program (`# policy=... capacity=...`) is printed and parsed from one table of keys, so
// a key added to Config is printed, parsed and named in errors the same way, and the two cannot drift.

// headerPrefix starts the setup line.
const headerPrefix = "# policy="

// setupKey is one key=value of the setup line: the Config field it names (a pointer into the Config given)
// and when it is printed.
type setupKey struct {
	name string
	// field returns a pointer to the field: *string, *uint64, *int, *int64, *bool, *float64 or *impl.Mutation.
	field func(*Config) any
	// shown reports whether the key is printed for cfg; nil: when the field is not its zero value.
	shown func(Config) bool
	// check says what the key wants when cfg's value is out of its range ("" when it is in range); nil: any
	// value that parses. It is the one statement of the key's range: ParseHeader applies it to every
	// setup line read, and ValidateSetup to a Config built in code.
	check func(Config) string
}

func always(Config) bool { return true }

// setupKeys is the setup line's keys in print order. The knobs (impl.Config) come after them, from knobKeys.
var setupKeys = []setupKey{
	{"policy", func(c *Config) any { return &c.Policy }, always, checkPolicy},
	{"capacity", func(c *Config) any { return &c.Capacity }, always, checkCapacity},
	{"granularity", func(c *Config) any { return &c.Granularity }, always, checkGranularity},
	{"streams", func(c *Config) any { return &c.Streams }, always, checkStreams},
	{"sync", func(c *Config) any { return &c.SyncStreams }, always, nil},
	{"seed", func(c *Config) any { return &c.Seed }, nil, nil},
	{"mutations", func(c *Config) any { return &c.Mutations }, nil, nil},
	{"patterns", func(c *Config) any { return &c.Patterns }, nil, nil},
	// The probes are printed when they are not the default, which the Env writes into its Config.
	{"probes", func(c *Config) any { return &c.Probes }, func(c Config) bool { return c.Probes != 0 && c.Probes != DefaultProbes }, checkProbes},
	{"serve", func(c *Config) any { return &c.Serve }, nil, nil},
	// The cap is printed whenever the serving layer is on (0, no cap, is a choice the run made), and when set.
	{"limit", func(c *Config) any { return &c.MemoryLimit }, func(c Config) bool { return c.Serve || c.MemoryLimit != 0 }, nil},
	{"clib", func(c *Config) any { return &c.CLib }, nil, nil},               // the C library over the serving layer (CLib implies Serve)
	{"hostcache", func(c *Config) any { return &c.HostCache }, nil, nil},     // the host cache's stand-in in front of it (implies CLib)
	{"defaultname", func(c *Config) any { return &c.DefaultName }, nil, nil}, // policy asked for by the empty name
}

// The ranges of the setup line's values (setupKeys.check), stated once.
const (
	// MinGranularity and MaxGranularity bound a granularity=: a power of two between a host page and 1 GiB
	// (CUDA's is 2 MiB; 0 means that default).
	MinGranularity = 4 << 10
	MaxGranularity = 1 << 30
	// MaxCapacity bounds capacity=: 1 PiB, far above any GPU, far below where byte counts overflow.
	MaxCapacity = 1 << 50
	// MaxSetupStreams bounds streams=: each is a stream made on the device before the first op.
	MaxSetupStreams = 256
	// MaxProbes bounds probes=, the granules the pattern check reads back per large allocation.
	MaxProbes = 1 << 16
)

func checkPolicy(c Config) string {
	if c.Policy == "" || slices.Contains(impl.Policies, c.Policy) {
		return ""
	}
	return "want one of " + strings.Join(impl.Policies, ", ")
}

// withSetupDefaults fills the zero values Config documents as defaults: capacity 8 GiB, granularity 2 MiB,
// 2 streams (a setup line's 0 means the same: a program without a setup line, a trace, has them). NewEnv
// runs under them.
func (cfg Config) withSetupDefaults() Config {
	if cfg.Capacity == 0 {
		cfg.Capacity = 8 << 30
	}
	if cfg.Granularity == 0 {
		cfg.Granularity = 2 << 20
	}
	if cfg.Streams == 0 {
		cfg.Streams = 2
	}
	return cfg
}

// granularityOf is the granularity a Config runs under: Granularity, or the default 2 MiB for 0.
func granularityOf(c Config) uint64 {
	if c.Granularity == 0 {
		return 2 << 20
	}
	return c.Granularity
}

func checkGranularity(c Config) string {
	g := c.Granularity
	if g == 0 || g >= MinGranularity && g <= MaxGranularity && g&(g-1) == 0 {
		return ""
	}
	return fmt.Sprintf("want a power of two from %d to %d bytes (0: the default 2097152)", MinGranularity, MaxGranularity)
}

func checkCapacity(c Config) string {
	if checkGranularity(c) != "" {
		return "" // the granularity is refused: its error says so
	}
	if g := granularityOf(c); c.Capacity != 0 && (c.Capacity < g || c.Capacity > MaxCapacity) {
		return fmt.Sprintf("want from one granule (granularity=%d) to %d bytes (0: the default 8 GiB)", g, uint64(MaxCapacity))
	}
	return ""
}

func checkStreams(c Config) string {
	if c.Streams < 0 || c.Streams > MaxSetupStreams {
		return fmt.Sprintf("want 1 to %d, the default stream counted (0: the default 2)", MaxSetupStreams)
	}
	return ""
}

func checkProbes(c Config) string {
	if c.Probes < 0 || c.Probes > MaxProbes {
		return fmt.Sprintf("want 0 (the default %d) to %d", DefaultProbes, MaxProbes)
	}
	return ""
}

// ErrBadSetup is the kind (errors.Is) of every error about a setup line: a malformed pair, an unknown key,
// or a value out of its range. Nothing has run when it is returned.
var ErrBadSetup = errors.New("bad setup line")

// setupError is one refused setup value: the key, its text and what the key wants.
type setupError struct{ key, value, want string }

func (e *setupError) Error() string {
	return fmt.Sprintf("setup %s=%s: %s", e.key, e.value, e.want)
}
func (e *setupError) Is(target error) bool { return target == ErrBadSetup }

// ValidateSetup checks every value of cfg that the setup line carries against its key's range (the checks
// ParseHeader makes of the keys a line sets; a key a line leaves out keeps its default), and returns the
// first out of range as an ErrBadSetup error naming the key.
func ValidateSetup(cfg Config) error { return checkSetup(cfg, setupKeys) }

// checkSetup checks the values of cfg that keys name, in order.
func checkSetup(cfg Config, keys []setupKey) error {
	for _, k := range keys {
		if k.check == nil {
			continue
		}
		if want := k.check(cfg); want != "" {
			text, _ := formatField(k.field(&cfg))
			return &setupError{key: k.name, value: text, want: want}
		}
	}
	return nil
}

// knobKey is one engine knob of the setup line, printed when it differs from its default (zero).
type knobKey struct {
	name  string
	field func(*impl.Config) any // as setupKey.field
}

// knobKeys is the knobs' keys in print order.
var knobKeys = []knobKey{
	{"chunk", func(k *impl.Config) any { return &k.ChunkSize }},
	{"stitchmin", func(k *impl.Config) any { return &k.StitchMin }},
	{"sblockcache", func(k *impl.Config) any { return &k.SBlockCache }},
	{"nocross", func(k *impl.Config) any { return &k.NoCrossStream }},
	{"pagesmall", func(k *impl.Config) any { return &k.PageSizeSmall }},
	{"pagelarge", func(k *impl.Config) any { return &k.PageSizeLarge }},
	{"stitchsave", func(k *impl.Config) any { return &k.StitchSave }},
	{"reuselimit", func(k *impl.Config) any { return &k.ReuseLimit }},
	{"defraglevel", func(k *impl.Config) any { return &k.DefragLevel }},
	{"autogc", func(k *impl.Config) any { return &k.AutoGC }},
	{"realloc", func(k *impl.Config) any { return &k.ReAlloc }},
}

// formatField prints the field p points to and reports whether it holds its zero value. A key of a type it
// does not know is a programming error in the tables above.
func formatField(p any) (text string, zero bool) {
	switch v := p.(type) {
	case *string:
		return *v, *v == ""
	case *uint64:
		return strconv.FormatUint(*v, 10), *v == 0
	case *int:
		return strconv.Itoa(*v), *v == 0
	case *int64:
		return strconv.FormatInt(*v, 10), *v == 0
	case *bool:
		return strconv.FormatBool(*v), !*v
	case *float64:
		return strconv.FormatFloat(*v, 'g', -1, 64), *v == 0
	case *impl.Mutation:
		return mutationText(*v), *v == 0
	}
	panic(fmt.Sprintf("ops: setup key of type %T", p))
}

// parseField sets the field p points to from text, as formatField prints it.
func parseField(p any, text string) error {
	var err error
	switch v := p.(type) {
	case *string:
		*v = text
	case *uint64:
		*v, err = strconv.ParseUint(text, 10, 64)
	case *int:
		var n int64
		n, err = strconv.ParseInt(text, 10, 32)
		*v = int(n)
	case *int64:
		*v, err = strconv.ParseInt(text, 10, 64)
	case *bool:
		*v, err = strconv.ParseBool(text)
	case *float64:
		*v, err = strconv.ParseFloat(text, 64)
	case *impl.Mutation:
		*v, err = parseMutations(text)
	default:
		panic(fmt.Sprintf("ops: setup key of type %T", p))
	}
	return err
}

// Header prints the setup line of a program run under cfg: `# policy=P capacity=B granularity=B streams=N
// sync=BOOL`, then the seed, the mutations, the pattern check, the serving layer and its cap, and the knobs
// that are not the defaults (setupKeys, knobKeys). ParseHeader reads it back.
func (cfg Config) Header() string {
	f := make([]string, 0, len(setupKeys)+1)
	for _, k := range setupKeys {
		text, zero := formatField(k.field(&cfg))
		if k.shown != nil && k.shown(cfg) || k.shown == nil && !zero {
			f = append(f, k.name+"="+text)
		}
	}
	if k := KnobString(cfg.Knobs); k != "" {
		f = append(f, k)
	}
	return "# " + strings.Join(f, " ")
}

// KnobString prints the knobs that differ from the defaults, as the op file's header writes them (knobKeys).
// Every knob of impl.Config is printed (TestHeaderCarriesEveryKnob holds that for fields added later): a
// failure found under a knob the header left out would replay under another engine. Config.Policy is the
// header's policy=, TestOnlyMutations its mutations=; DebugOOM changes no decision and is not printed.
func KnobString(k impl.Config) string {
	var f []string
	for _, key := range knobKeys {
		if text, zero := formatField(key.field(&k)); !zero {
			f = append(f, key.name+"="+text)
		}
	}
	return strings.Join(f, " ")
}

// ParseHeader reads a setup line (Config.Header) into cfg; unknown keys, values that do not parse and
// values out of their key's range (setupKeys.check: a granularity that is not a power of two, a capacity
// below one granule, negative streams; 0 is each one's documented default) are an ErrBadSetup error naming the key and what it wants, so a typo does not silently run
// another setup, nor panic in the device it would build.
func ParseHeader(line string, cfg *Config) error {
	if !strings.HasPrefix(line, headerPrefix) {
		return fmt.Errorf("%w: not a setup line (want %q...)", ErrBadSetup, headerPrefix)
	}
	var given []setupKey // the keys the line sets, whose ranges are checked once all are read
	for _, kv := range strings.Fields(strings.TrimPrefix(line, "#")) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%w: setup wants key=value pairs, got %q", ErrBadSetup, kv)
		}
		p := setupField(cfg, k)
		if p == nil {
			return fmt.Errorf("%w: unknown setup key %q", ErrBadSetup, k)
		}
		if err := parseField(p, v); err != nil {
			return fmt.Errorf("%w: bad value for setup key %s: %q: want %s", ErrBadSetup, k, v, fieldWants(p))
		}
		if i := slices.IndexFunc(setupKeys, func(s setupKey) bool { return s.name == k }); i >= 0 {
			given = append(given, setupKeys[i])
		}
	}
	return checkSetup(*cfg, given)
}

// fieldWants says what text a field of the setup line parses from.
func fieldWants(p any) string {
	switch p.(type) {
	case *uint64:
		return "a whole number of at least 0"
	case *int, *int64:
		return "a whole number"
	case *bool:
		return "true or false"
	case *float64:
		return "a number"
	case *impl.Mutation:
		return "seeded bug names joined by + (" + mutationText(impl.AllMutations()[0]) + ", ...)"
	}
	return "a value"
}

// setupField returns a pointer to the field of cfg (or of its knobs) that key names, nil for an unknown key.
func setupField(cfg *Config, key string) any {
	for _, k := range setupKeys {
		if k.name == key {
			return k.field(cfg)
		}
	}
	for _, k := range knobKeys {
		if k.name == key {
			return k.field(&cfg.Knobs)
		}
	}
	return nil
}

// mutationText names the seeded bugs of m, joined by "+" (`mutations=no-merge+spurious-oom`); bits that name
// no bug print in hex.
func mutationText(m impl.Mutation) string {
	var names []string
	for _, one := range impl.AllMutations() {
		if m&one != 0 {
			names = append(names, one.String())
			m &^= one
		}
	}
	if m != 0 {
		names = append(names, fmt.Sprintf("%#x", uint32(m)))
	}
	return strings.Join(names, "+")
}

// parseMutations reads mutationText back; a number (0x40) is read as the bits themselves.
func parseMutations(text string) (impl.Mutation, error) {
	var m impl.Mutation
	for _, name := range strings.Split(text, "+") {
		if n, err := strconv.ParseUint(name, 0, 32); err == nil {
			m |= impl.Mutation(n)
			continue
		}
		i := slices.IndexFunc(impl.AllMutations(), func(x impl.Mutation) bool { return x.String() == name })
		if i < 0 {
			return 0, fmt.Errorf("no seeded bug is named %q", name)
		}
		m |= impl.AllMutations()[i]
	}
	return m, nil
}
