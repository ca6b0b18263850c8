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

// The store-author guide's snippets are the example module's test file
// (examples/boltstore/store_test.go), which make test compiles and runs:
// every Go block of its section "The two tests" must appear in it
// verbatim, so the guide and the API cannot drift apart.
func TestGuideSnippetsAreTheExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "certify-go-store.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "examples", "boltstore", "store_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "## The two tests")
	if start < 0 {
		t.Fatal("docs/certify-go-store.md has no section \"The two tests\"")
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatalf("the store-author section has %d Go blocks; want the conformance and the crash test", len(blocks))
	}
	for i, b := range blocks {
		if !strings.Contains(string(example), b[1]) {
			t.Errorf("Go block %d of the guide's section \"The two tests\" is not in examples/boltstore/store_test.go verbatim:\n%s", i+1, b[1])
		}
	}
	for _, name := range []string{"properties.Stores(", "properties.CertifyCrashSafety("} {
		if !strings.Contains(section, name) {
			t.Errorf("the guide's section \"The two tests\" does not show %s", name)
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
	// Each system's suite and its negative control (Stores and
	// StoresFailures, PlanSave and PlanSaveFailures), the certification,
	// its options and the three types a backend is made of, and the seed
	// variable: ten.
	if len(names) > 10 {
		t.Errorf("properties exports %d names %v; a store author should need about 10", len(names), names)
	}
}
