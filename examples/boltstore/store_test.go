package boltstore_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/verdict"

	"example.com/boltstore"
)

// The conformance suite, exactly as the store-author guide
// (docs/certify-go-store.md) writes it: a fresh bbolt file per call.
func TestStoresConform(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// The crash matrix with real process kills: every worker process of a case
// opens the same file under the case's directory (which may not exist yet:
// Open creates it). No System B: those cases are not applicable. The data
// lives in the case's folder (Embedded), so where FUSE works the matrix
// also cuts the power at every window: what bbolt did not fsync is lost.
func TestStoresSurviveKills(t *testing.T) {
	properties.CertifyCrashSafety(t, properties.Backend{
		Name:     "bbolt",
		Embedded: true,
		Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
			return boltstore.Open(filepath.Join(env.Dir, "store.db"))
		},
	})
}

// The negative control of the power-loss column: without bbolt's fsync a
// commit survives every process kill of the matrix but not a power loss,
// and I9 (an acknowledged write missing right after it) must say so.
func TestSkippedSyncIsCaughtByPowerLoss(t *testing.T) {
	properties.CertifyCrashSafety(t, properties.Backend{
		Name:     "bbolt-nosync",
		Embedded: true,
		Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
			return boltstore.OpenWith(filepath.Join(env.Dir, "store.db"), boltstore.Options{NoSync: true})
		},
	}, properties.CrashOptions{Kinds: []faults.Kind{faults.PowerLoss}, Points: []faults.Point{faults.BeforeStateCommit, faults.BeforeCompleted}, ExpectBroken: []string{"I9"}})
}

// The store with the defect of TwoUpdates (the operation and its plan in
// two Update calls, no window declared) is caught by the durable-step
// sweep: killed, or the power cut, right after the syncs of the first
// Update, the operation is stored without its plan (I5).
func TestTwoUpdatesCreateIsCaughtByTheDurableStepSweep(t *testing.T) {
	properties.CertifyCrashSafety(t, properties.Backend{
		Name:     "bbolt-two-updates",
		Embedded: true,
		Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
			return boltstore.OpenWith(filepath.Join(env.Dir, "store.db"), boltstore.Options{TwoUpdates: true})
		},
	}, properties.CrashOptions{Classes: []string{"durable-step"}, ExpectBroken: []string{"I5"}})
}

// Layout 2, the store's next release, is a store in its own right: the
// conformance suite on a fresh file of it.
func TestLayout2Conforms(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		st, err := boltstore.OpenWith(filepath.Join(t.TempDir(), "store.db"), boltstore.Options{Layout: 2})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// bolt is the backend of the stores opened with o in the case's folder.
func bolt(name string, o boltstore.Options) properties.Backend {
	return properties.Backend{
		Name:     name,
		Embedded: true,
		Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
			return boltstore.OpenWith(filepath.Join(env.Dir, "store.db"), o)
		},
	}
}

// An upgrade in the middle of in-flight operations: every crash of the
// crash column, at every window, is recovered by layout 2 on the file
// layout 1 left, and layout 2's migration moves every plan: certified.
func TestUpgradeToLayout2Certifies(t *testing.T) {
	rep := properties.CertifyCrashSafety(t, bolt("bbolt-layout1", boltstore.Options{}), properties.CrashOptions{
		Kinds: []faults.Kind{faults.Crash, faults.PowerLoss}, RecoverWith: ptr(bolt("bbolt-layout2", boltstore.Options{Layout: 2}))})
	// Every case that passed was recovered by layout 2: its first worker
	// after the crash and every later one ran on it.
	for _, r := range rep.Results {
		if r.Verdict == verdict.Pass && r.UpgradedAt == "" {
			t.Errorf("case %s passed without an upgrade: no worker ran on layout 2", r.Case.ID)
		}
	}
}

// The negative control: a layout 2 whose migration moves the plans of
// finished operations only leaves each operation in flight at the crash
// without a plan layout 2 can read; recovery cannot resume it, and I5
// (every persisted operation in the store with its plan, COMPLETED or
// given a disposition) says so.
func TestUpgradeWithoutMigratingInFlightOperationsFails(t *testing.T) {
	properties.CertifyCrashSafety(t, bolt("bbolt-layout1", boltstore.Options{}), properties.CrashOptions{
		Kinds:       []faults.Kind{faults.Crash},
		RecoverWith: ptr(bolt("bbolt-layout2-drained-only", boltstore.Options{Layout: 2, MigrateFinishedOnly: true})), ExpectBroken: []string{"I5"}})
}

func ptr[T any](v T) *T { return &v }

// bbolt syncs each commit before the call returns, so at the protocol's
// windows it has nothing written and not synced: a torn power loss there
// tears nothing, and each case of the torn-write column (in the default
// matrix beside the power-loss column) is not applicable, never a
// failure nor a case not exercised that would keep the run from
// certifying: the power-loss cases at the same windows judge the cut.
func TestTornWritesFindNothingToTearInBbolt(t *testing.T) {
	rep := properties.CertifyCrashSafety(t, bolt("bbolt", boltstore.Options{}), properties.CrashOptions{
		Kinds: []faults.Kind{faults.PowerLoss, faults.TornWrite}, Points: []faults.Point{faults.BeforeGraphWrite, faults.BeforeStateCommit, faults.BeforeCompleted}})
	if rep.PowerLoss != "" {
		t.Fatal(rep.PowerLoss)
	}
	n := 0
	for _, r := range rep.Results {
		if r.Case.Kind != faults.TornWrite {
			continue
		}
		n++
		if r.Verdict != verdict.NotApplicable || !slices.Contains(r.Notes, verdict.TornNotApplicable) {
			t.Errorf("%s: %s %v, want not applicable: nothing to tear", r.Case.ID, r.Verdict, r.Notes)
		}
	}
	if n != 3 {
		t.Errorf("%d torn-write cases, want 3", n)
	}
}
