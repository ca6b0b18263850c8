package check

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
)

// checkAnswers (I9): every answer the service gave a caller says something
// about the stores, and the final stores must agree with it, whatever came
// after (an answer is an acknowledgement):
//   - COMPLETED and ALREADY_COMPLETED: the operation is in the store,
//     COMPLETED with no disposition, and the document's history holds the
//     state it committed, at the answered revision: this intent's content
//     ACTIVE (an ingestion) or RETRACTED (a retraction);
//   - SUPERSEDED: the operation is ABANDONED and the document's history
//     holds the superseding commit at the answered revision: another
//     operation's, of this content ACTIVE (the intent took effect);
//   - ABANDONED and DEAD_LETTER: the operation carries that disposition;
//   - NO_OP: the document held what the intent asked for at the answered
//     revision (this content ACTIVE, or retracted or absent).
func checkAnswers(s Snapshot, log history.Log) []Violation {
	ops := opIndex(s)
	byRev := map[string]map[int64]reference.DocumentState{} // doc -> revision -> state
	add := func(st reference.DocumentState) {
		if byRev[st.DocumentID] == nil {
			byRev[st.DocumentID] = map[int64]reference.DocumentState{}
		}
		byRev[st.DocumentID][st.Revision] = st
	}
	for _, vs := range s.Versions {
		for _, v := range vs {
			add(v)
		}
	}
	for _, st := range s.States {
		add(st)
	}
	var out []Violation
	pairs, _ := pairAnswers(log)
	for _, p := range pairs {
		r, in := log[p.answer], p.intent
		if r.Err != "" || r.Result == nil || r.Result.Outcome == "" {
			continue
		}
		if v, ok := staleAnswer(log, pairs, p); ok {
			out = append(out, v)
			continue
		}
		if why := disagreement(in, *r.Result, ops, byRev[in.Doc]); why != "" {
			op := r.Result.Op
			out = append(out, Violation{Invariant: I9, Operation: op, Document: in.Doc,
				Message:  fmt.Sprintf("%s's %s of document %s was answered %s (revision %d), yet %s", r.Worker, in.Do, in.Doc, r.Result.Outcome, r.Result.Revision, why),
				Evidence: []string{"the operation in the store: " + describeOp(ops, op), "the document at that revision: " + describeRev(byRev[in.Doc], r.Result.Revision)}})
		}
	}
	return out
}

// staleAnswer (I9) judges a NO_OP answer (and a COMPLETED or
// ALREADY_COMPLETED one of a retraction or of an ingestion without the
// caller's operationId) against the answers acknowledged before its
// intent was asked. A NO_OP at revision R says R was the document's
// current revision when the service read it; an answer given
// to any caller before this intent was asked that named a later revision
// X > R (COMPLETED, ALREADY_COMPLETED, SUPERSEDED or NO_OP at X) proves X
// existed by then, and revisions only grow: the NO_OP read a state
// older than one already acknowledged. A store that serves an instance
// what it read or wrote itself, missing what another instance committed
// since, breaks this (the history's file is appended to by every process
// of a case, so its order is the real order).
func staleAnswer(log history.Log, pairs []answerPair, p answerPair) (Violation, bool) {
	res := log[p.answer].Result
	switch reference.Outcome(res.Outcome) {
	case reference.OutcomeNoOp:
	case reference.OutcomeCompleted, reference.OutcomeAlreadyDone:
		// A retraction, or an ingestion whose operationId the service
		// derived, is planned on the current revision: its commit, or
		// the earlier one it found done, cannot lie below a revision
		// already acknowledged. (A caller's own operationId may be
		// answered with its old commit.)
		if p.intent.Do != "retract" && p.intent.Op != "" {
			return Violation{}, false
		}
	default:
		return Violation{}, false
	}
	var later *answerPair
	for i := range pairs {
		q := &pairs[i]
		r := log[q.answer]
		if q.answer > p.asked || q.intent.Doc != p.intent.Doc || r.Err != "" || r.Result == nil || r.Result.Revision <= res.Revision {
			continue
		}
		switch reference.Outcome(r.Result.Outcome) {
		case reference.OutcomeCompleted, reference.OutcomeAlreadyDone, reference.OutcomeSuperseded, reference.OutcomeNoOp:
			if later == nil || r.Result.Revision > log[later.answer].Result.Revision {
				later = q
			}
		}
	}
	if later == nil {
		return Violation{}, false
	}
	w, lr := log[later.answer].Worker, log[later.answer].Result
	return Violation{Invariant: I9, Operation: res.Op, Document: p.intent.Doc, Consequence: true,
		Message: fmt.Sprintf("%s's %s of document %s was answered %s at revision %d, yet %s had been answered %s at revision %d before it was asked: the answer describes a state older than one already acknowledged (a stale read, or an earlier operation taken for this one)",
			log[p.answer].Worker, p.intent.Do, p.intent.Doc, res.Outcome, res.Revision, w, lr.Outcome, lr.Revision),
		Evidence: []string{fmt.Sprintf("history record %d: %s's answer %s at revision %d (operation %s)", later.answer, w, lr.Outcome, lr.Revision, lr.Op),
			fmt.Sprintf("history record %d: %s asks to %s %s", p.asked, log[p.asked].Worker, p.intent.Do, p.intent.Doc),
			fmt.Sprintf("history record %d: answered %s at revision %d", p.answer, res.Outcome, res.Revision)}}, true
}

