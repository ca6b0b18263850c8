// Package plansavetest is the conformance suite of System B's stores
// (plansave.CheckpointStore and plansave.PlanStore): the contract every
// pair of stores must keep, and the crash scenarios a durable pair must
// survive. A store's own tests call it with a factory, as
// testing/fstest.TestFS is called with a file system.
package plansavetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// Stores is the pair of stores a workflow runs on, from one backend.
type Stores interface {
	plansave.CheckpointStore
	plansave.PlanStore
}

// Durable opens the stores of a durable backend over dir: a second call
// with the same dir sees everything the first committed, as a restarted
// process does. unique false opens the mutant without UNIQUE(owner,
// operation_id). The suite closes what it opens.
type Durable func(t *testing.T, dir string, unique bool) (Stores, io.Closer)

var ctx = context.Background()

var yes = func() *bool { b := true; return &b }()
var no = func() *bool { b := false; return &b }()

// crashRuntime simulates a process death at an armed point by a panic
// that runUntilCrash catches.
func crashRuntime(s *faults.Schedule) *faults.Runtime { return faults.PanicCrash(s) }

// runUntilCrash runs f and reports the crash that ended it, or nil.
var runUntilCrash = faults.RunUntilCrash

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func workflow(st Stores, sched *faults.Schedule) *plansave.Workflow {
	return &plansave.Workflow{Checkpoints: st, Plans: st, Faults: crashRuntime(sched)}
}

// TestStores runs the contract of a pair of stores, each subtest on fresh
// stores from open: a workflow's happy path, the wait for approval, a
// conflicting save under a used operation_id, and concurrent saves of one
// operation.
func TestStores(t *testing.T, open func(t *testing.T) Stores) {
	t.Run("HappyPath", func(t *testing.T) { happyPath(t, open(t)) })
	t.Run("WaitingForApproval", func(t *testing.T) { waitingForApproval(t, open(t)) })
	t.Run("SaveConflict", func(t *testing.T) { saveConflict(t, open(t)) })
	t.Run("ConcurrentSavesOfOneOperation", func(t *testing.T) { concurrentSaves(t, open(t)) })
}

func happyPath(t *testing.T, st Stores) {
	w := workflow(st, faults.NewSchedule())
	cp, err := w.Start(ctx, "thread-1", "alice", "plan a trip", 30)
	must(t, err)
	if cp.Status != plansave.StatusStarted || cp.Next != plansave.StepApprove || cp.OperationID != "op-thread-1" || cp.PlanID != 0 {
		t.Fatalf("start: %+v", cp)
	}
	// Start is idempotent: the thread keeps its operation_id.
	again, err := w.Start(ctx, "thread-1", "alice", "other question", 99)
	must(t, err)
	if again != cp {
		t.Fatalf("restart of a thread changed it: %+v", again)
	}
	done, err := w.Invoke(ctx, "thread-1", yes)
	must(t, err)
	rows, err := st.List(ctx, "alice")
	must(t, err)
	if done.Status != plansave.StatusSaved || done.Next != "" || len(rows) != 1 || done.PlanID != rows[0].ID || done.PlanID == 0 {
		t.Fatalf("saved %+v, rows %+v", done, rows)
	}
	if r := rows[0]; r.Owner != "alice" || r.OperationID != "op-thread-1" || r.Question != "plan a trip" || r.Minutes != 30 {
		t.Fatalf("row %+v", r)
	}
	// The checkpoint is durable; invoking a finished thread changes
	// nothing.
	cp2, ok, err := st.Load(ctx, "thread-1")
	must(t, err)
	if !ok || cp2 != done {
		t.Fatalf("checkpoint %+v", cp2)
	}
	fin, err := w.Invoke(ctx, "thread-1", nil)
	must(t, err)
	rows, _ = st.List(ctx, "alice")
	if fin != done || len(rows) != 1 {
		t.Fatal("invoking a saved thread saved again")
	}
	// A custom operation id generator is used.
	w.NewOperationID = func(th string) string { return "custom-" + th }
	c3, err := w.Start(ctx, "thread-2", "alice", "q", 1)
	must(t, err)
	if c3.OperationID != "custom-thread-2" {
		t.Fatalf("operation id %s", c3.OperationID)
	}
	if other, _ := st.List(ctx, "bob"); len(other) != 0 {
		t.Fatal("rows leak across owners")
	}
}

