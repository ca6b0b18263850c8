package explore_test

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the sqlite and memory backends
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

func inProcessRunner(t testing.TB, bugs []reference.Bug, mutant string) *sim.Runner {
	dir, err := os.MkdirTemp(shm(), "explore-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: dir, InProcess: true, Bugs: bugs, Mutant: mutant, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.CloseShared)
	return r
}

func shm() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

func TestScheduleIsDeterministic(t *testing.T) {
	for i := 0; i < 50; i++ {
		a, b := explore.Schedule(42, i, explore.DefaultShape), explore.Schedule(42, i, explore.DefaultShape)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("schedule %d of seed 42 differs between two generations:\n%+v\n%+v", i, a, b)
		}
	}
	if reflect.DeepEqual(explore.Schedule(42, 0, explore.DefaultShape).Steps, explore.Schedule(43, 0, explore.DefaultShape).Steps) &&
		reflect.DeepEqual(explore.Schedule(42, 1, explore.DefaultShape).Steps, explore.Schedule(43, 1, explore.DefaultShape).Steps) {
		t.Fatal("seeds 42 and 43 generate the same schedules")
	}
}

// The reference passes random schedules (no false alarms).
func TestExploreReferenceFindsNothing(t *testing.T) {
	r := inProcessRunner(t, nil, "")
	res := explore.Run(context.Background(), r, explore.Options{Seed: 7, MaxSchedules: 150, Parallel: 2})
	if res.Finding != nil {
		f := res.Finding
		t.Fatalf("exploring the reference found %s in schedule %d of seed 7: %v\nshrunk: %+v", f.Invariant, f.Index, f.Result.Violations, f.Shrunk)
	}
	if res.Skipped > 0 {
		t.Fatalf("%d schedules were undecided", res.Skipped)
	}
}

func TestExploreCatchesAndShrinksMutants(t *testing.T) {
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
		{"no-unique-constraint", nil, sim.MutantNoUniqueConstraint, "I8"},
	} {
		t.Run(m.name, func(t *testing.T) {
			r := inProcessRunner(t, m.bugs, m.mutant)
			res := explore.Run(context.Background(), r, explore.Options{Seed: 1, Budget: 60 * time.Second, Parallel: 2, Target: m.want})
			if res.Finding == nil {
				t.Fatalf("no violation in %d schedules (%s)", res.Schedules, res.Took)
			}
			f := res.Finding
			if f.Invariant != m.want {
				t.Errorf("found %s first, want %s (violations %v)", f.Invariant, m.want, f.Result.Violations)
			}
			if n := explore.Size(f.Shrunk); n > 6 {
				t.Errorf("shrunk to %d steps, want at most 6: %+v", n, f.Shrunk.Steps)
			}
			if f.Reproduced != f.Reruns {
				t.Errorf("shrunk schedule reproduced %d/%d", f.Reproduced, f.Reruns)
			}
			t.Logf("%s: found %s after %d schedules (%s), shrunk to %d steps in %s", m.name, f.Invariant, res.Schedules, f.FoundAfter.Round(time.Millisecond), explore.Size(f.Shrunk), (f.ShrunkAfter - f.FoundAfter).Round(time.Millisecond))
		})
	}
}