// answerPair is one ingest or retraction intent a worker asked (the Seen
// intent record at index asked) and the service's answer to it (the
// Result record at index answer).
type answerPair struct {
	intent        history.Observation
	asked, answer int
}

// pairAnswers pairs each worker's ingest and retraction intents with the
// results that answered them, in order (a worker asks one at a time), and
// returns the intents never answered by worker.
func pairAnswers(log history.Log) (pairs []answerPair, open map[string][]answerPair) {
	open = map[string][]answerPair{}
	for i, r := range log {
		switch {
		case r.Kind == history.Seen && r.Obs != nil && r.Obs.What == history.SeenIntent && (r.Obs.Do == "ingest" || r.Obs.Do == "retract"):
			open[r.Worker] = append(open[r.Worker], answerPair{intent: *r.Obs, asked: i})
		case r.Kind == history.Result && (r.Do == "ingest" || r.Do == "retract") && len(open[r.Worker]) > 0:
			p := open[r.Worker][0]
			open[r.Worker] = open[r.Worker][1:]
			p.answer = i
			pairs = append(pairs, p)
		}
	}
	return pairs, open
}

// disagreement says how the stores contradict one answer, or "".
func disagreement(in history.Observation, res history.Outcome, ops map[string]reference.Operation, revs map[int64]reference.DocumentState) string {
	op, stored := ops[res.Op]
	st, atRev := revs[res.Revision]
	if !stored && reference.Outcome(res.Outcome) != reference.OutcomeNoOp {
		// The operation is gone altogether: I5 reports a lost
		// operation (the same rule as CheckI9's).
		return ""
	}
	switch reference.Outcome(res.Outcome) {
	case reference.OutcomeCompleted, reference.OutcomeAlreadyDone:
		switch {
		case op.Stage != reference.Completed || op.Disposition != reference.Active:
			return fmt.Sprintf("the store holds it %s", describeEnd(op))
		case !atRev || st.OperationID != res.Op:
			return fmt.Sprintf("the document's history holds no state committed by it at revision %d", res.Revision)
		case in.Do == "ingest" && in.ContentHash != "" && (st.Status != reference.DocActive || st.ContentHash != in.ContentHash):
			// The operation committed other content than this intent's
			// (an operationId resubmitted with other content must be
			// refused, not answered with the first content's commit).
			return fmt.Sprintf("revision %d is %s with other content: the answer acknowledged an ingestion of this content that never happened", res.Revision, st.Status)
		case in.Do == "retract" && st.Status != reference.DocRetracted:
			return fmt.Sprintf("revision %d is %s, not RETRACTED", res.Revision, st.Status)
		}
	case reference.OutcomeSuperseded:
		switch {
		case op.Disposition != reference.Abandoned:
			return fmt.Sprintf("the store holds it %s, not ABANDONED", describeEnd(op))
		case !atRev:
			return fmt.Sprintf("the document's history holds no revision %d that superseded it", res.Revision)
		case st.OperationID == res.Op:
			return fmt.Sprintf("revision %d was committed by the operation itself, not by one that superseded it", res.Revision)
		case in.Do == "ingest" && in.ContentHash != "" && (st.Status != reference.DocActive || st.ContentHash != in.ContentHash):
			return fmt.Sprintf("revision %d is %s with other content: the superseding operation did not carry this content out", res.Revision, st.Status)
		}
	case reference.OutcomeAbandoned, reference.OutcomeDeadLetter:
		want := reference.Abandoned
		if reference.Outcome(res.Outcome) == reference.OutcomeDeadLetter {
			want = reference.DeadLetter
		}
		if op.Disposition != want {
			return fmt.Sprintf("the store holds it %s", describeEnd(op))
		}
	case reference.OutcomeNoOp:
		if res.Revision == 0 {
			if in.Do == "ingest" {
				return "an ingestion is a no-op only over a document that already holds its content"
			}
			return "" // nothing to retract
		}
		switch {
		case !atRev:
			return fmt.Sprintf("the document's history holds no revision %d", res.Revision)
		case in.Do == "ingest" && (st.Status != reference.DocActive || st.ContentHash != in.ContentHash):
			return fmt.Sprintf("revision %d is %s with other content, not this content ACTIVE", res.Revision, st.Status)
		case in.Do == "retract" && st.Status != reference.DocRetracted:
			return fmt.Sprintf("revision %d is %s, not RETRACTED", res.Revision, st.Status)
		}
	}
	return ""
}

func describeOp(ops map[string]reference.Operation, id string) string {
	op, ok := ops[id]
	if !ok {
		return "none (" + id + ")"
	}
	return fmt.Sprintf("%s %s", id, describeEnd(op))
}

func describeRev(revs map[int64]reference.DocumentState, rev int64) string {
	st, ok := revs[rev]
	return describeState(st, ok)
}