func waitingForApproval(t *testing.T, st Stores) {
	w := workflow(st, faults.NewSchedule())
	_, err := w.Start(ctx, "t", "alice", "q", 5)
	must(t, err)
	for _, a := range []*bool{nil, no} {
		cp, err := w.Invoke(ctx, "t", a)
		if !errors.Is(err, plansave.ErrNotApproved) || cp.Status != plansave.StatusStarted {
			t.Fatalf("invoke without approval: %+v %v", cp, err)
		}
	}
	if rows, _ := st.List(ctx, "alice"); len(rows) != 0 {
		t.Fatal("saved without approval")
	}
	if _, err := w.Invoke(ctx, "unknown-thread", yes); err == nil {
		t.Fatal("invoke of an unknown thread succeeded")
	}
	for _, k := range [][2]string{{"", "alice"}, {"t2", " "}} {
		if _, err := w.Start(ctx, k[0], k[1], "q", 1); err == nil {
			t.Fatalf("Start(%q,%q) accepted blanks", k[0], k[1])
		}
	}
}

func saveConflict(t *testing.T, st Stores) {
	id, err := st.Save(ctx, "alice", "op-1", "q", 5)
	must(t, err)
	id2, err := st.Save(ctx, "alice", "op-1", "q", 5)
	must(t, err)
	if id2 != id {
		t.Fatalf("repeated save: id %d, want %d", id2, id)
	}
	for _, c := range []struct {
		q string
		m int
	}{{"other", 5}, {"q", 6}} {
		if _, err := st.Save(ctx, "alice", "op-1", c.q, c.m); !errors.Is(err, plansave.ErrConflict) {
			t.Fatalf("conflicting save %v: %v", c, err)
		}
	}
	// The same operation_id of another owner is another row.
	id3, err := st.Save(ctx, "bob", "op-1", "other", 1)
	must(t, err)
	if id3 == id {
		t.Fatal("owners share rows")
	}
	rows, err := st.List(ctx, "alice")
	must(t, err)
	if len(rows) != 1 || rows[0].Question != "q" {
		t.Fatalf("rows %+v", rows)
	}
}

func concurrentSaves(t *testing.T, st Stores) {
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = st.Save(ctx, "alice", "op-x", "q", 1)
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("save %d: id %d err %v (first %d)", i, ids[i], errs[i], ids[0])
		}
	}
	rows, err := st.List(ctx, "alice")
	must(t, err)
	if len(rows) != 1 {
		t.Fatalf("%d rows: %s", len(rows), fmt.Sprint(rows))
	}
}

// TestCrashRecovery runs the crash scenarios of seed 000 on a durable pair
// of stores: a crash (or an unknown outcome) between the business commit
// and the checkpoint, before the business commit and before the approval
// is recorded, each resumed by a new process on the same stores, must end
// saved with one row, the first commit's; a transient checkpoint failure
// is retried; and the mutant without the unique constraint saves twice
// (the scenario tells them apart).
func TestCrashRecovery(t *testing.T, open Durable) {
	for _, kind := range []faults.Kind{faults.Crash, faults.Unknown} {
		t.Run("AfterBusinessCommit/"+string(kind), func(t *testing.T) {
			first, final, rows := crashAfterBusinessCommit(t, open, true, kind)
			if final.Status != plansave.StatusSaved || len(rows) != 1 || final.PlanID != first || rows[0].ID != first {
				t.Fatalf("final %+v, rows %+v, first id %d: want saved, one row, the first id", final, rows, first)
			}
		})
	}
	t.Run("MutantWithoutUniqueSavesTwice", func(t *testing.T) {
		first, final, rows := crashAfterBusinessCommit(t, open, false, faults.Crash)
		if len(rows) != 2 {
			t.Fatalf("mutant: %d rows, want 2", len(rows))
		}
		if final.PlanID == first {
			t.Fatal("mutant returned the first id")
		}
	})
	for _, p := range []faults.Point{faults.PlanSaveBeforeBusiness, faults.PlanSaveBeforeApprove} {
		for _, kind := range []faults.Kind{faults.Crash, faults.Unknown} {
			t.Run(string(p)+"/"+string(kind), func(t *testing.T) { crashBefore(t, open, p, kind) })
		}
	}
	t.Run("TransientSaveErrorThenRetry", func(t *testing.T) { transientThenRetry(t, open) })
}

