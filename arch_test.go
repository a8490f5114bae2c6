package gmlake_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/gmlake/gmlake"

// allowedImports is the layer table of ARCHITECTURE.md: for each folder, the project packages its
// non-test code may import. Folders not listed may import nothing of the project.
var allowedImports = map[string][]string{
	"vmm":            {},
	"spec":           {"vmm"},
	"model/sim":      {"vmm"},
	"model/contract": {"vmm"},
	"impl":           {"vmm"},
	"impl/cudavmm":   {"vmm"},
	"impl/clib":      {"impl", "impl/cudavmm", "model/sim", "vmm"},
	"harness":        {"spec", "model/sim", "model/contract", "impl", "vmm", "harness/trace", "impl/cudavmm"},
	"harness/trace":  {},
	"fuzz":           {"harness", "harness/trace", "impl", "model/sim", "model/contract", "spec", "vmm", "impl/cudavmm"},
	".":              {"impl", "impl/clib", "impl/cudavmm", "model/sim", "vmm"},
	"capi":           {"impl/clib"},
	"cmd/gmlake":     {"harness", "harness/trace", "impl", "impl/cudavmm", "model/sim", "model/contract", "vmm", "fuzz", "spec"},
}

// Property: dependencies point one way (ARCHITECTURE.md "Layers"), impl never sees its judges, and only
// impl/cudavmm (and capi, which must speak C to PyTorch) imports "C" or unsafe.
func TestLayering(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		allowed, known := allowedImports[dir]
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "C" || p == "unsafe" {
				if dir != "impl/cudavmm" && dir != "capi" {
					t.Errorf("%s imports %q: only impl/cudavmm (and capi) may", path, p)
				}
				continue
			}
			if !strings.HasPrefix(p, modulePath) {
				continue
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/")
			if rel == "" {
				rel = "."
			}
			if !known {
				t.Errorf("%s: folder %s is not in the layer table; add it to allowedImports and ARCHITECTURE", path, dir)
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == rel
			}
			if !ok {
				t.Errorf("%s imports %s: %s may import only %v", path, p, dir, allowed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
