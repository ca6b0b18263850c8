package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxCommandLines is how long a function of cmd/crashmatrix may be: a
// command parses its flags into one options value and calls one function
// of a lower package (internal/certifyrun, internal/scenariorun, …),
// where the run itself is.
const maxCommandLines = 60

// longCommands are the functions of cmd/crashmatrix allowed to be longer
// than maxCommandLines: none. A function may join it only with a reason
// written beside it.
var longCommands = []string{}

// TestCommandFunctionsAreThin fails when a function of cmd/crashmatrix
// (its non-test files) is longer than maxCommandLines and not in
// longCommands, or when one in longCommands is no longer (take it out).
func TestCommandFunctionsAreThin(t *testing.T) {
	long := commandLengths(t, filepath.Join(repoRoot, "cmd", "crashmatrix"))
	for name, n := range long {
		if !slices.Contains(longCommands, name) {
			t.Errorf("cmd/crashmatrix: %s is %d lines, over %d: parse the flags into options and move the run into a lower package", name, n, maxCommandLines)
		}
	}
	for _, name := range longCommands {
		if _, ok := long[name]; !ok {
			t.Errorf("cmd/crashmatrix: %s is no longer over %d lines (or is gone): take it out of longCommands", name, maxCommandLines)
		}
	}
}

// commandLengths are the functions (and methods, as Type.Method) of the
// package in dir, test files left out, that are longer than
// maxCommandLines, with their lengths in lines.
func commandLengths(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	long := map[string]int{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				name = receiverName(fd.Recv.List[0].Type) + "." + name
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxCommandLines {
				long[name] = n
			}
		}
	}
	return long
}

// receiverName is the type a method is declared on.
func receiverName(recv ast.Expr) string {
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
