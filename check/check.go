// Package check holds the invariant checkers I1–I8 of protocol.md. Each
// reads a Snapshot of the stores' real contents and what the harness
// Observed (the durable history), and returns Violations that name the
// invariant, the operation and the evidence.
package check

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
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
}

func (v Violation) String() string {
	s := v.Invariant.Short() + ": " + v.Message
	if v.Operation != "" {
		s += " [op " + v.Operation + "]"
	}
	return s
}

// Snapshot is what the stores hold for one space after recovery quiesced.
type Snapshot struct {
	Space      string
	Ops        []reference.Operation
	Plans      map[string]reference.Plan
	PlanErrors map[string]string
	States     []reference.DocumentState
	Versions   map[string][]reference.DocumentState
	Registry   []reference.RegisteredEntity
	Graph      reference.Graph
	Duplicates []string
	// System B
	PlanRows    []plansave.PlanRow
	Checkpoints map[string]plansave.Checkpoint
}

// Take reads a snapshot of one space from the stores, and of System B's
// threads (may be empty).
func Take(ctx context.Context, st reference.Stores, space string, cps plansave.CheckpointStore, plans plansave.PlanStore, threads []PlanSaveThread) (Snapshot, error) {
	s := Snapshot{Space: space, Plans: map[string]reference.Plan{}, PlanErrors: map[string]string{}, Versions: map[string][]reference.DocumentState{}, Checkpoints: map[string]plansave.Checkpoint{}}
	if st.Ops != nil {
		var ops []reference.Operation
		var err error
		if sl, ok := st.Ops.(reference.SpaceLister); ok {
			ops, err = sl.ListSpace(ctx, space)
		} else {
			ops, err = st.Ops.List(ctx)
		}
		if err != nil {
			return s, fmt.Errorf("snapshot: operations: %w", err)
		}
		var plans map[string]reference.Plan
		var planErrs map[string]error
		if pr, ok := st.Ops.(reference.SpacePlanReader); ok {
			if plans, planErrs, err = pr.SpacePlans(ctx, space); err != nil {
				return s, fmt.Errorf("snapshot: plans: %w", err)
			}
		}
		for _, op := range ops {
			if op.Space != space {
				continue
			}
			s.Ops = append(s.Ops, op)
			var p reference.Plan
			var err error
			if plans != nil {
				p, err = plans[op.OperationID], planErrs[op.OperationID]
				if _, ok := plans[op.OperationID]; !ok && err == nil {
					err = fmt.Errorf("operation %s: %w", op.OperationID, reference.ErrNoPersistedPlan)
				}
			} else {
				p, err = st.Ops.GetPlan(ctx, op.OperationID)
			}
			if err != nil {
				s.PlanErrors[op.OperationID] = err.Error()
				continue
			}
			s.Plans[op.OperationID] = p
		}
		states, err := st.States.List(ctx, space)
		if err != nil {
			return s, fmt.Errorf("snapshot: states: %w", err)
		}
		s.States = states
		docs := map[string]bool{}
		for _, d := range states {
			docs[d.DocumentID] = true
		}
		for _, op := range s.Ops {
			docs[op.DocumentID] = true
		}
		var all map[string][]reference.DocumentState
		if vr, ok := st.States.(reference.SpaceVersionReader); ok {
			if all, err = vr.SpaceVersions(ctx, space); err != nil {
				return s, fmt.Errorf("snapshot: versions: %w", err)
			}
		}
		for d := range docs {
			if all != nil {
				s.Versions[d] = all[d]
				continue
			}
			v, err := st.States.Versions(ctx, space, d)
			if err != nil {
				return s, fmt.Errorf("snapshot: versions of %s: %w", d, err)
			}
			s.Versions[d] = v
		}
		if s.Registry, err = st.Registry.List(ctx, space); err != nil {
			return s, fmt.Errorf("snapshot: registry: %w", err)
		}
		// The required record read: duplicates are seen whatever the
		// writer offers beyond the interface.
		recs, err := st.Writer.ReadRecords(ctx, space)
		if err != nil {
			return s, fmt.Errorf("snapshot: graph: %w", err)
		}
		s.Graph, s.Duplicates = recs.Graph(), recs.Duplicates()
	}
	owners := map[string]bool{}
	for _, t := range threads {
		if cps == nil || plans == nil {
			break
		}
		cp, ok, err := cps.Load(ctx, t.Thread)
		if err != nil {
			return s, fmt.Errorf("snapshot: checkpoint %s: %w", t.Thread, err)
		}
		if ok {
			s.Checkpoints[t.Thread] = cp
		}
		if !owners[t.Owner] {
			owners[t.Owner] = true
			rows, err := plans.List(ctx, t.Owner)
			if err != nil {
				return s, fmt.Errorf("snapshot: plan rows of %s: %w", t.Owner, err)
			}
			s.PlanRows = append(s.PlanRows, rows...)
		}
	}
	return s, nil
}

