package explore_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

func simStoreRunner(t testing.TB, bugs []reference.Bug, mutant string) *sim.Runner {
	dir, err := os.MkdirTemp(shm(), "explore-sim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := embedded.SimStore()
	r, err := sim.NewRunner(sim.Config{Use: &b, SimulatedStore: true, WorkDir: dir, InProcess: true, Bugs: bugs, Mutant: mutant, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.CloseShared)
	return r
}

// The simulated store is refused wherever it could stand in for a real
// store: without SimulatedStore (certify, run, the matrix) and with real
// worker processes, which cannot reach the explorer's memory.
func TestSimStoreIsRefusedOutsideExplore(t *testing.T) {
	b := embedded.SimStore()
	dir := t.TempDir()
	if _, err := sim.NewRunner(sim.Config{Use: &b, WorkDir: dir, InProcess: true}); err == nil || !strings.Contains(err.Error(), "simulated store") {
		t.Errorf("a runner without SimulatedStore took the simulated store (err %v)", err)
	}
	if _, err := sim.NewRunner(sim.Config{Use: &b, SimulatedStore: true, WorkDir: dir}); err == nil || !strings.Contains(err.Error(), "in-process") {
		t.Errorf("a process-mode runner took the simulated store (err %v)", err)
	}
	for _, name := range sim.BackendNames() {
		if name == embedded.SimStoreName {
			t.Errorf("the simulated store is registered as backend %q: certify --backend could select it", name)
		}
	}
}

// A simulated crash on the simulated store leaves what the worker
// committed: the kill-restart-recover case passes on it, as on SQLite,
// where the volatile memory backend (which forgets a dead worker's
// writes) fails.
func TestSimStoreKeepsCommitsAcrossASimulatedCrash(t *testing.T) {
	r := simStoreRunner(t, nil, "")
	for _, c := range catalogue.CycleCases(3) {
		if res := r.RunCase(context.Background(), c); res.Verdict != verdict.Pass {
			t.Fatalf("%s on the simulated store: %s %v %v", c.ID, res.Verdict, res.Violations, res.Notes)
		}
	}
	res := explore.Run(context.Background(), r, explore.Options{Seed: 7, MaxSchedules: 300, Parallel: 2})
	if res.Finding != nil {
		t.Fatalf("exploring the reference on the simulated store found %s in schedule %d: %v", res.Finding.Invariant, res.Finding.Index, res.Finding.Result.Violations)
	}
	if res.Skipped > 0 {
		t.Fatalf("%d schedules were undecided on the simulated store", res.Skipped)
	}
}

func TestSimStoreExploreCatchesMutants(t *testing.T) {
	for _, m := range []struct {
		name   string
		bugs   []reference.Bug
		mutant string
		want   string
	}{
		{"recall-model-on-resume", []reference.Bug{reference.BugRecallModelOnResume}, "", "I1"},
		{"skip-revision-check", []reference.Bug{reference.BugSkipRevisionCheck}, "", "I2"},
		{"advance-before-graph-write", []reference.Bug{reference.BugAdvanceBeforeGraphWrite}, "", "I4"},
		{"create-instead-of-merge", nil, sim.MutantCreateNotMerge, "I3"},
	} {
		t.Run(m.name, func(t *testing.T) {
			r := simStoreRunner(t, m.bugs, m.mutant)
			res := explore.Run(context.Background(), r, explore.Options{Seed: 1, Budget: 60 * time.Second, Parallel: 2, Target: m.want})
			if res.Finding == nil {
				t.Fatalf("no %s violation in %d schedules on the simulated store (%s)", m.want, res.Schedules, res.Took)
			}
			if f := res.Finding; f.Reproduced != f.Reruns {
				t.Errorf("shrunk schedule reproduced %d/%d on the simulated store", f.Reproduced, f.Reruns)
			}
		})
	}
}

func TestSimStoreRefusesMutantsItDoesNotModel(t *testing.T) {
	r := simStoreRunner(t, nil, sim.MutantNoUniqueConstraint)
	res := r.RunCase(context.Background(), explore.Schedule(1, 0, explore.DefaultShape))
	if res.Verdict != verdict.Undecided || !strings.Contains(strings.Join(res.Notes, " "), "does not model") {
		t.Fatalf("a case with mutant %s on the simulated store: %s %v, want undecided naming the mutant", sim.MutantNoUniqueConstraint, res.Verdict, res.Notes)
	}
}
