package check

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// A thread whose checkpoint names another operation_id than its start
// gave made the id anew on retry: the row saved under the first id and
// the one under the new id are two plans for one logical save (I8), even
// though the checkpoint's own id has exactly one row. A thread that kept
// its id passes.
func TestCheckI8OperationIDMadeAnew(t *testing.T) {
	rows := []plansave.PlanRow{{ID: 1, Owner: "alice", OperationID: "alice/op-a", Question: "q", Minutes: 5},
		{ID: 2, Owner: "alice", OperationID: "alice/op-b", Question: "q", Minutes: 5}}
	snap := Snapshot{PlanRows: rows, Checkpoints: map[string]plansave.Checkpoint{
		"s/t1": {ThreadID: "s/t1", Owner: "alice", OperationID: "alice/op-b", Status: plansave.StatusSaved, PlanID: 2}}}
	obs := Observed{Threads: []PlanSaveThread{{Thread: "s/t1", Owner: "alice", StartedOp: "alice/op-a", ReturnedIDs: []int64{2}}}}
	got := only(CheckI8(snap, obs), I8)
	if len(got) != 1 || !strings.Contains(got[0].Message, "operation_id changed from alice/op-a (its start) to alice/op-b: 2 plan rows for one logical save") {
		t.Fatalf("operation_id made anew: %v, want one I8 violation naming both ids", got)
	}
	if ev := strings.Join(got[0].Evidence, "\n"); !strings.Contains(ev, "row id 1 under alice/op-a") || !strings.Contains(ev, "row id 2 under alice/op-b") {
		t.Errorf("evidence lacks the two rows:\n%s", ev)
	}
	kept := Snapshot{PlanRows: rows[:1], Checkpoints: map[string]plansave.Checkpoint{
		"s/t1": {ThreadID: "s/t1", Owner: "alice", OperationID: "alice/op-a", Status: plansave.StatusSaved, PlanID: 1}}}
	obs.Threads[0].ReturnedIDs = []int64{1}
	if got := only(CheckI8(kept, obs), I8); len(got) != 0 {
		t.Errorf("the id kept: %v, want none", got)
	}
}
