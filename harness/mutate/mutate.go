// Package mutate is the project's mutation-testing tool: it generates mutants of the engine's source (impl/),
// of the layers libgmlake runs over it (impl/serve, impl/clib), of libgmlake.so's own Go code (capi: cgo, its
// //export comments untouched, since a mutant replaces text inside a function body only), of the trace format
// and recorder (trace) and of replay's figures (harness/replay) with go/ast, and of the C and C++ the product
// ships (capi's C, impl/cudavmm's cuda.c, the C++ allocator) with a token-level generator (cxx.go), compiles
// each one through `go test -overlay` (no file of the tree is touched; cgo reads an overlaid C file too), runs
// every checker's test set that calls the mutated folder against it separately, and reports which checkers
// killed it. Mutants only a GPU can judge (the C++ allocator, the real driver) are written out (EmitCXX,
// `--emit`) and run there by harness/mutate/gpu's scripts. The score is the share of
// mutants that compile which at least one checker killed; the target (issue 12) is every non-equivalent mutant
// killed by at least two independent checkers.
//
// # Mutants
//
// One mutant is one textual replacement of one AST node, so it is exactly a diff of one line:
//   - cmp-boundary: a comparison moved by one (< to <=, <= to <, > to >=, >= to >);
//   - cmp-negate: a comparison negated (== to !=, != to ==, < to >=, ...);
//   - logic: && to || and back;
//   - arith: + to -, - to +, * to /, << to >>, & to |, | to &;
//   - const: an integer literal plus one (0 to 1, 1 to 0, n to n+1);
//   - bool: true to false and back;
//   - drop: a statement removed (a call, an assignment, an increment);
//   - cond-negate: an if condition negated;
//   - swap-branches: the then and else blocks of an if exchanged;
//   - return-nil: a returned error replaced by nil.
//
// Code that only formats messages (arguments of fmt and errors calls, panics), the debugging dump
// (debug.go, debugOOM) and the engine's self-checks (invariants.go, assertLocked) are not mutated: a checker
// that reads no message cannot tell, a self-check fires only on an engine already broken, and such mutants
// are equivalent by construction. Nor is code the seeded-bug switches rule out in the production build
// (`a.seeded(M)` is false there, impl/seeded_off.go): the body of `if seeded(M)`, the operands of
// `seeded(M) && x`, the else of `if !seeded(M)`; its sites keep their numbers so the keys after them do not
// move. A mutant that does not compile is counted apart (invalid), never as killed.
//
// # Keys and samples
//
// A mutant's key names it independently of line numbers: file, enclosing function, kind, the n-th such site
// in that function, and the source text replaced (`alloc.go (*Allocator).allocLocked cmp-boundary 3 a < b`).
// The file is its base name in impl/ (DefaultDir: the keys of every sample saved before other folders were
// mutated), its path from the module root elsewhere (`impl/serve/engine.go (*Engine).AllocPool ...`).
// A sample is a list of keys (testdata/mutants/*.txt); measuring the same sample before and after a change to
// the checkers compares like with like even while the engine's lines move.
package mutate

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Mutant is one textual replacement in one file of the mutated package.
type Mutant struct {
	File string // path relative to the module root, slash-separated (impl/alloc.go)
	Line int    // 1-based line of the replaced text
	Col  int
	Func string // enclosing function ("(*Allocator).allocLocked"; "" at file scope)
	Kind string // cmp-boundary, cmp-negate, logic, arith, const, bool, drop, cond-negate, swap-branches, return-nil
	Nth  int    // this is the Nth mutant of Kind in Func (0-based), for the key
	Orig string // the replaced source text (one line, shortened)
	// Site fingerprints the code of the mutated line (spacing and a trailing comment aside): key files
	// carry it, so that a key whose line changed or went names no mutant, rather than moving to a
	// look-alike (the same text of the same kind) elsewhere in the function.
	Site  string
	New   string // what replaces it (shortened)
	start int    // byte offsets of the replacement in the file
	end   int
	repl  string
}

// Key names the mutant stably across line moves.
func (m Mutant) Key() string {
	return fmt.Sprintf("%s %s %s %d %s", keyFile(m.File), orDash(m.Func), m.Kind, m.Nth, m.Orig)
}

// SiteKey is Key with the site's fingerprint ("KEY @SITE"): the form key files are written in.
func (m Mutant) SiteKey() string { return m.Key() + siteSep + m.Site }

