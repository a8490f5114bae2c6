//go:build gmlake_testhooks

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func init() {
	// The re-executed test binary runs one program and exits (from TestMain: no test runs).
	hostProgram = func() (int, bool) {
		name := os.Getenv("CAPI_HOST_PROGRAM")
		if name == "" {
			return 0, false
		}
		return runHostProgram(name, append([]string{name}, strings.Fields(os.Getenv("CAPI_HOST_ARGS"))...)), true
	}
}

// Property: the C ABI's threaded programs (close_race: eight threads allocating and freeing while the main
// thread closes the device; abi_test and torch_abi_test, each with concurrent threads among its checks) pass
// when their calls run in this test binary, each in its own process. Under -race (make race) a data race
// in capi, impl/clib, impl/serve or the engine reached from C threads fails them: GORACE=halt_on_error=1
// makes the race detector end the process with status 66 at the first race.
func TestHostProgramsUnderRace(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string
	}{
		{"close_race", "1", "no panic"},
		{"abi_test", filepath.Join(t.TempDir(), "abi.trace"), " passed, 0 failed"},
		{"torch_abi_test", "", " passed, 0 failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^$")
			cmd.Env = append(simEnv(), "CAPI_HOST_PROGRAM="+tc.name, "CAPI_HOST_ARGS="+tc.args)
			out, err := hostOutput(cmd)
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("%s: %v (want %q in its output; reproduce: go test -race -tags gmlake_testhooks ./capi -run 'TestHostProgramsUnderRace/%s')\n%.4000s",
					tc.name, err, tc.want, tc.name, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Log(lines[len(lines)-1])
		})
	}
}
