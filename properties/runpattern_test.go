package properties

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// A run pattern narrows the suites as go test -run does: each level of a
// subtest's path against the pattern's element at that level, levels
// past the pattern whole; a replay line's leading "^$/" is dropped.
func TestRunPatternMatchesLevelByLevel(t *testing.T) {
	p, err := ParseRunPattern("^$/^Stores$/Behaviour")
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
	if _, err := ParseRunPattern("Stores/("); err == nil {
		t.Error("a pattern that does not compile was accepted")
	}
}

// StoresFailuresMatching runs what the pattern names and nothing else:
// one bundle-opening subtest, not the suite's hundreds.
func TestStoresFailuresMatchingRunsOnlyWhatItNames(t *testing.T) {
	p, err := ParseRunPattern("Stores/Behaviour/Locks")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	failed, ran := StoresFailuresMatching(p, func(test, _ string) (reference.Stores, error) {
		tests = append(tests, test)
		return memory.New(memory.Options{}), nil
	})
	if len(failed) != 0 || ran != 1 {
		t.Fatalf("failed %v, ran %d; want nothing failed and the one subtest run", failed, ran)
	}
	for _, name := range tests {
		if name != "/Stores/Behaviour/Locks" && name != "/Stores/Behaviour" && name != "/Stores" {
			t.Errorf("a bundle was opened for %s, outside the pattern", name)
		}
	}
	if _, ran := StoresFailuresMatching(RunPattern{p[0], p[1]}, func(string, string) (reference.Stores, error) {
		return memory.New(memory.Options{}), nil
	}); ran != 1 {
		t.Errorf("Stores/Behaviour ran %d, want 1 (its parent level)", ran)
	}
}

// Conformance messages show values as JSON without HTML escapes: a
// store author reads "token > 1", not "token \u003e 1".
func TestConfShowDoesNotEscapeHTML(t *testing.T) {
	if got := confShow([]string{"token > 1", "<nil>", "a & b"}); got != `["token > 1","<nil>","a & b"]` {
		t.Errorf("confShow = %s", got)
	}
}
