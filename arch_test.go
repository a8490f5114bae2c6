package gmlake_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/gmlake/gmlake"

// allowedImports is the layer table of ARCHITECTURE.md: for each folder, the project packages its
// non-test code may import. Folders not listed may import nothing of the project.
var allowedImports = map[string][]string{
	"vmm/wrap":            {"vmm"},
	"vmm":                 {},
	"spec":                {"vmm"},
	"model/sim":           {"vmm"},
	"model/contract":      {"vmm"},
	"impl":                {"vmm", "vmm/wrap"},
	"impl/cudavmm":        {"vmm"},
	"impl/clib":           {"impl", "vmm", "vmm/wrap"},
	"harness":             {"harness/trace", "impl", "model/contract", "model/sim", "spec", "vmm"},
	"harness/trace":       {},
	"harness/snapshot":    {"harness/trace"},
	"harness/probe":       {"vmm"},
	"harness/itf":         {},
	"harness/replay":      {"harness/trace", "impl", "model/sim", "vmm", "vmm/wrap"},
	"harness/conformance": {"impl", "model/sim", "vmm"},
	"fuzz":                {"harness", "harness/trace", "impl", "impl/cudavmm", "model/sim", "spec", "vmm"},
	".":                   {"impl", "impl/clib", "impl/cudavmm", "model/sim", "vmm"},
	"capi":                {"impl/clib", "impl/cudavmm", "model/sim", "harness/trace", "vmm"},
	"cmd/gmlake": {"fuzz", "harness", "harness/conformance", "harness/probe", "harness/replay", "harness/snapshot", "harness/trace",
		"impl", "impl/cudavmm", "model/sim", "vmm", "vmm/wrap"},
}

// judges are the packages the product must not link: the oracle, the invariants, the checkers and the
// fuzzers. harness/trace is a pure format package (libgmlake writes traces with it), not a judge.
var judges = []string{"model/contract", "spec", "harness", "fuzz", "cmd/gmlake"}

// projectImports parses the non-test Go files of the module and returns, for each folder, the project
// packages it imports (module-relative, "." for the root) and the files that import "C" or unsafe.
func projectImports(t *testing.T) (imports map[string][]string, unsafeUsers map[string]string) {
	t.Helper()
	imports, unsafeUsers = map[string][]string{}, map[string]string{}
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
		if _, ok := imports[dir]; !ok {
			imports[dir] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "C" || p == "unsafe" {
				unsafeUsers[path] = p
				continue
			}
			if !strings.HasPrefix(p, modulePath) {
				continue
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/")
			if rel == "" {
				rel = "."
			}
			imports[dir] = append(imports[dir], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports, unsafeUsers
}

// Property: dependencies point one way (ARCHITECTURE.md "Layers"), impl never sees its judges, every folder
// with Go code is in the layer table, and only impl/cudavmm (and capi, which must speak C to PyTorch)
// imports "C" or unsafe.
func TestLayering(t *testing.T) {
	imports, unsafeUsers := projectImports(t)
	for path, p := range unsafeUsers {
		if dir := filepath.ToSlash(filepath.Dir(path)); dir != "impl/cudavmm" && dir != "capi" {
			t.Errorf("%s imports %q: only impl/cudavmm (and capi) may", path, p)
		}
	}
	for dir, imps := range imports {
		allowed, known := allowedImports[dir]
		if !known {
			t.Errorf("folder %s is not in the layer table; add it to allowedImports and docs/ARCHITECTURE.md", dir)
			continue
		}
		for _, rel := range imps {
			if !slices.Contains(allowed, rel) {
				t.Errorf("%s imports %s: %s may import only %v", dir, rel, dir, allowed)
			}
		}
	}
}

// Property: the product (libgmlake, the Go facade, the engine and its C-library layer) links no judge,
// directly or through another package: PyTorch's allocator carries no oracle and no test machinery.
func TestProductLinksNoJudge(t *testing.T) {
	imports, _ := projectImports(t)
	for _, root := range []string{"capi", ".", "impl", "impl/clib", "impl/cudavmm", "model/sim"} {
		seen := map[string]string{root: ""} // package -> the package that imported it first
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, q := range imports[p] {
				if _, ok := seen[q]; !ok {
					seen[q] = p
					queue = append(queue, q)
				}
			}
		}
		for _, j := range judges {
			if by, ok := seen[j]; ok {
				t.Errorf("%s links the judge %s (imported by %s)", root, j, by)
			}
		}
	}
}
