package harness

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// RecorderTB is a rapid.TB that records a failure instead of failing a test, so a bite test
// (TestMutationsCaught here, harness/gpu's TestGPUCheckersBite) can run rapid.Check under each seeded bug and
// ask whether it failed and which invariants its log names (Failed, Output, InvsIn).
type RecorderTB struct {
	mu     sync.Mutex
	name   string
	failed bool
	log    strings.Builder
}

func (r *RecorderTB) Helper()      {}
func (r *RecorderTB) Name() string { return r.name }
func (r *RecorderTB) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log.Len() < 1<<16 {
		fmt.Fprintf(&r.log, format+"\n", args...)
	}
}
func (r *RecorderTB) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *RecorderTB) Skipf(format string, args ...any)  { r.Logf(format, args...) }
func (r *RecorderTB) Skip(args ...any)                  { r.Log(args...) }
func (r *RecorderTB) SkipNow()                          {}
func (r *RecorderTB) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *RecorderTB) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *RecorderTB) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *RecorderTB) Fatal(args ...any)                 { r.Error(args...) }
func (r *RecorderTB) FailNow()                          { r.Fail() }
func (r *RecorderTB) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}
func (r *RecorderTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// NewRecorderTB returns a RecorderTB whose Name is name.
func NewRecorderTB(name string) *RecorderTB { return &RecorderTB{name: name} }

// Output returns what was logged (the first 64 KiB).
func (r *RecorderTB) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

var invRE = regexp.MustCompile(`INV-[A-Z]+`)

// InvsIn returns the distinct INV names mentioned in s, sorted.
func InvsIn(s string) []string {
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
