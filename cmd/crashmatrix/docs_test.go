package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/internal/docstest"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// docFiles are the docs whose blocks TestDocs runs: the README and the
// guides.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(rootDir(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(rootDir(), "README.md")}, guides...)
}

// TestDocs runs the docs as a reader would: every ```sh run block of the
// README and the guides, command by command, with a freshly built
// crashmatrix on PATH, in a folder of its own; each command must exit as
// its remark says and print every line quoted under it. Every block
// marked <!-- output: COMMAND --> must hold what COMMAND prints now (up
// to durations and temporary folder names), and every section
// docstest.Generated writes from the code must be what it writes now:
// `make docs` rewrites both. A
// changed flag, message or matrix fails here until the docs follow.
func TestDocs(t *testing.T) {
	root := rootDir()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "crashmatrix"), "./cmd/crashmatrix")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/crashmatrix: %v\n%s", err, out)
	}
	r := docstest.Runner{Root: root, BinDir: bin}
	runnable, outputs := 0, 0
	for _, path := range docFiles(t) {
		rel, _ := filepath.Rel(root, path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := docstest.Blocks(string(data))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for name, gen := range docstest.Generated {
			if s, ok := docstest.Section(string(data), name); ok {
				outputs++
				if want := gen(); s != want {
					t.Errorf("%s: section %q is not what the code gives now (make docs rewrites it):\n%s", rel, name, docstest.FirstDifference(s, want))
				}
			}
		}
		for _, b := range blocks {
			where := fmt.Sprintf("%s:%d", rel, b.Line)
			if cmd, ok := b.OutputCommand(); ok {
				outputs++
				t.Run(where, func(t *testing.T) {
					out, code, err := r.Run(t.TempDir(), cmd)
					if err != nil {
						t.Fatal(err)
					}
					if code > 2 {
						t.Fatalf("%s exited %d:\n%s", cmd, code, out)
					}
					if d := docstest.FirstDifference(b.Body, out); d != "" {
						t.Errorf("the output of %q the doc shows is not what it prints now (make docs rewrites it); first difference at %s", cmd, d)
					}
				})
			}
			if !b.Runnable() {
				continue
			}
			runnable++
			t.Run(where, func(t *testing.T) {
				dir := t.TempDir() // one folder per block: a command may use an earlier one's files
				cmds := docstest.Commands(b.Body)
				if len(cmds) == 0 {
					t.Fatal("a runnable block with no command")
				}
				for _, c := range cmds {
					out, code, err := r.RunIn(dir, c.Line)
					if err != nil {
						t.Fatal(err)
					}
					if code != c.Exit {
						t.Errorf("%s\nexited %d, the doc says %d; output:\n%s", c.Line, code, c.Exit, out)
						continue
					}
					for _, q := range c.Quoted {
						if !docstest.QuoteRE(q).MatchString(out) {
							t.Errorf("%s\nprinted no line the doc quotes as\n  %s\noutput:\n%s", c.Line, q, out)
						}
					}
				}
			})
		}
	}
	// The docs are the test's input: losing the markers must not make it
	// pass by running nothing.
	if runnable < 5 || outputs < 3 {
		t.Errorf("the docs have %d runnable blocks and %d output blocks; want at least 5 and 3", runnable, outputs)
	}
}

// figureRE is a measured figure in prose: a duration, a rate, a
// multiple of another figure.
var figureRE = regexp.MustCompile(`\b\d+(\.\d+)? ?(ms|s|min|schedules/s|cycles/s|cycles/s)\b|\b\d+\.\d+×`)

// TestPerformanceIsGenerated: docs/performance.md holds figures only in
// the sections `make bench` writes (crashmatrix bench --doc, docsgen
// -section), each with its date, commit or machine and load; prose
// outside them quotes none, so no hand-typed figure can go stale there.
func TestPerformanceIsGenerated(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(rootDir(), "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	depth := 0
	for i, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "<!-- begin "):
			depth++
		case strings.HasPrefix(l, "<!-- end "):
			depth--
		case depth == 0 && figureRE.MatchString(l):
			t.Errorf("docs/performance.md:%d quotes a figure outside a generated section: %q", i+1, l)
		}
	}
	for _, name := range []string{"bench sqlite", "bench containers", "bench store python", "bench store java", "bench-load"} {
		s, ok := docstest.Section(text, name)
		if !ok {
			t.Errorf("docs/performance.md has no section %q (make bench writes it)", name)
			continue
		}
		if !strings.HasPrefix(s, "Written by `") && !strings.HasPrefix(s, "Not measured yet") {
			t.Errorf("section %q does not start by saying how and when it was measured:\n%s", name, s)
		}
	}
}

