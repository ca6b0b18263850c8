package properties

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The disk-error stores: an operation store in a SQLite database of its
// own, opened with synchronous=OFF, that makes each write durable itself
// (an fsync of the database's WAL, the database and its folder after each
// write call), as a store with its own log or group commit does. What it
// does when the disk fails is the defect, or not:
const (
	// diskRetriesFsync retries an fsync that failed with EIO and
	// acknowledges the write when the retry succeeds (PostgreSQL before
	// 2018, "fsyncgate"): Linux dropped the pages at the error, so the
	// retry had nothing to write.
	diskRetriesFsync = "retries-fsync"
	// diskNoSpaceIsSuccess treats ENOSPC (SQLite's SQLITE_FULL) as a
	// write that succeeded.
	diskNoSpaceIsSuccess = "enospc-is-success"
)

// syncingOps is that operation store. Without a defect, an fsync that
// fails stops it (as PostgreSQL PANICs now): the call and every later one
// return the error, until the process restarts and reads what is durable.
type syncingOps struct {
	reference.OperationStore
	dir    string
	defect string
	// stopped is the failed fsync that stopped the store.
	stopped error
}

// isNoSpace reports whether err says the disk is full: ENOSPC, or
// SQLite's SQLITE_FULL.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "database or disk is full")
}

// sync makes the store's writes durable: its WAL, its database, the names
// of both.
func (s *syncingOps) sync() error {
	for _, name := range []string{"ops.db-wal", "ops.db", "."} {
		f, err := os.Open(filepath.Join(s.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		if err != nil && s.defect == diskRetriesFsync {
			err = f.Sync() // succeeds: the kernel marked the pages clean
		}
		f.Close()
		if err != nil {
			s.stopped = fmt.Errorf("fsync %s failed (%w): the store stops, its writes since the last good sync may be gone; restart the process", name, err)
			return s.stopped
		}
	}
	return nil
}

// wrote ends a write call: err is the call's own error.
func (s *syncingOps) wrote(err error) error {
	switch {
	case err != nil && s.defect == diskNoSpaceIsSuccess && isNoSpace(err):
		return nil
	case err != nil:
		return err
	}
	return s.sync()
}

func (s *syncingOps) CreateIfAbsent(ctx context.Context, op reference.Operation, p reference.Plan) (bool, error) {
	if s.stopped != nil {
		return false, s.stopped
	}
	ok, err := s.OperationStore.CreateIfAbsent(ctx, op, p)
	if err = s.wrote(err); err != nil {
		return false, err
	}
	return ok || s.defect == diskNoSpaceIsSuccess, nil
}

func (s *syncingOps) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if s.stopped != nil {
		return false, s.stopped
	}
	ok, err := s.OperationStore.CompareAndSet(ctx, expected, next)
	if err = s.wrote(err); err != nil {
		return false, err
	}
	return ok || s.defect == diskNoSpaceIsSuccess, nil
}

func (s *syncingOps) Claim(ctx context.Context, id, holder string, now, ttl int64) (bool, error) {
	if s.stopped != nil {
		return false, s.stopped
	}
	ok, err := s.OperationStore.Claim(ctx, id, holder, now, ttl)
	return ok, s.wrote(err)
}

func (s *syncingOps) ReleaseClaim(ctx context.Context, id, holder string) (bool, error) {
	if s.stopped != nil {
		return false, s.stopped
	}
	ok, err := s.OperationStore.ReleaseClaim(ctx, id, holder)
	return ok, s.wrote(err)
}

func (s *syncingOps) Get(ctx context.Context, id string) (reference.Operation, error) {
	if s.stopped != nil {
		return reference.Operation{}, s.stopped
	}
	return s.OperationStore.Get(ctx, id)
}

func (s *syncingOps) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	if s.stopped != nil {
		return reference.Plan{}, s.stopped
	}
	return s.OperationStore.GetPlan(ctx, id)
}

func (s *syncingOps) List(ctx context.Context) ([]reference.Operation, error) {
	if s.stopped != nil {
		return nil, s.stopped
	}
	return s.OperationStore.List(ctx)
}

func (s *syncingOps) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if s.stopped != nil {
		return nil, s.stopped
	}
	return s.OperationStore.ListRecoverable(ctx, limit)
}

// sqliteIn opens the reference SQLite stores in dir (made first).
func sqliteIn(dir string) (reference.Stores, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return reference.Stores{}, err
	}
	return sqlite.Open(filepath.Join(dir, "store.db"), sqlite.Options{})
}

// syncingBackend opens the reference SQLite stores with the operation
// store replaced by syncingOps, its defect named by the case's mutant
// (CrashOptions.Mutant).
func syncingBackend() sim.Backend {
	return sim.Backend{
		Name:     "sqlite-own-fsync-ops",
		Embedded: true,
		Open: func(_ context.Context, env sim.CaseEnv) (reference.Stores, error) {
			st, err := sqliteIn(env.Dir)
			if err != nil {
				return reference.Stores{}, err
			}
			ops, err := sqlite.Open(filepath.Join(env.Dir, "ops.db"), sqlite.Options{SynchronousOff: true})
			if err != nil {
				return reference.Stores{}, err
			}
			st.Ops = &syncingOps{OperationStore: ops.Ops, dir: env.Dir, defect: env.Mutant}
			return st, nil
		},
	}
}