// siteSep puts a key's site fingerprint after its text ("@" begins no Go token, and the text is shortened
// to one line).
const siteSep = " @"

// splitSite splits a key as written in a key file into the key and its site fingerprint ("" for a key
// written before keys carried one: matched by position and text alone).
func splitSite(k string) (key, site string) {
	i := strings.LastIndex(k, siteSep)
	if i < 0 || len(k)-i-len(siteSep) != siteLen {
		return k, ""
	}
	for _, c := range k[i+len(siteSep):] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return k, ""
		}
	}
	return k[:i], k[i+len(siteSep):]
}

// siteLen is the length of a site fingerprint: 32 bits of FNV-1a in hex.
const siteLen = 8

// siteOf fingerprints the code of the line of src that holds byte offset at: its fields joined by one
// space, a trailing line comment cut off.
func siteOf(src []byte, at int) string {
	lo := bytes.LastIndexByte(src[:at], '\n') + 1
	hi := bytes.IndexByte(src[at:], '\n')
	if hi < 0 {
		hi = len(src)
	} else {
		hi += at
	}
	line := string(src[lo:hi])
	if i := strings.Index(line[at-lo:], "//"); i >= 0 { // a comment after the site (one before it could be a string's)
		line = line[:at-lo+i]
	}
	h := fnv.New32a()
	h.Write([]byte(strings.Join(strings.Fields(line), " ")))
	return fmt.Sprintf("%08x", h.Sum32())
}

// Dir is the folder of the mutated file, relative to the module root ("impl", "impl/serve").
func (m Mutant) Dir() string { return path.Dir(m.File) }

// DefaultDir is the folder mutated when none is named; its files' keys carry no folder.
const DefaultDir = "impl"

// KeyDir is the folder of the mutant a key names: DefaultDir for a bare file name, else the file's folder.
func KeyDir(key string) string {
	f, _, _ := strings.Cut(key, " ")
	if !strings.Contains(f, "/") {
		return DefaultDir
	}
	return path.Dir(f)
}

// KeyDirs is the folders the keys name, in first-seen order.
func KeyDirs(keys []string) []string {
	var out []string
	for _, k := range keys {
		if d := KeyDir(k); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// keyFile is how a key names a file: its base name in DefaultDir, its module path elsewhere.
func keyFile(file string) string {
	if path.Dir(file) == DefaultDir {
		return path.Base(file)
	}
	return file
}

// Pos is file:line:col.
func (m Mutant) Pos() string { return fmt.Sprintf("%s:%d:%d", m.File, m.Line, m.Col) }

func (m Mutant) String() string {
	return fmt.Sprintf("%s %s `%s` -> `%s` (in %s)", m.Pos(), m.Kind, m.Orig, m.New, orDash(m.Func))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Apply returns the file's source with the mutant applied.
func (m Mutant) Apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.repl))
	out = append(out, src[:m.start]...)
	out = append(out, m.repl...)
	return append(out, src[m.end:]...)
}

// Skip is the files of impl/ that are not mutated: the debugging dump and the engine's self-check (a mutant
// there changes a message or a check that fires only on an engine already broken).
var Skip = map[string]bool{"debug.go": true, "invariants.go": true, "seeded_off.go": true}

// Generate parses every non-test Go file and every C or C++ source (cxx.go) of dir (relative to root, e.g.
// "impl") except the skipped base names and returns every mutant, in file and source order.
func Generate(root, dir string, skip map[string]bool) ([]Mutant, error) {
	ents, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return nil, err
	}
	var all []Mutant
	for _, e := range ents {
		name := e.Name()
		isC := cxxExt(name)
		if e.IsDir() || (!isC && (!strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go"))) || skip[name] {
			continue
		}
		rel := filepath.ToSlash(filepath.Join(dir, name))
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		if isC {
			all = append(all, generateCXX(rel, src)...)
			continue
		}
		ms, err := generateFile(rel, src)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	return all, nil
}

// GenerateDirs is Generate over several folders, in the order given (a folder named twice counts once).
func GenerateDirs(root string, dirs []string, skip map[string]bool) ([]Mutant, error) {
	var all []Mutant
	done := map[string]bool{}
	for _, d := range dirs {
		d = path.Clean(filepath.ToSlash(strings.TrimSpace(d)))
		if done[d] {
			continue
		}
		done[d] = true
		ms, err := Generate(root, d, skip)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	return all, nil
}

// generator walks one file.
type generator struct {
	fset *token.FileSet
	file string
	src  []byte
	fn   string
	nth  map[string]int // func+kind -> count
	out  []Mutant
	dead int // > 0 while walking code the production build never runs (behind a false seeded(...)): counted, not kept
}

func generateFile(rel string, src []byte) ([]Mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if hasBuildTag(f) {
		return nil, nil
	}
	g := &generator{fset: fset, file: rel, src: src, nth: map[string]int{}}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue // constants and types: changing them is mostly a compile error or a message
		}
		if fd.Name.Name == "assertLocked" {
			continue // the lock precondition's self-check (as its calls, below): it fires only in a broken program
		}
		g.fn = funcName(fd)
		g.walk(fd.Body)
	}
	return g.out, nil
}

