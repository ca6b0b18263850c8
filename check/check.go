// Package check holds the invariant checkers I1–I9 of protocol.md. Each
// reads a Snapshot of the stores' real contents and what the harness
// Observed (the durable history), and returns Violations that name the
// invariant, the operation and the evidence.
package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Invariant names one property of protocol.md.
type Invariant string

// The invariants.
const (
	I1 Invariant = "I1 one plan per operationId"
	I2 Invariant = "I2 no stale-revision commit"
	I3 Invariant = "I3 convergent graph"
	I4 Invariant = "I4 legal stages"
	I5 Invariant = "I5 liveness"
	I6 Invariant = "I6 registry"
	I7 Invariant = "I7 leases"
	I8 Invariant = "I8 plan save"
	I9 Invariant = "I9 acknowledged durability"
)

// All lists every invariant.
var All = []Invariant{I1, I2, I3, I4, I5, I6, I7, I8, I9}

// Short returns "I3" for I3.
func (i Invariant) Short() string { s, _, _ := strings.Cut(string(i), " "); return s }

// ParseInvariant accepts "I3" or the full name.
func ParseInvariant(s string) (Invariant, error) {
	for _, i := range All {
		if strings.EqualFold(s, i.Short()) || s == string(i) {
			return i, nil
		}
	}
	return "", fmt.Errorf("unknown invariant %q (want I1..I9)", s)
}

// Violation is one broken invariant with its evidence.
type Violation struct {
	Invariant Invariant `json:"invariant"`
	Operation string    `json:"operation,omitempty"`
	Document  string    `json:"document,omitempty"`
	Message   string    `json:"message"`
	Evidence  []string  `json:"evidence,omitempty"`
	// Events cites the history events that show the violation, as
	// indices into Observed.Events (the service's events in history
	// order), so a report can point at them.
	Events []int `json:"events,omitempty"`
	// RootCause marks a violation that explains the case's others: a
	// store forgot an acknowledged record across a restart, after which
	// leases, stages and revisions start over and other checks fail too.
	RootCause bool `json:"rootCause,omitempty"`
	// Consequence marks a violation that is never a root cause, even of
	// an invariant whose violations usually are (I9): a stale answer
	// breaks I9 where nothing was lost, and follows from the loss where
	// a store forgot what it had acknowledged.
	Consequence bool `json:"consequence,omitempty"`
	// Forgot names, on a violation that says a store forgot a write it
	// had acknowledged, the kind of record it was (ForgotOperation, …).
	// However many kinds a case lost and at whichever window, they are
	// one defect (a write that was not durable: a skipped fsync loses
	// whichever record was written last), which a report folds under one
	// root cause.
	Forgot string `json:"forgot,omitempty"`
}

// What a store forgot (Violation.Forgot).
const (
	ForgotOperation  = "operation"
	ForgotStage      = "operation stage"
	ForgotState      = "document state"
	ForgotVersion    = "version"
	ForgotGraphNode  = "graph node"
	ForgotGraphEdge  = "graph edge"
	ForgotPlanRow    = "plan row"
	ForgotCheckpoint = "checkpoint"
	ForgotLease      = "lease grant"
	ForgotClaim      = "claim"
)

func (v Violation) String() string {
	s := v.Invariant.Short() + ": " + v.Message
	if v.Operation != "" {
		s += " [op " + v.Operation + "]"
	}
	return s
}

// Observed is what the harness saw, from the durable history.
type Observed struct {
	// Events of the service, in history order.
	Events []reference.Event
	// ModelCalls counts model calls per operationId (the durable call log).
	ModelCalls map[string]int
	// Prepared maps operationIds the history saw persisted to the
	// fingerprints seen for them.
	Prepared map[string][]string
	// Quiet says whether the final recovery found nothing left to do, and
	// Rounds how many rounds it took.
	Quiet  bool
	Rounds int
	// Threads are System B's threads.
	Threads []PlanSaveThread
	// ConflictAccepted lists threads where a conflicting retry was
	// accepted instead of failing loudly.
	ConflictAccepted []string
	// Log is the whole history: the intent-based checks (CheckIntents)
	// read the harness's own observations and which worker did what.
	Log history.Log
	// Restarts are the database server restarts of the case (I9).
	Restarts []Restart
	// Pending are intents asked before the history began whose answer it
	// never saw: the unfinished operations of a loaded state (a
	// scenario's initial block). Each may take effect until its operation
	// ends, so it overlaps every intent on its document asked meanwhile.
	Pending []PendingIntent
}

