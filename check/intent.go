package check

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The checks in this file judge the service against what the harness
// recorded itself (history.Seen: the worker's intent before each call, the
// model it owns, and what really reached the stores), never only against
// the records the service keeps about itself.

// CheckIntents runs every intent-based check; each violation names the
// invariant it breaks.
func CheckIntents(s Snapshot, o Observed) []Violation {
	if len(o.Log) == 0 {
		return nil
	}
	x := newIntentIndex(o.Log)
	x.pending = o.Pending
	var out []Violation
	out = append(out, x.checkI1(s)...)
	out = append(out, x.checkI2()...)
	out = append(out, x.checkI4(s)...)
	out = append(out, x.checkDeadLetters(s)...)
	out = append(out, x.checkFulfilled(s)...)
	out = append(out, checkAnswers(s, x.log)...)
	out = append(out, checkRegistered(s)...)
	out = append(out, x.checkClaims()...)
	out = append(out, x.checkStaleWrites()...)
	out = append(out, x.checkLogicalSaves(s, o)...)
	return out
}

// intentIndex is the history digested once for the checks.
type intentIndex struct {
	log history.Log
	obs []history.WorkerObservation
	// freeze is the created freeze of each operation, and base its plan's
	// base revision as the harness saw it (the model call's for an
	// ingestion, the freeze's for a retraction).
	freeze map[string]history.WorkerObservation
	model  map[string]history.WorkerObservation
	// docOf maps operations to documents.
	docOf map[string]string
	// stalledBetweenCalls are the workers a fault stalled before one of
	// their store calls (faults.StoreCall): see checkStaleWrites.
	stalledBetweenCalls map[string]bool
	// leaseFaulted are the workers whose lease a fault broke, and
	// leaseFaults says whether any was.
	leaseFaulted map[string]bool
	// pending are the intents under way before the history began.
	pending []PendingIntent
}

func newIntentIndex(h history.Log) *intentIndex {
	x := &intentIndex{log: h, obs: h.Observations(), freeze: map[string]history.WorkerObservation{}, model: map[string]history.WorkerObservation{},
		docOf: map[string]string{}}
	fw := faultedWorkersOf(h)
	x.leaseFaulted, x.stalledBetweenCalls = fw.leaseFaulted, fw.stalled
	for _, r := range h {
		switch r.Kind {
		case history.Event:
			if r.Event.OperationID != "" && r.Event.DocumentID != "" {
				x.docOf[r.Event.OperationID] = r.Event.DocumentID
			}
		}
	}
	for _, ob := range x.obs {
		switch ob.What {
		case history.SeenModel:
			if _, frozen := x.freeze[ob.Op]; !frozen {
				x.model[ob.Op] = ob // the last answer before the freeze
			}
		case history.SeenFreeze:
			if _, ok := x.freeze[ob.Op]; !ok && ob.Created {
				x.freeze[ob.Op] = ob
			}
		}
		if ob.Op != "" && ob.Doc != "" {
			x.docOf[ob.Op] = ob.Doc
		}
	}
	return x
}

// base returns the revision op's frozen plan was made against, as the
// harness saw it, and whether it knows.
func (x *intentIndex) base(op string) (int64, bool) {
	f, ok := x.freeze[op]
	if !ok {
		return 0, false
	}
	if f.Do == string(reference.Ingestion) {
		m, ok := x.model[op]
		if !ok || m.Base < 0 {
			return 0, false
		}
		return m.Base, true
	}
	return f.Base, f.Base >= 0
}

// intentKey names one ingestion intent: this content of this document on
// top of this revision.
func intentKey(doc, hash string, base int64) string {
	return fmt.Sprintf("%s@%d/%.12s", doc, base, hash)
}

