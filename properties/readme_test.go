package properties

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's store-author snippets are the example module's test file
// (examples/boltstore/store_test.go), which make test compiles and runs:
// every Go block of the section must appear in it verbatim, so the README
// and the API cannot drift apart.
func TestReadmeSnippetsAreTheExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "examples", "boltstore", "store_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "## Certifying your own store from `go test`")
	if start < 0 {
		t.Fatal("README.md has no section \"Certifying your own store from `go test`\"")
	}
	// The section's opening part (up to its first subsection) is the
	// example's test file; the subsections that follow are about store
	// windows and random kills.
	section := text[start:]
	for _, next := range []string{"\n## ", "\n### "} {
		if end := strings.Index(section[3:], next); end >= 0 {
			section = section[:end+3]
		}
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatalf("the store-author section has %d Go blocks; want the conformance and the crash test", len(blocks))
	}
	for i, b := range blocks {
		if !strings.Contains(string(example), b[1]) {
			t.Errorf("README Go block %d of the store-author section is not in examples/boltstore/store_test.go verbatim:\n%s", i+1, b[1])
		}
	}
	for _, name := range []string{"properties.Stores(", "properties.CertifyCrashSafety("} {
		if !strings.Contains(section, name) {
			t.Errorf("the store-author section does not show %s", name)
		}
	}
}

// go doc ./properties fits one screen: a handful of exported names, each
// with a doc comment.
func TestExportedSurfaceIsSmall(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
					if d.Doc == nil {
						t.Errorf("exported %s has no doc comment", d.Name.Name)
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if len(names) > 8 {
		t.Errorf("properties exports %d names %v; a store author should need about 7", len(names), names)
	}
}
