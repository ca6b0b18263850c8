package postgres

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference/plansave/plansavetest"
)

// planSaveOpener opens PlanSave stores on one fresh schema per directory
// name: a second open of the same directory is a restarted process on the
// same database.
func planSaveOpener() plansavetest.Durable {
	var mu sync.Mutex
	schemas := map[string]string{}
	return func(t *testing.T, dir string, unique bool) (plansavetest.Stores, io.Closer) {
		t.Helper()
		mu.Lock()
		dsn, ok := schemas[dir]
		if !ok {
			dsn = schemaDSN(t)
			schemas[dir] = dsn
		}
		mu.Unlock()
		p, err := OpenPlanSave(context.Background(), dsn, unique)
		if err != nil {
			t.Fatalf("OpenPlanSave: %v", err)
		}
		return p, p
	}
}

func TestPlanSaveStores(t *testing.T) {
	open := planSaveOpener()
	plansavetest.TestStores(t, func(t *testing.T) plansavetest.Stores {
		s, c := open(t, t.TempDir(), true)
		t.Cleanup(func() { _ = c.Close() })
		return s
	})
}

func TestPlanSaveCrashRecovery(t *testing.T) {
	plansavetest.TestCrashRecovery(t, planSaveOpener())
}
