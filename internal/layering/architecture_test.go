package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module's root, two folders up from this package.
const repoRoot = "../.."

// declared collects every top-level name of the module's Go files, and
// every method and struct or interface field as Type.Member: by package
// name ("catalogue" -> "Case", "Case.Label", ...) and all together ("").
func declared(t *testing.T) map[string]map[string]bool {
	t.Helper()
	names := map[string]map[string]bool{"": {}}
	add := func(pkg, name string) {
		if names[pkg] == nil {
			names[pkg] = map[string]bool{}
		}
		names[pkg][name] = true
		names[""][name] = true
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					add(pkg, decl.Name.Name)
					continue
				}
				recv := decl.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if ix, ok := recv.(*ast.IndexExpr); ok {
					recv = ix.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					add(pkg, id.Name+"."+decl.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						add(pkg, spec.Name.Name)
						var fields *ast.FieldList
						switch ty := spec.Type.(type) {
						case *ast.StructType:
							fields = ty.Fields
						case *ast.InterfaceType:
							fields = ty.Methods
						}
						if fields == nil {
							continue
						}
						for _, field := range fields.List {
							for _, n := range field.Names {
								add(pkg, spec.Name.Name+"."+n.Name)
							}
							if len(field.Names) == 0 { // embedded: its name is its type's
								ty := field.Type
								if star, ok := ty.(*ast.StarExpr); ok {
									ty = star.X
								}
								switch ty := ty.(type) {
								case *ast.Ident:
									add(pkg, spec.Name.Name+"."+ty.Name)
								case *ast.SelectorExpr:
									add(pkg, spec.Name.Name+"."+ty.Sel.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							add(pkg, n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var (
	quoted    = regexp.MustCompile("`([^`\n]+)`")
	pathLike  = regexp.MustCompile(`^[\w.-]+(/[\w.…-]+)+/?$|^[\w-]+/$`)
	identLike = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$`)
)

// exists says whether a quoted path names a file or folder of the
// repository ("adapters/...": the folder; a "..." inside a path stands for
// any folders between).
func exists(p string) bool {
	p = strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/")
	if before, after, ok := strings.Cut(p, "/.../"); ok {
		found := false
		_ = filepath.WalkDir(filepath.Join(repoRoot, before), func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(filepath.ToSlash(path), "/"+after) {
				found = true
				return filepath.SkipAll
			}
			return nil
		})
		return found
	}
	_, err := os.Stat(filepath.Join(repoRoot, p))
	return err == nil
}

// TestArchitectureQuotesWhatExists fails when ARCHITECTURE.md quotes a
// file or folder that is not in the repository, or a Go name that no
// package declares: `pkg.Name`, `pkg.Type.Member`, `Type.Member` and
// plain identifiers with a capital letter or a lower-case word with one
// inside (`armRandomKill`). A call's arguments are left out
// (`Runtime.At(ctx, point, step)` checks `Runtime.At`); quotes with spaces
// (commands, flags, YAML) are not names and are left alone.
func TestArchitectureQuotesWhatExists(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := declared(t)
	checked := 0
	for _, m := range quoted.FindAllStringSubmatch(string(doc), -1) {
		q := m[1]
		if call, _, ok := strings.Cut(q, "("); ok && !strings.Contains(call, " ") {
			q = call
		}
		switch {
		case pathLike.MatchString(q):
			checked++
			if !exists(q) {
				t.Errorf("ARCHITECTURE.md quotes %s: no such file or folder", m[0])
			}
		case identLike.MatchString(q):
			parts := strings.Split(q, ".")
			if len(parts) == 1 && strings.ToLower(q) == q {
				continue // a word: a package, a command, a kind's name
			}
			pkg, rest := "", q
			if _, ok := names[parts[0]]; ok && len(parts) > 1 && strings.ToLower(parts[0][:1]) == parts[0][:1] {
				pkg, rest = parts[0], strings.Join(parts[1:], ".")
			} else if strings.ToLower(parts[0][:1]) == parts[0][:1] && len(parts) > 1 {
				continue // a method on a variable (s.at): nothing to look up
			}
			checked++
			if !names[pkg][rest] {
				t.Errorf("ARCHITECTURE.md quotes %s: no package declares %s", m[0], q)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d quoted names and paths; ARCHITECTURE.md quotes far more: the patterns above no longer find them", checked)
	}
}