// hasBuildTag reports a //go:build line that the shipped build does not satisfy: files compiled only under a
// tag (the seeded bugs, the C ABI's test hooks) or only elsewhere (another OS, no cgo) are not the product.
// The shipped build is Linux with cgo (libgmlake.so, the real driver): driver.go's `cgo` and trace's `unix`
// files are mutated, their stand-ins are not. impl/seeded_off.go is skipped by name (Skip): its one function is
// the seeded-bug switch itself.
func hasBuildTag(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			e, err := constraint.Parse(c.Text)
			if err != nil {
				return true
			}
			return !e.Eval(func(tag string) bool { return shippedTags[tag] })
		}
	}
	return false
}

// shippedTags are the build tags true in the build that ships (linux/amd64, cgo, the gc toolchain).
var shippedTags = map[string]bool{"linux": true, "unix": true, "amd64": true, "cgo": true, "gc": true}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		if star != "" {
			return "(*" + id.Name + ")." + fd.Name.Name
		}
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

func (g *generator) text(n ast.Node) string { return string(g.src[g.off(n.Pos()):g.off(n.End())]) }
func (g *generator) off(p token.Pos) int    { return g.fset.Position(p).Offset }

func (g *generator) add(kind string, at token.Pos, start, end int, repl string) {
	g.addSpan(kind, at, start, end, start, end, repl)
}

// addSpan adds a mutant that names the source [start, end) (its Orig and Site) and replaces the wider
// span [from, to) with repl.
func (g *generator) addSpan(kind string, at token.Pos, start, end, from, to int, repl string) {
	pos := g.fset.Position(at)
	k := g.fn + "\x00" + kind
	m := Mutant{File: g.file, Line: pos.Line, Col: pos.Column, Func: g.fn, Kind: kind, Nth: g.nth[k],
		Orig: short(string(g.src[start:end])), Site: siteOf(g.src, start), New: short(repl), start: from, end: to, repl: repl}
	g.nth[k]++ // a dead site still takes its number, so the keys of the live sites after it do not move
	if g.dead == 0 {
		g.out = append(g.out, m)
	}
}

// isSeeded reports a call of the seeded-bug switch (`a.seeded(MutX)`): false in the production build
// (impl/seeded_off.go), true only under the `seeded` tag for the seeded-bug table.
func isSeeded(e ast.Expr) bool {
	c, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := c.Fun.(type) {
	case *ast.SelectorExpr:
		return fn.Sel.Name == "seeded"
	case *ast.Ident:
		return fn.Name == "seeded"
	}
	return false
}

// constant reports whether e is false (or true: want) in the production build because of a seeded switch:
// the call itself, its negation, or an && (||) with such an operand.
func constant(e ast.Expr, want bool) bool {
	e = ast.Unparen(e)
	if isSeeded(e) {
		return !want
	}
	switch x := e.(type) {
	case *ast.UnaryExpr:
		return x.Op == token.NOT && constant(x.X, !want)
	case *ast.BinaryExpr:
		if (x.Op == token.LAND && !want) || (x.Op == token.LOR && want) {
			return constant(x.X, want) || constant(x.Y, want)
		}
	}
	return false
}

// walkDead walks n as code the production build never runs: its mutants are numbered and dropped.
func (g *generator) walkDead(n ast.Node) {
	g.dead++
	g.walk(n)
	g.dead--
}

// short makes a one-line excerpt of at most 60 bytes.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

