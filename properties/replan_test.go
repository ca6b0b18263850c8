package properties

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The resume-after-replan classes (sim/catalogue/replan.go) are where the matrix
// catches replan-id-per-attempt: each of the two (a death right after the
// re-plan's creation, a crash before the abandon) catches it by I1 on its
// own, in every one of a few runs, and the unmodified reference passes
// both, exercised.
func TestResumeAfterReplanCatchesReplanIDPerAttempt(t *testing.T) {
	run := func(t *testing.T, bugs []reference.Bug) ([]catalogue.Case, verdict.Report) {
		t.Helper()
		r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), InProcess: true, Bugs: bugs, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer r.CloseShared()
		var cases []catalogue.Case
		for _, c := range catalogue.Lease(r.Config().LeaseTTL).ClassCases() {
			if strings.HasPrefix(c.Class, catalogue.ReplanResumeClass) {
				cases = append(cases, c)
			}
		}
		if len(cases) != 2 {
			t.Fatalf("%d %s* classes, want 2", len(cases), catalogue.ReplanResumeClass)
		}
		return cases, r.RunAll(context.Background(), cases, 2, nil)
	}
	t.Run("reference", func(t *testing.T) {
		_, rep := run(t, nil)
		for _, res := range rep.Results {
			if res.Verdict != verdict.Pass {
				t.Errorf("%s on the reference: %s, violations %v, notes %v", res.Case.ID, res.Verdict, res.Violations, res.Notes)
			}
		}
	})
	t.Run("mutant", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			cases, rep := run(t, []reference.Bug{reference.BugReplanIDPerAttempt})
			if len(rep.Results) != len(cases) {
				t.Fatalf("run %d: %d results for %d cases", i, len(rep.Results), len(cases))
			}
			for _, res := range rep.Results {
				if res.Verdict != verdict.Fail || !slices.Contains(res.Broken(), "I1") {
					t.Errorf("run %d: %s with %s: %s, broke %v, notes %v; want FAIL by I1", i, res.Case.ID, reference.BugReplanIDPerAttempt, res.Verdict, res.Broken(), res.Notes)
				}
			}
		}
	})
}
