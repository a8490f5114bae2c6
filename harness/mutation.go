package harness

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// recorderTB is a rapid.TB that records a failure instead of failing a test, so TestMutationsCaught can run
// rapid.Check under each seeded bug and ask whether it failed.
type recorderTB struct {
	mu     sync.Mutex
	name   string
	failed bool
	log    strings.Builder
}

func (r *recorderTB) Helper()      {}
func (r *recorderTB) Name() string { return r.name }
func (r *recorderTB) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log.Len() < 1<<16 {
		fmt.Fprintf(&r.log, format+"\n", args...)
	}
}
func (r *recorderTB) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorderTB) Skipf(format string, args ...any)  { r.Logf(format, args...) }
func (r *recorderTB) Skip(args ...any)                  { r.Log(args...) }
func (r *recorderTB) SkipNow()                          {}
func (r *recorderTB) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorderTB) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorderTB) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorderTB) Fatal(args ...any)                 { r.Error(args...) }
func (r *recorderTB) FailNow()                          { r.Fail() }
func (r *recorderTB) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}
func (r *recorderTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

var invRE = regexp.MustCompile(`INV-[A-Z]+`)

// invsIn returns the distinct INV names mentioned in s, sorted.
func invsIn(s string) []string {
	seen := map[string]bool{}
	for _, m := range invRE.FindAllString(s, -1) {
		seen[m] = true
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
