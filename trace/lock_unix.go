//go:build unix

package trace

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes f's exclusive lock (flock) without waiting: ErrBusy if another open file holds it. The
// lock goes with the file: a writer killed by any signal releases it.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrBusy
	}
	return err
}
