package properties_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim"
)

// The project's own System B stores pass the PlanSave suite.
func TestPlanSaveSQLite(t *testing.T) {
	properties.PlanSave(t, func(t *testing.T) sim.PlanSaveStores {
		s, err := sqlite.OpenPlanSave(t.TempDir(), true)
		if err != nil {
			t.Fatal(err)
		}
		return sim.PlanSaveStores{Checkpoints: s, Plans: s, Closer: s}
	})
}

func TestPlanSaveMemory(t *testing.T) {
	properties.PlanSave(t, func(t *testing.T) sim.PlanSaveStores {
		m := plansave.NewMemory()
		return sim.PlanSaveStores{Checkpoints: m, Plans: m}
	})
}

// The negative control: a plan table without UNIQUE(owner, operation_id)
// (the no-unique-constraint mutant) fails the subtests that name the key,
// and nothing else.
func TestPlanSaveCatchesAPlanTableWithoutItsKey(t *testing.T) {
	failed := properties.PlanSaveFailures(func(_, dir string) (sim.PlanSaveStores, error) {
		s, err := sqlite.OpenPlanSave(dir, false)
		if err != nil {
			return sim.PlanSaveStores{}, err
		}
		return sim.PlanSaveStores{Checkpoints: s, Plans: s, Closer: s}, nil
	})
	for _, want := range []string{"PlanStore/SaveOfTheSameKeyAndContentReturnsTheFirstRow", "PlanStore/Concurrency/RacingSavesOfOneKeyMakeOneRow"} {
		if _, ok := failed[want]; !ok {
			t.Errorf("%s did not fail on a plan table without its key; failures: %v", want, failed)
		}
	}
	for path := range failed {
		if path != "PlanStore" && path != "PlanStore/Concurrency" && path != "PlanStore/SaveOfTheSameKeyAndContentReturnsTheFirstRow" &&
			path != "PlanStore/Concurrency/RacingSavesOfOneKeyMakeOneRow" && path != "PlanStore/SameKeyWithOtherContentIsAConflict" {
			t.Errorf("%s failed too: %s", path, failed[path])
		}
	}
	if ok := properties.PlanSaveFailures(func(_, dir string) (sim.PlanSaveStores, error) {
		s, err := sqlite.OpenPlanSave(dir, true)
		return sim.PlanSaveStores{Checkpoints: s, Plans: s, Closer: s}, err
	}); len(ok) != 0 {
		t.Errorf("the correct store fails: %v", ok)
	}
}
