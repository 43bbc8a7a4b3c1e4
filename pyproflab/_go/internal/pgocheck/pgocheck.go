// Package pgocheck indexes a Go module's source for `pyproflab pgo check`:
// every function with the name the linker (and so a CPU profile) gives it,
// its start and end lines, and the calls on each line of its body.
//
// The source is read with go/parser and go/ast only (no type checking, no
// build): a profile is checked against source that may not build today.
// Python (pyproflab/analyses/pgo_check.py) matches a profile's hot edges
// against the index; the rules about names and calls live here.
//
// Rules:
//   - Packages: every directory under the module root holding non-test .go
//     files, except testdata, vendor, directories starting with "." or "_",
//     and nested modules. A package named main has the symbol prefix "main";
//     any other has its import path, escaped as the linker escapes it (a dot
//     in the last element is %2e).
//   - Functions: F is PREFIX.F; a method on T is PREFIX.T.M, on *T
//     PREFIX.(*T).M; type parameters show as [...] (PREFIX.F[...],
//     PREFIX.(*T[...]).M), as in profiles; the init functions of a package
//     are PREFIX.init.0, .1, ... in file order. Function literals inside a
//     declaration D are D.func1, D.func2, ... in source order, and literals
//     nested in a literal L are L.1, L.2, ...; literals in package-level
//     variables are PREFIX.init.func1, ... (the compiler's names).
//   - A function's start line is the line of its func keyword (what the
//     runtime records as Function.start_line); its end line is that of its
//     closing brace.
//   - Calls: a call's line is that of its opening parenthesis (the line the
//     compiler gives the call). Calls inside a function literal belong to the
//     literal. Builtins (len, append, make, ...) and conversions to types
//     declared in the package, predeclared types or type literals are not
//     calls. A call is "func" (a named function: PREFIX.NAME, or the
//     imported package's PREFIX.NAME), "method" (x.M(...) on anything that is
//     not an imported package: only the method's name is known without
//     types), "closure" (a literal called where it stands) or "indirect".
//   - Interface methods: the names of the methods of every interface type
//     declared in the module, and of the standard library's most used ones
//     (io, fmt.Stringer, error, sort.Interface, http.Handler): x.M() with such
//     a name may be an interface call, which only the profile's edges at that
//     line can devirtualize.
package pgocheck

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// FormatVersion changes whenever the JSON below changes shape.
const FormatVersion = 1

// Call is one call expression in a function body.
type Call struct {
	Line int    `json:"line"`
	Kind string `json:"kind"` // func, method, closure, indirect
	Name string `json:"name"` // func, closure: linker name; method: the method's name
}

// Func is one function, method or function literal.
type Func struct {
	Name    string `json:"name"`
	Package string `json:"package"` // symbol prefix
	File    string `json:"file"`    // slash-separated, relative to the module root
	Start   int    `json:"start"`
	End     int    `json:"end"`
	Generic bool   `json:"generic"`
	Calls   []Call `json:"calls"`
}

// Package is one package of the module.
type Package struct {
	ImportPath string `json:"import_path"`
	Name       string `json:"name"`
	Prefix     string `json:"prefix"`
	Dir        string `json:"dir"`
}

// Index is the whole module.
type Index struct {
	Format    int       `json:"format"`
	Module    string    `json:"module"`
	Root      string    `json:"root"`
	Packages  []Package `json:"packages"`
	Functions []Func    `json:"functions"`
	// InterfaceMethods lists method names that may be called through an interface.
	InterfaceMethods []string `json:"interface_methods"`
}

var stdInterfaceMethods = []string{"Close", "Error", "Len", "Less", "Read", "ReadAt",
	"ReadFrom", "Seek", "ServeHTTP", "String", "Swap", "Write", "WriteTo"}