// checkI1: one frozen plan per ingestion intent, across retries, recovery
// and restarts (a retry that mints a new operationId makes a second one);
// no model call for an intent after its plan was frozen (unless a lease
// fault let two holders plan at once); the stored plan is the plan that
// was frozen, by the checker's own encoding; every graph write puts only
// content of a frozen plan into the graph.
func (x *intentIndex) checkI1(s Snapshot) []Violation {
	var out []Violation
	frozenFor := map[string]string{} // intent -> first operation frozen for it
	frozenAt := map[string]int{}     // intent -> history index of that freeze
	items := map[string]bool{}
	ops := make([]string, 0, len(x.freeze))
	for op := range x.freeze {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return x.freeze[ops[i]].Index < x.freeze[ops[j]].Index })
	for _, op := range ops {
		f := x.freeze[op]
		for _, it := range f.Items {
			items[it] = true
		}
		m, ok := x.model[op]
		if f.Do != string(reference.Ingestion) || !ok || m.Base < 0 {
			continue
		}
		base := m.Base
		if p, stored := s.Plans[op]; stored && x.stalledBetweenCalls[m.Worker] {
			// Stalled between its read of the document and its model
			// call, the worker planned against a revision older than
			// the one the harness saw at the call: the plan says which.
			base = p.ExpectedRevision()
		}
		k := intentKey(m.Doc, m.ContentHash, base)
		if first, dup := frozenFor[k]; dup {
			out = append(out, Violation{Invariant: I1, Operation: op, Document: m.Doc,
				Message:  fmt.Sprintf("a second plan was frozen for one ingestion intent (document %s, this content, on top of revision %d): operation %s, after %s; a retry must reuse the operationId and its plan", m.Doc, m.Base, op, first),
				Evidence: []string{"first plan: " + first + " (" + x.freeze[first].Plan[:12] + ")", "second plan: " + op + " (" + f.Plan[:12] + ")"}})
			continue
		}
		frozenFor[k], frozenAt[k] = op, f.Index
	}
	if len(x.leaseFaulted) == 0 {
		for _, ob := range x.obs {
			if ob.What != history.SeenModel || ob.Base < 0 || x.stalledBetweenCalls[ob.Worker] {
				continue // a stalled worker's call: see stalledCallsAfterFreeze
			}
			k := intentKey(ob.Doc, ob.ContentHash, ob.Base)
			if at, ok := frozenAt[k]; ok && ob.Index > at {
				out = append(out, Violation{Invariant: I1, Operation: ob.Op, Document: ob.Doc,
					Message: fmt.Sprintf("the model was asked again (by %s, operation %s) for an intent whose plan %s was already frozen", ob.Worker, ob.Op, frozenFor[k])})
			}
		}
	}
	for _, op := range ops {
		p, ok := s.Plans[op]
		if ok && PlanDigest(p) != x.freeze[op].Plan {
			out = append(out, Violation{Invariant: I1, Operation: op, Document: x.freeze[op].Doc,
				Message:  "the stored plan is not the plan that was frozen (the checker's own encoding of its content differs)",
				Evidence: []string{"frozen " + x.freeze[op].Plan, "stored " + PlanDigest(p)}})
		}
	}
	// A plan frozen by a store call that died after its commit (a window
	// the store declares inside CreateIfAbsent) was never seen returning:
	// the stored plans count as frozen too.
	for _, p := range s.Plans {
		for _, it := range MutationItems(p.Mutation) {
			items[it] = true
		}
	}
	reported := map[string]bool{}
	for _, ob := range x.obs {
		if ob.What != history.SeenGraph || reported[ob.Op] {
			continue
		}
		for _, it := range ob.Items {
			if !items[it] {
				reported[ob.Op] = true
				out = append(out, Violation{Invariant: I1, Operation: ob.Op, Document: x.docOf[ob.Op],
					Message:  fmt.Sprintf("%s wrote to the graph, under operation %s, content that no frozen plan holds: a plan other than the frozen one was executed", ob.Worker, ob.Op),
					Evidence: []string{"written: " + it}})
				break
			}
		}
	}
	return out
}

// checkI2: a commit may replace only the revision its plan was made
// against (as the harness saw it when the model was asked, or when a
// retraction was frozen).
func (x *intentIndex) checkI2() []Violation {
	var out []Violation
	for _, ob := range x.obs {
		if ob.What != history.SeenCommit {
			continue
		}
		if b, ok := x.base(ob.Op); ok && ob.Expected != b {
			out = append(out, Violation{Invariant: I2, Operation: ob.Op, Document: ob.Doc,
				Message:  fmt.Sprintf("operation %s committed revision %d over revision %d, but its plan was made against revision %d", ob.Op, ob.Revision, ob.Expected, b),
				Evidence: []string{fmt.Sprintf("committed by %s; the plan's base as the harness saw it: %d", ob.Worker, b)}})
		}
	}
	return out
}