var (
	boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	negate   = map[token.Token]token.Token{token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ,
		token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR}
	logic = map[token.Token]token.Token{token.LAND: token.LOR, token.LOR: token.LAND}
	arith = map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO,
		token.SHL: token.SHR, token.AND: token.OR, token.OR: token.AND}
)

// quiet reports a call whose arguments only format a message (or that is the debugging dump).
func quiet(call *ast.CallExpr) bool {
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name == "panic" || fn.Name == "print" || fn.Name == "println"
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok && (x.Name == "fmt" || x.Name == "errors" || x.Name == "strconv" || x.Name == "strings") {
			return true
		}
		// assertLocked is the lock precondition's self-check: it panics only in a program that already
		// broke the lock rule, so dropping it changes no answer (equivalent by construction, like invariants.go).
		return fn.Sel.Name == "dumpState" || fn.Sel.Name == "Errorf" || fn.Sel.Name == "String" || fn.Sel.Name == "assertLocked"
	}
	return false
}

// addOp adds the mutant that swaps n's operator (the source [start, end)) for t. An operator of another
// precedence (|| and &&, & and |) in the operator's place would regroup the operands around it (the outer
// || of `a || b || c` made && reads `a || (b && c)`), so then the whole expression is written again with
// each operand in parentheses and the whole in parentheses too (an operand of a wider expression, as the
// inner || of `a || b && c`): the mutant is n with its operator swapped, `((a || b) && (c))`.
func (g *generator) addOp(kind string, n *ast.BinaryExpr, start, end int, t token.Token) {
	if t.Precedence() == n.Op.Precedence() {
		g.add(kind, n.OpPos, start, end, t.String())
		return
	}
	from, to := g.off(n.Pos()), g.off(n.End())
	x, y := string(g.src[from:g.off(n.X.End())]), string(g.src[g.off(n.Y.Pos()):to])
	g.addSpan(kind, n.OpPos, start, end, from, to, "(("+x+") "+t.String()+" ("+y+"))")
}

func mentionsDebug(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && (id.Name == "debugOOM" || id.Name == "dumpState") {
			found = true
		}
		return !found
	})
	return found
}

func (g *generator) walk(body ast.Node) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if quiet(n) {
				return false
			}
		case *ast.FuncLit:
			// walked as part of the enclosing function
		case *ast.BinaryExpr:
			// An operand of `seeded(M) && x` (or `seeded(M) || x` negated) is never read in the production
			// build: a mutant there is equivalent there (the operator's own mutants below are not).
			deadOperands := (n.Op == token.LAND && (constant(n.X, false) || constant(n.Y, false))) ||
				(n.Op == token.LOR && (constant(n.X, true) || constant(n.Y, true)))
			start, end := g.off(n.OpPos), g.off(n.OpPos)+len(n.Op.String())
			if t, ok := boundary[n.Op]; ok {
				g.add("cmp-boundary", n.OpPos, start, end, t.String())
			}
			if t, ok := negate[n.Op]; ok {
				g.add("cmp-negate", n.OpPos, start, end, t.String())
			}
			if t, ok := logic[n.Op]; ok {
				g.addOp("logic", n, start, end, t)
			}
			if t, ok := arith[n.Op]; ok && !isString(n) {
				g.addOp("arith", n, start, end, t)
			}
			if deadOperands {
				g.walkDead(n.X)
				g.walkDead(n.Y)
				return false
			}
		case *ast.BasicLit:
			if n.Kind == token.INT {
				v, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
				if err == nil {
					repl := "(" + n.Value + " + 1)"
					if v == 1 {
						repl = "0"
					}
					g.add("const", n.Pos(), g.off(n.Pos()), g.off(n.End()), repl)
				}
			}
		case *ast.Ident:
			if n.Name == "true" || n.Name == "false" {
				repl := "true"
				if n.Name == "true" {
					repl = "false"
				}
				g.add("bool", n.Pos(), g.off(n.Pos()), g.off(n.End()), repl)
			}
		case *ast.IfStmt:
			if mentionsDebug(n.Cond) {
				return false
			}
			if b, ok := n.Cond.(*ast.BinaryExpr); !ok || negate[b.Op] == token.ILLEGAL {
				// (a comparison's negation is already cmp-negate)
				g.add("cond-negate", n.Cond.Pos(), g.off(n.Cond.Pos()), g.off(n.Cond.End()), "!("+g.text(n.Cond)+")")
			}
			if els, ok := n.Else.(*ast.BlockStmt); ok {
				// swap the two blocks: replace [then.Lbrace, else.End) with else + " else " + then
				start, end := g.off(n.Body.Lbrace), g.off(els.End())
				g.add("swap-branches", n.Body.Lbrace, start, end, g.text(els)+" else "+g.text(n.Body))
			}
			// The branch a seeded switch rules out never runs in the production build.
			if constant(n.Cond, false) || (n.Else != nil && constant(n.Cond, true)) {
				if n.Init != nil {
					g.walk(n.Init)
				}
				g.walk(n.Cond)
				if constant(n.Cond, false) {
					g.walkDead(n.Body)
					if n.Else != nil {
						g.walk(n.Else)
					}
				} else {
					g.walk(n.Body)
					g.walkDead(n.Else)
				}
				return false
			}
		case *ast.ReturnStmt:
			if len(n.Results) > 0 {
				last := n.Results[len(n.Results)-1]
				if id, ok := last.(*ast.Ident); ok && id.Name == "err" {
					g.add("return-nil", id.Pos(), g.off(id.Pos()), g.off(id.End()), "nil")
				}
			}
		case *ast.BlockStmt:
			for _, st := range n.List {
				if droppable(st) && !mentionsDebug(st) {
					g.add("drop", st.Pos(), g.off(st.Pos()), g.off(st.End()), "")
				}
			}
		case *ast.CaseClause:
			for _, st := range n.Body {
				if droppable(st) && !mentionsDebug(st) {
					g.add("drop", st.Pos(), g.off(st.Pos()), g.off(st.End()), "")
				}
			}
		}
		return true
	})
}

