package storeproc_test

import (
	"context"
	"io"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/reference/plansave/plansavetest"
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
