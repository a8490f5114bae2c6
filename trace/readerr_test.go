package trace

import (
	"strings"
	"testing"
)

// Property: a path that cannot be read as a file (a folder) is said to be unreadable, not "truncated or
// corrupt input" (which is what a gzip stream that ends early or fails its checksum is).
func TestReadOfAFolderSaysItCannotBeRead(t *testing.T) {
	_, err := ReadFile(t.TempDir())
	if err == nil || strings.Contains(err.Error(), "truncated or corrupt") {
		t.Fatalf("ReadFile of a folder: %v, want an error that says it cannot be read", err)
	}
}
