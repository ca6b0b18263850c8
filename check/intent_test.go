package check

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

func seen(worker string, o history.Observation) history.Record {
	return history.Record{Worker: worker, Kind: history.Seen, Obs: &o}
}

func event(worker string, e reference.Event) history.Record {
	return history.Record{Worker: worker, Kind: history.Event, Event: &e}
}

func only(vs []Violation, inv Invariant) []Violation {
	var out []Violation
	for _, v := range vs {
		if v.Invariant == inv {
			out = append(out, v)
		}
	}
	return out
}

// A recovery that resumes an operation while another instance's claim on it
// is live breaks I7; once that claim is released, or expired, it does not.
func TestCheckIntentsClaims(t *testing.T) {
	claimA := seen("a", history.Observation{What: history.SeenClaim, Op: "op", Holder: "a/1", Now: 1000, Until: 1300, Granted: true})
	resumeB := func(at int64) []history.Record {
		return []history.Record{
			{Worker: "b", Kind: history.Action, Do: "recover"},
			seen("b", history.Observation{What: history.SeenClaim, Op: "op", Holder: "b/2", Now: at, Until: at + 300}),
			event("b", reference.Event{Kind: reference.EvInvoke, OperationID: "op", DocumentID: "d", Detail: "resume", Holder: "b/2", At: at}),
		}
	}
	for _, c := range []struct {
		name string
		log  history.Log
		want int
	}{
		{"resume under another's live claim", append(history.Log{claimA}, resumeB(1100)...), 1},
		{"after the claim was released", append(history.Log{claimA, seen("a", history.Observation{What: history.SeenUnclaim, Op: "op", Holder: "a/1", Granted: true})}, resumeB(1100)...), 0},
		{"after the claim expired", append(history.Log{claimA}, resumeB(1300)...), 0},
	} {
		got := only(CheckIntents(Snapshot{}, Observed{Log: c.log}), I7)
		if len(got) != c.want {
			t.Errorf("%s: %d I7 violations %v, want %d", c.name, len(got), got, c.want)
		}
	}
}

// Two rows saved for one thread under two keys are two plans for one
// logical save (I8), whatever the keys.
func TestCheckIntentsLogicalSaves(t *testing.T) {
	log := history.Log{
		seen("w", history.Observation{What: history.SeenSave, Thread: "t1", Owner: "alice", Op: "op-t1-a", ID: 1}),
		seen("r", history.Observation{What: history.SeenSave, Thread: "t1", Owner: "alice", Op: "op-t1-b", ID: 2}),
	}
	obs := Observed{Log: log, Threads: []PlanSaveThread{{Thread: "t1", Owner: "alice"}}}
	two := Snapshot{PlanRows: []plansave.PlanRow{{ID: 1, Owner: "alice", OperationID: "op-t1-a"}, {ID: 2, Owner: "alice", OperationID: "op-t1-b"}}}
	if got := only(CheckIntents(two, obs), I8); len(got) != 1 || !strings.Contains(got[0].Message, "2 plan rows for one logical save") {
		t.Errorf("two rows for one thread: %v, want one I8 violation", got)
	}
	one := Snapshot{PlanRows: two.PlanRows[:1]}
	if got := only(CheckIntents(one, obs), I8); len(got) != 0 {
		t.Errorf("one row: %v, want none", got)
	}
}

// A permanent failure retried more than DeadLetterBound times breaks I5.
func TestCheckIntentsDeadLetterBound(t *testing.T) {
	perm := faults.On(faults.Persistent, 0)
	failOnce := func(worker string) []history.Record {
		return []history.Record{
			event(worker, reference.Event{Kind: reference.EvInvoke, OperationID: "op", Detail: "resume"}),
			{Worker: worker, Kind: history.Hit, Point: faults.BeforeGraphWrite, Fault: &perm},
			event(worker, reference.Event{Kind: reference.EvError, OperationID: "op"}),
		}
	}
	base := history.Log{seen("w", history.Observation{What: history.SeenFreeze, Op: "op", Doc: "d", Do: string(reference.Ingestion), Created: true})}
	snap := Snapshot{Ops: []reference.Operation{{OperationID: "op", DocumentID: "d", Stage: reference.Failed, Disposition: reference.DeadLetter}}}
	var retried history.Log
	retried = append(retried, base...)
	for _, w := range []string{"w", "r", "r", "r"} {
		retried = append(retried, failOnce(w)...)
	}
	if got := only(CheckIntents(snap, Observed{Log: retried}), I5); len(got) != 1 || !strings.Contains(got[0].Message, "3 more times") {
		t.Errorf("retried three times: %v, want one I5 violation saying so", got)
	}
	once := append(append(append(history.Log{}, base...), failOnce("w")...), failOnce("r")...)
	once = append(once, event("r", reference.Event{Kind: reference.EvDisposition, OperationID: "op", Detail: "DEAD_LETTER: x"}))
	if got := only(CheckIntents(snap, Observed{Log: once}), I5); len(got) != 0 {
		t.Errorf("dead-lettered by the recovery that found it: %v, want none", got)
	}
}
