package properties

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The journaling state store: before it commits a document's state, it
// appends the state to a journal of its own and fsyncs it (a log first,
// as a store with its own write-ahead log does); the commit is then the
// reference SQLite store's revision compare-and-set. What it checks
// before that fsync is the defect, or not:
const (
	// statesCheckBeforeSync checks the revision before the journal's
	// fsync and, the check passed, commits after it on whatever revision
	// is current then: it trusts a check the fsync may have outlived.
	statesCheckBeforeSync = "check-before-sync"
)

type journalStates struct {
	reference.DocumentStateStore
	dir, defect string
}

// journal appends next to the process's journal and fsyncs it (a
// journal a process: one file would have every writer wait for the
// fsync of another, as the kernel locks a file for its fsync).
func (s *journalStates) journal(next reference.DocumentState) error {
	line, err := json.Marshal(next)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("states.%d.journal", os.Getpid())), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Sync(), f.Close())
}

func (s *journalStates) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if s.defect != statesCheckBeforeSync {
		if err := s.journal(next); err != nil {
			return false, err
		}
		return s.DocumentStateStore.CompareAndSet(ctx, expected, next)
	}
	cur, ok, err := s.FindCurrent(ctx, next.Space, next.DocumentID)
	switch {
	case err != nil:
		return false, err
	case ok && cur.Revision != expected || !ok && expected != 0:
		return false, nil
	}
	if err := s.journal(next); err != nil {
		return false, err
	}
	// The check passed: commit on the revision current now.
	if cur, ok, err = s.FindCurrent(ctx, next.Space, next.DocumentID); err != nil {
		return false, err
	}
	base := int64(0)
	if ok {
		base = cur.Revision
	}
	next.Revision = base + 1
	return s.DocumentStateStore.CompareAndSet(ctx, base, next)
}

// journalBackend is the reference SQLite stores with the state store
// journaling first, its defect named by the case's mutant.
func journalBackend() sim.Backend {
	return sim.Backend{
		Name:     "sqlite-journaled-states",
		Embedded: true,
		Open: func(_ context.Context, env sim.CaseEnv) (reference.Stores, error) {
			st, err := sqliteIn(env.Dir)
			if err != nil {
				return reference.Stores{}, err
			}
			st.States = &journalStates{DocumentStateStore: st.States, dir: env.Dir, defect: env.Mutant}
			return st, nil
		},
	}
}

// A store call that checks a revision before a slow fsync and commits
// after it on trust is caught by slow-sync's competitor alone: at the
// state commit, the worker's fsync holds past its lease while a
// competitor takes the lease over and commits another version of the
// document; the worker's commit then lands on top of it. The crash,
// pause and power-loss columns and the slow-sync column without a
// competitor certify that store at the window (nobody writes inside its
// call there); the store checking the revision in its commit, after the
// fsync, certifies the competitor's case too.
func TestSlowSyncCompetitorCatchesACheckBeforeTheSync(t *testing.T) {
	requireLazyFS(t)
	p := faults.BeforeStateCommit
	takeover := catalogue.SlowSyncTakeoverClass + "-" + strings.ToLower(string(p))
	others := CertifyCrashSafety(t, journalBackend(), CrashOptions{Points: []faults.Point{p},
		Kinds: []faults.Kind{faults.Crash, faults.Unknown, faults.Pause, faults.Recrash, faults.PowerLoss, faults.SlowSync}, Mutant: statesCheckBeforeSync})
	if others.ExitCode != 0 {
		t.Fatalf("the store that checks before its fsync, every other column at %s: exit %d", p, others.ExitCode)
	}
	opts := CrashOptions{Points: []faults.Point{p}, Kinds: []faults.Kind{faults.SlowSync}, Classes: []string{takeover}}
	broken := opts
	broken.Mutant, broken.ExpectBroken = statesCheckBeforeSync, []string{"I2"}
	rep := CertifyCrashSafety(t, journalBackend(), broken)
	found := false
	for _, r := range rep.Results {
		t.Logf("%s: %s %v %v", r.Case.ID, r.Verdict, r.Broken(), r.Notes)
		if r.Case.Class == takeover {
			found = r.Verdict == verdict.Fail
		} else if r.Verdict != verdict.Pass {
			t.Errorf("%s: %s, want a pass (no competitor inside the call)", r.Case.ID, r.Verdict)
		}
	}
	if !found {
		t.Fatalf("the slow-sync case with a competitor did not fail")
	}
	good := CertifyCrashSafety(t, journalBackend(), opts)
	for _, r := range good.Results {
		if r.Verdict != verdict.Pass {
			t.Errorf("%s without the defect: %s %v", r.Case.ID, r.Verdict, r.Notes)
		}
		if r.Case.Class == takeover && !tookOverDuringTheSync(r.Timeline) {
			t.Errorf("%s: the competitor was granted no lease while the worker's fsync held", r.Case.ID)
		}
	}
}

// tookOverDuringTheSync reports whether the competitor was granted a
// lease after the fault worker's slow fsync began to hold and before the
// fault worker's next record.
func tookOverDuringTheSync(h history.Log) bool {
	holding := false
	for _, r := range h {
		switch {
		case r.Kind == history.Server && r.Worker == "fault" && r.Fault != nil && r.Fault.Kind == faults.SlowSync:
			holding = true
		case holding && r.Worker == "fault":
			return false
		case holding && r.Worker == "competitor" && r.Kind == history.Event && r.Event.Kind == reference.EvLeaseAcquire:
			return true
		}
	}
	return false
}
