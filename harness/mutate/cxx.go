package mutate

// The mutants of the product's C and C++ sources: capi's C (abi.c, hostcache.c, settings.c, torch.c,
// throw.cc), which go test -overlay reaches through cgo like a Go file, and the C++ allocator
// (python/gmlake_torch/csrc/gmlake_allocator.cc), which only a GPU machine with torch can build and judge
// (EmitCXX writes its mutated sources; harness/mutate/gpu/cxx_mutants.sh runs them there).
//
// There is no C++ parser in the standard library, so the generator works on tokens: comments, string and
// character literals and preprocessor lines are skipped; a function body is a brace whose head (the text
// since the last `;`, `{` or `}` at its depth) has a parenthesis and no control keyword, opened outside any
// function; mutants are made only inside bodies. The kinds are the Go generator's (mutate.go), with the
// spelling C allows: a comparison or a logical or arithmetic operator counts only when written with spaces
// on both sides (so a template's angle brackets, a pointer's `*` or a stream's `<<` are never taken for
// one), a statement drop replaces an expression statement (a call, an assignment, an increment) with `;`,
// a cond-negate wraps an if's condition in `!( )`. Code that only formats a message is not mutated: the
// tokens of a statement after its first string literal (the arguments of snprintf, TORCH_CHECK's message,
// a stream's text), and a statement that starts with `throw` or is a formatted print.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cxxExt reports whether name is a C or C++ source the generator mutates (headers declare, they do not
// run; test hooks compiled only into the test binaries are not the product).
func cxxExt(name string) bool {
	if strings.Contains(name, "testhooks") || strings.Contains(name, "_test.") {
		return false
	}
	switch filepath.Ext(name) {
	case ".c", ".cc", ".cpp":
		return true
	}
	return false
}

type ctok struct {
	text       string
	start, end int
	line, col  int
	spaced     bool // whitespace on both sides
}

