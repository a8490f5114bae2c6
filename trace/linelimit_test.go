package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"
)

// Property: a line longer than 64 KiB is refused as such (a v1 trace's ParseError, a v2 trace's cut), at the
// same line, whatever reader NewReader is given: the bytes themselves, a bufio.Reader of any size (replay
// hands it one of 64 KiB, a Go caller may have any other), plain or gzip. The limit is the format's, not the
// caller's buffer's: before, a caller's bufio.Reader of 64 KiB or more was read as it was, so a 100 KiB line
// read whole through a 1 MiB one and the limit moved with the caller.
func TestLineLimitIsTheSameWhateverTheReader(t *testing.T) {
	long := "# " + strings.Repeat("x", 100<<10) + "\n" // a comment, so a reader that takes it whole skips it
	v1 := "a 0 4096 0\n" + long + "f 0\n"
	head, _ := encodeV2(t, recordedEvents(8, 1), 4, false)
	nl := bytes.IndexByte(head, '\n') + 1
	v2 := string(head[:nl]) + long + string(head[nl:])
	for _, c := range []struct {
		name, text string
		wantLine   string
	}{{"v1", v1, ":2"}, {"v2", v2, "line 2 "}} {
		for _, gz := range []bool{false, true} {
			data := []byte(c.text)
			if gz {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				zw.Write(data)
				zw.Close()
				data = b.Bytes()
			}
			for _, size := range []int{0, 4096, 1 << 16, 1<<16 + 1, 1 << 17, 1 << 20} {
				var r io.Reader = bytes.NewReader(data)
				if size > 0 {
					r = bufio.NewReaderSize(r, size)
				}
				name := fmt.Sprintf("%s gzip=%v bufio=%d", c.name, gz, size)
				err := readAll(r, name)
				if err == nil || !strings.Contains(err.Error(), "longer than 64 KiB") || !strings.Contains(err.Error(), c.wantLine) {
					t.Errorf("%s: a 100 KiB line at line 2 read as %v, want it refused as longer than 64 KiB at line 2", name, err)
				}
			}
		}
	}
}

// readAll reads every event of r and returns the error that ended it (nil: the whole trace read).
func readAll(r io.Reader, name string) error {
	rd, err := NewReader(r, name)
	if err != nil {
		return err
	}
	defer rd.Close()
	for {
		_, ok, err := rd.Next()
		if err != nil || !ok {
			return err
		}
	}
}
