package properties_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
)

// The embedded default passes the whole matrix, with real process kills of
// re-executed test binaries: what a store author's own go test does.
func TestCertifySQLite(t *testing.T) {
	properties.CertifyCrashSafety(t, embedded.SQLite())
}

// The in-memory adapter must fail: after a restart the plan is gone.
func TestCrashMatrixMemoryFails(t *testing.T) {
	rep := properties.RunCrashMatrix(t, embedded.Memory(), properties.CrashOptions{
		Points: []faults.Point{faults.BeforeGraphApplied, faults.PlanSaveBeforeCheckpoint}, Kinds: []faults.Kind{faults.Crash}})
	if rep.ExitCode != 1 {
		t.Fatalf("memory backend: exit code %d, want 1 (an invariant broke)", rep.ExitCode)
	}
	broken := rep.Broken()
	for _, want := range []string{"I5", "I8"} {
		if !slices.Contains(broken, want) {
			t.Errorf("memory backend broke %v, want %s among them", broken, want)
		}
	}
	found := false
	for _, r := range rep.Results {
		for _, v := range r.Violations {
			if v.Invariant == check.I5 && strings.Contains(v.Message, "plan and stage are gone") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no readable I5 finding saying the plan is gone after restart")
	}
}

// Each reference mutant is caught by the invariant that names its defect:
// recall-model-on-resume by I1, create-instead-of-merge by I3,
// skip-revision-check by I2, advance-before-graph-write by I4, and System B
// without its unique constraint by I8.
func TestMutantsCaught(t *testing.T) {
	properties.MutantsCaught(t, embedded.SQLite(), properties.CrashOptions{})
}

// A failing case's replay command narrows the run to that case through
// CRASHMATRIX_CASE.
func TestCrashMatrixRunsOnlyTheNamedCase(t *testing.T) {
	t.Setenv(properties.CaseEnv, "beforegraphapplied-crash")
	rep := properties.RunCrashMatrix(t, embedded.Memory(), properties.CrashOptions{Points: []faults.Point{faults.BeforeGraphApplied}})
	if len(rep.Results) != 1 || rep.Results[0].Case.ID != "beforegraphapplied-crash" {
		var ids []string
		for _, r := range rep.Results {
			ids = append(ids, r.Case.ID)
		}
		t.Fatalf("ran %v, want only beforegraphapplied-crash", ids)
	}
}
