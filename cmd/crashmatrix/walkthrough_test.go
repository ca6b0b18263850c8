package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/docstest"
)

// TestSchemaWalkthrough runs the walkthrough "From incident to scenario" of
// scenarios/SCHEMA.md as a reader would: every command of its sh blocks as
// written (only /tmp/cm becomes a folder of the test's), the file edit its
// prose and yaml block describe, and each output line it quotes (a "# "
// comment under a command; "..." and "…" stand for any text) must be in
// what that command printed. The walkthrough's own reference is
// unmodified, so its explorations must come back clean, and its mutant
// exploration must find what the text says. A changed command or output
// fails here until the doc follows.
func TestSchemaWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the walkthrough builds the command with go: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(rootDir(), "scenarios", "SCHEMA.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := docstest.Between(string(doc), "## From incident to scenario", "\n## ")
	if section == "" {
		t.Fatal("SCHEMA.md has no section \"From incident to scenario\"")
	}
	dir := t.TempDir()
	cwd := rootDir()
	shBlocks := docstest.Fenced(section, "sh")
	yamlBlocks := docstest.Fenced(section, "yaml")
	if len(shBlocks) < 4 || len(yamlBlocks) < 1 {
		t.Fatalf("the walkthrough has %d sh and %d yaml blocks, want at least 4 and 1", len(shBlocks), len(yamlBlocks))
	}
	ran := 0
	for bi, block := range shBlocks {
		if bi == 3 {
			// Step 3's edit, between the blocks: "cp incident.yaml
			// orphan.yaml", then the yaml block's new edge first under
			// initial.graph.edges.
			editOrphan(t, section, dir, yamlBlocks[0])
		}
		for _, c := range docstest.Commands(block) {
			line := strings.ReplaceAll(c.Line, "/tmp/cm", dir)
			next := ""
			if before, after, ok := strings.Cut(line, " && cd "); ok {
				line, next = before, strings.TrimSpace(after)
			}
			out, code := runShell(t, cwd, line)
			ran++
			if want := wantExit(line); code != want {
				t.Fatalf("%s\nexited %d, want %d; output:\n%s", c.Line, code, want, out)
			}
			for _, q := range c.Quoted {
				if !docstest.QuoteRE(q).MatchString(out) {
					t.Errorf("%s\nprinted no line the walkthrough quotes as\n  %s\noutput:\n%s", c.Line, q, out)
				}
			}
			if strings.Contains(line, "explore --from incident.yaml --budget") && !strings.Contains(line, "--bug") && !strings.Contains(out, "no violation found") {
				t.Errorf("%s\nfound a violation on the unmodified reference:\n%s", c.Line, out)
			}
			if next != "" {
				cwd = next
			}
		}
	}
	if ran < 6 {
		t.Fatalf("ran %d commands of the walkthrough, want at least 6", ran)
	}
	// Step 4's prose: exploring from the edited state stops at once.
	out, code := runShell(t, cwd, "./crashmatrix explore --from orphan.yaml --budget 30s")
	if code != 1 || !strings.Contains(out, "the initial state breaks I3 before any fault") {
		t.Errorf("explore --from orphan.yaml exited %d, want 1 saying the initial state breaks I3:\n%s", code, out)
	}
}

// wantExit is the exit code the walkthrough says a command has: the demo
// dies by SIGKILL (the shell reports 137); replaying or exploring a bug
// finds it (1); the rest succeeds.
func wantExit(line string) int {
	switch {
	case strings.Contains(line, "--kill-at"):
		return 137
	case strings.Contains(line, "run orphan.yaml"), strings.Contains(line, "--bug "):
		return 1
	}
	return 0
}

// editOrphan does step 3's edit: a copy of incident.yaml with the quoted
// edge first under initial.graph.edges.
func editOrphan(t *testing.T, section, dir, yamlBlock string) {
	t.Helper()
	if !strings.Contains(section, "cp incident.yaml orphan.yaml") {
		t.Fatal("step 3 no longer says cp incident.yaml orphan.yaml")
	}
	var edge string
	for _, l := range strings.Split(yamlBlock, "\n") {
		if strings.Contains(l, "MANAGES") {
			edge = strings.TrimSpace(l)
		}
	}
	if edge == "" {
		t.Fatalf("step 3's yaml block quotes no MANAGES edge:\n%s", yamlBlock)
	}
	data, err := os.ReadFile(filepath.Join(dir, "incident.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	inGraph := false
	for i, l := range lines {
		inGraph = inGraph || strings.TrimSpace(l) == "graph:"
		if inGraph && strings.TrimSpace(l) == "edges:" && i+1 < len(lines) {
			next := lines[i+1] // the first item: the new one goes at its indentation
			indent := next[:len(next)-len(strings.TrimLeft(next, " "))]
			lines = append(lines[:i+1], append([]string{indent + edge}, lines[i+1:]...)...)
			if err := os.WriteFile(filepath.Join(dir, "orphan.yaml"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("incident.yaml has no initial.graph.edges:\n%s", data)
}

func runShell(t *testing.T, dir, line string) (string, int) {
	t.Helper()
	// What the commands leave in the temporary directory (a failed run
	// keeps its histories there) goes with the test.
	out, code, err := docstest.Shell(dir, []string{"TMPDIR=" + t.TempDir()}, line)
	if err != nil {
		t.Fatal(err)
	}
	return out, code
}