// PendingIntent is an operation on Document that was under way before the
// history began.
type PendingIntent struct {
	Operation, Document string
}

// Check runs every checker.
func Check(s Snapshot, o Observed) []Violation {
	var out []Violation
	for _, f := range []func(Snapshot, Observed) []Violation{CheckI1, CheckI2, CheckI3, CheckI4, CheckI5, CheckI6, CheckI7, CheckI8, CheckI9, CheckIntents} {
		out = append(out, f(s, o)...)
	}
	return out
}

// planMissing says whether a plan's load error says there is no plan at
// all (as opposed to a plan that is there but damaged).
func planMissing(msg string) bool {
	return strings.Contains(msg, reference.ErrNotFound.Error()) || strings.Contains(msg, reference.ErrNoPersistedPlan.Error())
}

func opIndex(s Snapshot) map[string]reference.Operation {
	m := make(map[string]reference.Operation, len(s.Ops))
	for _, op := range s.Ops {
		m[op.OperationID] = op
	}
	return m
}

// eventsOf returns the indices of op's events of one kind.
func (o Observed) eventsOf(kind, op string) []int {
	var out []int
	for i, e := range o.Events {
		if e.Kind == kind && e.OperationID == op {
			out = append(out, i)
		}
	}
	return out
}

// CheckI1: one plan per operationId. The stored fingerprint is the one the
// history saw persisted and its plan hashes to it; no model call for an
// operationId happened after the call that produced its persisted plan.
func CheckI1(s Snapshot, o Observed) []Violation {
	var out []Violation
	ops := opIndex(s)
	for id, fps := range o.Prepared {
		op, ok := ops[id]
		if !ok {
			continue // I5 reports a lost operation
		}
		for _, fp := range fps {
			if fp != op.PlanFingerprint {
				out = append(out, Violation{Invariant: I1, Operation: id, Document: op.DocumentID,
					Message:  "the stored plan fingerprint changed after the operation was persisted",
					Evidence: []string{"persisted with " + fp, "stored now " + op.PlanFingerprint}, Events: o.eventsOf(reference.EvPrepared, id)})
			}
		}
	}
	fw := faultedWorkersOf(o.Log)
	for _, op := range s.Ops {
		if msg, bad := s.PlanErrors[op.OperationID]; bad {
			if planMissing(msg) {
				continue // I5 reports a lost plan
			}
			out = append(out, Violation{Invariant: I1, Operation: op.OperationID, Document: op.DocumentID,
				Message: "the stored plan does not load against its fingerprint", Evidence: []string{msg}})
			continue
		}
		p, ok := s.Plans[op.OperationID]
		if !ok || p.Kind != reference.Ingestion {
			continue
		}
		if calls := o.ModelCalls[op.OperationID] - stalledCallsAfterFreeze(o.Log, op.OperationID, fw) - concurrentCallsBeforeFreeze(o.Log, op.OperationID, fw); calls > p.ExtractionCall {
			out = append(out, Violation{Invariant: I1, Operation: op.OperationID, Document: op.DocumentID, Events: o.eventsOf(reference.EvModelCall, op.OperationID),
				Message:  fmt.Sprintf("the model was called %d times for this operationId, but the persisted plan came from call %d: the model was called again after the plan was frozen", calls, p.ExtractionCall),
				Evidence: []string{fmt.Sprintf("model calls (durable call log): %d", calls), fmt.Sprintf("plan.extractionCall: %d", p.ExtractionCall)}})
		}
	}
	return out
}

