package properties_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The reference SQLite stores with their defaults (WAL, synchronous=FULL)
// under the disk errors at every window (docs/power-loss.md, "Disk
// errors", says what this shows): every case passes and every error
// acted. At the window before the operation is persisted: the failed
// fsync failed SQLite's commit, the service tried the prepare again (a
// second model call) and that commit, written again whole, was durable;
// on the full disk the ingest failed with SQLite's "database or disk is
// full": a failure, never an acknowledgement.
func TestSQLiteDefaultsUnderDiskErrors(t *testing.T) {
	rep := crashrun.Run(t, embedded.SQLite(), crashrun.Options{Kinds: faults.DiskKinds}).Report
	if rep.ExitCode != 0 || len(rep.Results) == 0 {
		t.Fatalf("the reference SQLite stores under disk errors: exit %d, counts %v", rep.ExitCode, rep.Counts)
	}
	per := map[faults.Kind]int{}
	for _, r := range rep.Results {
		per[r.Case.Kind]++
		if r.Verdict != verdict.Pass {
			t.Errorf("%s: %s %v %v", r.Case.ID, r.Verdict, r.Broken(), r.Notes)
		}
	}
	if per[faults.FsyncError] != per[faults.DiskFull] || per[faults.DiskFull] != per[faults.SlowSync] || per[faults.FsyncError] < len(faults.Catalogue) {
		t.Errorf("cases per kind %v, want one per window (%d) each", per, len(faults.Catalogue))
	}
	for _, r := range rep.Results {
		if r.Case.Point != faults.BeforePrepare {
			continue
		}
		var failed []string
		models, results := 0, 0 // the model calls of the first action
		for _, rec := range r.Timeline {
			switch {
			case rec.Worker != "fault":
			case rec.Kind == history.Result:
				results++
				if rec.Err != "" {
					failed = append(failed, rec.Err)
				}
			case rec.Kind == history.Model && results == 0:
				models++
			}
		}
		switch r.Case.Kind {
		case faults.FsyncError:
			if len(failed) != 0 || models < 2 {
				t.Errorf("%s: the fault worker's first ingest made %d model calls and its actions failed with %q; want the prepare tried again after SQLite's error, and no failure", r.Case.ID, models, failed)
			}
			t.Logf("%s: the first ingest called the model %d times (the prepare was tried again after the failed commit) and completed", r.Case.ID, models)
		case faults.DiskFull:
			if len(failed) == 0 || !strings.Contains(failed[0], "database or disk is full") {
				t.Errorf("%s: the fault worker's failed actions %q, want SQLite's \"database or disk is full\"", r.Case.ID, failed)
				continue
			}
			t.Logf("%s: the ingest failed: %s", r.Case.ID, failed[0])
		}
	}
}

// A disk error that never acts (the store keeps its files off the case's
// lazy mount, so no fsync or write of it reaches the error) leaves its
// case not exercised, with the cause no-disk-io: never a pass.
func TestDiskErrorThatNeverActsIsNotExercised(t *testing.T) {
	elsewhere := sim.Backend{
		Name:     "sqlite-elsewhere",
		Embedded: true,
		Open: func(_ context.Context, env sim.CaseEnv) (reference.Stores, error) {
			if err := os.MkdirAll(env.TempDir, 0o755); err != nil {
				return reference.Stores{}, err
			}
			return sqlite.Open(filepath.Join(env.TempDir, "elsewhere.db"), sqlite.Options{})
		},
	}
	rep := crashrun.Run(t, elsewhere, crashrun.Options{Points: []faults.Point{faults.BeforePrepare}, Kinds: []faults.Kind{faults.FsyncError}}).Report
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want the one case", len(rep.Results))
	}
	r := rep.Results[0]
	if r.Verdict != verdict.NotExercised || r.NotExercised == nil || r.NotExercised.Cause != verdict.CauseNoDiskIO || rep.ExitCode == 0 {
		t.Fatalf("%s: %s (%+v), exit %d; want not exercised, cause %s; notes %v", r.Case.ID, r.Verdict, r.NotExercised, rep.ExitCode, verdict.CauseNoDiskIO, r.Notes)
	}
}