// reopen opens the stores over dir and closes them when the test ends.
func reopen(t *testing.T, open Durable, dir string, unique bool) Stores {
	t.Helper()
	st, c := open(t, dir, unique)
	t.Cleanup(func() { _ = c.Close() })
	return st
}

// crashAfterBusinessCommit runs a thread to a crash between the business
// commit and the checkpoint, then resumes it in a new process over the
// same stores. It returns the first commit's row id, the final checkpoint
// and the rows.
func crashAfterBusinessCommit(t *testing.T, open Durable, unique bool, kind faults.Kind) (int64, plansave.Checkpoint, []plansave.PlanRow) {
	dir := t.TempDir()
	st, c := open(t, dir, unique)
	sched := faults.NewSchedule()
	sched.Arm(faults.PlanSaveBeforeCheckpoint, faults.Action{Kind: kind, Hit: 1})
	w := workflow(st, sched)
	_, err := w.Start(ctx, "thread-1", "alice", "plan a trip", 30)
	must(t, err)
	if hit := runUntilCrash(func() { _, _ = w.Invoke(ctx, "thread-1", yes) }); hit == nil || hit.Point != faults.PlanSaveBeforeCheckpoint {
		t.Fatalf("no crash at the checkpoint: %v", hit)
	}
	rows, err := st.List(ctx, "alice")
	must(t, err)
	if len(rows) != 1 {
		t.Fatalf("business commit: %d rows", len(rows))
	}
	first := rows[0].ID
	must(t, c.Close())
	// A new process: new handles on the same stores, same thread id.
	st2 := reopen(t, open, dir, unique)
	cp, ok, err := st2.Load(ctx, "thread-1")
	must(t, err)
	if !ok {
		t.Fatal("checkpoint lost")
	}
	w2 := workflow(st2, faults.NewSchedule())
	final, err := w2.Invoke(ctx, "thread-1", nil)
	must(t, err)
	if final.OperationID != cp.OperationID {
		t.Fatal("the resumed thread changed its operation_id")
	}
	rows, err = st2.List(ctx, "alice")
	must(t, err)
	return first, final, rows
}

func crashBefore(t *testing.T, open Durable, p faults.Point, kind faults.Kind) {
	dir := t.TempDir()
	st := reopen(t, open, dir, true)
	sched := faults.NewSchedule()
	sched.Arm(p, faults.Action{Kind: kind, Hit: 1})
	w := workflow(st, sched)
	_, err := w.Start(ctx, "th", "alice", "q", 3)
	must(t, err)
	if runUntilCrash(func() { _, _ = w.Invoke(ctx, "th", yes) }) == nil {
		t.Fatal("no crash")
	}
	st2 := reopen(t, open, dir, true)
	w2 := workflow(st2, faults.NewSchedule())
	final, err := w2.Invoke(ctx, "th", yes)
	must(t, err)
	rows, err := st2.List(ctx, "alice")
	must(t, err)
	if final.Status != plansave.StatusSaved || len(rows) != 1 || final.PlanID != rows[0].ID {
		t.Fatalf("final %+v rows %+v", final, rows)
	}
}

func transientThenRetry(t *testing.T, open Durable) {
	st := reopen(t, open, t.TempDir(), true)
	sched := faults.NewSchedule()
	sched.Arm(faults.PlanSaveBeforeCheckpoint, faults.Action{Kind: faults.Transient, Hit: 1})
	w := workflow(st, sched)
	_, err := w.Start(ctx, "th", "alice", "q", 3)
	must(t, err)
	cp, err := w.Invoke(ctx, "th", yes)
	var ie *faults.InjectedError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "checkpoint") || cp.Status == plansave.StatusSaved {
		t.Fatalf("transient checkpoint failure: %+v %v", cp, err)
	}
	final, err := w.Invoke(ctx, "th", nil)
	must(t, err)
	rows, _ := st.List(ctx, "alice")
	if final.Status != plansave.StatusSaved || len(rows) != 1 || final.PlanID != rows[0].ID {
		t.Fatalf("final %+v rows %+v", final, rows)
	}
}