// checkI4: an operation reaches STATE_COMMITTED only after the harness saw
// its state committed (or the store holds a version it committed).
func (x *intentIndex) checkI4(s Snapshot) []Violation {
	var out []Violation
	committed := map[string]bool{}
	// A worker killed at a random instant may die between a commit and
	// its record: a version the store holds for the operation counts too.
	for _, st := range s.States {
		committed[st.OperationID] = true
	}
	for _, vs := range s.Versions {
		for _, v := range vs {
			committed[v.OperationID] = true
		}
	}
	for _, r := range x.log {
		switch {
		case r.Kind == history.Seen && r.Obs != nil && r.Obs.What == history.SeenCommit:
			committed[r.Obs.Op] = true
		case r.Kind == history.Event && r.Event.Kind == reference.EvStage && r.Event.To == reference.StateCommitted && !committed[r.Event.OperationID]:
			out = append(out, Violation{Invariant: I4, Operation: r.Event.OperationID, Document: r.Event.DocumentID,
				Message: fmt.Sprintf("%s moved the operation to STATE_COMMITTED, but no state commit of it ever reached the state store", r.Worker)})
			committed[r.Event.OperationID] = true // once
		}
	}
	return out
}

// DeadLetterBound is how many more times an operation that failed
// permanently may fail permanently again before it is dead-lettered: once,
// in the recovery that finds it when its first failure did not come through
// the service's failure path, and no more. A failure met by a worker that
// died before its call returned does not count: the worker may have died
// before it could record the failure, and the next one to take the
// operation up cannot know of it. Once the failure is recorded (the
// pending dead-letter mark reached the store) the rule is stricter: whoever
// takes the operation up afterwards finishes the dead letter and runs no
// step of the plan (checkNotRetried).
const DeadLetterBound = 1

// checkDeadLetters (I5): an operation whose step failed permanently (a
// permanent or persistent fault, attributed to the operation the worker
// reported on next) fails permanently at most DeadLetterBound more times
// before it reaches its dead letter (or, should the error have gone away,
// its end): a permanent error is not retried.
func (x *intentIndex) checkDeadLetters(s Snapshot) []Violation {
	ops := opIndex(s)
	hits := map[string][]int{} // op -> history indexes of its permanent failures
	var order []string
	for i, r := range x.log {
		if r.Kind != history.Hit || r.Fault == nil || (r.Fault.Kind != faults.Permanent && r.Fault.Kind != faults.Persistent) {
			continue
		}
		op := x.nextOpOf(r.Worker, i)
		if f, frozen := x.freeze[op]; !frozen || f.Index > i {
			continue // no operation existed yet: nothing to dead-letter
		}
		if _, ok := ops[op]; !ok {
			continue // I5 reports a lost operation
		}
		if !x.answeredAfter(r.Worker, i) {
			continue // died before it could record the failure
		}
		if len(hits[op]) == 0 {
			order = append(order, op)
		}
		hits[op] = append(hits[op], i)
	}
	out := x.checkNotRetried(ops)
	for _, op := range order {
		first := hits[op][0]
		end, why := len(x.log), "its end ("+describeEnd(ops[op])+")"
	scan:
		for j, e := range x.log[first+1:] {
			if e.Kind != history.Event || e.Event.OperationID != op {
				continue
			}
			switch {
			case e.Event.Kind == reference.EvDisposition:
				end, why = first+1+j, "its disposition ("+e.Event.Detail+")"
				break scan
			case e.Event.Kind == reference.EvStage && e.Event.To == reference.Completed:
				end, why = first+1+j, "COMPLETED"
				break scan
			}
		}
		again := 0
		for _, h := range hits[op][1:] {
			if h < end {
				again++
			}
		}
		if again > DeadLetterBound {
			r := x.log[first]
			out = append(out, Violation{Invariant: I5, Operation: op, Document: ops[op].DocumentID,
				Message:  fmt.Sprintf("the operation failed permanently at %s (%s), then failed permanently %d more times before %s (bound %d): a permanent error was retried instead of dead-lettered", r.Point, r.Fault, again, why, DeadLetterBound),
				Evidence: []string{fmt.Sprintf("attempts recorded: %d; failure reason: %s", ops[op].Attempts, ops[op].FailureReason)}})
		}
	}
	return out
}

// answeredAfter says whether worker's call in progress at history index i
// returned (a Result record of the worker follows), or the worker died
// first.
func (x *intentIndex) answeredAfter(worker string, i int) bool {
	for _, r := range x.log[i+1:] {
		if r.Worker == worker && r.Kind == history.Result {
			return true
		}
	}
	return false
}

