package faults_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// pointConstants parses the faults package and returns every constant of
// type Point with its value.
func pointConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "catalogue.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Point" {
				continue
			}
			for i, n := range vs.Names {
				out[n.Name] = strings.Trim(vs.Values[i].(*ast.BasicLit).Value, `"`)
			}
		}
	}
	return out
}

// usedPoints scans the protocol code for faults.X used as the point of a
// Runtime.At call (directly or through a wrapper taking the point second).
func usedPoints(t *testing.T, dirs ...string) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "faults" {
					used[sel.Sel.Name] = append(used[sel.Sel.Name], fset.Position(sel.Pos()).String())
				}
				return true
			})
		}
	}
	return used
}

func TestCatalogueMatchesCode(t *testing.T) {
	consts := pointConstants(t)
	if len(consts) == 0 {
		t.Fatal("found no Point constants in catalogue.go")
	}
	inCatalogue := map[faults.Point]bool{}
	for _, s := range faults.Catalogue {
		if inCatalogue[s.Point] {
			t.Errorf("point %s is listed twice in the catalogue", s.Point)
		}
		inCatalogue[s.Point] = true
		if s.Step == "" || s.Window == "" || s.Recovery == "" || len(s.Kinds) == 0 {
			t.Errorf("point %s: catalogue entry is incomplete: %+v", s.Point, s)
		}
	}
	values := map[string]bool{}
	for name, v := range consts {
		values[v] = true
		if !inCatalogue[faults.Point(v)] {
			t.Errorf("constant %s (%q) is declared but missing from the catalogue", name, v)
		}
	}
	for p := range inCatalogue {
		if !values[string(p)] {
			t.Errorf("catalogue lists %q, which no Point constant declares", p)
		}
	}
	used := usedPoints(t, filepath.Join("..", "reference"), filepath.Join("..", "reference", "plansave"))
	var unused []string
	for name := range consts {
		if len(used[name]) == 0 {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("catalogue points never placed in the protocol code: %v", unused)
	}
}

// Every At call in the protocol code names a catalogue constant, never a
// string literal or a computed point.
func TestNoAdHocFailpoints(t *testing.T) {
	for _, dir := range []string{filepath.Join("..", "reference"), filepath.Join("..", "reference", "plansave")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "At" && sel.Sel.Name != "at") || len(call.Args) < 2 {
					return true
				}
				arg := call.Args[1]
				if s, ok := arg.(*ast.SelectorExpr); ok {
					if x, ok := s.X.(*ast.Ident); ok && x.Name == "faults" {
						return true
					}
				}
				if id, ok := arg.(*ast.Ident); ok && (id.Name == "p" || id.Name == "step") {
					return true // a helper forwarding its point parameter
				}
				t.Errorf("%s: failpoint %s is not a catalogue constant", fset.Position(arg.Pos()), src[fset.Position(arg.Pos()).Offset:fset.Position(arg.End()).Offset])
				return true
			})
		}
	}
}

func TestParseAction(t *testing.T) {
	for in, want := range map[string]faults.Action{
		"crash":            {Kind: faults.Crash},
		"crash@2":          {Kind: faults.Crash, Hit: 2},
		"pause:250@1":      {Kind: faults.Pause, Hit: 1, PauseFor: 250e6},
		"error":            {Kind: faults.Transient},
		"permanent@3":      {Kind: faults.Permanent, Hit: 3},
		"unknown":          {Kind: faults.Unknown},
		"recrash@1":        {Kind: faults.Recrash, Hit: 1},
		"torn-write@1":     {Kind: faults.TornWrite, Hit: 1},
		"torn-write:4096":  {Kind: faults.TornWrite},
		"torn-write:512@1": {Kind: faults.TornWrite, Hit: 1, Tear: faults.TearSector},
		"torn-write:1@2":   {Kind: faults.TornWrite, Hit: 2, Tear: faults.TearByte},
		"torn-write:64":    {Kind: faults.TornWrite, Tear: 64},
	} {
		got, err := faults.ParseAction(in)
		if err != nil || got != want {
			t.Errorf("ParseAction(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, _ := faults.ParseAction(got.String()); back != got {
			t.Errorf("round trip of %q: %q parses to %+v", in, got.String(), back)
		}
	}
	for _, bad := range []string{"", "crsh", "crash@0", "crash@x", "pause:-1", "error:5", "torn-write:0", "torn-write:3", "torn-write:8192", "torn-write:x", "power-loss:512"} {
		if _, err := faults.ParseAction(bad); err == nil {
			t.Errorf("ParseAction(%q) accepted", bad)
		}
	}
}

func TestServerFaultActionsRoundTrip(t *testing.T) {
	for _, s := range []string{"server-crash:postgres@1", "ack-lost:neo4j@1", "conn-reset:postgres"} {
		a, err := faults.ParseAction(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !a.Kind.IsServer() || a.String() != s {
			t.Fatalf("%s parsed to %+v, renders %q", s, a, a.String())
		}
	}
	if a, err := faults.ParseAction("ack-lost@2"); err != nil || a.Server != "postgres" || a.Hit != 2 {
		t.Fatalf("ack-lost@2: %+v %v; want server postgres by default", a, err)
	}
	if _, err := faults.ParseAction("server-crash:mysql@1"); err == nil || !strings.Contains(err.Error(), "targets a server") {
		t.Fatalf("an unknown server must be refused, got %v", err)
	}
	spec, _ := faults.Lookup(faults.PlanSaveBeforeBusiness)
	if spec.AppliesServer(faults.ServerCrash, "neo4j") || !spec.AppliesServer(faults.AckLost, "postgres") || spec.AppliesServer(faults.Crash, "postgres") {
		t.Fatal("server faults: Neo4j holds System A's graph only; worker kinds are not server faults")
	}
}

// Every kind parses by its name, a power loss (plain or torn) applies
// wherever a crash does and nowhere else, and an unknown name is refused
// with the list of names.
func TestKindsParseAndPowerLossesFollowCrash(t *testing.T) {
	for _, k := range faults.AllKinds() {
		if got, err := faults.ParseKind(string(k)); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	if _, err := faults.ParseKind("torn"); err == nil || !strings.Contains(err.Error(), "torn-write") {
		t.Errorf("ParseKind(torn): %v; want an error listing torn-write", err)
	}
	for _, s := range faults.Catalogue {
		for _, k := range []faults.Kind{faults.PowerLoss, faults.TornWrite} {
			if !k.IsPowerLoss() || s.Applies(k) != s.Applies(faults.Crash) {
				t.Errorf("%s at %s: applies %v, crash applies %v", k, s.Point, s.Applies(k), s.Applies(faults.Crash))
			}
		}
	}
	if faults.Crash.IsPowerLoss() {
		t.Error("a crash is no power loss")
	}
	// A disk error is armed at a window the worker would die before, and
	// is neither a power loss nor a server fault.
	for _, s := range faults.Catalogue {
		for _, k := range faults.DiskKinds {
			if !k.IsDisk() || k.IsPowerLoss() || k.IsServer() || s.Applies(k) != s.Applies(faults.Crash) {
				t.Errorf("%s at %s: applies %v, crash applies %v", k, s.Point, s.Applies(k), s.Applies(faults.Crash))
			}
		}
	}
	for _, k := range []faults.Kind{faults.FsyncError, faults.DiskFull, faults.SlowSync} {
		if a, err := faults.ParseAction(string(k) + "@1"); err != nil || a.Kind != k || a.String() != string(k)+"@1" {
			t.Errorf("ParseAction(%s@1) = %v, %v", k, a, err)
		}
	}
}
