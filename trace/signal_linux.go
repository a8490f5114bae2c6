package trace

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// pending reports whether sig is pending for the whole process (ShdPnd in /proc/self/status).
func pending(sig syscall.Signal) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}
