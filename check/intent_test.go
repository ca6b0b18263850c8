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
		for _, v := range got {
			if v.RootCause || v.Forgot != "" {
				t.Errorf("%s: %+v marked a forgotten claim, with no restart between", c.name, v)
			}
		}
	}
}

// A claim granted, then a power loss (or a server restart), then another
// instance's resume while the claim was live: the store forgot the claim
// it had granted, one more forgotten write (a root cause), not a
// violation of its own. A store that skipped its fsync had it apart from
// the root cause of every other write it forgot.
func TestForgottenClaimIsARootCause(t *testing.T) {
	claimA := seen("a", history.Observation{What: history.SeenClaim, Op: "op", Holder: "a/1", Now: 1000, Until: 1300, Granted: true})
	resumeB := []history.Record{
		{Worker: "b", Kind: history.Action, Do: "recover"},
		seen("b", history.Observation{What: history.SeenClaim, Op: "op", Holder: "b/2", Now: 1000, Until: 1300, Granted: true}),
		event("b", reference.Event{Kind: reference.EvInvoke, OperationID: "op", DocumentID: "d", Detail: "resume", Holder: "b/2", At: 1000}),
	}
	for name, between := range map[string]history.Record{
		"power loss":     {Worker: "a", Kind: history.Hit, Point: faults.RecoveryBeforeResume, Fault: &faults.Action{Kind: faults.PowerLoss, Hit: 1}},
		"server restart": {Worker: "a", Kind: history.Server, Point: faults.RecoveryBeforeResume, Fault: &faults.Action{Kind: faults.ServerCrash, Hit: 1}, Note: "postgres restarted"},
	} {
		log := append(history.Log{claimA, between}, resumeB...)
		got := only(CheckIntents(Snapshot{}, Observed{Log: log}), I7)
		if len(got) != 1 || !got[0].RootCause || got[0].Forgot != ForgotClaim || !strings.Contains(got[0].Message, "the store forgot the claim it had granted") {
			t.Errorf("%s between the claim and the resume: %+v, want one I7 that says the store forgot the claim", name, got)
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
			{Worker: worker, Kind: history.Result, Do: "recover", Err: "injected"},
		}
	}
	// Each one's process dies before its call returns: it may have died
	// before it could record the failure, so none of them counts.
	dieOnce := func(worker string) []history.Record { return failOnce(worker)[:2] }
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
	died := append(history.Log{}, base...)
	for _, w := range []string{"w", "r1", "r2", "r3"} {
		died = append(died, dieOnce(w)...)
	}
	died = append(died, failOnce("r4")...)
	if got := only(CheckIntents(snap, Observed{Log: died}), I5); len(got) != 0 {
		t.Errorf("four processes died before they could record the failure: %v, want none", got)
	}
}

// Once a permanent failure is recorded (SeenMark), whoever takes the
// operation up afterwards finishes its dead letter and runs none of its
// plan: a graph write or a state commit by such a worker breaks I5; the
// dead letter's own reconciliation (deletes) does not.
func TestCheckIntentsNotRetriedAfterMark(t *testing.T) {
	snap := Snapshot{Ops: []reference.Operation{{OperationID: "op", DocumentID: "d", Stage: reference.GraphApplied, Disposition: reference.DeadLetter}}}
	marked := history.Log{
		seen("w1", history.Observation{What: history.SeenFreeze, Op: "op", Doc: "d", Do: string(reference.Ingestion), Created: true}),
		seen("w1", history.Observation{What: history.SeenMark, Op: "op", Doc: "d"}),
		seen("w1", history.Observation{What: history.SeenGraph, Op: "op", Deleted: 2}),
		event("w2", reference.Event{Kind: reference.EvInvoke, OperationID: "op", Detail: "ingest"}),
	}
	for name, c := range map[string]struct {
		then history.Log
		want string
	}{
		"graph write":  {history.Log{event("w2", reference.Event{Kind: reference.EvGraphBatch, OperationID: "op", Detail: "1"})}, "a graph write"},
		"state commit": {history.Log{seen("w2", history.Observation{What: history.SeenCommit, Op: "op", Doc: "d", Revision: 1})}, "a state commit"},
		"stale-edge clean-up of a committed state": {history.Log{event("w2", reference.Event{Kind: reference.EvGraphBatch, OperationID: "op", Detail: "stale edges"}),
			event("w2", reference.Event{Kind: reference.EvDisposition, OperationID: "op", Detail: "DEAD_LETTER: x"})}, ""},
		"reconcile only": {history.Log{event("w2", reference.Event{Kind: reference.EvGraphBatch, OperationID: "op", Detail: "reconcile"}),
			event("w2", reference.Event{Kind: reference.EvDisposition, OperationID: "op", Detail: "DEAD_LETTER: x"})}, ""},
	} {
		log := append(append(history.Log{}, marked...), c.then...)
		got := only(CheckIntents(snap, Observed{Log: log}), I5)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%s: %v, want none", name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0].Message, c.want) || !strings.Contains(got[0].Message, "w2 took the operation up after its permanent failure was recorded")):
			t.Errorf("%s: %v, want one I5 violation naming %q", name, got, c.want)
		}
	}
	// The same writes by a worker that took the operation up before the
	// mark (a holder racing the one that failed) are not a retry.
	early := history.Log{marked[0], marked[3], marked[1], event("w2", reference.Event{Kind: reference.EvGraphBatch, OperationID: "op", Detail: "1"})}
	if got := only(CheckIntents(snap, Observed{Log: early}), I5); len(got) != 0 {
		t.Errorf("taken up before the mark: %v, want none", got)
	}
}

