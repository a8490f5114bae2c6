package gmlake_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/gmlake/gmlake"

// allowedImports is the layer table of docs/ARCHITECTURE.md: for each folder, the project packages its
// non-test code may import (tests may import more: a test of the engine runs it on model/sim). A folder
// with Go code that is not listed fails TestLayering.
var allowedImports = map[string][]string{
	// The product: what libgmlake and the Go facade link.
	"vmm":          {},
	"vmm/wrap":     {"vmm"},
	"impl":         {"vmm", "vmm/wrap"},
	"impl/serve":   {"impl", "vmm", "vmm/wrap"},
	"impl/clib":    {"impl", "impl/serve", "vmm", "vmm/wrap"},
	"impl/cudavmm": {"vmm"},
	"model/sim":    {"vmm"},
	".":            {"impl", "impl/clib", "impl/cudavmm", "model/sim", "vmm"},
	"capi":         {"trace", "impl/clib", "impl/cudavmm", "model/sim", "vmm"},

	// The formats: pure, importing nothing (trace is linked by libgmlake to write GMLAKE_TRACE).
	"trace":            {},
	"harness/snapshot": {"trace"},
	"harness/itf":      {},

	// The judges: the oracle, the invariants, the checkers, the fuzzers.
	"model/contract":      {"vmm"},
	"spec":                {"vmm"},
	"harness/ops":         {"trace", "impl", "impl/clib", "impl/serve", "model/contract", "model/sim", "spec", "vmm"},
	"harness":             {"harness/ops", "trace", "impl", "impl/serve", "model/contract", "model/sim", "spec", "vmm"},
	"harness/conformance": {"impl", "model/sim", "vmm"},
	"harness/mutate":      {},
	"harness/golden":      {},
	"harness/gpu":         {"impl/cudavmm", "model/sim", "vmm"},
	"fuzz":                {"harness/gpu", "harness/ops", "trace", "impl", "impl/cudavmm", "impl/serve", "model/sim", "spec", "vmm"},

	// The measurements and the CLI.
	"harness/replay": {"trace", "impl", "model/sim", "vmm", "vmm/wrap"},
	"harness/probe":  {"vmm"},
	"cmd/gmlake": {"fuzz", "harness", "harness/ops", "harness/conformance", "harness/probe", "harness/replay", "harness/snapshot",
		"trace", "harness/mutate", "impl", "impl/cudavmm", "model/sim", "vmm", "vmm/wrap"},
}

// judges are the packages the product must not link: the oracle, the invariants, the checkers and the
// fuzzers. trace is a pure format package (libgmlake writes traces with it), not a judge.
var judges = []string{"model/contract", "spec", "harness/ops", "harness", "harness/gpu", "harness/conformance", "harness/mutate", "harness/golden", "fuzz", "cmd/gmlake"}

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
	for _, root := range []string{"capi", ".", "impl", "impl/serve", "impl/clib", "impl/cudavmm", "model/sim"} {
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
		// The engine does not even see the simulated device: it knows only vmm.Driver.
		if by, ok := seen["model/sim"]; ok && strings.HasPrefix(root, "impl") {
			t.Errorf("%s links model/sim (imported by %s): the engine knows devices only as vmm.Driver", root, by)
		}
	}
}

// Property: every package has a doc comment, "Package NAME ..." (or "Command NAME ..." for a main package),
// saying what it owns (STYLE.md).
func TestEveryPackageSaysWhatItOwns(t *testing.T) {
	imports, _ := projectImports(t)
	fset := token.NewFileSet()
	for dir := range imports {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var docs []string
		name := ""
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			name = f.Name.Name
			if f.Doc != nil {
				docs = append(docs, f.Doc.Text())
			}
		}
		if len(docs) != 1 {
			t.Errorf("%s: %d files carry a package doc comment; want exactly one (a doc.go, or the package's main file)", dir, len(docs))
			continue
		}
		want := "Package " + name + " "
		if name == "main" {
			want = "Command " + filepath.Base(dir) + " "
		}
		if !strings.HasPrefix(docs[0], want) {
			t.Errorf("%s: the package doc starts %q; want %q and what the package owns", dir, firstLine(docs[0]), want)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Property: the layer diagram of docs/ARCHITECTURE.md draws exactly allowedImports: every folder, and for
// each the packages it may import ("gmlake (root)" is the module root; "a/{b, c}" is a/b and a/c).
func TestArchitectureDocDrawsTheTable(t *testing.T) {
	doc, err := os.ReadFile("docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Layers")
	_, rest, ok2 := strings.Cut(rest, "```\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`docs/ARCHITECTURE.md has no "## Layers" section with a diagram in a code block`)
	}
	braces := regexp.MustCompile(`([\w/]+/)\{([^}]*)\}`)
	drawn := map[string][]string{}
	last := ""
	for _, line := range strings.Split(block, "\n") {
		if strings.TrimSpace(line) == "" || (strings.Contains(line, "──") && !strings.Contains(line, "──►")) {
			continue // a group's title
		}
		if line[0] == ' ' { // the imports continue from the line above
			drawn[last] = append(drawn[last], docImports(braces, line)...)
			continue
		}
		name, imps, _ := strings.Cut(line, "──►")
		name = strings.TrimSpace(name)
		if i := strings.Index(name, "  "); i >= 0 {
			name = name[:i] // a folder with no imports, then its comment
		}
		if name == "gmlake (root)" {
			name = "."
		}
		last = name
		drawn[name] = docImports(braces, imps)
	}
	for dir, want := range allowedImports {
		got, ok := drawn[dir]
		if !ok {
			t.Errorf("docs/ARCHITECTURE.md does not draw %s", dir)
			continue
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Errorf("docs/ARCHITECTURE.md draws %s ──► %v; arch_test.go allows %v", dir, got, w)
		}
	}
	for dir := range drawn {
		if _, ok := allowedImports[dir]; !ok {
			t.Errorf("docs/ARCHITECTURE.md draws %s, which is not in the layer table", dir)
		}
	}
}

// docImports reads a diagram line's list of imports: comma separated, up to a parenthesised comment.
func docImports(braces *regexp.Regexp, s string) []string {
	if i := strings.Index(s, "("); i >= 0 {
		s = s[:i]
	}
	s = braces.ReplaceAllStringFunc(s, func(m string) string {
		p := braces.FindStringSubmatch(m)
		var out []string
		for _, x := range strings.Split(p[2], ",") {
			out = append(out, p[1]+strings.TrimSpace(x))
		}
		return strings.Join(out, ", ")
	})
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// Property: every config struct (a type named ...Config or ...Options) ends with `_ struct{}`, so that a
// field can be added without breaking a caller's literal (STYLE.md, porcupine's convention).
func TestConfigStructsEndWithBlank(t *testing.T) {
	imports, _ := projectImports(t)
	fset := token.NewFileSet()
	for dir := range imports {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok || !(strings.HasSuffix(ts.Name.Name, "Config") || strings.HasSuffix(ts.Name.Name, "Options")) {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				fl := st.Fields.List
				last := len(fl) > 0 && len(fl[len(fl)-1].Names) == 1 && fl[len(fl)-1].Names[0].Name == "_"
				if !last {
					t.Errorf("%s: %s does not end with `_ struct{}`", fset.Position(ts.Pos()), ts.Name.Name)
				}
				return true
			})
		}
	}
}