// CheckI2: no stale-revision commit. Each document's committed revisions
// form a gap-free chain 1..n ending at the current state, every commit's
// operation expected exactly the previous revision, and no revision was
// committed twice.
func CheckI2(s Snapshot, o Observed) []Violation {
	var out []Violation
	ops := opIndex(s)
	cur := map[string]reference.DocumentState{}
	for _, st := range s.States {
		cur[st.DocumentID] = st
	}
	docs := make([]string, 0, len(s.Versions))
	for d := range s.Versions {
		docs = append(docs, d)
	}
	sort.Strings(docs)
	for _, d := range docs {
		vs := s.Versions[d]
		for i, v := range vs {
			if v.Revision != int64(i+1) {
				out = append(out, Violation{Invariant: I2, Document: d, Operation: v.OperationID,
					Message: fmt.Sprintf("revision chain has a gap: position %d holds revision %d", i+1, v.Revision), Evidence: revs(vs)})
				break
			}
			if op, ok := ops[v.OperationID]; ok && op.ExpectedRevision != v.Revision-1 {
				out = append(out, Violation{Invariant: I2, Document: d, Operation: v.OperationID, Events: o.eventsOf(reference.EvStateCommit, v.OperationID),
					Message:  fmt.Sprintf("revision %d was committed by an operation that expected revision %d, not %d", v.Revision, op.ExpectedRevision, v.Revision-1),
					Evidence: append(revs(vs), fmt.Sprintf("operation %s expectedRevision=%d", op.OperationID, op.ExpectedRevision))})
			}
		}
		if c, ok := cur[d]; ok {
			if len(vs) == 0 || vs[len(vs)-1].Revision != c.Revision || vs[len(vs)-1].OperationID != c.OperationID {
				out = append(out, Violation{Invariant: I2, Document: d, Operation: c.OperationID,
					Message:  fmt.Sprintf("current revision %d (op %s) is not the last revision of the history", c.Revision, c.OperationID),
					Evidence: revs(vs)})
			}
		}
	}
	type key struct {
		doc string
		rev int64
	}
	type commit struct {
		op    string
		event int
	}
	committed := map[key]commit{}
	for i, e := range o.Events {
		if e.Kind != reference.EvStateCommit {
			continue
		}
		if e.Expected != e.Revision-1 {
			out = append(out, Violation{Invariant: I2, Document: e.DocumentID, Operation: e.OperationID, Events: []int{i},
				Message: fmt.Sprintf("a state commit moved revision %d to %d", e.Expected, e.Revision)})
		}
		k := key{e.DocumentID, e.Revision}
		if prev, dup := committed[k]; dup && prev.op != e.OperationID {
			out = append(out, Violation{Invariant: I2, Document: e.DocumentID, Operation: e.OperationID, Events: []int{prev.event, i},
				Message:  fmt.Sprintf("revision %d was committed twice (lost update)", e.Revision),
				Evidence: []string{"first by " + prev.op, "then by " + e.OperationID}})
		}
		committed[k] = commit{e.OperationID, i}
	}
	return out
}

func revs(vs []reference.DocumentState) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("revision %d by %s (%s)", v.Revision, v.OperationID, v.Status))
	}
	return out
}