// isString guesses a string concatenation (a string literal on either side): + on strings only formats.
func isString(b *ast.BinaryExpr) bool {
	for _, e := range []ast.Expr{b.X, b.Y} {
		if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
			return true
		}
	}
	return false
}

// droppable: a statement whose removal still compiles in most cases: a call, an assignment to existing
// variables, an increment, a defer.
func droppable(st ast.Stmt) bool {
	switch s := st.(type) {
	case *ast.ExprStmt:
		c, ok := s.X.(*ast.CallExpr)
		return ok && !quiet(c)
	case *ast.AssignStmt:
		return s.Tok != token.DEFINE
	case *ast.IncDecStmt, *ast.DeferStmt:
		return true
	}
	return false
}

// Sample returns n mutants drawn with a seeded permutation (the same seed and mutants give the same sample).
func Sample(all []Mutant, n int, seed uint64) []Mutant {
	idx := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).Perm(len(all))
	if n > len(all) || n <= 0 {
		n = len(all)
	}
	out := make([]Mutant, 0, n)
	for _, i := range idx[:n] {
		out = append(out, all[i])
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].start < out[j].start
	})
	return out
}

// ReadKeys reads a sample file: one key a line, '#' comments.
func ReadKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	return keys, nil
}

// ReadKeyHeader returns the '#' comment lines of a sample file, without their '#', for FormatKeys.
func ReadKeyHeader(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var hdr []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "#") {
			hdr = append(hdr, strings.TrimSpace(strings.TrimPrefix(l, "#")))
		}
	}
	return strings.Join(hdr, "\n"), nil
}

// FormatKeys writes a sample file.
func FormatKeys(header string, ms []Mutant) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	for _, m := range ms {
		fmt.Fprintln(&b, m.SiteKey())
	}
	return b.Bytes()
}

// Select returns the mutants of all whose keys are listed (a key whose site moved within its function
// matches the same text at the nearest index), and the keys that match no mutant any more (the code they
// named changed).
func Select(all []Mutant, keys []string) (found []Mutant, gone []string) {
	for _, p := range match(all, keys) {
		if p.ok {
			found = append(found, p.m)
		} else {
			gone = append(gone, p.key)
		}
	}
	return found, gone
}

// matched is one key and the mutant it names now (ok false: none).
type matched struct {
	key string
	m   Mutant
	ok  bool
}

