package mutate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const cSnippet = `// a < b in a comment: not a mutant
#define LIMIT (1 + 2)
#include "x.h"
static const char *msg = "a == b";
struct tab { int a; } tabs[] = {{1}};
namespace ns {
class K {
  int get(int x) const {
    if (x == 0) {
      return 1;
    }
    std::vector<int> v;
    char buf[64];
    snprintf(buf, sizeof buf, "%d < %d", x + 1, 2);
    /* x > 3 */
    for (int i = 0; i < x; i++) {
      v.push_back(i);
    }
    TORCH_CHECK(x >= 2, "need ", x + 3, " items");
    n_ = n_ + x;
    bool ok = x != 4 && true;
    return ok ? 5 : -1;
  }
};
}  // namespace ns
int f(int y) { return y - 1; }
`

// TestCMutantsAreTheKindsOfTheGoGenerator: the snippet's mutants are exactly the operators written with
// spaces, the integer literals, the booleans, the if conditions and the expression statements of the function
// bodies; nothing in a comment, a string, a directive, a declaration's array bound or a message's arguments.
func TestCMutantsAreTheKindsOfTheGoGenerator(t *testing.T) {
	ms := generateCXX("x.cc", []byte(cSnippet))
	var got []string
	for _, m := range ms {
		got = append(got, m.Func+" "+m.Kind+" "+m.Orig+" -> "+m.New)
	}
	want := []string{
		"get cmp-negate == -> !=",
		"get const 0 -> 1",
		"get cond-negate x == 0 -> !(x == 0)",
		"get const 1 -> 0",
		"get const 0 -> 1",
		"get cmp-boundary < -> <=",
		"get cmp-negate < -> >=",
		"get drop v.push_back(i); -> ;",
		"get cmp-boundary >= -> >",
		"get cmp-negate >= -> <",
		"get const 2 -> 3",
		"get drop TORCH_CHECK(x >= 2, \"need \", x + 3, \" items\"); -> ;",
		"get arith + -> -",
		"get drop n_ = n_ + x; -> ;",
		"get cmp-negate != -> ==",
		"get const 4 -> 5",
		"get logic && -> ||",
		"get bool true -> false",
		"get const 5 -> 6",
		"get const 1 -> 0",
		"f arith - -> +",
		"f const 1 -> 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mutants of the snippet:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCMutantsOfTheProductAreOneEditEach: over every C and C++ source that ships, each mutant changes its
// file only inside its own span, into its replacement, and no two mutants share a key.
func TestCMutantsOfTheProductAreOneEditEach(t *testing.T) {
	seen := map[string]bool{}
	n := 0
	for _, dir := range []string{"capi", "python/gmlake_torch/csrc"} {
		ms, err := Generate("../..", dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if !cxxExt(filepath.Base(m.File)) {
				continue
			}
			n++
			src, err := os.ReadFile(filepath.Join("../..", m.File))
			if err != nil {
				t.Fatal(err)
			}
			out := m.Apply(src)
			if string(out[:m.start]) != string(src[:m.start]) || string(out[m.start+len(m.repl):]) != string(src[m.end:]) {
				t.Fatalf("%s: changes the file outside its span", m)
			}
			if m.Func == "" {
				t.Errorf("%s: outside any function body", m)
			}
			if seen[m.Key()] {
				t.Errorf("%s: key %q twice", m, m.Key())
			}
			seen[m.Key()] = true
		}
	}
	if n < 1000 {
		t.Errorf("only %d mutants of the C and C++ sources: the generator lost its way", n)
	}
}