// checkNotRetried (I5): once an operation's permanent failure is recorded
// (history.SeenMark), a worker that takes it up afterwards (resumes it, or
// is asked for the same intent again) finishes its dead letter and runs no
// step of its plan: no graph upsert, no state commit, no step that can
// fail again. Reconciling its graph effects is the dead letter's own work
// and is allowed.
func (x *intentIndex) checkNotRetried(ops map[string]reference.Operation) []Violation {
	marked := map[string]int{}  // op -> history index of its first mark
	took := map[string]string{} // worker -> operation it took up after the mark
	done := map[string]bool{}   // ops already reported or disposed of
	var out []Violation
	report := func(op, worker, what string, i int) {
		done[op] = true
		out = append(out, Violation{Invariant: I5, Operation: op, Document: x.docOf[op],
			Message: fmt.Sprintf("%s took the operation up after its permanent failure was recorded and ran its plan again (%s): a permanent error was retried instead of dead-lettered", worker, what),
			Evidence: []string{fmt.Sprintf("failure recorded at history line %d; %s at line %d", marked[op]+1, what, i+1),
				"final record: " + describeEnd(ops[op])}})
	}
	for i, r := range x.log {
		switch r.Kind {
		case history.Seen:
			if r.Obs == nil {
				continue
			}
			ob := r.Obs
			switch {
			case ob.What == history.SeenMark:
				if _, ok := marked[ob.Op]; !ok {
					marked[ob.Op] = i
				}
			case done[ob.Op] || took[r.Worker] != ob.Op:
			case ob.What == history.SeenCommit:
				report(ob.Op, r.Worker, "a state commit", i)
			}
		case history.Event:
			e := r.Event
			switch {
			case e.Kind == reference.EvDisposition:
				done[e.OperationID] = true
			case e.Kind == reference.EvGraphBatch && planBatch(e.Detail) && took[r.Worker] == e.OperationID && !done[e.OperationID]:
				// A batch of the plan's own graph write (numbered); a
				// reconciliation or a clean-up of stale edges is the dead
				// letter's work.
				report(e.OperationID, r.Worker, "a graph write", i)
			case e.Kind == reference.EvInvoke && e.OperationID != "":
				if _, ok := marked[e.OperationID]; ok && !done[e.OperationID] {
					took[r.Worker] = e.OperationID
				} else {
					delete(took, r.Worker)
				}
			}
		case history.Hit:
			op := took[r.Worker]
			if op == "" || done[op] || r.Fault == nil || (r.Fault.Kind != faults.Permanent && r.Fault.Kind != faults.Persistent) {
				continue
			}
			if x.nextOpOf(r.Worker, i) == op {
				report(op, r.Worker, fmt.Sprintf("a step that failed permanently again at %s", r.Point), i)
			}
		}
	}
	return out
}

// planBatch says whether a graph batch event's detail numbers a batch of
// the plan's own mutation (not "reconcile" or "stale edges").
func planBatch(detail string) bool {
	_, err := strconv.Atoi(detail)
	return err == nil
}

func describeEnd(op reference.Operation) string {
	if op.Disposition != reference.Active {
		return string(op.Disposition)
	}
	return string(op.Stage)
}

// nextOpOf names the operation the worker reported on first after history
// index i (the one the fault hit).
func (x *intentIndex) nextOpOf(worker string, i int) string {
	for _, r := range x.log[i+1:] {
		if r.Worker == worker && r.Kind == history.Event && r.Event.OperationID != "" {
			return r.Event.OperationID
		}
	}
	return ""
}

