package properties_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/properties/check"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
)

// The embedded default passes the whole matrix, with real process kills of
// re-executed test binaries: what a store author's own go test does.
func TestCertifySQLite(t *testing.T) {
	properties.CertifyCrashSafety(t, sim.SQLiteBackend())
}

// The in-memory adapter must fail: after a restart the plan is gone.
func TestCrashMatrixMemoryFails(t *testing.T) {
	rep := properties.RunCrashMatrix(t, sim.MemoryBackend(), properties.CrashOptions{
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

// expectCaught runs a slice of the matrix with a mutant and checks that the
// named invariant (and only invariants from want) caught it.
func expectCaught(t *testing.T, opts properties.CrashOptions, want check.Invariant) {
	t.Helper()
	rep := properties.RunCrashMatrix(t, sim.SQLiteBackend(), opts)
	if rep.ExitCode != 1 {
		t.Fatalf("mutant %v%s: exit code %d, want 1; the mutant went unnoticed", opts.Bugs, opts.Mutant, rep.ExitCode)
	}
	if !slices.Contains(rep.Broken(), want.Short()) {
		t.Fatalf("mutant %v%s broke %v, want %s", opts.Bugs, opts.Mutant, rep.Broken(), want)
	}
}

func TestMutantRecallModelOnResumeBreaksI1(t *testing.T) {
	expectCaught(t, properties.CrashOptions{Bugs: []reference.Bug{reference.BugRecallModelOnResume},
		Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: []faults.Kind{faults.Crash}}, check.I1)
}

func TestMutantCreateInsteadOfMergeBreaksI3(t *testing.T) {
	expectCaught(t, properties.CrashOptions{Mutant: sim.MutantCreateNotMerge,
		Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Unknown}}, check.I3)
}

func TestMutantSkipRevisionCheckBreaksI2(t *testing.T) {
	expectCaught(t, properties.CrashOptions{Bugs: []reference.Bug{reference.BugSkipRevisionCheck},
		Points: []faults.Point{faults.ConflictBeforeReplan}, Kinds: []faults.Kind{faults.Crash}}, check.I2)
}

func TestMutantAdvanceBeforeGraphWriteBreaksI4(t *testing.T) {
	expectCaught(t, properties.CrashOptions{Bugs: []reference.Bug{reference.BugAdvanceBeforeGraphWrite},
		Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: []faults.Kind{faults.Crash}}, check.I4)
}

func TestMutantPlanSaveWithoutUniqueConstraintBreaksI8(t *testing.T) {
	expectCaught(t, properties.CrashOptions{Mutant: sim.MutantNoUniqueConstraint,
		Points: []faults.Point{faults.PlanSaveBeforeCheckpoint}, Kinds: []faults.Kind{faults.Crash}}, check.I8)
}