// An operation under way before the history began (a loaded state's
// unfinished operation) is an intent that may still take effect: a
// retraction answered NO_OP while it was pending is not the document's last
// word, and recovery finishing the loaded ingest afterwards breaks nothing.
// Once the history shows the loaded operation ended, a later answer is the
// last word again. (The walkthrough "From incident to scenario" reported
// I5 on the unmodified reference before this.)
func TestCheckIntentsPendingBeforeHistory(t *testing.T) {
	snap := Snapshot{States: []reference.DocumentState{{DocumentID: "d2", Revision: 1, OperationID: "loaded", Status: reference.DocActive, ContentHash: "h"}}}
	retract := history.Log{
		seen("w1", history.Observation{What: history.SeenIntent, Do: "retract", Doc: "d2"}),
		{Worker: "w1", Kind: history.Result, Do: "retract", Result: &history.Outcome{Outcome: string(reference.OutcomeNoOp)}},
	}
	finish := event("quiesce", reference.Event{Kind: reference.EvStage, OperationID: "loaded", DocumentID: "d2", From: reference.StateCommitted, To: reference.Completed})
	pending := []PendingIntent{{Operation: "loaded", Document: "d2"}}

	after := append(append(history.Log{}, retract...), finish)
	if got := only(CheckIntents(snap, Observed{Log: after, Pending: pending}), I5); len(got) != 0 {
		t.Errorf("retraction answered while the loaded ingest was pending: %v, want none", got)
	}
	if got := only(CheckIntents(snap, Observed{Log: after}), I5); len(got) != 1 {
		t.Errorf("without the pending intent the same history must break I5 (the check still judges): %v", got)
	}
	before := append(history.Log{finish}, retract...)
	if got := only(CheckIntents(snap, Observed{Log: before, Pending: pending}), I5); len(got) != 1 || !strings.Contains(got[0].Message, "answered NO_OP, the last answer on it, yet the document is ACTIVE") {
		t.Errorf("retraction asked after the loaded ingest ended: %v, want one I5 violation", got)
	}
}

