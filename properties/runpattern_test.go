package properties

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// A run pattern narrows the suites as go test -run does: each level of a
// subtest's path against the pattern's element at that level, levels
// past the pattern whole; a replay line's leading "^$/" is dropped.
func TestRunPatternMatchesLevelByLevel(t *testing.T) {
	p, err := parseRunPattern("^$/^Stores$/Behaviour")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path []string
		want bool
	}{
		{[]string{"Stores"}, true},
		{[]string{"Stores", "Behaviour"}, true},
		{[]string{"Stores", "Behaviour", "Locks"}, true},
		{[]string{"Stores", "OperationStore"}, false},
		{[]string{"PlanSave"}, false},
		{[]string{"MoreStores"}, false},
	} {
		if got := p.matches(c.path); got != c.want {
			t.Errorf("%v matches %v = %v, want %v", p, c.path, got, c.want)
		}
	}
	if _, err := parseRunPattern("Stores/("); err == nil {
		t.Error("a pattern that does not compile was accepted")
	}
}

// CRASHMATRIX_CONFORMANCE_RUN runs what the pattern names and nothing
// else: one bundle-opening subtest, not the suite's hundreds; a pattern
// naming the suite and none of its subtests fails saying so; one naming
// another suite runs nothing here.
func TestConformanceRunEnvRunsOnlyWhatItNames(t *testing.T) {
	var tests []string
	open := func(test, _ string) (reference.Stores, error) {
		tests = append(tests, test)
		return memory.New(memory.Options{}), nil
	}
	t.Setenv(conformanceRunEnv, "Stores/Behaviour/Locks")
	if failed := StoresFailures(open); len(failed) != 0 {
		t.Fatalf("failed %v; want nothing", failed)
	}
	if len(tests) == 0 {
		t.Fatal("no bundle was opened: the pattern ran nothing")
	}
	for _, name := range tests {
		if name != "/Stores/Behaviour/Locks" && name != "/Stores/Behaviour" && name != "/Stores" {
			t.Errorf("a bundle was opened for %s, outside the pattern", name)
		}
	}
	t.Setenv(conformanceRunEnv, "Stores/Behaviour/Nope")
	if failed := StoresFailures(open); !strings.Contains(failed[""], noSubtest+"Stores") {
		t.Errorf("a pattern naming no subtest: %v", failed)
	}
	tests = nil
	t.Setenv(conformanceRunEnv, "PlanSave/PlanStore")
	if failed := StoresFailures(open); len(failed) != 0 || len(tests) != 0 {
		t.Errorf("a pattern naming the other suite: failed %v, opened %v; want nothing run", failed, tests)
	}
}

// Conformance messages show values as JSON without HTML escapes: a
// store author reads "token > 1", not "token \u003e 1".
func TestConfShowDoesNotEscapeHTML(t *testing.T) {
	if got := confShow([]string{"token > 1", "<nil>", "a & b"}); got != `["token > 1","<nil>","a & b"]` {
		t.Errorf("confShow = %s", got)
	}
}
