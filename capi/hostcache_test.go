package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hostCachePure are the functions of gmlake.h that reach no device's engine state the host cache could make
// stale (errors, settings, knob names, the callback's registration, the fraction's value), or that reach it
// only through another entry (gmlake_alloc_throw calls gmlake_alloc).
var hostCachePure = map[string]string{
	"gmlake_last_error": "the thread's error", "gmlake_last_error_kind": "the thread's error",
	"gmlake_init": "no engine", "gmlake_knobs": "knob names", "gmlake_set_event_callback": "registration",
	"gmlake_last_failure": "the thread's failure", "gmlake_get_memory_fraction": "the cap's setting",
	"gmlake_check_settings": "settings", "gmlake_settings_json": "settings", "gmlake_alloc_throw": "calls gmlake_alloc",
}

// Property (host cache, structural): every function gmlake.h declares either hands the device's host-cache
// log to the engine before it reaches Go (a gmlake_hc_ call in its body: hostcache.c) or is listed in
// hostCachePure with its reason; a new entry point that forgets the log fails here, before FuzzABI's judges
// would have to stumble on a stale answer.
func TestEveryEntryHandsTheHostCacheOver(t *testing.T) {
	h, err := os.ReadFile("gmlake.h")
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^[a-z][a-z0-9_ ]*[ *](gmlake_[a-z0-9_]+)\(`)
	var src strings.Builder
	for _, pat := range []string{"*.c", "*.cc"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	code := src.String()
	names := decl.FindAllStringSubmatch(string(h), -1)
	if len(names) < 30 {
		t.Fatalf("found %d functions in gmlake.h: the pattern no longer reads it", len(names))
	}
	for _, m := range names {
		name := m[1]
		if _, ok := hostCachePure[name]; ok {
			continue
		}
		def := regexp.MustCompile(`(?m)^[^\n;]*\b` + name + `\([^;{]*\)\s*\{`).FindStringIndex(code)
		if def == nil {
			t.Errorf("%s: declared in gmlake.h, defined in no C file of capi", name)
			continue
		}
		body := code[def[1]:]
		if end := strings.Index(body, "\n}\n"); end >= 0 {
			body = body[:end]
		}
		if !strings.Contains(body, "gmlake_hc_") {
			t.Errorf("%s reaches the engine without handing the host cache's log over (call gmlake_hc_flush(device) "+
				"first, or list it in hostCachePure with its reason)", name)
		}
	}
}