// PlanSaveThread is a System B thread the harness ran.
type PlanSaveThread struct {
	Thread, Owner string
	// Completed: some invoke returned status saved, so the row id it
	// returned must be the one kept.
	ReturnedIDs []int64
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
}

// Check runs every checker.
func Check(s Snapshot, o Observed) []Violation {
	var out []Violation
	for _, f := range []func(Snapshot, Observed) []Violation{CheckI1, CheckI2, CheckI3, CheckI4, CheckI5, CheckI6, CheckI7, CheckI8, CheckI9, CheckIntents} {
		out = append(out, f(s, o)...)
	}
	return out
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
	for _, op := range s.Ops {
		if msg, bad := s.PlanErrors[op.OperationID]; bad {
			if strings.Contains(msg, reference.ErrNotFound.Error()) {
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
		if calls := o.ModelCalls[op.OperationID]; calls > p.ExtractionCall {
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

// CheckI3: convergent graph. Once recovery quiesced, the graph's edges are
// exactly the fact sources of the ACTIVE documents, every node an ACTIVE
// document mentions exists, and nothing is stored twice.
func CheckI3(s Snapshot, _ Observed) []Violation {
	var out []Violation
	want := map[reference.EdgeKey][]string{}
	nodes := map[string][]string{}
	for _, st := range s.States {
		if st.Status != reference.DocActive {
			continue
		}
		for _, k := range st.FactSources {
			want[k] = append(want[k], st.DocumentID)
		}
		for _, n := range st.NodeIDs {
			nodes[n] = append(nodes[n], st.DocumentID)
		}
	}
	for _, k := range s.Graph.SortedEdges() {
		if _, ok := want[k]; !ok {
			out = append(out, Violation{Invariant: I3, Message: "the graph holds edge " + k.String() + " that no ACTIVE document supports (an unreconciled effect)",
				Evidence: []string{fmt.Sprintf("%d edges in graph, %d supported", len(s.Graph.Edges), len(want))}})
		}
	}
	keys := make([]reference.EdgeKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Less(keys[j]) })
	for _, k := range keys {
		if _, ok := s.Graph.Edges[k]; !ok {
			out = append(out, Violation{Invariant: I3, Document: strings.Join(want[k], ","),
				Message: "edge " + k.String() + " supported by ACTIVE document(s) " + strings.Join(want[k], ", ") + " is missing from the graph"})
		}
	}
	ids := make([]string, 0, len(nodes))
	for n := range nodes {
		ids = append(ids, n)
	}
	sort.Strings(ids)
	for _, n := range ids {
		if _, ok := s.Graph.Nodes[n]; !ok {
			out = append(out, Violation{Invariant: I3, Document: strings.Join(nodes[n], ","),
				Message: "node " + n + " mentioned by ACTIVE document(s) " + strings.Join(nodes[n], ", ") + " is missing from the graph"})
		}
	}
	for _, d := range s.Duplicates {
		out = append(out, Violation{Invariant: I3, Message: "duplicate in the graph: " + d})
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
			out = append(out, Violation{Invariant: I5, Operation: id, RootCause: true, Events: o.eventsOf(reference.EvPrepared, id),
				Message:  "the operation was persisted (the history saw createIfAbsent succeed) but the store has no record of it after restart: the plan and stage are gone",
				Evidence: []string{"fingerprint at persist time: " + strings.Join(o.Prepared[id], ", ")}})
		}
	}
	for _, op := range s.Ops {
		if msg, bad := s.PlanErrors[op.OperationID]; bad && strings.Contains(msg, "not found") {
			out = append(out, Violation{Invariant: I5, Operation: op.OperationID, Message: "the operation has no persisted plan: it cannot be resumed", Evidence: []string{msg}})
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

// CheckI6: registry. Each (type, name) maps to one node id, and each
// registered node exists in the graph.
func CheckI6(s Snapshot, _ Observed) []Violation {
	var out []Violation
	owner := map[string]string{}
	for _, e := range s.Registry {
		for _, n := range e.Names {
			k := reference.Normalize(e.Type) + "/" + reference.Normalize(n)
			if prev, ok := owner[k]; ok && prev != e.NodeID {
				out = append(out, Violation{Invariant: I6, Message: fmt.Sprintf("name %q of type %s is bound to two nodes", n, e.Type), Evidence: []string{prev, e.NodeID}})
			}
			owner[k] = e.NodeID
		}
		if _, ok := s.Graph.Nodes[e.NodeID]; !ok {
			out = append(out, Violation{Invariant: I6, Message: fmt.Sprintf("registered entity %s (%s %q) has no node in the graph", e.NodeID, e.Type, e.CanonicalName)})
		}
	}
	return out
}

// CheckI7: leases. Per document, fencing tokens grow with each grant; a new
// holder is granted only after the previous holder's lease (as last
// renewed) expired; a holder refused as stale commits nothing afterwards.
func CheckI7(_ Snapshot, o Observed) []Violation {
	var out []Violation
	type grant struct {
		holder    string
		token     int64
		expiresAt int64
		event     int
		// releasing: the holder sent a release whose outcome the
		// history may not show (killed right after it).
		releasing bool
	}
	cur := map[string]*grant{}
	lost := map[string]int{} // holder+op refused -> the refusal's event
	// A lease a fault broke on purpose (split brain, early expiry) is not
	// the lock provider's fault: its grants are not judged here.
	broken := newIntentIndex(o.Log).leaseFaultedHolder
	for i, e := range o.Events {
		doc := e.Space + "/" + e.DocumentID
		switch e.Kind {
		case reference.EvLeaseAcquire:
			if g := cur[doc]; g != nil && !broken(g.holder) && !broken(e.Holder) {
				if e.Holder != g.holder && e.Token <= g.token {
					out = append(out, Violation{Invariant: I7, Document: e.DocumentID, Events: []int{g.event, i},
						Message: fmt.Sprintf("fencing token did not grow: %s got token %d after %s held %d", e.Holder, e.Token, g.holder, g.token)})
				}
				if e.Holder != g.holder && e.At < g.expiresAt && e.Token != g.token && !g.releasing {
					out = append(out, Violation{Invariant: I7, Document: e.DocumentID, Events: []int{g.event, i},
						Message: fmt.Sprintf("two live holders: %s got token %d at %d while %s's token %d lived until %d", e.Holder, e.Token, e.At, g.holder, g.token, g.expiresAt)})
				}
			}
			cur[doc] = &grant{holder: e.Holder, token: e.Token, expiresAt: e.ExpiresAt, event: i}
			for k := range lost {
				if strings.HasPrefix(k, e.Holder+"\x00") {
					delete(lost, k) // a new lease: a new epoch for this holder
				}
			}
		case reference.EvLeaseRenew:
			if g := cur[doc]; g != nil && g.holder == e.Holder && g.token == e.Token {
				g.expiresAt = e.ExpiresAt
			} else if g != nil && g.token > e.Token && !broken(g.holder) && !broken(e.Holder) {
				out = append(out, Violation{Invariant: I7, Document: e.DocumentID, Events: []int{g.event, i},
					Message: fmt.Sprintf("stale holder %s renewed token %d after token %d was granted to %s", e.Holder, e.Token, g.token, g.holder)})
			}
		case reference.EvLeaseReleasing:
			if g := cur[doc]; g != nil && g.holder == e.Holder && g.token == e.Token {
				g.releasing = true
			}
		case reference.EvLeaseRelease:
			if g := cur[doc]; g != nil && g.holder == e.Holder && g.token == e.Token {
				delete(cur, doc)
			}
		case reference.EvLeaseBroken:
			out = append(out, Violation{Invariant: I7, Document: e.DocumentID,
				Message: "the lock provider broke the lease contract: " + e.Detail})
		case reference.EvLeaseLost:
			lost[e.Holder+"\x00"+e.OperationID] = i
		case reference.EvStateCommit:
			if at, ok := lost[e.Holder+"\x00"+e.OperationID]; ok {
				out = append(out, Violation{Invariant: I7, Operation: e.OperationID, Document: e.DocumentID, Events: []int{at, i},
					Message: fmt.Sprintf("holder %s committed revision %d after it was refused as a stale holder", e.Holder, e.Revision)})
			}
		case reference.EvInvoke:
			delete(lost, e.Holder+"\x00"+e.OperationID)
		}
	}
	return out
}

// CheckI8: plan save. One row per (owner, operation_id); the checkpoint of
// a saved thread names the first row's id; every id a retry returned is that
// id; a conflicting retry failed loudly.
func CheckI8(s Snapshot, o Observed) []Violation {
	var out []Violation
	rows := map[string][]plansave.PlanRow{}
	for _, r := range s.PlanRows {
		k := r.Owner + "/" + r.OperationID
		rows[k] = append(rows[k], r)
	}
	for _, th := range o.Threads {
		cp, ok := s.Checkpoints[th.Thread]
		if !ok {
			out = append(out, Violation{Invariant: I8, Operation: th.Thread, RootCause: true, Message: "the thread's checkpoint is gone after restart"})
			continue
		}
		k := cp.Owner + "/" + cp.OperationID
		rs := rows[k]
		if len(rs) != 1 {
			var ev []string
			for _, r := range rs {
				ev = append(ev, fmt.Sprintf("row id %d (%s, %d min)", r.ID, r.Question, r.Minutes))
			}
			out = append(out, Violation{Invariant: I8, Operation: cp.OperationID,
				Message: fmt.Sprintf("%d plan rows for (owner %s, operation_id %s), want exactly 1", len(rs), cp.Owner, cp.OperationID), Evidence: ev})
			continue
		}
		first := rs[0].ID
		if cp.Status != plansave.StatusSaved || cp.PlanID != first {
			out = append(out, Violation{Invariant: I8, Operation: cp.OperationID,
				Message: fmt.Sprintf("checkpoint is %s with plan id %d, want saved with the first row id %d", cp.Status, cp.PlanID, first)})
		}
		for _, id := range th.ReturnedIDs {
			if id != first {
				out = append(out, Violation{Invariant: I8, Operation: cp.OperationID,
					Message: fmt.Sprintf("a retry returned row id %d, not the first id %d", id, first)})
			}
		}
	}
	for _, t := range o.ConflictAccepted {
		out = append(out, Violation{Invariant: I8, Operation: t, Message: "a retry with the same operation_id and other content was accepted instead of failing loudly"})
	}
	return out
}

// plainOps and plainStates hide every optional method of the stores, so
// that Take falls back to the one-by-one reads.
type plainOps struct{ reference.OperationStore }
type plainStates struct{ reference.DocumentStateStore }

// CompareBatchedReads takes the snapshot of space twice, with the stores'
// optional batch reads (reference.SpacePlanReader, reference.SpaceVersionReader,
// reference.SpaceLister) and with the one-by-one reads every store
// supports, and describes how the two differ ("" when they agree). A store
// that offers the batch reads must give the same snapshot both ways.
func CompareBatchedReads(ctx context.Context, st reference.Stores, space string) (string, error) {
	batched, err := Take(ctx, st, space, nil, nil, nil)
	if err != nil {
		return "", err
	}
	plain := st
	plain.Ops, plain.States = plainOps{st.Ops}, plainStates{st.States}
	oneByOne, err := Take(ctx, plain, space, nil, nil, nil)
	if err != nil {
		return "", err
	}
	if reflect.DeepEqual(batched, oneByOne) {
		return "", nil
	}
	return fmt.Sprintf("batched and one-by-one snapshots differ:\n batched    %+v\n one-by-one %+v", batched, oneByOne), nil
}
