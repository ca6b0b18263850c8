package explore_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/initial"
)

func incidentState(t *testing.T) *initial.State {
	t.Helper()
	sc, err := scenarios.Load("../../scenarios/library/incident-stuck-graph-applied.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc.Initial
}

// Schedules from an initial state carry it, start with a recovery worker,
// and are the same for the same seed and index.
func TestScheduleFromIsDeterministic(t *testing.T) {
	st := incidentState(t)
	for i := 0; i < 50; i++ {
		a, b := explore.ScheduleFrom(3, i, explore.DefaultShape, st), explore.ScheduleFrom(3, i, explore.DefaultShape, st)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("schedule %d differs between two draws", i)
		}
		if a.Initial != st || a.Steps[0].Worker != "r0" || a.Steps[len(a.Steps)-1].Worker != "quiesce" {
			t.Fatalf("schedule %d: initial %v, steps %+v", i, a.Initial == st, a.Steps)
		}
	}
}

// From the stuck incident, the explorer finds the revision-check mutant
// (I2) and the shrunk case still starts from the state.
func TestExploreFromFindsTheMutant(t *testing.T) {
	r := inProcessRunner(t, []reference.Bug{reference.BugSkipRevisionCheck}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := incidentState(t)
	res := explore.Run(ctx, r, explore.Options{Seed: 1, MaxSchedules: 400, Parallel: 2, Target: "I2", Initial: st})
	if res.Finding == nil {
		t.Fatalf("no I2 in %d schedules from the incident", res.Schedules)
	}
	f := res.Finding
	if f.Shrunk.Initial != st || f.Reproduced != f.Reruns || !slices.Contains(r.RunCase(ctx, f.Shrunk).Broken(), "I2") {
		t.Fatalf("shrunk case: initial kept %v, reproduced %d/%d", f.Shrunk.Initial == st, f.Reproduced, f.Reruns)
	}
}
