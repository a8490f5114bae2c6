package cudavmm

import (
	"errors"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/vmm"
)

// TestParseHandlesNamesEachBitAndRefusesUnknownNames: every name maps to its bit, lists combine, "none" and ""
// are plain memory, handleNames names the bits back, and an unknown name is vmm.ErrInvalidValue naming the bad
// word (so RequestHandles changes nothing).
func TestParseHandlesNamesEachBitAndRefusesUnknownNames(t *testing.T) {
	for _, c := range []struct {
		spec  string
		want  int32
		names string
	}{
		{"", 0, "none"}, {"none", 0, "none"}, {"posix_fd", handlePosixFD, "posix_fd"}, {"rdma", handleRDMA, "rdma"},
		{"fabric", handleFabric, "fabric"}, {"posix_fd,rdma", handlePosixFD | handleRDMA, "posix_fd rdma"},
		{"rdma fabric posix_fd", handlePosixFD | handleRDMA | handleFabric, "posix_fd fabric rdma"},
	} {
		got, err := parseHandles(c.spec)
		if err != nil || got != c.want || handleNames(got) != c.names {
			t.Errorf("parseHandles(%q) = %#x (%q), %v; want %#x (%q)", c.spec, got, handleNames(got), err, c.want, c.names)
		}
	}
	_, err := parseHandles("posix_fd,rmda")
	if !errors.Is(err, vmm.ErrInvalidValue) || !strings.Contains(err.Error(), `"rmda"`) {
		t.Errorf("parseHandles of a misspelt name = %v, want ErrInvalidValue naming \"rmda\"", err)
	}
}
