package storeproc_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/reference/plansave/plansavetest"
	"github.com/crashmatrix/crashmatrix/sim"
)

// planSaveStores is System B's pair from one store process.
type planSaveStores struct {
	*storeproc.Checkpoints
	*storeproc.Plans
}

var _ plansavetest.Stores = planSaveStores{}

// List resolves the name both stores could lend: the plan table's rows.
func (s planSaveStores) List(ctx context.Context, owner string) ([]plansave.PlanRow, error) {
	return s.Plans.List(ctx, owner)
}

func openPlanSave(t *testing.T, dir string, unique bool) (plansavetest.Stores, io.Closer) {
	t.Helper()
	var args []string
	if !unique {
		args = append(args, "--no-unique")
	}
	c, err := storeproc.Start(context.Background(), storeproc.Options{Command: python(t, "plansave_store.py", args...), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return planSaveStores{c.Checkpoints(), c.Plans()}, c
}

// TestPythonPlanStore runs System B's store suite over the protocol
// against the seed's plan store in Python: its contract, and the seed's
// crash scenarios, in which the variant without UNIQUE(owner,
// operation_id) saves twice.
func TestPythonPlanStore(t *testing.T) {
	plansavetest.TestStores(t, func(t *testing.T) plansavetest.Stores {
		st, c := openPlanSave(t, t.TempDir(), true)
		t.Cleanup(func() { _ = c.Close() })
		return st
	})
	plansavetest.TestCrashRecovery(t, openPlanSave)
}

// TestPythonPlanStoreConformance runs properties.PlanSaveFailures (what
// certify --plansave-cmd runs before its matrix) over the protocol: the
// seed's plan store passes, the variant without UNIQUE(owner,
// operation_id) fails the key's subtests.
func TestPythonPlanStoreConformance(t *testing.T) {
	run := func(args ...string) map[string]string {
		return properties.PlanSaveFailures(func(test, dir string) (sim.PlanSaveStores, error) {
			procs := 1
			if strings.Contains(test, "/Concurrency/") {
				procs = 2
			}
			c, err := storeproc.Start(context.Background(), storeproc.Options{Command: python(t, "plansave_store.py", args...), Dir: dir, Procs: procs})
			if err != nil {
				return sim.PlanSaveStores{}, err
			}
			return sim.PlanSaveStores{Checkpoints: c.Checkpoints(), Plans: c.Plans(), Closer: c}, nil
		})
	}
	if failed := run(); len(failed) != 0 {
		t.Errorf("the seed's plan store fails: %v", failed)
	}
	failed := run("--no-unique")
	if _, ok := failed["PlanStore/SaveOfTheSameKeyAndContentReturnsTheFirstRow"]; !ok {
		t.Errorf("the plan store without its key passes: %v", failed)
	}
}
