package impl

import (
	"fmt"
	"strings"
	"testing"
)

// underLock runs f with a.mu held, as the exported methods run the core: white-box tests call it so.
func underLock[T any](a *Allocator, f func() T) T {
	a.mu.Lock()
	defer a.mu.Unlock()
	return f()
}

// Property: a core entry point called without the lock panics (assertLocked), and with it does not.
func TestCoreEntryPointsAssertTheLock(t *testing.T) {
	a, _ := newTest(t, PolicyGMLake, 0 /* capacity: an H200 */, true /* sync */)
	mustFree(t, a, mustAlloc(t, a, 3*MiB, 0))
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), "Allocator.mu must be held") {
				t.Fatalf("sortedStreamsLocked without the lock: recovered %v, want the lock assertion", r)
			}
		}()
		a.sortedStreamsLocked()
	}()
	if n := len(underLock(a, a.sortedStreamsLocked)); n != 1 {
		t.Fatalf("%d streams under the lock, want 1", n)
	}
}