// Run is the "pgo" subcommand: pgo index -source DIR writes the index as JSON.
func Run(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "index" {
		fmt.Fprintln(stderr, "usage: pyproflab-go pgo index -source DIR")
		return 2
	}
	fs := flag.NewFlagSet("pgo index", flag.ContinueOnError)
	fs.SetOutput(stderr)
	source := fs.String("source", ".", "the Go module's root directory (holding go.mod)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	idx, err := Build(*source)
	if err != nil {
		fmt.Fprintf(stderr, "pyproflab-go pgo: %v\n", err)
		return 2
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(idx); err != nil {
		fmt.Fprintf(stderr, "pyproflab-go pgo: writing the index: %v\n", err)
		return 1
	}
	return 0
}

// Build indexes the module rooted at dir.
func Build(dir string) (*Index, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	modPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	idx := &Index{Format: FormatVersion, Module: modPath, Root: root}
	dirs, err := packageDirs(root)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var pkgs []*parsedPackage
	for _, d := range dirs {
		found, err := parseDir(fset, root, d, modPath)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, found...)
	}
	byPath := map[string]*parsedPackage{}
	for _, pp := range pkgs {
		if pp.name != "main" {
			byPath[pp.importPath] = pp
		}
	}
	methods := setOf(stdInterfaceMethods...)
	for _, pp := range pkgs {
		for _, f := range pp.files {
			interfaceMethods(f, methods)
		}
	}
	for m := range methods {
		idx.InterfaceMethods = append(idx.InterfaceMethods, m)
	}
	sort.Strings(idx.InterfaceMethods)
	for _, pp := range pkgs {
		prefix := PathToPrefix(pp.importPath)
		if pp.name == "main" {
			prefix = "main"
		}
		idx.Packages = append(idx.Packages, Package{pp.importPath, pp.name, prefix, pp.dir})
		p := &pkgIndexer{
			idx: idx, fset: fset, root: root, prefix: prefix,
			types: pp.types, funcs: pp.funcs, modPkgs: byPath,
		}
		p.files(pp.files)
	}
	return idx, nil
}

// modulePath reads the module directive of go.mod.
func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("%s: no go.mod: --source must be a Go module's root", filepath.Dir(gomod))
		}
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimSpace(line))
		if len(f) >= 2 && f[0] == "module" {
			if p, err := strconv.Unquote(f[1]); err == nil {
				return p, nil
			}
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s: no module directive", gomod)
}

// packageDirs lists the directories to index, sorted (see the package rules).
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root {
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		dirs = append(dirs, p)
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

// parseDir parses the non-test .go files of one directory, in name order,
// grouped by package name.
func parseDir(fset *token.FileSet, root, dir, modPath string) ([]*parsedPackage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(root, dir)
	rel = filepath.ToSlash(rel)
	importPath := modPath
	if rel != "." {
		importPath = path.Join(modPath, rel)
	}
	var out []*parsedPackage
	byName := map[string]*parsedPackage{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err // the first syntax error, with its file and position
		}
		pp := byName[f.Name.Name]
		if pp == nil {
			pp = &parsedPackage{dir: rel, importPath: importPath, name: f.Name.Name}
			byName[pp.name] = pp
			out = append(out, pp)
		}
		pp.files = append(pp.files, f)
	}
	for _, pp := range out {
		pp.types, pp.funcs = declaredNames(pp.files)
	}
	return out, nil
}

// interfaceMethods adds the method names of every interface type in f.
func interfaceMethods(f *ast.File, into map[string]bool) {
	ast.Inspect(f, func(n ast.Node) bool {
		it, ok := n.(*ast.InterfaceType)
		if !ok || it.Methods == nil {
			return true
		}
		for _, m := range it.Methods.List {
			for _, name := range m.Names {
				into[name.Name] = true
			}
		}
		return true
	})
}

// PathToPrefix escapes an import path as the linker does in symbol names
// (cmd/internal/objabi.PathToPrefix): control characters, space, '%', '"',
// bytes from 0x7f, and '.' after the last '/' become %xx.
func PathToPrefix(s string) string {
	slash := strings.LastIndex(s, "/")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || (c == '.' && i > slash) || c == '%' || c == '"' || c >= 0x7F {
			fmt.Fprintf(&b, "%%%02x", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