func requireLazyFS(t *testing.T) {
	t.Helper()
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error())) // make test runs as root where FUSE works
	}
}

// diskCase returns the one result of the report at point p, and fails
// the test unless its disk error acted (its note says so).
func diskCase(t *testing.T, rep verdict.Report, p faults.Point, k faults.Kind, acted string) verdict.CaseResult {
	t.Helper()
	for _, r := range rep.Results {
		if r.Case.Point == p && r.Case.Kind == k {
			if !strings.Contains(strings.Join(r.Notes, "\n"), acted) {
				t.Fatalf("%s: no note says %q: the disk error did not act as the case names: %v", r.Case.ID, acted, r.Notes)
			}
			return r
		}
	}
	t.Fatalf("no %s case at %s in the report", k, p)
	return verdict.CaseResult{}
}

// logI9 logs the first I9 violation of r, and fails the test when r has
// none.
func logI9(t *testing.T, r verdict.CaseResult) {
	t.Helper()
	for _, v := range r.Violations {
		if v.Invariant == check.I9 {
			t.Logf("%s: %s %s", r.Case.ID, v.Message, v.Evidence)
			return
		}
	}
	t.Fatalf("%s: no I9 violation among %v", r.Case.ID, r.Broken())
}

// caughtThenCertified runs disk error k at window p against the store
// with defect (a negative control: I9 must break, in that case) and then
// without (it must certify); in both, the error must have acted as the
// note acted says.
func caughtThenCertified(t *testing.T, p faults.Point, k faults.Kind, defect, acted string) {
	t.Helper()
	requireLazyFS(t)
	opts := CrashOptions{Points: []faults.Point{p}, Kinds: []faults.Kind{k}}
	broken := opts
	broken.Mutant, broken.ExpectBroken = defect, []string{"I9"}
	rep := CertifyCrashSafety(t, syncingBackend(), broken)
	r := diskCase(t, rep, p, k, acted)
	if r.Verdict != verdict.Fail {
		t.Fatalf("%s with the defect %s: %s, want a failure", r.Case.ID, defect, r.Verdict)
	}
	logI9(t, r)
	good := CertifyCrashSafety(t, syncingBackend(), opts)
	if r = diskCase(t, good, p, k, acted); r.Verdict != verdict.Pass {
		t.Fatalf("%s without the defect: %s %v", r.Case.ID, r.Verdict, r.Notes)
	}
}

// A store that retries an fsync after EIO and acknowledges acknowledges
// what Linux dropped: I9 catches it once the power is cut. The same store
// stopping at the failed fsync certifies.
func TestFsyncErrorCatchesAStoreThatRetriesFsync(t *testing.T) {
	caughtThenCertified(t, faults.BeforePrepare, faults.FsyncError, diskRetriesFsync, "1 fsync failed with EIO")
}

// A store that takes ENOSPC for success acknowledges a write that never
// reached the disk: caught. The same store returning the error certifies.
func TestDiskFullCatchesAStoreThatTakesENOSPCForSuccess(t *testing.T) {
	caughtThenCertified(t, faults.BeforeCompleted, faults.DiskFull, diskNoSpaceIsSuccess, "failed with ENOSPC")
}

// At the durable steps the probe found in the store's calls (its create
// takes three: the WAL's fsync, the database's, the folder's), an
// fsync-error right before the first catches the store that retries
// fsync, as at the window before the call; the store that stops at the
// error certifies every step.
func TestFsyncErrorAtDurableStepsCatchesAStoreThatRetriesFsync(t *testing.T) {
	requireLazyFS(t)
	opts := CrashOptions{Kinds: []faults.Kind{faults.FsyncError}, Classes: []string{catalogue.DurableStepClass}}
	broken := opts
	broken.Mutant, broken.ExpectBroken = diskRetriesFsync, []string{"I9"}
	rep := CertifyCrashSafety(t, syncingBackend(), broken)
	caught := ""
	for _, r := range rep.Results {
		t.Logf("%s: %s %v", r.Case.ID, r.Verdict, r.Broken())
		if strings.HasPrefix(r.Case.ID, "durable-step-ops.create-1-of-") && r.Verdict == verdict.Fail {
			caught = r.Case.ID
		}
	}
	if caught == "" {
		t.Fatalf("no fsync-error right before the first durable step of ops.create caught the store that retries fsync")
	}
	good := CertifyCrashSafety(t, syncingBackend(), opts)
	n := 0
	for _, r := range good.Results {
		if catalogue.IsDurableStep(r.Case) && r.Case.Kind == faults.FsyncError {
			n++
			if r.Verdict != verdict.Pass {
				t.Errorf("%s: %s %v", r.Case.ID, r.Verdict, r.Notes)
			}
		}
	}
	if n < 3 {
		t.Fatalf("%d durable-step fsync-error cases, want one per sync of the store's create at least (3)", n)
	}
}