// ctokens splits C/C++ source into tokens, comments, literals' insides and preprocessor lines left out
// (a string literal is one token, "\"...\"", so the statement rules can see it).
func ctokens(src []byte) []ctok {
	var out []ctok
	line, lineStart := 1, 0
	i := 0
	atLineStart := true
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for i < len(src) {
		c := src[i]
		if c == '\n' {
			line++
			lineStart = i + 1
			atLineStart = true
			i++
			continue
		}
		if isSpace(c) {
			i++
			continue
		}
		if atLineStart && c == '#' { // a preprocessor line, with its continuations
			for i < len(src) && src[i] != '\n' {
				if src[i] == '\\' && i+1 < len(src) && src[i+1] == '\n' {
					i += 2
					line++
					lineStart = i
					continue
				}
				i++
			}
			continue
		}
		atLineStart = false
		if c == '/' && i+1 < len(src) && src[i+1] == '/' {
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		if c == '/' && i+1 < len(src) && src[i+1] == '*' {
			j := strings.Index(string(src[i+2:]), "*/")
			end := len(src)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			for k := i; k < end; k++ {
				if src[k] == '\n' {
					line++
					lineStart = k + 1
				}
			}
			i = end
			continue
		}
		start := i
		switch {
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
			if c == '\'' {
				out = append(out, ctok{text: "'c'", start: start, end: i, line: line, col: start - lineStart + 1})
				continue
			}
			out = append(out, ctok{text: "\"\"", start: start, end: i, line: line, col: start - lineStart + 1})
			continue
		case isIdentByte(c):
			for i < len(src) && (isIdentByte(src[i]) || (src[i] == '.' && start < i && isDigit(src[start]))) {
				i++
			}
		default:
			n := 1
			for _, op := range []string{"<<=", ">>=", "->", "::", "==", "!=", "<=", ">=", "&&", "||", "++", "--",
				"+=", "-=", "*=", "/=", "|=", "&=", "^=", "<<", ">>"} {
				if strings.HasPrefix(string(src[i:min(i+3, len(src))]), op) {
					n = len(op)
					break
				}
			}
			i += n
		}
		t := ctok{text: string(src[start:i]), start: start, end: i, line: line, col: start - lineStart + 1}
		t.spaced = start > 0 && isSpace(src[start-1]) && i < len(src) && isSpace(src[i])
		out = append(out, t)
	}
	return out
}

func isIdentByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// cControl are the keywords whose parenthesis opens no function.
var cControl = map[string]bool{"if": true, "for": true, "while": true, "switch": true, "catch": true, "do": true,
	"else": true, "try": true, "return": true, "sizeof": true, "decltype": true, "alignof": true}

// cDeclStart are the words that begin a declaration, never an expression statement.
var cDeclStart = map[string]bool{"return": true, "if": true, "for": true, "while": true, "do": true, "switch": true,
	"case": true, "default": true, "break": true, "continue": true, "goto": true, "else": true, "typedef": true,
	"using": true, "static": true, "const": true, "constexpr": true, "auto": true, "struct": true, "class": true,
	"enum": true, "union": true, "throw": true, "try": true, "catch": true, "namespace": true, "template": true,
	"extern": true, "volatile": true, "unsigned": true, "signed": true, "int": true, "char": true, "long": true,
	"short": true, "bool": true, "float": true, "double": true, "void": true, "size_t": true, "uint64_t": true,
	"int64_t": true, "uint32_t": true, "int32_t": true, "uintptr_t": true, "uint8_t": true, "std": true,
	"thread_local": true, "inline": true, "friend": true, "virtual": true, "public": true, "private": true,
	"protected": true, "delete": true}

// cPrints are calls that only format text: a statement that is one of them is not dropped.
var cPrints = map[string]bool{"printf": true, "fprintf": true, "snprintf": true, "vsnprintf": true, "fputs": true,
	"perror": true, "TORCH_WARN": true, "TORCH_WARN_ONCE": true}

// generateCXX returns the mutants of one C or C++ file (rel: its path from the module root).
func generateCXX(rel string, src []byte) []Mutant {
	toks := ctokens(src)
	g := &cgen{file: rel, src: src, toks: toks, nth: map[string]int{}}
	g.walk()
	return g.out
}

type cgen struct {
	file string
	src  []byte
	toks []ctok
	nth  map[string]int
	out  []Mutant
}

func (g *cgen) add(fn, kind string, t ctok, start, end int, repl string) {
	k := fn + "\x00" + kind
	m := Mutant{File: g.file, Line: t.line, Col: t.col, Func: fn, Kind: kind, Nth: g.nth[k],
		Orig: short(string(g.src[start:end])), Site: siteOf(g.src, start), New: short(repl), start: start, end: end, repl: repl}
	g.nth[k]++
	g.out = append(g.out, m)
}

// walk finds the function bodies and mutates each statement in them.
func (g *cgen) walk() {
	toks := g.toks
	depth := 0
	fnDepth := -1 // the depth inside the function body being walked (-1: outside any)
	fn := ""
	headStart := 0 // first token of the current head (outside functions)
	for i := 0; i < len(toks); i++ {
		t := toks[i].text
		switch t {
		case "{":
			if fnDepth < 0 {
				if name, ok := funcHead(toks[headStart:i]); ok {
					fn = name
					fnDepth = depth + 1
					depth++
					i = g.body(fn, i+1) - 1 // body returns the index of the closing brace
					continue
				}
			}
			depth++
			headStart = i + 1
		case "}":
			depth--
			if fnDepth >= 0 && depth < fnDepth {
				fnDepth, fn = -1, ""
			}
			headStart = i + 1
		case ";":
			headStart = i + 1
		}
	}
}

// funcHead reports whether the tokens before a brace open a function body, and the function's name (the
// identifier, qualified with its class, before the head's first parenthesis).
func funcHead(head []ctok) (string, bool) {
	p := -1
	for i, t := range head {
		if t.text == "(" {
			p = i
			break
		}
		if t.text == "=" { // an initialiser
			return "", false
		}
	}
	if p < 1 || cControl[head[p-1].text] || !isIdentByte(head[p-1].text[0]) {
		return "", false
	}
	for _, t := range head[:p] {
		switch t.text {
		case "namespace", "class", "enum", "union", "\"\"": // a type's body, extern "C" { ... }
			return "", false
		}
	}
	name := head[p-1].text
	for j := p - 2; j >= 1 && head[j].text == "::" && isIdentByte(head[j-1].text[0]); j -= 2 {
		name = head[j-1].text + "::" + name
	}
	if name == "operator" || (p >= 2 && head[p-2].text == "operator") {
		return "", false
	}
	return name, true
}

// body mutates the statements of the function body whose first token is at i, up to its closing brace,
// and returns that brace's index.
func (g *cgen) body(fn string, i int) int {
	depth := 1
	stmt := i // first token of the statement being read
	for i < len(g.toks) {
		t := g.toks[i].text
		switch t {
		case "{":
			g.statement(fn, stmt, i)
			depth++
			stmt = i + 1
		case "}":
			g.statement(fn, stmt, i)
			depth--
			if depth == 0 {
				return i
			}
			stmt = i + 1
		case ";":
			g.statement(fn, stmt, i+1)
			stmt = i + 1
		case "(": // a for's header holds semicolons: read it as one stretch
			if i > 0 && g.toks[i-1].text == "for" {
				j := g.matchParen(i)
				g.statement(fn, stmt, j+1)
				stmt = j + 1
				i = j
			}
		}
		i++
	}
	return i
}

// matchParen returns the index of the parenthesis that closes the one at i.
func (g *cgen) matchParen(i int) int {
	d := 0
	for j := i; j < len(g.toks); j++ {
		switch g.toks[j].text {
		case "(":
			d++
		case ")":
			d--
			if d == 0 {
				return j
			}
		}
	}
	return len(g.toks) - 1
}

// statement mutates the tokens [a, b) of one statement (or a statement's head before a brace).
func (g *cgen) statement(fn string, a, b int) {
	if a >= b {
		return
	}
	toks := g.toks[a:b]
	first := toks[0].text
	if first == "throw" || cPrints[first] || first == "case" || first == "static_assert" {
		return
	}
	// Tokens after the first string literal format a message.
	end := len(toks)
	for k, t := range toks {
		if t.text == "\"\"" {
			end = k
			break
		}
	}
	for k := 0; k < end; k++ {
		t := toks[k]
		switch t.text {
		case "==", "!=", "<", "<=", ">", ">=":
			if t.spaced {
				if nb, ok := cmpBoundary[t.text]; ok {
					g.add(fn, "cmp-boundary", t, t.start, t.end, nb)
				}
				g.add(fn, "cmp-negate", t, t.start, t.end, cmpNegate[t.text])
			}
		case "&&", "||":
			if t.spaced {
				g.add(fn, "logic", t, t.start, t.end, map[string]string{"&&": "||", "||": "&&"}[t.text])
			}
		case "+", "-":
			if t.spaced {
				g.add(fn, "arith", t, t.start, t.end, map[string]string{"+": "-", "-": "+"}[t.text])
			}
		case "true", "false":
			g.add(fn, "bool", t, t.start, t.end, map[string]string{"true": "false", "false": "true"}[t.text])
		default:
			if n, ok := cInt(t.text); ok && !(k > 0 && toks[k-1].text == "[" && k+1 < len(toks) && toks[k+1].text == "]" && k >= 2 && isIdentByte(toks[k-2].text[0]) && k >= 3 && (cDeclStart[toks[k-3].text] || isIdentByte(toks[k-3].text[0]))) {
				repl := fmt.Sprint(n + 1)
				if n == 1 {
					repl = "0"
				}
				g.add(fn, "const", t, t.start, t.end, repl)
			}
		}
	}
	// cond-negate: if ( COND )
	if first == "if" && len(toks) > 1 && toks[1].text == "(" {
		j := g.matchParen(a+1) - a
		if j > 1 && j < len(toks)+1 {
			lo, hi := toks[2].start, g.toks[a+j].start
			g.add(fn, "cond-negate", toks[1], lo, hi, "!("+string(g.src[lo:hi])+")")
		}
	}
	if first == "else" && len(toks) > 2 && toks[1].text == "if" && toks[2].text == "(" {
		j := g.matchParen(a+2) - a
		lo, hi := toks[3].start, g.toks[a+j].start
		g.add(fn, "cond-negate", toks[2], lo, hi, "!("+string(g.src[lo:hi])+")")
	}
	// drop: an expression statement ending in ';' that is not a declaration
	if toks[len(toks)-1].text != ";" || len(toks) < 3 || cDeclStart[first] || !(isIdentByte(first[0]) || first == "*" || first == "(" || first == "++" || first == "--") {
		return
	}
	if isDecl(toks) {
		return
	}
	has := false
	for _, t := range toks {
		switch t.text {
		case "(", "=", "++", "--", "+=", "-=", "|=", "&=", "^=", "<<=", ">>=", "*=", "/=":
			has = true
		}
	}
	if has {
		g.add(fn, "drop", toks[0], toks[0].start, toks[len(toks)-1].end, ";")
	}
}

var cmpBoundary = map[string]string{"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
var cmpNegate = map[string]string{"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}

// isDecl reports a declaration: a type (an identifier, maybe qualified, templated, a pointer or a
// reference) followed by a name.
func isDecl(toks []ctok) bool {
	k := 0
	for k < len(toks) && (isIdentByte(toks[k].text[0]) && !isDigit(toks[k].text[0])) {
		k++
		if k < len(toks) && toks[k].text == "::" {
			k++
			continue
		}
		if k < len(toks) && toks[k].text == "<" && !toks[k].spaced { // a template's arguments
			d := 0
			for ; k < len(toks); k++ {
				if toks[k].text == "<" {
					d++
				} else if toks[k].text == ">" {
					d--
					if d == 0 {
						k++
						break
					}
				} else if toks[k].text == ">>" {
					d -= 2
					if d <= 0 {
						k++
						break
					}
				}
			}
		}
		for k < len(toks) && (toks[k].text == "*" || toks[k].text == "&" || toks[k].text == "&&") && !toks[k].spaced {
			k++
		}
		break
	}
	return k > 0 && k < len(toks) && isIdentByte(toks[k].text[0]) && !isDigit(toks[k].text[0])
}

// cInt parses a C integer literal (decimal or hex, with u/l suffixes); a float or anything else is not.
func cInt(s string) (uint64, bool) {
	if s == "" || !isDigit(s[0]) {
		return 0, false
	}
	t := strings.TrimRight(strings.ToLower(s), "ul")
	if strings.ContainsAny(t, ".e") && !strings.HasPrefix(t, "0x") {
		return 0, false
	}
	var n uint64
	if _, err := fmt.Sscan(t, &n); err != nil {
		if strings.HasPrefix(t, "0x") {
			if _, err := fmt.Sscanf(t, "0x%x", &n); err == nil {
				return n, true
			}
		}
		return 0, false
	}
	if len(t) > 1 && t[0] == '0' && !strings.HasPrefix(t, "0x") { // octal
		return 0, false
	}
	return n, true
}

// EmitCXX writes each mutant's whole mutated file into dir as NNN-<base name> (in the order given; a Go
// file's name ends in .go.txt), and dir/mutants.tsv: one "NNN<TAB>file<TAB>key-with-site" a line. It is how the C++ allocator's mutants travel
// to the GPU machine, where no Go toolchain runs them.
func EmitCXX(root, dir string, ms []Mutant) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tsv strings.Builder
	for i, m := range ms {
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%03d-%s", i+1, filepath.Base(m.File))
		if strings.HasSuffix(name, ".go") {
			name += ".txt" // not a Go file of the module to go vet ./..., the layering test or the build
		}
		if err := os.WriteFile(filepath.Join(dir, name), m.Apply(src), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&tsv, "%03d\t%s\t%s\n", i+1, m.File, m.SiteKey())
	}
	return os.WriteFile(filepath.Join(dir, "mutants.tsv"), []byte(tsv.String()), 0o644)
}
