package apicheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is sluice's own import path prefix: its packages may of course
// appear in its API.
const module = "github.com/sluice-cdc/"

// allowed lists the third-party packages whose types may appear in the
// public API, each with the reason. It is empty: every exposure so far
// could be wrapped in a type of sluice's own. A package belongs here only
// if its type IS the contract a user must hold (as io.Writer is, but that
// one is standard library and always allowed).
var allowed = map[string]string{}

// TestNoThirdPartyTypesInPublicAPI keeps third-party types out of
// sluice's public API: no exported function, method, struct field,
// interface method, type or variable of a public package (not internal/,
// cmd/ or examples/) may name a type of a package outside the standard
// library and sluice itself, unless that package is in allowed. It parses
// the module's source; the types themselves are not needed, since a
// package's type can only be named through its import. The name each
// import binds is resolved with go list, as it need not be the path's
// last element (go.yaml.in/yaml/v3 binds yaml, nats.go binds nats).
func TestNoThirdPartyTypesInPublicAPI(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	paths := map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == "../..":
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
		files = append(files, f)
		for _, im := range f.Imports {
			if path, _ := strconv.Unquote(im.Path.Value); thirdParty(path) {
				paths[path] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("read %d files of public packages: the walk missed the module", len(files))
	}
	names := packageNames(t, paths)
	for _, f := range files {
		for _, at := range exposed(f, names) {
			t.Errorf("%s: %s names a third-party type (%s) in the public API", fset.Position(at.pos), at.what, at.path)
		}
	}
}

// packageNames asks go list for the package name of each import path.
func packageNames(t *testing.T, paths map[string]bool) map[string]string {
	t.Helper()
	args := []string{"list", "-e", "-f", "{{.ImportPath}} {{.Name}}"}
	for p := range paths {
		args = append(args, p)
	}
	sort.Strings(args[4:])
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list of the public packages' imports: %v\n%s", err, stderr.Bytes())
	}
	names := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, name, ok := strings.Cut(line, " "); ok && name != "" {
			names[path] = name
		}
	}
	for p := range paths {
		if names[p] == "" {
			t.Fatalf("go list gave no package name for %s", p)
		}
	}
	return names
}

