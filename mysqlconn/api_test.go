package mysqlconn_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoGoMySQLInPublicAPI keeps go-mysql's types out of sluice's public
// API, the reason this package exists: no exported function, method,
// struct field, interface method, type or variable of a public package
// (not internal/, cmd/ or examples/) may name a type of a go-mysql
// package. It parses the module's source; the types themselves are not
// needed, since a go-mysql type can only be named through its import.
func TestNoGoMySQLInPublicAPI(t *testing.T) {
	fset := token.NewFileSet()
	var files int
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == "..":
			case name == "internal" || name == "cmd" || name == "examples" || name == "testdata" || strings.HasPrefix(name, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, at := range exposed(f) {
			t.Errorf("%s: %s names a go-mysql type in the public API", fset.Position(at.pos), at.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d files of public packages: the walk missed the module", files)
	}
}

// TestExposedFindsGoMySQL shows the check catching each kind of exported
// identifier, and passing unexported ones.
func TestExposedFindsGoMySQL(t *testing.T) {
	src := `package p

import (
	"context"
	gm "github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

func Dial(ctx context.Context) (*gm.Conn, error) { return nil, nil }
func dial() *gm.Conn                             { return nil }
type T struct {
	Set  mysql.GTIDSet
	conn *gm.Conn
}
func (T) Result() *mysql.Result { return nil }
func (T) result() *mysql.Result { return nil }
type hidden struct{}
func (hidden) Exported() *mysql.Result { return nil }
type Executer interface{ Execute(string) (*mysql.Result, error) }
type Alias = mysql.Position
type Embeds struct{ *gm.Conn }
var Default *gm.Conn
const Code = mysql.ER_UNKNOWN_ERROR
func Uses() { _ = mysql.Position{} }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, at := range exposed(f) {
		got = append(got, at.what)
	}
	want := []string{"func Dial", "field Set of T", "method T.Result", "method Execute of Executer", "type Alias", "field *gm.Conn of Embeds", "var Default"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("exposed:\n got %q\nwant %q", got, want)
	}
}

type exposure struct {
	pos  token.Pos
	what string
}

// exposed lists the exported declarations of f whose types name a package
// of github.com/go-mysql-org. (A constant such as a go-mysql error code has
// an untyped or basic type and exposes nothing.)
func exposed(f *ast.File) []exposure {
	bad := map[string]bool{}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if !strings.HasPrefix(path, "github.com/go-mysql-org/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		bad[name] = true
	}
	if len(bad) == 0 {
		return nil
	}
	names := func(n ast.Node) bool {
		found := false
		ast.Inspect(n, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := se.X.(*ast.Ident); ok && bad[id.Name] {
					found = true
				}
			}
			return !found
		})
		return found
	}
	var out []exposure
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			what := "func " + d.Name.Name
			if d.Recv != nil {
				recv := receiver(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				what = "method " + recv + "." + d.Name.Name
			}
			if names(d.Type) {
				out = append(out, exposure{d.Pos(), what})
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, exposedType(s, names)...)
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if !n.IsExported() || d.Tok == token.CONST {
							continue
						}
						if (s.Type != nil && names(s.Type)) || (s.Type == nil && i < len(s.Values) && names(s.Values[i])) {
							out = append(out, exposure{n.Pos(), "var " + n.Name})
						}
					}
				}
			}
		}
	}
	return out
}

func exposedType(s *ast.TypeSpec, names func(ast.Node) bool) []exposure {
	var out []exposure
	switch t := s.Type.(type) {
	case *ast.StructType:
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 { // embedded: its exported fields and methods are promoted
				if names(fl.Type) {
					out = append(out, exposure{fl.Pos(), "field " + types(fl.Type) + " of " + s.Name.Name})
				}
				continue
			}
			for _, n := range fl.Names {
				if n.IsExported() && names(fl.Type) {
					out = append(out, exposure{n.Pos(), "field " + n.Name + " of " + s.Name.Name})
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			if names(m.Type) {
				what := "embedded " + types(m.Type)
				if len(m.Names) > 0 {
					what = "method " + m.Names[0].Name
				}
				out = append(out, exposure{m.Pos(), what + " of " + s.Name.Name})
			}
		}
	default:
		if names(s.Type) {
			out = append(out, exposure{s.Pos(), "type " + s.Name.Name})
		}
	}
	return out
}

// receiver is the name of a method's receiver type: T of T, *T, T[K].
func receiver(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// types renders a type expression of the form pkg.T or *pkg.T.
func types(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + types(x.X)
	case *ast.SelectorExpr:
		return types(x.X) + "." + x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
