package pgocheck

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPathToPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"example.com/router.v2":     "example.com/router%2ev2",
		"gopkg.in/yaml.v3":          "gopkg.in/yaml%2ev3",
		"example.com/a.b/c":         "example.com/a.b/c",
		"main":                      "main",
		`example.com/we"ird%path x`: "example.com/we%22ird%25path%20x",
	} {
		if got := PathToPrefix(in); got != want {
			t.Errorf("PathToPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGuessPackageName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/google/go-cmp/cmp": "cmp",
		"gopkg.in/yaml.v3":             "yaml",
		"example.com/mod/v2":           "mod",
		"strings":                      "strings",
		"github.com/foo/go-bar":        "bar",
	} {
		if got := guessPackageName(in); got != want {
			t.Errorf("guessPackageName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClosuresCallsAndLines(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/x\n")
	write("a.go", `package x

func F() int {
	a := func() int {
		return func() int { return g(1) }()
	}
	return a() + len("x") + int(T(2))
}

type T int

func g(n int) int { return n }
`)
	idx, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Func{}
	for _, f := range idx.Functions {
		byName[f.Name] = f
	}
	for name, start := range map[string]int{
		"example.com/x.F": 3, "example.com/x.F.func1": 4, "example.com/x.F.func1.1": 5, "example.com/x.g": 12,
	} {
		f, ok := byName[name]
		if !ok || f.Start != start {
			t.Errorf("%s: got %+v, want start %d", name, f, start)
		}
	}
	if c := byName["example.com/x.F"].Calls; len(c) != 1 || c[0] != (Call{7, "indirect", "a"}) {
		t.Errorf("F's calls: %+v (len and the conversion are not calls)", c)
	}
	if c := byName["example.com/x.F.func1"].Calls; len(c) != 1 || c[0] != (Call{5, "closure", "example.com/x.F.func1.1"}) {
		t.Errorf("F.func1's calls: %+v", c)
	}
	if c := byName["example.com/x.F.func1.1"].Calls; len(c) != 1 || c[0] != (Call{5, "func", "example.com/x.g"}) {
		t.Errorf("F.func1.1's calls: %+v", c)
	}
}

func TestSyntaxErrorNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module m\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.go"), []byte("package m\nfunc (\n"), 0o644)
	if _, err := Build(dir); err == nil || !filepath.IsAbs(dir) {
		t.Fatalf("want an error, got %v", err)
	}
}
