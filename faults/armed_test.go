package faults

import (
	"strings"
	"testing"
)

// The supervisor arms a worker's points through GO_FAILPOINTS (EnvValue);
// the worker reads back each point's action, and refuses a term it does
// not know with the point's name.
func TestFailpointsReadWhatEnvValueWrites(t *testing.T) {
	arms := Arms{"a/afterWrite": {Kind: Crash, Hit: 2}, "b/x y": {Kind: Transient, Hit: 1}}
	terms, err := ParseFailpoints(EnvValue(arms))
	if err != nil {
		t.Fatal(err)
	}
	if len(terms) != len(arms) {
		t.Fatalf("read %v, want %d points", terms, len(arms))
	}
	for p, a := range arms {
		v, ok := terms[Path(p)]
		if !ok {
			t.Fatalf("%s: not read back from %q", p, EnvValue(arms))
		}
		got, err := ParseAction(v)
		if err != nil || got != a {
			t.Errorf("%s: read %q = %+v (%v), want %+v", p, v, got, err, a)
		}
	}
	if terms, err := ParseFailpoints(""); err != nil || len(terms) != 0 {
		t.Errorf(`ParseFailpoints("") = %v, %v; want nothing armed`, terms, err)
	}
	for _, bad := range []string{"p=1*return(\"crash@1\")", "p=pause", "p=return(crash@1)", "=return(\"x\")", "p"} {
		if _, err := ParseFailpoints(bad); err == nil || !strings.Contains(err.Error(), "GO_FAILPOINTS") {
			t.Errorf("ParseFailpoints(%q): %v, want an error naming GO_FAILPOINTS", bad, err)
		}
	}
	if err := EnableFailpoint("p", "panic"); err == nil {
		t.Error(`EnableFailpoint("p", "panic"): nil error, want one`)
	}
}