// checkFulfilled (I5): once every intent on a document was answered, and
// answered without an error, the last one, if it overlapped no other
// intent on the document (it was asked after all of them were answered),
// is the document's final state: an ingest leaves it ACTIVE with that
// content, a retraction leaves it RETRACTED.
func (x *intentIndex) checkFulfilled(s Snapshot) []Violation {
	type answered struct {
		intent        history.Observation
		worker        string
		res           *history.Outcome
		err           string
		asked, answer int
		overlapped    bool
	}
	last := map[string]*answered{}
	lastAnswer := map[string]int{}                   // doc -> history index of its latest answer
	failed := map[string]bool{}                      // doc -> some intent on it was answered with an error
	unanswered := map[string][]history.Observation{} // doc -> intents never answered
	pairs, open := pairAnswers(x.log)
	for _, p := range pairs {
		r, doc := x.log[p.answer], p.intent.Doc
		if r.Err != "" {
			failed[doc] = true
		}
		prev, seen := lastAnswer[doc]
		last[doc] = &answered{intent: p.intent, worker: r.Worker, res: r.Result, err: r.Err, asked: p.asked, answer: p.answer,
			overlapped: seen && prev > p.asked}
		lastAnswer[doc] = p.answer
	}
	for _, ins := range open {
		for _, in := range ins {
			unanswered[in.intent.Doc] = append(unanswered[in.intent.Doc], in.intent)
		}
	}
	// An operation under way before the history began is an intent asked
	// first and never answered: until the history shows it ended, it may
	// still take effect after any answer on its document.
	// One that lost a revision race lives on in the operation that planned
	// its content anew on the latest revision (SupersededBy, and so on down
	// the chain: recovery re-plans it again when it loses again), which
	// takes effect on top of whatever won, a retraction included: it ends
	// when the last operation of its chain ends.
	endedAt := x.operationEnds()
	next := map[string]string{}
	for _, op := range s.Ops {
		if op.SupersededBy != "" {
			next[op.OperationID] = op.SupersededBy
		}
	}
	pendingUntil := map[string]int{} // doc -> history index by which its pending operations ended
	for _, p := range x.pending {
		end, seen := 0, map[string]bool{}
		for id := p.Operation; id != "" && !seen[id]; id = next[id] {
			seen[id] = true
			e, ok := endedAt[id]
			if !ok {
				e = len(x.log)
			}
			end = max(end, e)
		}
		pendingUntil[p.Document] = max(pendingUntil[p.Document], end)
	}
	cur := map[string]reference.DocumentState{}
	for _, st := range s.States {
		cur[st.DocumentID] = st
	}
	docs := make([]string, 0, len(last))
	for d := range last {
		docs = append(docs, d)
	}
	sort.Strings(docs)
	var out []Violation
	for _, d := range docs {
		a := last[d]
		if until, ok := pendingUntil[d]; ok && until > a.asked {
			continue // a loaded operation still under way when it was asked
		}
		if failed[d] || a.res == nil || len(unanswered[d]) > 0 || a.overlapped {
			// An intent answered with an error may still take effect
			// (recovery retries a FAILED operation and plans it anew on
			// top of whatever won meanwhile), one that never returned
			// too, and one that raced another has no single last word.
			continue
		}
		st, ok := cur[d]
		switch {
		case a.intent.Do == "ingest" && (a.res.Outcome == string(reference.OutcomeCompleted) || a.res.Outcome == string(reference.OutcomeNoOp) || a.res.Outcome == string(reference.OutcomeSuperseded)):
			if !ok || st.Status != reference.DocActive || st.ContentHash != a.intent.ContentHash {
				out = append(out, Violation{Invariant: I5, Document: d, Operation: a.res.Op,
					Message:  fmt.Sprintf("%s's ingest of document %s was answered %s, the last answer on it, yet the document does not hold that content: the intent never took effect", a.worker, d, a.res.Outcome),
					Evidence: []string{"final state: " + describeState(st, ok)}})
			}
		case a.intent.Do == "retract" && (a.res.Outcome == string(reference.OutcomeCompleted) || a.res.Outcome == string(reference.OutcomeNoOp)):
			if ok && st.Status != reference.DocRetracted {
				out = append(out, Violation{Invariant: I5, Document: d, Operation: a.res.Op,
					Message:  fmt.Sprintf("%s's retraction of document %s was answered %s, the last answer on it, yet the document is %s", a.worker, d, a.res.Outcome, st.Status),
					Evidence: []string{"final state: " + describeState(st, ok)}})
			}
		}
	}
	return out
}

// operationEnds maps each operation that ended in the history (reached
// COMPLETED or a disposition) to the history index where it did.
func (x *intentIndex) operationEnds() map[string]int {
	out := map[string]int{}
	for i, r := range x.log {
		if r.Kind != history.Event || r.Event == nil {
			continue
		}
		e := r.Event
		if _, seen := out[e.OperationID]; seen {
			continue
		}
		if e.Kind == reference.EvDisposition || e.Kind == reference.EvStage && e.To == reference.Completed {
			out[e.OperationID] = i
		}
	}
	return out
}

