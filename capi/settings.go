package main

// The settings functions of gmlake.h: gmlake_check_settings parses an environment exactly as an engine's
// start does (clib.ParseEnv over the settings table, then an engine started on a simulated device with
// those settings), for gmlake_torch's up-front check; gmlake_settings_json hands out the table.

/*
#include <stddef.h>
#include <stdint.h>

const char *gmlake_environ_at(size_t i);
int gmlake_copy_out(const char *s, size_t n, char *buf, size_t len);
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
)

// settingChecks are the checks of settings that other packages parse: the CUDA driver's handle types.
var settingChecks = map[string]func(string) error{"GMLAKE_CUDA_HANDLES": cudavmm.CheckHandles}

// maxEnviron bounds the entries read from an environment (a caller's array without its NULL end is not read
// past this many).
const maxEnviron = 1 << 20

// liveEnviron returns the process's environment as it is now (the C one: Go's os.Environ is a copy taken
// when the library loaded, before a host such as Python may have set variables).
func liveEnviron() []string {
	var out []string
	for i := 0; i < maxEnviron; i++ {
		p := C.gmlake_environ_at(C.size_t(i))
		if p == nil {
			break
		}
		out = append(out, C.GoString(p))
	}
	return out
}

// checkSettings is gmlake_check_settings' verdict on env: "" when an engine would start with it, else one
// line naming the first bad variable.
func checkSettings(env []string) string {
	parsed, err := clib.ParseEnv(env, settingChecks)
	if err != nil {
		return err.Error()
	}
	if len(parsed.Unknown) > 0 {
		return fmt.Sprintf("%s: unknown gmlake setting (known: %s)", parsed.Unknown[0], strings.Join(settingNames(), ", "))
	}
	// Start an engine with them, as the first allocation would: on the simulated device of the settings (an
	// H200's capacity for the real GPU, whose 2 MiB granularity it shares), told nothing.
	cfg := parsed.Engine
	cfg.Driver, cfg.OwnStreams, cfg.Note = driverSim, true, nil
	eng, err := clib.New(sim.NewDevice(sim.DeviceConfig{Capacity: parsed.SimCapacity, SyncStreams: true}), cfg)
	if err != nil {
		return fmt.Sprintf("gmlake: the settings start no engine: %v", err)
	}
	if _, _, err := eng.Close(); err != nil {
		return fmt.Sprintf("gmlake: the settings start an engine that does not close: %v", err)
	}
	return ""
}

// settingNames lists the table's variables (those of the project's tests left out).
func settingNames() []string {
	var out []string
	for _, s := range clib.Settings() {
		if s.ReadBy != clib.ReadByTests && s.Retired == "" {
			out = append(out, s.Name)
		}
	}
	return out
}

// settingOn reads boolean setting name as the settings parser does (1 or true; the engine's start has refused
// any value other than those and 0, false).
func settingOn(name string) bool {
	on, err := clib.ParseBool(getenv(name))
	return err == nil && on
}

//export gmlakeGoCheckSettings
func gmlakeGoCheckSettings(env **C.char, buf *C.char, n C.size_t) (ret C.int) {
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(nil, "gmlake_check_settings", r)
		}
	}()
	var list []string
	if env == nil {
		list = liveEnviron()
	} else {
		for i := 0; i < maxEnviron; i++ {
			p := *(**C.char)(unsafe.Add(unsafe.Pointer(env), uintptr(i)*unsafe.Sizeof(env)))
			if p == nil {
				break
			}
			list = append(list, C.GoString(p))
		}
	}
	testHookCheck(list)
	return copyOut(checkSettings(list), buf, n)
}

//export gmlakeGoSettingsJSON
func gmlakeGoSettingsJSON(buf *C.char, n C.size_t) (ret C.int) {
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			recovered(nil, "gmlake_settings_json", r)
		}
	}()
	return copyOut(string(clib.SettingsJSON()), buf, n)
}