// TestMutantTableIsCrashrun: the mutants table of docs/invariants.md is
// crashrun.Mutants(), row for row: each mutant's name, the invariant that
// catches it and where (`point x kind`, class `name`, or the exploration's
// seed and schedule budget).
func TestMutantTableIsCrashrun(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(rootDir(), "docs", "invariants.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]string{} // name -> invariant, where
	for _, l := range strings.Split(docstest.Between(string(data), "## Mutants", "\n## "), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 6 || strings.TrimSpace(f[1]) == "mutant" || strings.HasPrefix(strings.TrimSpace(f[1]), "---") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(f[1]), " ")
		rows[name] = [2]string{strings.TrimSpace(f[3]), strings.TrimSpace(f[4])}
	}
	mutants := crashrun.Mutants()
	if len(rows) != len(mutants) {
		t.Errorf("docs/invariants.md lists %d mutants, crashrun.Mutants() %d", len(rows), len(mutants))
	}
	for _, m := range mutants {
		row, ok := rows[m.Name]
		if !ok {
			t.Errorf("mutant %s has no row in docs/invariants.md", m.Name)
			continue
		}
		var where string
		o := m.Options
		switch {
		case m.Explore != nil:
			where = fmt.Sprintf("explore, seed %d, within %s schedules", m.Explore.Seed, thousands(m.Explore.MaxSchedules))
		case len(o.Classes) == 1 && len(o.Points) == 0:
			where = "class `" + o.Classes[0] + "`"
		case len(o.Points) == 1 && len(o.Kinds) == 1 && len(o.Classes) == 0:
			where = fmt.Sprintf("`%s x %s`", o.Points[0], o.Kinds[0])
		default:
			t.Errorf("mutant %s: options %+v have no wording here; add one", m.Name, o)
			continue
		}
		if row != [2]string{m.Invariant, where} {
			t.Errorf("docs/invariants.md says mutant %s is caught by %s at %s; crashrun says %s at %s", m.Name, row[0], row[1], m.Invariant, where)
		}
	}
}

// thousands writes n with a comma every three digits, as the docs do.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestFaultKindsTableIsComplete: docs/fault-kinds.md has a row for every
// fault kind the program knows (faults.AllKinds), and none for a kind it
// does not.
func TestFaultKindsTableIsComplete(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(rootDir(), "docs", "fault-kinds.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(docstest.Between(string(data), "## What happens at the window", "\n## "), "\n") {
		if m := regexp.MustCompile("^\\| `([a-z-]+)` \\|").FindStringSubmatch(l); m != nil {
			rows[m[1]] = true
		}
	}
	for _, k := range faults.AllKinds() {
		if !rows[string(k)] {
			t.Errorf("docs/fault-kinds.md has no row for fault kind %s", k)
		}
		delete(rows, string(k))
	}
	for k := range rows {
		t.Errorf("docs/fault-kinds.md has a row for %s, which is no fault kind", k)
	}
}

// TestCIGuideNamesEveryCause: docs/ci.md names every cause of a case not
// exercised that a report can give (sim.Causes).
func TestCIGuideNamesEveryCause(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(rootDir(), "docs", "ci.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range verdict.Causes {
		if !strings.Contains(string(data), "`"+string(c)+"`") {
			t.Errorf("docs/ci.md does not name the cause %s", c)
		}
	}
}

// pendingDocs are guides other branches are writing while this one links
// them: a link to one is let through while the file is missing, and
// checked like any other once it exists.
var pendingDocs = map[string]bool{
	"docs/store-protocol.md": true, // the any-language store protocol
}

// TestDocLinks: every relative link of the README and the guides names a
// file of the repository, and every #anchor a heading of its target.
func TestDocLinks(t *testing.T) {
	n := 0
	for _, path := range docFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(rootDir(), path)
		for _, link := range docstest.Links(string(data)) {
			n++
			file, anchor, _ := strings.Cut(link, "#")
			target := path
			if file != "" {
				target = filepath.Join(filepath.Dir(path), file)
			}
			tdata, err := os.ReadFile(target)
			if err != nil {
				if st, serr := os.Stat(target); serr == nil && st.IsDir() && anchor == "" {
					continue
				}
				if trel, _ := filepath.Rel(rootDir(), target); pendingDocs[trel] && os.IsNotExist(err) {
					continue
				}
				t.Errorf("%s: link %s: %v", rel, link, err)
				continue
			}
			if anchor != "" && !docstest.Anchors(string(tdata))[anchor] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", rel, link, file)
			}
		}
	}
	if n < 20 {
		t.Errorf("found %d relative links in the docs; the README's map alone has more", n)
	}
}