func describeState(st reference.DocumentState, ok bool) string {
	if !ok {
		return "absent"
	}
	return fmt.Sprintf("revision %d %s by %s (content %.12s)", st.Revision, st.Status, st.OperationID, st.ContentHash)
}

// checkRegistered (I6, the other way round): every node an ACTIVE document
// supports is registered.
func checkRegistered(s Snapshot) []Violation {
	reg := map[string]bool{}
	for _, e := range s.Registry {
		reg[e.NodeID] = true
	}
	var out []Violation
	for _, st := range s.States {
		if st.Status != reference.DocActive {
			continue
		}
		for _, n := range st.NodeIDs {
			if !reg[n] {
				out = append(out, Violation{Invariant: I6, Document: st.DocumentID, Operation: st.OperationID,
					Message: fmt.Sprintf("node %s, which ACTIVE document %s supports, is not registered", n, st.DocumentID)})
			}
		}
	}
	return out
}

// checkClaims (I7): no instance resumes an operation, during recovery,
// while another instance's claim on it is live.
func (x *intentIndex) checkClaims() []Violation {
	live := map[string][]claim{} // op -> granted, unreleased claims
	action := map[string]string{}
	// A worker killed at a random instant may have released a claim and
	// died before recording it: its claims are not judged.
	randomKilled := map[string]bool{}
	for _, r := range x.log {
		if r.Kind == history.Kill {
			randomKilled[r.Worker] = true
		}
	}
	var out []Violation
	for _, r := range x.log {
		switch r.Kind {
		case history.Action:
			action[r.Worker] = r.Do
		case history.Seen:
			switch ob := r.Obs; ob.What {
			case history.SeenClaim:
				if ob.Granted && !randomKilled[r.Worker] {
					live[ob.Op] = append(without(live[ob.Op], ob.Holder), claim{holder: ob.Holder, now: ob.Now, until: ob.Until})
				}
			case history.SeenUnclaim:
				live[ob.Op] = without(live[ob.Op], ob.Holder)
			}
		case history.Hit, history.Server:
			// A power loss (at its hit) or a database server killed and
			// restarted (once the supervisor did it): a claim granted
			// before it must outlive it.
			if f := r.Fault; f != nil && r.Err == "" && (r.Kind == history.Hit && f.Kind.IsPowerLoss() || r.Kind == history.Server && f.Kind == faults.ServerCrash) {
				what := "a power loss"
				if r.Kind == history.Server {
					what = "a database server restart"
				}
				for _, cs := range live {
					for i := range cs {
						cs[i].outlived = cmp.Or(cs[i].outlived, what)
					}
				}
			}
		case history.Event:
			e := r.Event
			if e.Kind != reference.EvInvoke || e.Detail != "resume" || action[r.Worker] != "recover" {
				continue
			}
			for _, c := range live[e.OperationID] {
				if c.holder != e.Holder && e.At >= c.now && e.At < c.until {
					v := Violation{Invariant: I7, Operation: e.OperationID, Document: e.DocumentID,
						Message: fmt.Sprintf("recovery %s resumed the operation while %s's claim on it was live (claimed at %d, until %d; resumed at %d)", e.Holder, c.holder, c.now, c.until, e.At)}
					if c.outlived != "" {
						// Granted, then a restart lost it: the claim's
						// write was not durable.
						v.Message += fmt.Sprintf("; %s came between the claim and the resume: the store forgot the claim it had granted (its write was not durable)", c.outlived)
						v.RootCause, v.Forgot = true, ForgotClaim
					}
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// claim is a granted recovery claim.
type claim struct {
	holder     string
	now, until int64
	// outlived names the power loss or server restart that came after
	// the claim was granted ("" when none did).
	outlived string
}

// without returns the claims not held by holder.
func without(cs []claim, holder string) []claim {
	out := cs[:0:0]
	for _, c := range cs {
		if c.holder != holder {
			out = append(out, c)
		}
	}
	return out
}

// checkStaleWrites (I7): within one call, once another holder was granted
// a document's lease, the previous holder writes nothing more for that
// document (no graph write that puts content in, no state commit). Workers whose lease a fault
// broke are not judged here: with the lease gone on purpose, the CAS and
// the other invariants must hold instead. Nor are workers stalled before a
// store call (faults.StoreCall): such a stall can fall between the lease
// check and the write it fences, which no check in the client can see (a
// pause there outlives any lease), so there too the CAS and the other
// invariants must hold alone.
func (x *intentIndex) checkStaleWrites() []Violation {
	type lease struct {
		token      int64
		supersoded string
	}
	holds := map[string]map[string]*lease{} // worker -> doc -> lease of the current call
	var out []Violation
	stale := func(worker, doc string) string {
		if l := holds[worker][doc]; l != nil {
			return l.supersoded
		}
		return ""
	}
	for _, r := range x.log {
		switch r.Kind {
		case history.Event:
			e := r.Event
			switch e.Kind {
			case reference.EvInvoke, reference.EvOK, reference.EvError:
				delete(holds, r.Worker)
			case reference.EvLeaseAcquire:
				for w, docs := range holds {
					if l := docs[e.DocumentID]; w != r.Worker && l != nil && e.Token > l.token && l.supersoded == "" {
						l.supersoded = fmt.Sprintf("%s (token %d)", e.Holder, e.Token)
					}
				}
				if holds[r.Worker] == nil {
					holds[r.Worker] = map[string]*lease{}
				}
				holds[r.Worker][e.DocumentID] = &lease{token: e.Token}
			}
		case history.Seen:
			ob := r.Obs
			// A graph write that only deletes is a reconciliation (of an
			// abandoned plan or a dead letter), which needs no lease: it
			// removes only what nothing supports.
			if (ob.What != history.SeenGraph || len(ob.Items) == 0) && ob.What != history.SeenCommit || x.leaseFaulted[r.Worker] || x.stalledBetweenCalls[r.Worker] {
				continue
			}
			doc := firstNonEmptyString(ob.Doc, x.docOf[ob.Op])
			if by := stale(r.Worker, doc); by != "" && !x.leaseFaultedHolder(by) {
				what := "wrote content to the graph"
				if ob.What == history.SeenCommit {
					what = fmt.Sprintf("committed revision %d", ob.Revision)
				}
				out = append(out, Violation{Invariant: I7, Operation: ob.Op, Document: doc,
					Message: fmt.Sprintf("%s %s for document %s after its lease was granted to %s: a stale holder was not stopped", r.Worker, what, doc, by)})
				holds[r.Worker][doc] = nil // once per lease
			}
		}
	}
	return out
}

func (x *intentIndex) leaseFaultedHolder(holder string) bool {
	w, _, _ := strings.Cut(holder, "/")
	return x.leaseFaulted[w]
}

// leaseFaultedHolders is intentIndex.leaseFaultedHolder without the rest
// of the index (CheckI7 needs only this; the index copies every
// observation of the case).
func leaseFaultedHolders(h history.Log) func(holder string) bool {
	faulted := map[string]bool{}
	for _, r := range h {
		if r.Kind == history.Hit && r.Fault != nil && r.Fault.Kind.IsLeaseFault() {
			faulted[r.Worker] = true
		}
	}
	return func(holder string) bool {
		w, _, _ := strings.Cut(holder, "/")
		return faulted[w]
	}
}

func firstNonEmptyString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkLogicalSaves (I8): one plan row per logical save, (owner, thread),
// whatever keys the code chose for its attempts.
func (x *intentIndex) checkLogicalSaves(s Snapshot, o Observed) []Violation {
	keys := map[string]map[string]bool{} // thread -> keys saved under
	owner := map[string]string{}
	for _, ob := range x.obs {
		if ob.What != history.SeenSave || ob.Err != "" {
			continue
		}
		if keys[ob.Thread] == nil {
			keys[ob.Thread] = map[string]bool{}
		}
		keys[ob.Thread][ob.Op] = true
		owner[ob.Thread] = ob.Owner
	}
	var out []Violation
	for _, th := range o.Threads {
		ks := keys[th.Thread]
		if len(ks) == 0 {
			continue
		}
		var rows []string
		for _, r := range s.PlanRows {
			if r.Owner == owner[th.Thread] && ks[r.OperationID] {
				rows = append(rows, fmt.Sprintf("row %d under key %s", r.ID, r.OperationID))
			}
		}
		if len(rows) != 1 {
			out = append(out, Violation{Invariant: I8, Operation: th.Thread,
				Message:  fmt.Sprintf("%d plan rows for one logical save (owner %s, thread %s), want exactly 1", len(rows), owner[th.Thread], th.Thread),
				Evidence: rows})
		}
	}
	return out
}