// TestExposedFindsThirdPartyTypes shows the check catching each kind of
// exported identifier, for imports renamed or not, whose name is or is
// not the path's last element, and passing unexported identifiers,
// standard-library and sluice types.
func TestExposedFindsThirdPartyTypes(t *testing.T) {
	src := `package p

import (
	"context"
	"io"
	gm "github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/nats-io/nats.go"
	"github.com/sluice-cdc/sluice/position"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"
	"gopkg.in/natefinch/lumberjack.v2"
	"github.com/redis/go-redis/v9"
)

func Dial(ctx context.Context) (*gm.Conn, error) { return nil, nil }
func dial() *gm.Conn                             { return nil }
func Std(w io.Writer) error                      { return nil }
func Own() position.Position                     { return position.Position{} }
type T struct {
	Set  mysql.GTIDSet
	Node yaml.Node
	conn *gm.Conn
	node yaml.Node
	W    io.Writer
}
func (T) Result() *mysql.Result { return nil }
func (T) result() *mysql.Result { return nil }
func (*T) Client() *clientv3.Client { return nil }
type hidden struct{ Node yaml.Node }
func (hidden) Exported() *mysql.Result { return nil }
type Executer interface{ Execute(string) (*mysql.Result, error) }
type Alias = mysql.Position
type Embeds struct{ *gm.Conn }
var Default *gm.Conn
var Log = &lumberjack.Logger{}
const Code = mysql.ER_UNKNOWN_ERROR
func Uses() { _ = mysql.Position{}; _ = yaml.Node{} }
func IsFence(m *nats.Msg) bool { return false }
func Redis[C redis.Cmdable](c C) {}
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, at := range exposed(f, nil) {
		got = append(got, at.what+" ("+at.path+")")
	}
	want := []string{
		"func Dial (github.com/go-mysql-org/go-mysql/client)",
		"field Set of T (github.com/go-mysql-org/go-mysql/mysql)",
		"field Node of T (go.yaml.in/yaml/v3)",
		"method T.Result (github.com/go-mysql-org/go-mysql/mysql)",
		"method T.Client (go.etcd.io/etcd/client/v3)",
		"method Execute of Executer (github.com/go-mysql-org/go-mysql/mysql)",
		"type Alias (github.com/go-mysql-org/go-mysql/mysql)",
		"field *gm.Conn of Embeds (github.com/go-mysql-org/go-mysql/client)",
		"var Default (github.com/go-mysql-org/go-mysql/client)",
		"var Log (gopkg.in/natefinch/lumberjack.v2)",
		"func IsFence (github.com/nats-io/nats.go)",
		"func Redis (github.com/redis/go-redis/v9)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("exposed:\n got %q\nwant %q", got, want)
	}
}

// TestGuessName checks the fallback for an import go list did not name.
func TestGuessName(t *testing.T) {
	for path, want := range map[string]string{
		"go.yaml.in/yaml/v3":               "yaml",
		"go.etcd.io/etcd/client/v3":        "client",
		"github.com/nats-io/nats.go":       "nats",
		"gopkg.in/natefinch/lumberjack.v2": "lumberjack",
		"github.com/redis/go-redis/v9":     "redis",
		"github.com/twmb/franz-go/pkg/kgo": "kgo",
		"github.com/google/uuid":           "uuid",
	} {
		if got := guessName(path); got != want {
			t.Errorf("guessName(%q) = %q, want %q", path, got, want)
		}
	}
}

// thirdParty tells whether an import path is neither the standard
// library's (whose first element has no dot) nor sluice's, nor allowed.
func thirdParty(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	if !strings.Contains(first, ".") || strings.HasPrefix(path, module) {
		return false
	}
	_, ok := allowed[path]
	return !ok
}

var versionSuffix = regexp.MustCompile(`^v[0-9]+$`)

// guessName is the name an import of path most likely binds when go list
// did not say: its last element that is not a major version suffix (v3),
// without a gopkg.in version (.v2), a .go suffix or a go- prefix.
func guessName(path string) string {
	elems := strings.Split(path, "/")
	name := elems[len(elems)-1]
	if versionSuffix.MatchString(name) && len(elems) > 1 {
		name = elems[len(elems)-2]
	}
	if i := strings.Index(name, ".v"); i > 0 && versionSuffix.MatchString(name[i+1:]) {
		name = name[:i]
	}
	name = strings.TrimSuffix(name, ".go")
	name = strings.TrimPrefix(name, "go-")
	return name
}

type exposure struct {
	pos  token.Pos
	what string
	path string // the third-party package named
}

// exposed lists the exported declarations of f whose types name a
// third-party package (see thirdParty). names gives the package name of an
// import path; guessName stands in for a path it lacks. (A constant such as
// a go-mysql error code has an untyped or basic type and exposes nothing.)
// A dot import of a third-party package is listed too: its types would be
// named without a qualifier, which this check cannot see.
func exposed(f *ast.File, names map[string]string) []exposure {
	var out []exposure
	bad := map[string]string{} // name bound in f → import path
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if !thirdParty(path) {
			continue
		}
		name := names[path]
		if name == "" {
			name = guessName(path)
		}
		if im.Name != nil {
			name = im.Name.Name
		}
		switch name {
		case "_":
			continue
		case ".":
			out = append(out, exposure{im.Pos(), "dot import", path})
			continue
		}
		bad[name] = path
	}
	if len(bad) == 0 {
		return out
	}
	// named reports the import path of the first third-party package n
	// names, or "".
	named := func(n ast.Node) string {
		found := ""
		ast.Inspect(n, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := se.X.(*ast.Ident); ok && bad[id.Name] != "" {
					found = bad[id.Name]
				}
			}
			return found == ""
		})
		return found
	}
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
			if path := named(d.Type); path != "" {
				out = append(out, exposure{d.Pos(), what, path})
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, exposedType(s, named)...)
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if !n.IsExported() || d.Tok == token.CONST {
							continue
						}
						var path string
						if s.Type != nil {
							path = named(s.Type)
						} else if i < len(s.Values) {
							path = named(s.Values[i])
						}
						if path != "" {
							out = append(out, exposure{n.Pos(), "var " + n.Name, path})
						}
					}
				}
			}
		}
	}
	return out
}

func exposedType(s *ast.TypeSpec, named func(ast.Node) string) []exposure {
	var out []exposure
	if s.TypeParams != nil {
		if path := named(s.TypeParams); path != "" {
			out = append(out, exposure{s.Pos(), "type parameters of " + s.Name.Name, path})
		}
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 { // embedded: its exported fields and methods are promoted
				if path := named(fl.Type); path != "" {
					out = append(out, exposure{fl.Pos(), "field " + types(fl.Type) + " of " + s.Name.Name, path})
				}
				continue
			}
			path := named(fl.Type)
			for _, n := range fl.Names {
				if n.IsExported() && path != "" {
					out = append(out, exposure{n.Pos(), "field " + n.Name + " of " + s.Name.Name, path})
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			if path := named(m.Type); path != "" {
				what := "embedded " + types(m.Type)
				if len(m.Names) > 0 {
					what = "method " + m.Names[0].Name
				}
				out = append(out, exposure{m.Pos(), what + " of " + s.Name.Name, path})
			}
		}
	default:
		if path := named(s.Type); path != "" {
			out = append(out, exposure{s.Pos(), "type " + s.Name.Name, path})
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