// CheckI4: legal stages. Every stage change the history observed is a legal
// transition, GRAPH_APPLIED follows a confirmed graph write, and each
// operation's observed stages chain (allowing for events lost to a kill
// between a commit and its report).
func CheckI4(s Snapshot, o Observed) []Violation {
	var out []Violation
	last := map[string]reference.Stage{}
	lastAt := map[string]int{}
	written := map[string]bool{}
	for i, e := range o.Events {
		if e.Kind == reference.EvGraphWritten {
			written[e.OperationID] = true
		}
		if e.Kind != reference.EvStage {
			continue
		}
		if e.From == reference.Prepared && e.To == reference.GraphApplied && !written[e.OperationID] {
			out = append(out, Violation{Invariant: I4, Operation: e.OperationID, Document: e.DocumentID, Events: []int{i},
				Message:  "stage advanced to GRAPH_APPLIED before the graph writer confirmed the mutation",
				Evidence: []string{"holder " + e.Holder + " moved PREPARED -> GRAPH_APPLIED; no graph-written event for this operation precedes it"}})
		}
		if !e.From.CanTransition(e.To) {
			out = append(out, Violation{Invariant: I4, Operation: e.OperationID, Document: e.DocumentID, Events: []int{i},
				Message: fmt.Sprintf("illegal stage change %s -> %s", e.From, e.To)})
		}
		if prev, ok := last[e.OperationID]; ok && !reachable(prev, e.From) {
			out = append(out, Violation{Invariant: I4, Operation: e.OperationID, Document: e.DocumentID, Events: []int{lastAt[e.OperationID], i},
				Message: fmt.Sprintf("stage went back: observed %s, then a change from %s", prev, e.From)})
		}
		last[e.OperationID], lastAt[e.OperationID] = e.To, i
	}
	for _, op := range s.Ops {
		if !op.Stage.Valid() {
			out = append(out, Violation{Invariant: I4, Operation: op.OperationID, Message: fmt.Sprintf("stored stage %q is not a stage", op.Stage)})
			continue
		}
		if prev, ok := last[op.OperationID]; ok && !reachable(prev, op.Stage) {
			out = append(out, Violation{Invariant: I4, Operation: op.OperationID, Events: []int{lastAt[op.OperationID]},
				Message: fmt.Sprintf("stored stage %s cannot follow the last observed stage %s", op.Stage, prev)})
		}
	}
	return out
}

// reachable reports whether stage b can follow stage a (or equal it).
func reachable(a, b reference.Stage) bool {
	if a == b {
		return true
	}
	seen := map[reference.Stage]bool{a: true}
	frontier := []reference.Stage{a}
	for len(frontier) > 0 {
		x := frontier[0]
		frontier = frontier[1:]
		for _, y := range reference.Stages {
			if x.CanTransition(y) && !seen[y] {
				if y == b {
					return true
				}
				seen[y] = true
				frontier = append(frontier, y)
			}
		}
	}
	return false
}

// CheckI5: liveness. Every operation whose plan was persisted (in the store
// or seen persisted by the history) is in the store, with its plan, and has
// reached COMPLETED or a recorded terminal disposition; recovery quiesced.
func CheckI5(s Snapshot, o Observed) []Violation {
	var out []Violation
	ops := opIndex(s)
	ids := make([]string, 0, len(o.Prepared))
	for id := range o.Prepared {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ok := ops[id]; !ok {
			out = append(out, Violation{Invariant: I5, Operation: id, RootCause: true, Forgot: ForgotOperation, Events: o.eventsOf(reference.EvPrepared, id),
				Message:  "the operation was persisted (the history saw createIfAbsent succeed) but the store has no record of it after restart: the plan and stage are gone",
				Evidence: []string{"fingerprint at persist time: " + strings.Join(o.Prepared[id], ", ")}})
		}
	}
	for _, op := range s.Ops {
		if msg, bad := s.PlanErrors[op.OperationID]; bad && planMissing(msg) {
			out = append(out, Violation{Invariant: I5, Operation: op.OperationID, Document: op.DocumentID, RootCause: true,
				Message:  "the operation record is stored without its plan (written apart from it, or the plan was lost): it cannot be resumed; the operation and its plan must be created in one transaction",
				Evidence: []string{msg}})
		}
		if !op.Finished() {
			out = append(out, Violation{Invariant: I5, Operation: op.OperationID, Document: op.DocumentID, Events: o.eventsOf(reference.EvStage, op.OperationID),
				Message:  fmt.Sprintf("the operation is stuck at %s after recovery quiesced (attempts %d)", op.Stage, op.Attempts),
				Evidence: []string{"failure reason: " + op.FailureReason}})
		}
	}
	if !o.Quiet {
		out = append(out, Violation{Invariant: I5, Message: fmt.Sprintf("recovery did not quiesce within %d rounds after faults stopped", o.Rounds)})
	}
	return out
}
