package clib

import (
	"strconv"
	"testing"
)

// effective is what c holds for setting s, as text comparable to canonical(s, v): parseOne's inverse, written
// apart from it, so that a value the parser accepts and then drops or stores in the wrong field shows
// (FuzzParseEnv: an accepted setting takes effect). ok is false for the settings the library does not hold in
// an EnvConfig (the Python package's, the tests', and GMLAKE_CUDA_HANDLES, which the CUDA driver reads through
// ParseEnv's extra check).
func effective(c EnvConfig, s Setting) (v string, ok bool) {
	if s.Knob != "" {
		v, ok = c.Engine.Knobs[s.Name]
		return v, ok
	}
	switch s.Name {
	case "GMLAKE_POLICY":
		return c.Engine.Policy, true
	case "GMLAKE_DEVICE":
		return c.Device, true
	case "GMLAKE_SIM_CAPACITY":
		return strconv.FormatUint(c.SimCapacity, 10), true
	case "GMLAKE_MEMORY_FRACTION":
		return strconv.FormatFloat(c.Engine.MemoryFraction, 'g', -1, 64), true
	case "GMLAKE_MEMORY_LIMIT":
		return strconv.FormatUint(c.Engine.MemoryLimit, 10), true
	case "GMLAKE_TRACE":
		return c.Trace, true
	case "GMLAKE_VERBOSE":
		return strconv.FormatBool(c.Verbose), true
	case "GMLAKE_HOST_CACHE":
		return strconv.FormatBool(!c.Engine.NoHostCache), true
	case "GMLAKE_TIME_DRIVER":
		return strconv.FormatBool(c.Engine.TimeDriver), true
	}
	return "", false
}

// canonical is the text effective gives for a setting of s accepted with value v.
func canonical(s Setting, v string) string {
	if s.Knob != "" {
		return v
	}
	switch s.Unit {
	case UnitBoolean:
		b, _ := ParseBool(v)
		return strconv.FormatBool(b)
	case UnitBytes:
		n, _ := ParseBytes(v)
		return strconv.FormatUint(n, 10)
	case UnitFraction:
		f, _ := ParseFraction(v)
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v
}

// Property: effective knows every setting the library holds in an EnvConfig, so FuzzParseEnv's "an accepted
// setting takes effect" covers the whole table: each knob and each of the library's settings, except
// GMLAKE_CUDA_HANDLES (the CUDA driver parses it, through ParseEnv's extra check) and the retired ones.
func TestEffectiveKnowsEveryLibrarySetting(t *testing.T) {
	for _, s := range table {
		if s.Retired != "" || s.ReadBy != ReadByLibrary || s.Name == "GMLAKE_CUDA_HANDLES" {
			continue
		}
		if _, ok := effective(EnvConfig{Engine: Config{Knobs: map[string]string{s.Name: "x"}}}, s); !ok {
			t.Errorf("%s: effective does not say what an EnvConfig holds for it", s.Name)
		}
	}
}