// Every answer is checked against the stores: ALREADY_COMPLETED and
// COMPLETED need the operation COMPLETED and its commit in the document's
// history, NO_OP needs the document as the intent wanted it, a disposition
// needs that disposition.
func TestCheckAnswersAgainstTheStores(t *testing.T) {
	committed := reference.DocumentState{DocumentID: "d", Revision: 1, OperationID: "op", Status: reference.DocActive, ContentHash: "h"}
	good := Snapshot{Ops: []reference.Operation{{OperationID: "op", DocumentID: "d", Stage: reference.Completed}},
		States: []reference.DocumentState{committed}, Versions: map[string][]reference.DocumentState{"d": {committed}}}
	answer := func(do, outcome string, rev int64) history.Log {
		return history.Log{
			seen("w", history.Observation{What: history.SeenIntent, Do: do, Doc: "d", ContentHash: "h"}),
			{Worker: "w", Kind: history.Result, Do: do, Result: &history.Outcome{Op: "op", Outcome: outcome, Revision: rev}},
		}
	}
	lost := Snapshot{Ops: []reference.Operation{{OperationID: "op", DocumentID: "d", Stage: reference.StateCommitted}}}
	other1 := committed
	other1.ContentHash = "first content"
	// SUPERSEDED: op abandoned for "re" (revision 1 of this content); B's
	// revision 2 holds other content.
	replanned := reference.DocumentState{DocumentID: "d", Revision: 1, OperationID: "re", Status: reference.DocActive, ContentHash: "h"}
	other := reference.DocumentState{DocumentID: "d", Revision: 2, OperationID: "b", Status: reference.DocActive, ContentHash: "other"}
	superseded := Snapshot{Ops: []reference.Operation{{OperationID: "op", DocumentID: "d", Stage: reference.Prepared, Disposition: reference.Abandoned, SupersededBy: "re"}},
		States: []reference.DocumentState{other}, Versions: map[string][]reference.DocumentState{"d": {replanned, other}}}
	for name, c := range map[string]struct {
		snap Snapshot
		log  history.Log
		want string
	}{
		"already completed, held":       {good, answer("ingest", "ALREADY_COMPLETED", 1), ""},
		"already completed, not held":   {lost, answer("ingest", "ALREADY_COMPLETED", 1), "the store holds it STATE_COMMITTED"},
		"already completed, no commit":  {Snapshot{Ops: good.Ops}, answer("ingest", "ALREADY_COMPLETED", 1), "holds no state committed by it at revision 1"},
		"completed, lost op (I5's)":     {Snapshot{}, answer("ingest", "COMPLETED", 1), ""},
		"no-op ingest, held":            {good, answer("ingest", "NO_OP", 1), ""},
		"no-op ingest of nothing":       {good, answer("ingest", "NO_OP", 0), "only over a document that already holds its content"},
		"no-op retract of active":       {good, answer("retract", "NO_OP", 1), "revision 1 is ACTIVE, not RETRACTED"},
		"dead letter not recorded":      {good, answer("ingest", "DEAD_LETTER", 0), "the store holds it COMPLETED"},
		"superseded, re-plan committed": {superseded, answer("ingest", "SUPERSEDED", 1), ""},
		"superseded, nothing committed": {superseded, answer("ingest", "SUPERSEDED", 0), "holds no revision 0 that superseded it"},
		"superseded by other content":   {superseded, answer("ingest", "SUPERSEDED", 2), "revision 2 is ACTIVE with other content"},
		"superseded by itself":          {Snapshot{Ops: superseded.Ops, Versions: good.Versions}, answer("ingest", "SUPERSEDED", 1), "committed by the operation itself"},
		"superseded, not abandoned":     {good, answer("ingest", "SUPERSEDED", 1), "not ABANDONED"},
		// An operationId resubmitted with other content, answered with the
		// first content's commit (a mutant that resumed it found it passed).
		"completed, other content": {Snapshot{Ops: good.Ops, Versions: map[string][]reference.DocumentState{"d": {other1}}}, answer("ingest", "COMPLETED", 1),
			"revision 1 is ACTIVE with other content: the answer acknowledged an ingestion of this content that never happened"},
		"already completed retract of active": {good, answer("retract", "ALREADY_COMPLETED", 1), "revision 1 is ACTIVE, not RETRACTED"},
	} {
		got := only(CheckIntents(c.snap, Observed{Log: c.log}), I9)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%s: %v, want none", name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0].Message, c.want)):
			t.Errorf("%s: %v, want one I9 violation saying %q", name, got, c.want)
		}
	}
}

