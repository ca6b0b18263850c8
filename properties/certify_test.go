package properties_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
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

// Each reference mutant that real process kills can prove is caught by
// the invariant that names its defect (properties.Mutants says which), with
// re-executed test binaries killed by SIGKILL.
func TestMutantsCaught(t *testing.T) {
	properties.MutantsCaught(t, embedded.SQLite(), properties.CrashOptions{})
}

// Every mutant of the catalogue, the realistic service bugs included, is
// caught by the invariant that names its defect, in the in-process mode:
// by its slice of the crash matrix (certify), or by the explorer within a
// fixed seed and schedule budget. "Not exercised" never counts.
func TestEveryMutantCaughtInProcess(t *testing.T) {
	listed := map[string]bool{}
	for _, m := range properties.Mutants() {
		listed[m.Name] = true
	}
	for _, b := range reference.Bugs {
		if !listed[string(b)] {
			t.Errorf("bug %s is not in the mutant catalogue (properties.Mutants)", b)
		}
	}
	for _, m := range properties.Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), InProcess: true,
				Bugs: m.Options.Bugs, Mutant: m.Options.Mutant, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer r.CloseShared()
			if m.Explore != nil {
				res := explore.Run(context.Background(), r, explore.Options{Seed: m.Explore.Seed, MaxSchedules: m.Explore.MaxSchedules, Parallel: 2, Target: m.Invariant, Confirm: 1})
				if res.Finding == nil {
					t.Fatalf("explore, seed %d, %d schedules: no %s violation", m.Explore.Seed, res.Schedules, m.Invariant)
				}
				t.Logf("explore seed %d: %s in schedule %d: %v", m.Explore.Seed, m.Invariant, res.Finding.Index, res.Finding.Result.Violations[0])
				return
			}
			ttl := r.Config().LeaseTTL.Milliseconds()
			cases := sim.Filter(sim.Matrix(ttl), m.Options.Points, m.Options.Kinds, m.Options.Classes)
			if len(cases) == 0 {
				t.Fatalf("no case matches the mutant's slice %+v", m.Options)
			}
			rep := r.RunAll(context.Background(), cases, 2, nil)
			if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), m.Invariant) {
				t.Fatalf("certify slice %v: exit %d, broke %v; want exit 1 and %s", caseIDs(cases), rep.ExitCode, rep.Broken(), m.Invariant)
			}
			for _, res := range rep.Results {
				for _, v := range res.Violations {
					if v.Invariant.Short() == m.Invariant {
						t.Logf("%s: %s", res.Case.ID, v)
						return
					}
				}
			}
		})
	}
}

func caseIDs(cs []sim.Case) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
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
