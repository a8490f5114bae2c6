package ops

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Property (issue 36 item 8): a setup line's value outside its key's range is refused by ParseHeader with
// a one-line ErrBadSetup error naming the key, before any device is built: a granularity that is not a
// power of two used to panic inside the simulated device, negative streams and a capacity below one
// granule used to run. 0 is each key's documented default (Config), as a program without a setup line has.
func TestParseHeaderRefusesValuesOutOfRange(t *testing.T) {
	base := "# policy=gmlake capacity=1073741824 granularity=2097152 streams=2 sync=true"
	for _, c := range []struct{ set, key string }{
		{"granularity=3", "granularity"},
		{"granularity=1024", "granularity"},
		{"granularity=6291456", "granularity"},
		{"granularity=2147483648", "granularity"},
		{"capacity=1048576", "capacity"}, // below one 2 MiB granule
		{"capacity=18446744073709551615", "capacity"},
		{"streams=-1", "streams"},
		{"streams=100000", "streams"},
		{"probes=-4", "probes"},
		{"policy=bogus", "policy"},
	} {
		k, _, _ := strings.Cut(c.set, "=")
		line := strings.Replace(base, k+"=", "x"+k+"=", 1) + " " + c.set // the base's own value is replaced
		line = strings.Replace(line, " x"+k+"="+valueOf(base, k), "", 1)
		var cfg Config
		err := ParseHeader(line, &cfg)
		if err == nil || !errors.Is(err, ErrBadSetup) || !strings.Contains(err.Error(), c.key) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseHeader(%q) = %v, want a one-line ErrBadSetup error naming %s", line, err, c.key)
		}
	}
	// A line that leaves a key out, or sets it to 0, keeps its default: a hand-written "# policy=gmlake" runs.
	for _, line := range []string{"# policy=gmlake", "# policy=gmlake capacity=0 granularity=0 streams=0"} {
		var cfg Config
		if err := ParseHeader(line, &cfg); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
}

func valueOf(line, key string) string {
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Property (the generic check of item 8): every hostile value of every setup key is either refused by
// ParseHeader with a one-line ErrBadSetup error naming the key, or runs: a program under the setup it
// parses to runs without a panic (a value let through that the device or the engine cannot take would
// panic or fail later, as granularity=3 did).
func TestEverySetupValueParsedRunsOrIsRefused(t *testing.T) {
	hostile := []string{"0", "1", "-1", "3", "4096", "1048576", "2097152", "6291456", "1073741824", "2147483648",
		"18446744073709551615", "9223372036854775807", "-9223372036854775808", "1e3", "NaN", "", "true", "caching"}
	base := "# policy=gmlake capacity=268435456 granularity=2097152 streams=2 sync=true"
	prog := []Op{{Kind: OpAlloc, ID: 0, Size: 4096}, {Kind: OpFree, ID: 0}}
	for _, k := range setupKeys {
		if k.name == "mutations" {
			continue // seeded bugs: a run under them fails by design
		}
		for _, v := range hostile {
			line := base
			if old := valueOf(base, k.name); old != "" {
				line = strings.Replace(line, k.name+"="+old, k.name+"="+v, 1)
			} else {
				line += " " + k.name + "=" + v
			}
			var cfg Config
			err := ParseHeader(line, &cfg)
			if err != nil {
				if !errors.Is(err, ErrBadSetup) || !strings.Contains(err.Error(), k.name) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%q: refused with %v, want a one-line ErrBadSetup error naming %s", line, err, k.name)
				}
				continue
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%q is accepted by ParseHeader and then panics: %v", line, r)
					}
				}()
				if _, _, _, err := Run(cfg, prog); err != nil && strings.Contains(fmt.Sprint(err), "goroutine") {
					t.Errorf("%q: %v", line, err)
				}
			}()
		}
	}
}