// A NO_OP at revision R says R was current when the service read; an
// answer at a later revision given to anyone before the intent was asked
// makes it a stale read (the bbolt mutant that served each instance its
// own cached states answered NO_OP at revision 1 after another instance
// had been answered COMPLETED at revision 2, and certified). The same
// answers interleaved the other way round are legal: the NO_OP may be
// ordered before the other commit.
func TestAnswerOlderThanAnAcknowledgedRevisionIsStale(t *testing.T) {
	v1 := reference.DocumentState{DocumentID: "d", Revision: 1, OperationID: "op1", Status: reference.DocActive, ContentHash: "h1"}
	v2 := reference.DocumentState{DocumentID: "d", Revision: 2, OperationID: "op2", Status: reference.DocActive, ContentHash: "h2"}
	snap := Snapshot{Ops: []reference.Operation{{OperationID: "op1", DocumentID: "d", Stage: reference.Completed}, {OperationID: "op2", DocumentID: "d", Stage: reference.Completed}},
		States: []reference.DocumentState{v2}, Versions: map[string][]reference.DocumentState{"d": {v1, v2}}}
	ask := func(w, h string) history.Record {
		return seen(w, history.Observation{What: history.SeenIntent, Do: "ingest", Doc: "d", ContentHash: h})
	}
	answer := func(w, op, outcome string, rev int64) history.Record {
		return history.Record{Worker: w, Kind: history.Result, Do: "ingest", Result: &history.Outcome{Op: op, Outcome: outcome, Revision: rev}}
	}
	stale := history.Log{ask("a", "h1"), answer("a", "op1", "COMPLETED", 1), ask("b", "h2"), answer("b", "op2", "COMPLETED", 2),
		ask("a", "h1"), answer("a", "op3", "NO_OP", 1)}
	got := only(CheckIntents(snap, Observed{Log: stale}), I9)
	if len(got) != 1 || !strings.Contains(got[0].Message, "answered NO_OP at revision 1, yet b had been answered COMPLETED at revision 2 before it was asked") {
		t.Fatalf("NO_OP at 1 after COMPLETED at 2 was acknowledged: %v, want one I9 stale read", got)
	}
	// A second retraction after a re-ingestion answered with the first
	// retraction's commit (a retraction operationId made without the
	// revision): ALREADY_COMPLETED at 2 after COMPLETED at 3.
	retract := func(w string) history.Record {
		return seen(w, history.Observation{What: history.SeenIntent, Do: "retract", Doc: "d"})
	}
	retracted := reference.DocumentState{DocumentID: "d", Revision: 2, OperationID: "r1", Status: reference.DocRetracted}
	again := reference.DocumentState{DocumentID: "d", Revision: 3, OperationID: "op3", Status: reference.DocActive, ContentHash: "h2"}
	snap2 := Snapshot{Ops: []reference.Operation{{OperationID: "op1", DocumentID: "d", Stage: reference.Completed}, {OperationID: "r1", DocumentID: "d", Stage: reference.Completed}, {OperationID: "op3", DocumentID: "d", Stage: reference.Completed}},
		States: []reference.DocumentState{again}, Versions: map[string][]reference.DocumentState{"d": {v1, retracted, again}}}
	twice := history.Log{ask("a", "h1"), answer("a", "op1", "COMPLETED", 1), retract("a"), {Worker: "a", Kind: history.Result, Do: "retract", Result: &history.Outcome{Op: "r1", Outcome: "COMPLETED", Revision: 2}},
		ask("a", "h2"), answer("a", "op3", "COMPLETED", 3), retract("a"), {Worker: "a", Kind: history.Result, Do: "retract", Result: &history.Outcome{Op: "r1", Outcome: "ALREADY_COMPLETED", Revision: 2}}}
	got = only(CheckIntents(snap2, Observed{Log: twice}), I9)
	if len(got) != 1 || !strings.Contains(got[0].Message, "retract of document d was answered ALREADY_COMPLETED at revision 2, yet a had been answered COMPLETED at revision 3") {
		t.Fatalf("second retraction answered with the first: %v, want one I9", got)
	}
	overlapping := history.Log{ask("a", "h1"), answer("a", "op1", "COMPLETED", 1), ask("a", "h1"), ask("b", "h2"), answer("b", "op2", "COMPLETED", 2),
		answer("a", "op3", "NO_OP", 1)}
	if got := only(CheckIntents(snap, Observed{Log: overlapping}), I9); len(got) != 0 {
		t.Fatalf("NO_OP asked before the other commit was answered: %v, want none", got)
	}
}

// Frozen plans that give one entity (its type and name as normalised) two
// node ids split it: I6, even when the registry kept only the first (a
// mutant that hashed names without folding their case dead-lettered the
// second document on a registry conflict, and certified).
func TestOneEntityOneNodeIDAcrossPlans(t *testing.T) {
	plan := func(node, typ, name string) reference.Plan {
		return reference.Plan{Registrations: []reference.EntityRegistration{{NodeID: node, Type: typ, CanonicalName: name}}}
	}
	split := Snapshot{Plans: map[string]reference.Plan{"op-a": plan("org:1", "Org", "Acme"), "op-b": plan("org:2", "org", " ACME ")}}
	got := CheckI6(split, Observed{})
	if len(got) != 1 || !strings.Contains(got[0].Message, `entity org " ACME " has two node ids in the frozen plans: org:1 (operation op-a) and org:2 (operation op-b)`) {
		t.Fatalf("one entity, two node ids: %v, want one I6", got)
	}
	same := Snapshot{Plans: map[string]reference.Plan{"op-a": plan("org:1", "Org", "Acme"), "op-b": plan("org:1", "ORG", "acme"), "op-c": plan("org:3", "Org", "Acme Corp")}}
	if got := CheckI6(same, Observed{}); len(got) != 0 {
		t.Fatalf("one node id per entity: %v, want none", got)
	}
}