// match pairs each key with a mutant of all: the exact key first, then, for a key whose exact site is gone,
// the same file, function, kind and text at the nearest index (others' edits renumber the sites), each
// mutant taken once. A key that carries a site fingerprint (SiteKey) matches only a mutant on a line of
// the same code: when that line changed or went, the key names nothing (gone) rather than a look-alike.
// Exact matches come first in the result, in key order, then the others.
func match(all []Mutant, keys []string) []matched {
	byKey := map[string]Mutant{}
	for _, m := range all {
		byKey[m.Key()] = m
	}
	type loose struct{ file, fn, kind, orig string }
	// Functions renamed to end in Locked (the lock convention) are the same function.
	norm := func(fn string) string { return strings.TrimSuffix(fn, "Locked") }
	near := map[loose][]Mutant{}
	for _, m := range all {
		l := loose{keyFile(m.File), norm(orDash(m.Func)), m.Kind, m.Orig}
		near[l] = append(near[l], m)
	}
	exact := func(k string) (Mutant, bool) {
		key, site := splitSite(k)
		m, ok := byKey[key]
		return m, ok && (site == "" || m.Site == site)
	}
	var out []matched
	taken := map[string]bool{}
	for _, k := range keys {
		if m, ok := exact(k); ok {
			out = append(out, matched{k, m, true})
			taken[m.Key()] = true
		}
	}
	for _, k := range keys {
		if _, ok := exact(k); ok {
			continue
		}
		key, site := splitSite(k)
		f := strings.SplitN(key, " ", 5)
		if len(f) < 5 {
			out = append(out, matched{key: k})
			continue
		}
		nth, _ := strconv.Atoi(f[3])
		best, bestD := Mutant{}, -1
		for _, m := range near[loose{f[0], norm(f[1]), f[2], f[4]}] {
			if d := abs(m.Nth - nth); !taken[m.Key()] && (site == "" || m.Site == site) && (bestD < 0 || d < bestD) {
				best, bestD = m, d
			}
		}
		if bestD < 0 {
			out = append(out, matched{key: k})
			continue
		}
		taken[best.Key()] = true
		out = append(out, matched{k, best, true})
	}
	return out
}

// Judgement is a reasoned verdict on a mutant that no checker kills: Verdict "equivalent" (no caller can
// tell: the same answers, the same device state, the same statistics on every input) takes it out of the
// score's denominator; any other verdict (e.g. "open": a real difference no checker sees yet) only labels
// the survivor. The list lives in testdata/equivalent.txt so that the judgement is reviewed like code and
// the same on every run.
type Judgement struct {
	Key     string // the mutant's key when it was judged
	Verdict string // "equivalent", or another word that labels without excusing
	Reason  string // why: what makes the change unobservable (or what it would take to see it)
	_       struct{}
}

// Equivalent reports whether the verdict takes the mutant out of the score.
func (j Judgement) Equivalent() bool { return j.Verdict == VerdictEquivalent }

// VerdictEquivalent is the verdict that excludes a mutant from the score.
const VerdictEquivalent = "equivalent"

// judgementSep separates a key from its verdict on a line of the judgement list ("##" is no Go operator, so
// it appears in no key).
const judgementSep = " ## "

// ReadJudgements reads a judgement list: one `KEY ## VERDICT: reason` a line, '#' comments, blank lines.
func ReadJudgements(path string) ([]Judgement, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Judgement
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, rest, ok := strings.Cut(l, judgementSep)
		verdict, reason, ok2 := strings.Cut(rest, ":")
		verdict, reason = strings.TrimSpace(verdict), strings.TrimSpace(reason)
		if !ok || !ok2 || verdict == "" || strings.ContainsAny(verdict, " \t") || reason == "" {
			return nil, fmt.Errorf("%s:%d: want `KEY ## VERDICT: reason`, got %q", path, i+1, l)
		}
		out = append(out, Judgement{Key: strings.TrimSpace(key), Verdict: verdict, Reason: reason})
	}
	return out, nil
}

// Judge returns the judgement of each mutant of all that a judgement names (by the mutant's current key;
// moved sites are matched as Select does), and the judgements that name no mutant any more (the code
// changed: judge again).
func Judge(all []Mutant, js []Judgement) (by map[string]Judgement, stale []Judgement) {
	keys := make([]string, len(js))
	jk := map[string]Judgement{}
	for i, j := range js {
		keys[i] = j.Key
		jk[j.Key] = j
	}
	by = map[string]Judgement{}
	for _, p := range match(all, keys) {
		if !p.ok {
			stale = append(stale, jk[p.key])
			continue
		}
		by[p.m.Key()] = jk[p.key]
	}
	return by, stale
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
