package scenarios

import (
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Odd inputs give located errors, never a panic or a silent success.
func TestOddInputs(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"", "x.yaml:1: empty scenario file"},
		{"# only a comment\n", "x.yaml:1: empty scenario file"},
		{"- a\n- b\n", "x.yaml:1:1: want a mapping, got a list"},
		{"name: a\n---\nname: b\n", "x.yaml:2:1: a scenario file holds exactly one YAML document, found 2"},
		{"name: a\nname: b\n", `x.yaml:2:1: name: yaml: mapping key "name" already defined at [1:1]`},
		{"name: a\nsteps: 5\nexpect: {verdict: pass}\n", "x.yaml:2:8: steps: want a list, got an integer"},
		{"name: a\nsteps: [5]\nexpect: {verdict: pass}\n", "x.yaml:2:9: steps[0]: want a mapping, got an integer"},
		{"name: a\nsteps:\n  - worker: quiesce\n    actions: [{do: recover}]\n", "x.yaml:1:1: expect: required"},
		{"name:\nsteps:\n  - worker: quiesce\n    actions: [{do: recover}]\nexpect: {verdict: pass}\n", "x.yaml:1:1: name: required"},
		{"name: a\nsteps:\n  - worker: quiesce\n    actions: [{do: recover}]\nexpect: &x {verdict: pass}\n", "x.yaml:5:9: expect: anchors, aliases, tags and merge keys are not supported"},
		{"name: a\nsteps:\n  - worker: quiesce\n    actions: [{do: recover, rounds: 0}]\nexpect: {verdict: pass}\n", "x.yaml:4:37: steps[0].actions[0].rounds: rounds must be at least 1"},
		{"name: a\nsystem: plansave\nsteps:\n  - worker: quiesce\n    actions: [{do: recover}]\nexpect: {verdict: pass}\n", "x.yaml:5:20: steps[0].actions[0].do: action recover belongs to system ingestion, the scenario is plansave"},
		{"name: a\nmutant: no-unique-constraint\nsteps:\n  - worker: quiesce\n    actions: [{do: recover}]\nexpect: {verdict: pass}\n", "x.yaml:2:9: mutant: mutant no-unique-constraint does not apply to system ingestion"},
	} {
		_, err := Parse("x.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}

// FuzzParse: Parse never panics, every error is located, and whatever
// parses marshals and parses back.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("library/*.yaml")
	for _, p := range files[:min(len(files), 8)] {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(base))
	f.Fuzz(func(t *testing.T, data []byte) { checkAnyInput(t, data) })
}

func checkAnyInput(t *testing.T, data []byte) {
	t.Helper()
	s, err := Parse("f.yaml", data)
	if err != nil {
		for _, fe := range FieldErrors(err) {
			if !strings.HasPrefix(fe.Error(), "f.yaml:") {
				t.Fatalf("unlocated error %q", fe)
			}
		}
		if len(FieldErrors(err)) == 0 {
			t.Fatalf("error without FieldErrors: %v", err)
		}
		return
	}
	if _, err := s.Marshal(); err != nil {
		t.Fatalf("parsed but does not marshal: %v\n%s", err, data)
	}
}

// TestMutatedLibrary is a deterministic poor man's fuzz run: library files
// with a few random edits.
func TestMutatedLibrary(t *testing.T) {
	files, _ := filepath.Glob("library/*.yaml")
	r := rand.New(rand.NewSource(1))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		b, _ := os.ReadFile(files[r.Intn(len(files))])
		for j := 1 + r.Intn(4); j > 0; j-- {
			k := r.Intn(len(b))
			switch r.Intn(3) {
			case 0:
				b[k] = byte(r.Intn(128))
			case 1:
				b = append(b[:k], b[k+1:]...)
			default:
				const chars = "{}[]:-|>\"'#&*!\t\n 0"
				b = append(b[:k], append([]byte{chars[r.Intn(len(chars))]}, b[k:]...)...)
			}
		}
		checkAnyInput(t, b)
	}
}
