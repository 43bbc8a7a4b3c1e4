package pgocheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

var builtins = setOf("append", "cap", "clear", "close", "complex", "copy", "delete", "imag",
	"len", "make", "max", "min", "new", "panic", "print", "println", "real", "recover")

var predeclaredTypes = setOf("bool", "byte", "complex64", "complex128", "error", "float32",
	"float64", "int", "int8", "int16", "int32", "int64", "rune", "string", "uint", "uint8",
	"uint16", "uint32", "uint64", "uintptr", "any", "comparable")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// parsedPackage is one package's files before indexing.
type parsedPackage struct {
	dir        string // relative, slash-separated
	importPath string
	name       string
	files      []*ast.File
	types      map[string]bool // package-level type names
	funcs      map[string]bool // package-level function names
}

// pkgIndexer turns one package's files into Funcs.
type pkgIndexer struct {
	idx     *Index
	fset    *token.FileSet
	root    string
	prefix  string
	types   map[string]bool // package-level type names
	funcs   map[string]bool // package-level function names
	modPkgs map[string]*parsedPackage
	lits    map[*ast.FuncLit]string
	imports map[string]string // this file's import name -> import path
	file    string
}

// declaredNames lists a package's package-level type and function names.
func declaredNames(files []*ast.File) (types, funcs map[string]bool) {
	types, funcs = map[string]bool{}, map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						types[ts.Name.Name] = true
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil {
					funcs[d.Name.Name] = true
				}
			}
		}
	}
	return types, funcs
}

// files indexes the package's files in order (init functions and
// package-level literals are numbered across them).
func (p *pkgIndexer) files(files []*ast.File) {
	inits, globals := 0, &counter{base: p.prefix + ".init", decl: true}
	p.lits = map[*ast.FuncLit]string{}
	for _, f := range files {
		p.file = p.relFile(f)
		p.imports = p.fileImports(f)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := p.funcName(d)
				if d.Recv == nil && d.Name.Name == "init" {
					name = fmt.Sprintf("%s.init.%d", p.prefix, inits)
					inits++
				}
				p.addDecl(d, name)
			case *ast.GenDecl:
				if d.Tok == token.VAR {
					p.nameLits(d, globals)
					p.addLits(d)
				}
			}
		}
	}
}

func (p *pkgIndexer) relFile(f *ast.File) string {
	name := p.fset.File(f.Pos()).Name()
	rel, err := filepath.Rel(p.root, name)
	if err != nil {
		return filepath.ToSlash(name)
	}
	return filepath.ToSlash(rel)
}

// fileImports maps each import's name in this file to its path (the name is
// the explicit one, the module package's own name, or the path's last
// element without a major-version suffix).
func (p *pkgIndexer) fileImports(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, s := range f.Imports {
		ip, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			continue
		}
		var name string
		switch {
		case s.Name != nil:
			name = s.Name.Name
		case p.modPkgs[ip] != nil:
			name = p.modPkgs[ip].name
		default:
			name = guessPackageName(ip)
		}
		if name != "_" && name != "." {
			m[name] = ip
		}
	}
	return m
}

func guessPackageName(importPath string) string {
	parts := strings.Split(importPath, "/")
	last := parts[len(parts)-1]
	if len(parts) > 1 && len(last) > 1 && last[0] == 'v' && isDigits(last[1:]) {
		last = parts[len(parts)-2]
	}
	if i := strings.Index(last, ".v"); i > 0 && isDigits(last[i+2:]) {
		last = last[:i] // gopkg.in/yaml.v3
	}
	if i := strings.LastIndex(last, "-"); i >= 0 {
		last = last[i+1:] // go-cmp
	}
	return last
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// funcName is a declaration's linker name (see the package rules).
func (p *pkgIndexer) funcName(d *ast.FuncDecl) string {
	tparams := ""
	if d.Type.TypeParams != nil && len(d.Type.TypeParams.List) > 0 {
		tparams = "[...]"
	}
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return p.prefix + "." + d.Name.Name + tparams
	}
	return p.prefix + "." + recvName(d.Recv.List[0].Type) + "." + d.Name.Name
}

func recvName(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.ParenExpr:
		return recvName(t.X)
	case *ast.StarExpr:
		return "(*" + recvName(t.X) + ")"
	case *ast.IndexExpr:
		return recvName(t.X) + "[...]"
	case *ast.IndexListExpr:
		return recvName(t.X) + "[...]"
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// counter numbers the function literals under one owner.
type counter struct {
	base string
	decl bool // the owner is a declaration: children are base.funcN, else base.N
	n    int
}

func (c *counter) next() string {
	c.n++
	if c.decl {
		return fmt.Sprintf("%s.func%d", c.base, c.n)
	}
	return fmt.Sprintf("%s.%d", c.base, c.n)
}

// nameLits names the literals under node, in source order, recursively.
func (p *pkgIndexer) nameLits(node ast.Node, c *counter) {
	ast.Inspect(node, func(n ast.Node) bool {
		lit, ok := n.(*ast.FuncLit)
		if !ok {
			return true
		}
		name := c.next()
		p.lits[lit] = name
		p.nameLits(lit.Body, &counter{base: name})
		return false
	})
}

func (p *pkgIndexer) addDecl(d *ast.FuncDecl, name string) {
	fn := Func{
		Name:    name,
		Package: p.prefix,
		File:    p.file,
		Start:   p.line(d.Type.Func),
		Generic: strings.Contains(name, "[...]"),
	}
	fn.End = fn.Start
	if d.Body != nil {
		fn.End = p.line(d.Body.Rbrace)
		p.nameLits(d.Body, &counter{base: name, decl: true})
		fn.Calls = p.calls(d.Body)
	}
	p.idx.Functions = append(p.idx.Functions, fn)
	if d.Body != nil {
		p.addLits(d.Body)
	}
}

// addLits adds every literal under node (named by nameLits) as a Func.
func (p *pkgIndexer) addLits(node ast.Node) {
	ast.Inspect(node, func(n ast.Node) bool {
		lit, ok := n.(*ast.FuncLit)
		if !ok {
			return true
		}
		name := p.lits[lit]
		p.idx.Functions = append(p.idx.Functions, Func{
			Name:    name,
			Package: p.prefix,
			File:    p.file,
			Start:   p.line(lit.Type.Func),
			End:     p.line(lit.Body.Rbrace),
			Generic: strings.Contains(name, "[...]"),
			Calls:   p.calls(lit.Body),
		})
		return true // nested literals are added too
	})
}

func (p *pkgIndexer) line(pos token.Pos) int {
	return p.fset.Position(pos).Line
}

// calls lists the calls in body, leaving out those inside literals.
func (p *pkgIndexer) calls(body ast.Node) []Call {
	out := []Call{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // its calls are its own
		case *ast.CallExpr:
			if kind, name := p.classify(n.Fun); kind != "" {
				out = append(out, Call{p.line(n.Lparen), kind, name})
			}
		}
		return true
	})
	return out
}

// classify says what a call's function expression calls ("" when the
// expression is a builtin or a conversion, not a call).
func (p *pkgIndexer) classify(fun ast.Expr) (kind, name string) {
	switch f := fun.(type) {
	case *ast.ParenExpr:
		return p.classify(f.X)
	case *ast.IndexExpr: // an instantiation: F[int](x)
		return p.classify(f.X)
	case *ast.IndexListExpr:
		return p.classify(f.X)
	case *ast.FuncLit:
		return "closure", p.lits[f]
	case *ast.Ident:
		switch {
		case p.types[f.Name] || (predeclaredTypes[f.Name] && !p.funcs[f.Name]):
			return "", ""
		case builtins[f.Name] && !p.funcs[f.Name]:
			return "", ""
		case p.funcs[f.Name]:
			return "func", p.prefix + "." + f.Name
		}
		return "indirect", f.Name // a variable or parameter of function type
	case *ast.SelectorExpr:
		return p.classifySelector(f)
	case *ast.ArrayType, *ast.MapType, *ast.ChanType, *ast.FuncType,
		*ast.InterfaceType, *ast.StructType, *ast.StarExpr:
		return "", "" // a conversion to a type literal
	}
	return "indirect", ""
}

func (p *pkgIndexer) classifySelector(f *ast.SelectorExpr) (kind, name string) {
	x := f.X
	for {
		paren, ok := x.(*ast.ParenExpr)
		if !ok {
			break
		}
		x = paren.X
	}
	if id, ok := x.(*ast.Ident); ok {
		if ip, ok := p.imports[id.Name]; ok {
			if mp := p.modPkgs[ip]; mp != nil && mp.types[f.Sel.Name] {
				return "", "" // a conversion to the package's type
			}
			return "func", PathToPrefix(ip) + "." + f.Sel.Name
		}
		if p.types[id.Name] { // a method expression: T.M(x)
			return "func", p.prefix + "." + id.Name + "." + f.Sel.Name
		}
	}
	if star, ok := x.(*ast.StarExpr); ok { // (*T).M(x)
		if id, ok := star.X.(*ast.Ident); ok && p.types[id.Name] {
			return "func", p.prefix + ".(*" + id.Name + ")." + f.Sel.Name
		}
	}
	return "method", f.Sel.Name
}
