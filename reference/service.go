package reference

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Bug names a deliberate defect the reference service can be built with, so
// that the harness can prove it catches it (a mutant). The zero Service has
// none.
type Bug string

// The service mutants.
const (
	// BugRecallModelOnResume re-asks the model on resume and executes its
	// new answer instead of the persisted plan.
	BugRecallModelOnResume Bug = "recall-model-on-resume"
	// BugSkipRevisionCheck does not verify the expected revision and
	// commits the state on top of whatever revision is current.
	BugSkipRevisionCheck Bug = "skip-revision-check"
	// BugAdvanceBeforeGraphWrite moves the stage to GRAPH_APPLIED before
	// the graph write is confirmed.
	BugAdvanceBeforeGraphWrite Bug = "advance-before-graph-write"
)

// Bugs lists the service mutants.
var Bugs = []Bug{BugRecallModelOnResume, BugSkipRevisionCheck, BugAdvanceBeforeGraphWrite}

// Event is one observation of the service, for the harness's history.
type Event struct {
	Kind        string `json:"kind"`
	OperationID string `json:"op,omitempty"`
	Space       string `json:"space,omitempty"`
	DocumentID  string `json:"doc,omitempty"`
	From        Stage  `json:"from,omitempty"`
	To          Stage  `json:"to,omitempty"`
	Revision    int64  `json:"rev,omitempty"`
	Expected    int64  `json:"expected,omitempty"`
	Token       int64  `json:"token,omitempty"`
	Holder      string `json:"holder,omitempty"`
	ExpiresAt   int64  `json:"expiresAt,omitempty"`
	Detail      string `json:"detail,omitempty"`
	// Batch is what one graph batch wrote (EvGraphBatch).
	Batch *Mutation `json:"batch,omitempty"`
	At    int64     `json:"at"`
}

// Event kinds.
const (
	EvInvoke       = "invoke"        // an ingest, retract or resume call starts
	EvModelCall    = "model-call"    // the model was called (Detail: call ordinal)
	EvPrepared     = "prepared"      // createIfAbsent stored a new operation
	EvStage        = "stage"         // a stage CAS succeeded (From -> To)
	EvGraphWritten = "graph-written" // the writer confirmed the whole mutation (Detail: batches)
	EvGraphBatch   = "graph-batch"   // the writer confirmed one batch (Batch: what it wrote)
	EvVersion      = "version"       // the version history recorded a revision (Revision)
	EvStateCommit  = "state-commit"  // a revision CAS succeeded (Expected -> Revision)
	EvLeaseAcquire = "lease-acquire" // a lease was granted
	EvLeaseRenew   = "lease-renew"   // a lease was extended (ExpiresAt)
	EvLeaseLost    = "lease-lost"    // a stale holder was refused
	EvLeaseRelease = "lease-release" // a lease was released
	EvDisposition  = "disposition"   // dead letter or abandoned (Detail)
	EvOK           = "ok"            // the call returned (Detail: outcome)
	EvError        = "error"         // the call failed (Detail: error)
)

// Observer receives the service's events.
type Observer interface{ Observe(Event) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe implements Observer.
func (f ObserverFunc) Observe(e Event) { f(e) }

// Outcome says how an ingest, retract or resume call ended.
type Outcome string

// The outcomes.
const (
	OutcomeCompleted   Outcome = "COMPLETED"
	OutcomeNoOp        Outcome = "NO_OP"
	OutcomeAlreadyDone Outcome = "ALREADY_COMPLETED"
	OutcomeSuperseded  Outcome = "SUPERSEDED"
	OutcomeAbandoned   Outcome = "ABANDONED"
	OutcomeDeadLetter  Outcome = "DEAD_LETTER"
)

// Result is what a successful call returns.
type Result struct {
	OperationID  string
	Outcome      Outcome
	Revision     int64
	Writes       int
	SupersededBy string
}

// IngestRequest asks to ingest one document.
type IngestRequest struct {
	Space      string
	DocumentID string
	// OperationID names the business intent; derived from the content when
	// empty. A resubmission must reuse it.
	OperationID string
	Content     string
}

// Service is the reference ingestion service. Configure the fields, then
// call Ingest, Retract or Resume; Recovery drives Resume over unfinished
// operations.
type Service struct {
	Stores
	Extractor Extractor
	// Faults injects faults at the catalogue's failpoints (nil: none).
	Faults *faults.Runtime
	// Observer receives events (nil: none).
	Observer Observer
	// Now returns unix milliseconds (time.Now when nil).
	Now func() int64
	// Sleep waits d (a timer when nil); a simulated clock advances instead.
	Sleep func(ctx context.Context, d time.Duration) error
	// Holder identifies this instance in leases and claims.
	Holder string
	// LeaseTTL is the document lease's time to live (default 2s).
	LeaseTTL time.Duration
	// AcquireTimeout bounds the wait for a document lease (default 5s).
	AcquireTimeout time.Duration
	// BatchSize splits graph writes into batches of this many changes
	// (default 4); each batch is one writer call.
	BatchSize int
	// Model is the extraction fingerprint a NO_OP check compares against
	// (default FakeModel).
	Model string
	// Bugs switches on deliberate defects (mutants) for the harness.
	Bugs []Bug

	calls atomic.Int64
}

func (s *Service) has(b Bug) bool {
	for _, x := range s.Bugs {
		if x == b {
			return true
		}
	}
	return false
}

func (s *Service) now() int64 {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now().UnixMilli()
}

func (s *Service) sleep(ctx context.Context, d time.Duration) error {
	if s.Sleep != nil {
		return s.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *Service) emit(e Event) {
	if s.Observer != nil {
		if e.At == 0 {
			e.At = s.now()
		}
		e.Holder = firstNonEmpty(e.Holder, s.Holder)
		s.Observer.Observe(e)
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Service) at(ctx context.Context, p faults.Point, step func() error) error {
	return s.Faults.At(ctx, p, step)
}

func (s *Service) leaseTTL() int64 {
	if s.LeaseTTL <= 0 {
		return 2000
	}
	return s.LeaseTTL.Milliseconds()
}

func (s *Service) model() string { return firstNonEmpty(s.Model, FakeModel) }

// Ingest plans and executes one document under its lease. A resubmitted
// operationId resumes the persisted plan and never calls the model again.
func (s *Service) Ingest(ctx context.Context, req IngestRequest) (res Result, err error) {
	if err := CheckKey(req.Space, req.DocumentID); err != nil {
		return Result{}, err
	}
	if req.OperationID == "" {
		cur, ok, err := s.States.FindCurrent(ctx, req.Space, req.DocumentID)
		if err != nil {
			return Result{}, fmt.Errorf("ingest %s/%s: %w", req.Space, req.DocumentID, err)
		}
		base := int64(0)
		if ok {
			base = cur.Revision
		}
		req.OperationID = IngestOperationID(req.Space, req.DocumentID, ContentHash(req.Content), base)
	}
	s.emit(Event{Kind: EvInvoke, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID, Detail: "ingest"})
	defer s.report(req.OperationID, &res, &err)
	err = s.withLease(ctx, req.Space, req.DocumentID, func(lease *Lease) error {
		var e error
		res, e = s.ingestLocked(ctx, req, lease)
		return e
	})
	return res, err
}

func (s *Service) report(op string, res *Result, err *error) {
	if *err != nil {
		s.emit(Event{Kind: EvError, OperationID: op, Detail: (*err).Error()})
		return
	}
	s.emit(Event{Kind: EvOK, OperationID: res.OperationID, Revision: res.Revision, Detail: string(res.Outcome)})
}

func (s *Service) ingestLocked(ctx context.Context, req IngestRequest, lease *Lease) (Result, error) {
	// Duplicate delivery: the operation exists, so its plan is frozen.
	if op, err := s.Ops.Get(ctx, req.OperationID); err == nil {
		if op.Space != req.Space || op.DocumentID != req.DocumentID {
			return Result{}, fmt.Errorf("ingest %s/%s: %w: operation %s belongs to %s/%s", req.Space, req.DocumentID, ErrPlanConflict, op.OperationID, op.Space, op.DocumentID)
		}
		plan, err := s.Ops.GetPlan(ctx, op.OperationID)
		if err != nil {
			return Result{}, fmt.Errorf("ingest %s: %w", op.OperationID, err)
		}
		if plan.Content != req.Content {
			return Result{}, fmt.Errorf("ingest %s: %w: the same operationId was submitted with other content", op.OperationID, ErrPlanConflict)
		}
		return s.executeFresh(ctx, op, plan, lease)
	} else if !errors.Is(err, ErrNotFound) {
		return Result{}, fmt.Errorf("ingest %s: %w", req.OperationID, err)
	}
	plan, err := s.Plan(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if plan.Kind == NoOp {
		return Result{OperationID: plan.OperationID, Outcome: OutcomeNoOp, Revision: plan.ExpectedRevision()}, nil
	}
	op, err := s.prepare(ctx, plan, lease)
	if err != nil && definiteStoreFailure(err) {
		// The store said the create failed: nothing durable exists, so
		// protocol.md's first window applies and a new plan is made (the
		// model's answer is frozen only once stored). This is only sound
		// because an unknown outcome is never reported as a failure.
		if plan, err = s.Plan(ctx, req); err != nil {
			return Result{}, err
		}
		if plan.Kind == NoOp {
			return Result{OperationID: plan.OperationID, Outcome: OutcomeNoOp, Revision: plan.ExpectedRevision()}, nil
		}
		op, err = s.prepare(ctx, plan, lease)
	}
	if err != nil {
		return Result{}, err
	}
	return s.executeFresh(ctx, op, plan, lease) // prepare read it back
}

// prepare stores the operation and its plan (first write wins) and returns
// the stored operation; the same id with another plan is ErrPlanConflict.
func (s *Service) prepare(ctx context.Context, plan Plan, lease *Lease) (Operation, error) {
	op := NewOperation(plan, s.now())
	var created bool
	err := s.at(ctx, faults.BeforePrepare, func() error {
		// Fencing: a holder that stalled past its lease between the model
		// call and here must not freeze its plan; the new holder may have
		// asked the model again meanwhile.
		if err := s.renew(ctx, op, lease); err != nil {
			return err
		}
		var e error
		created, e = s.Ops.CreateIfAbsent(ctx, op, plan)
		return e
	})
	if err != nil && IsOutcomeUnknown(err) {
		// The create may have committed: read back by operationId. A
		// stored record is this create's or an earlier one's (first write
		// wins, so the plan is frozen either way); none means the create
		// did not commit, and it is tried again with the same plan, never
		// a new one (the first may still land).
		stored, gerr := s.Ops.Get(ctx, op.OperationID)
		switch {
		case gerr == nil:
			err, created = nil, stored.SameIdentity(op)
		case errors.Is(gerr, ErrNotFound):
			created, err = s.Ops.CreateIfAbsent(ctx, op, plan)
		}
	}
	if err != nil {
		return Operation{}, fmt.Errorf("prepare %s: %w", op.OperationID, err)
	}
	if created {
		s.emit(Event{Kind: EvPrepared, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Expected: op.ExpectedRevision, Detail: op.PlanFingerprint})
	}
	stored, err := s.Ops.Get(ctx, op.OperationID)
	if err != nil {
		return Operation{}, fmt.Errorf("prepare %s: %w", op.OperationID, err)
	}
	if !stored.SameIdentity(op) {
		return Operation{}, fmt.Errorf("prepare %s: %w: stored fingerprint %s, new plan %s", op.OperationID, ErrPlanConflict, stored.PlanFingerprint, op.PlanFingerprint)
	}
	return stored, nil
}

// Plan builds the plan of an ingestion request against the current state of
// the document. It returns a NO_OP plan without calling the model when the
// current state already holds this content from this model.
func (s *Service) Plan(ctx context.Context, req IngestRequest) (Plan, error) {
	if err := CheckKey(req.Space, req.DocumentID); err != nil {
		return Plan{}, err
	}
	cur, ok, err := s.States.FindCurrent(ctx, req.Space, req.DocumentID)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s/%s: %w", req.Space, req.DocumentID, err)
	}
	hash := ContentHash(req.Content)
	var prev *DocumentState
	if ok {
		prev = &cur
	}
	if ok && cur.Status == DocActive && cur.ContentHash == hash && cur.ExtractionFingerprint == s.model() {
		return Plan{Kind: NoOp, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID,
			Options: GraphOptions{Space: req.Space}, Mutation: Mutation{OperationID: req.OperationID}, PreviousState: prev, Content: req.Content}, nil
	}
	var ex Extraction
	err = s.at(ctx, faults.BeforeExtract, func() error {
		var e error
		ex, e = s.Extractor.Extract(ctx, ExtractRequest(req))
		return e
	})
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: model: %w", req.OperationID, err)
	}
	s.emit(Event{Kind: EvModelCall, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID, Detail: fmt.Sprint(ex.Call)})
	return s.buildPlan(ctx, req, prev, hash, ex)
}

func (s *Service) buildPlan(ctx context.Context, req IngestRequest, prev *DocumentState, hash string, ex Extraction) (Plan, error) {
	ids := map[string]string{} // normalised type+name -> node id
	key := func(t, n string) string { return Normalize(t) + "\n" + Normalize(n) }
	m := Mutation{OperationID: req.OperationID}
	var regs []EntityRegistration
	nodeIDs := map[string]bool{}
	queries := make([]EntityQuery, len(ex.Entities))
	for i, e := range ex.Entities {
		queries[i] = EntityQuery{Type: e.Type, Names: append([]string{e.Name}, e.Aliases...)}
	}
	matches, err := MatchNodeIDs(ctx, s.Registry, req.Space, queries)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: registry: %w", req.OperationID, err)
	}
	for i, e := range ex.Entities {
		id := NodeID(e.Type, e.Name)
		if len(matches[i]) > 1 {
			return Plan{}, fmt.Errorf("plan %s: %w: %s:%s matches %d registered entities", req.OperationID, ErrRegistryConflict, e.Type, e.Name, len(matches[i]))
		}
		if len(matches[i]) == 1 {
			id = matches[i][0]
		}
		ids[key(e.Type, e.Name)] = id
		for _, a := range e.Aliases {
			ids[key(e.Type, a)] = id
		}
		props := map[string]string{"name": e.Name}
		for k, v := range e.Properties {
			props[k] = v
		}
		if !nodeIDs[id] {
			m.UpsertNodes = append(m.UpsertNodes, NodeUpsert{ID: id, Label: e.Type, Properties: props})
			regs = append(regs, EntityRegistration{NodeID: id, Type: e.Type, CanonicalName: e.Name, Aliases: e.Aliases})
		}
		nodeIDs[id] = true
	}
	seen := map[EdgeKey]bool{}
	var facts []EdgeKey
	for _, r := range ex.Relations {
		k := EdgeKey{Source: ids[key(r.SourceType, r.SourceName)], Type: r.Type, Target: ids[key(r.TargetType, r.TargetName)]}
		if k.Source == "" || k.Target == "" || seen[k] {
			continue
		}
		seen[k] = true
		facts = append(facts, k)
		m.UpsertEdges = append(m.UpsertEdges, EdgeUpsert{Key: k, Properties: r.Properties})
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].Less(facts[j]) })
	var stale []EdgeKey
	if prev != nil {
		for _, k := range prev.FactSources {
			if !seen[k] {
				stale = append(stale, k)
			}
		}
	}
	m.DeleteEdges = append(m.DeleteEdges, stale...)
	rev := int64(1)
	if prev != nil {
		rev = prev.Revision + 1
	}
	sortedIDs := make([]string, 0, len(nodeIDs))
	for id := range nodeIDs {
		sortedIDs = append(sortedIDs, id)
	}
	sort.Strings(sortedIDs)
	next := &DocumentState{Space: req.Space, DocumentID: req.DocumentID, Revision: rev, OperationID: req.OperationID,
		ContentHash: hash, ExtractionFingerprint: firstNonEmpty(ex.Model, s.model()), Status: DocActive,
		FactSources: facts, NodeIDs: sortedIDs}
	p := Plan{Kind: Ingestion, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID,
		Options: GraphOptions{Space: req.Space}, Mutation: m, PreviousState: prev, NextState: next,
		StaleEdges: stale, Registrations: regs, Content: req.Content, ExtractionCall: ex.Call}
	return p, p.Validate()
}

// Retract plans and executes the retraction of a document's current
// revision: its state becomes RETRACTED and the edges it alone supported
// are deleted.
func (s *Service) Retract(ctx context.Context, space, documentID string) (res Result, err error) {
	if err := CheckKey(space, documentID); err != nil {
		return Result{}, err
	}
	s.emit(Event{Kind: EvInvoke, Space: space, DocumentID: documentID, Detail: "retract"})
	var opID string
	defer func() { s.report(opID, &res, &err) }()
	err = s.withLease(ctx, space, documentID, func(lease *Lease) error {
		cur, ok, e := s.States.FindCurrent(ctx, space, documentID)
		if e != nil {
			return fmt.Errorf("retract %s/%s: %w", space, documentID, e)
		}
		if !ok || cur.Status == DocRetracted {
			res = Result{Outcome: OutcomeNoOp, Revision: cur.Revision}
			return nil
		}
		opID = RetractOperationID(space, documentID, cur.Revision)
		if op, e := s.Ops.Get(ctx, opID); e == nil {
			plan, e := s.Ops.GetPlan(ctx, opID)
			if e != nil {
				return fmt.Errorf("retract %s: %w", opID, e)
			}
			res, e = s.execute(ctx, op, plan, lease)
			return e
		}
		prev := cur
		next := &DocumentState{Space: space, DocumentID: documentID, Revision: cur.Revision + 1, OperationID: opID,
			ContentHash: cur.ContentHash, ExtractionFingerprint: cur.ExtractionFingerprint, Status: DocRetracted}
		plan := Plan{Kind: Retraction, OperationID: opID, Space: space, DocumentID: documentID,
			Options: GraphOptions{Space: space}, Mutation: Mutation{OperationID: opID, DeleteEdges: append([]EdgeKey(nil), cur.FactSources...)},
			PreviousState: &prev, NextState: next, StaleEdges: append([]EdgeKey(nil), cur.FactSources...)}
		op, e := s.prepare(ctx, plan, lease)
		if e != nil {
			return e
		}
		res, e = s.execute(ctx, op, plan, lease)
		return e
	})
	return res, err
}

// Resume continues a persisted operation from its stage, with its persisted
// plan. It never calls the model; an operation without a persisted plan is
// ErrNoPersistedPlan.
func (s *Service) Resume(ctx context.Context, operationID string) (res Result, err error) {
	op, err := s.Ops.Get(ctx, operationID)
	if errors.Is(err, ErrNotFound) {
		return Result{}, fmt.Errorf("resume %s: %w: the operation was not found", operationID, ErrNoPersistedPlan)
	}
	if err != nil {
		return Result{}, fmt.Errorf("resume %s: %w", operationID, err)
	}
	s.emit(Event{Kind: EvInvoke, OperationID: operationID, Space: op.Space, DocumentID: op.DocumentID, Detail: "resume"})
	defer s.report(operationID, &res, &err)
	if op.Finished() {
		return finishedResult(op), nil
	}
	plan, err := s.Ops.GetPlan(ctx, operationID)
	if errors.Is(err, ErrNotFound) {
		return Result{}, fmt.Errorf("resume %s: %w: the plan was not found", operationID, ErrNoPersistedPlan)
	}
	if err != nil {
		return Result{}, fmt.Errorf("resume %s: %w", operationID, err)
	}
	if s.has(BugRecallModelOnResume) && plan.Kind == Ingestion {
		ex, e := s.Extractor.Extract(ctx, ExtractRequest{Space: plan.Space, DocumentID: plan.DocumentID, OperationID: plan.OperationID, Content: plan.Content})
		if e == nil {
			s.emit(Event{Kind: EvModelCall, OperationID: plan.OperationID, Detail: fmt.Sprint(ex.Call)})
			if np, e := s.buildPlan(ctx, IngestRequest{Space: plan.Space, DocumentID: plan.DocumentID, OperationID: plan.OperationID, Content: plan.Content},
				plan.PreviousState, ContentHash(plan.Content), ex); e == nil {
				plan = np
			}
		}
	}
	err = s.withLease(ctx, op.Space, op.DocumentID, func(lease *Lease) error {
		var e error
		res, e = s.execute(ctx, op, plan, lease)
		return e
	})
	return res, err
}

func finishedResult(op Operation) Result {
	switch {
	case op.Disposition == Abandoned:
		return Result{OperationID: op.OperationID, Outcome: OutcomeAbandoned, SupersededBy: op.SupersededBy}
	case op.Disposition == DeadLetter:
		return Result{OperationID: op.OperationID, Outcome: OutcomeDeadLetter}
	}
	return Result{OperationID: op.OperationID, Outcome: OutcomeAlreadyDone, Revision: op.ExpectedRevision + 1}
}

// withLease runs fn holding the document lease, released afterwards (a
// lease already lost is not an error of fn's).
func (s *Service) withLease(ctx context.Context, space, documentID string, fn func(*Lease) error) error {
	timeout := s.AcquireTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	deadline := s.now() + timeout.Milliseconds()
	backoff := 2 * time.Millisecond
	var lease Lease
	// Each call holds the lease under its own identity, so two calls on one
	// Service exclude each other as two instances do.
	holder := fmt.Sprintf("%s#%d", firstNonEmpty(s.Holder, "service"), s.calls.Add(1))
	for {
		l, ok, err := s.Locks.TryAcquire(ctx, space, documentID, holder, s.now(), s.leaseTTL())
		if err != nil {
			return fmt.Errorf("lease %s/%s: %w", space, documentID, err)
		}
		if ok {
			lease = l
			break
		}
		if s.now() > deadline {
			return fmt.Errorf("lease %s/%s held by %s (token %d): %w after %s", space, documentID, l.Holder, l.Token, ErrLockTimeout, timeout)
		}
		if err := s.sleep(ctx, backoff); err != nil {
			return err
		}
		if backoff < 50*time.Millisecond {
			backoff *= 2
		}
	}
	s.emit(Event{Kind: EvLeaseAcquire, Space: space, DocumentID: documentID, Token: lease.Token, ExpiresAt: lease.ExpiresAt, Holder: lease.Holder})
	err := fn(&lease)
	if rerr := s.Locks.Release(ctx, lease); rerr == nil {
		s.emit(Event{Kind: EvLeaseRelease, Space: space, DocumentID: documentID, Token: lease.Token, Holder: lease.Holder})
	}
	return err
}

// advance moves op to stage to with a CAS at failpoint p. If another
// instance got there first, the stored record is taken.
func (s *Service) advance(ctx context.Context, op *Operation, to Stage, p faults.Point) error {
	next, err := op.Advance(to, max(s.now(), op.UpdatedAt), "")
	if err != nil {
		return err
	}
	next.Attempts = op.Attempts
	var ok bool
	err = s.at(ctx, p, func() error {
		var e error
		ok, e = s.Ops.CompareAndSet(ctx, *op, next)
		return e
	})
	if err != nil && IsOutcomeUnknown(err) {
		// The CAS may have committed: read back by operationId.
		if stored, gerr := s.Ops.Get(ctx, op.OperationID); gerr == nil && stored.SameIdentity(*op) && stored.Stage == to {
			err, ok = nil, true
			next = stored
		}
	}
	if err != nil {
		return fmt.Errorf("operation %s %s -> %s: %w", op.OperationID, op.Stage, to, err)
	}
	if ok {
		s.emit(Event{Kind: EvStage, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, From: op.Stage, To: to})
		*op = next
		return nil
	}
	stored, err := s.Ops.Get(ctx, op.OperationID)
	if err != nil {
		return fmt.Errorf("operation %s: %w", op.OperationID, err)
	}
	if stored.SameIdentity(*op) && stored.Stage.Rank() >= to.Rank() && stored.Stage != Failed {
		*op = stored
		return nil
	}
	return fmt.Errorf("operation %s: stage changed concurrently (%s, wanted %s -> %s): %w", op.OperationID, stored.Stage, op.Stage, to, ErrRevisionConflict)
}

// execute runs a persisted plan from its stage to COMPLETED.
func (s *Service) execute(ctx context.Context, op Operation, plan Plan, lease *Lease) (Result, error) {
	fresh, err := s.Ops.Get(ctx, op.OperationID)
	if err != nil {
		return Result{}, fmt.Errorf("execute %s: %w", op.OperationID, err)
	}
	return s.executeFresh(ctx, fresh, plan, lease)
}

// executeFresh is execute for an operation record just read from the store.
func (s *Service) executeFresh(ctx context.Context, op Operation, plan Plan, lease *Lease) (Result, error) {
	if op.Finished() {
		return finishedResult(op), nil
	}
	if op.Stage == Failed {
		next := op
		next.Stage, next.UpdatedAt = Prepared, max(s.now(), op.UpdatedAt)
		var ok bool
		err := s.at(ctx, faults.BeforeRetryPrepared, func() error {
			var e error
			ok, e = s.Ops.CompareAndSet(ctx, op, next)
			return e
		})
		if err != nil {
			return Result{}, fmt.Errorf("retry %s: %w", op.OperationID, err)
		}
		if !ok {
			return Result{}, fmt.Errorf("retry %s: stage changed concurrently: %w", op.OperationID, ErrRevisionConflict)
		}
		s.emit(Event{Kind: EvStage, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, From: Failed, To: Prepared})
		op = next
	}
	// Already committed by this operation (the state commit survived a crash)?
	if plan.NextState != nil {
		st, ok, err := s.States.FindByOperationID(ctx, op.Space, op.DocumentID, op.OperationID)
		if err != nil {
			return Result{}, fmt.Errorf("execute %s: %w", op.OperationID, err)
		}
		if ok {
			return s.finishCommitted(ctx, op, plan, st, lease)
		}
	}
	expected := plan.ExpectedRevision()
	if op.Stage.Rank() < StateCommitted.Rank() && !s.has(BugSkipRevisionCheck) {
		cur, ok, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID)
		if err != nil {
			return Result{}, fmt.Errorf("execute %s: %w", op.OperationID, err)
		}
		if ok && cur.Revision != expected || !ok && expected != 0 {
			return s.conflict(ctx, op, plan, lease)
		}
	}
	writes := 0
	if op.Stage == Prepared {
		if s.has(BugAdvanceBeforeGraphWrite) {
			if err := s.advance(ctx, &op, GraphApplied, faults.BeforeGraphApplied); err != nil {
				return Result{}, err
			}
		}
		n, err := s.writeGraph(ctx, op, plan, lease)
		writes = n
		if err != nil {
			return Result{}, s.fail(ctx, op, err)
		}
		s.emit(Event{Kind: EvGraphWritten, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Detail: fmt.Sprint(n)})
		if op.Stage == Prepared {
			if err := s.advance(ctx, &op, GraphApplied, faults.BeforeGraphApplied); err != nil {
				return Result{}, err
			}
		}
	}
	if op.Stage == GraphApplied && strings.HasPrefix(op.FailureReason, DeadLetterPending) && writes == 0 {
		// A failure was recorded after the graph write: a dead letter may
		// have started removing this plan's effects before a crash
		// (deadLetter). Write them again (upserts and deletes are
		// repeatable) before the state commit relies on them.
		n, err := s.writeGraph(ctx, op, plan, lease)
		if err != nil {
			return Result{}, s.fail(ctx, op, err)
		}
		writes = n
		s.emit(Event{Kind: EvGraphWritten, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Detail: fmt.Sprint(n)})
	}
	if op.Stage == GraphApplied {
		if len(plan.Registrations) > 0 {
			if err := s.at(ctx, faults.BeforeRegistrySave, func() error {
				return s.Registry.SaveAll(ctx, op.Space, plan.Registrations)
			}); err != nil {
				return Result{}, s.fail(ctx, op, fmt.Errorf("registry %s: %w", op.OperationID, err))
			}
		}
		if err := s.at(ctx, faults.BeforeLeaseCheck, func() error { return s.renew(ctx, op, lease) }); err != nil {
			return Result{}, fmt.Errorf("state commit %s refused: %w", op.OperationID, err)
		}
		// Heal the history of the revision this plan builds on (a crash or
		// a failure may have left it unrecorded); idempotent.
		if plan.PreviousState != nil {
			if cur, ok, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID); err == nil && ok && cur.Revision == plan.ExpectedRevision() {
				if err := s.States.RecordVersion(ctx, cur); err != nil {
					return Result{}, s.fail(ctx, op, fmt.Errorf("history of revision %d: %w", cur.Revision, err))
				}
			}
		}
		next := *plan.NextState
		next.CommittedAt = s.now()
		exp := expected
		if s.has(BugSkipRevisionCheck) {
			if cur, ok, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID); err == nil && ok {
				exp = cur.Revision
			}
			next.Revision = exp + 1
		}
		var ok bool
		refused := false
		err := s.at(ctx, faults.BeforeStateCommit, func() error {
			// Fencing again: the holder may have stalled since the lease
			// check, and another instance may have settled the operation.
			if e := s.renew(ctx, op, lease); e != nil {
				refused = true
				return e
			}
			var e error
			ok, e = s.States.CompareAndSet(ctx, exp, next)
			return e
		})
		if refused {
			return Result{}, fmt.Errorf("state commit %s refused: %w", op.OperationID, err)
		}
		if err != nil && IsOutcomeUnknown(err) {
			// The revision CAS may have committed: read back by
			// operationId; if it did not, the error stands and the same
			// plan is retried later.
			if st, mine, gerr := s.States.FindByOperationID(ctx, op.Space, op.DocumentID, op.OperationID); gerr == nil && mine && st.Revision == next.Revision {
				err, ok = nil, true
			}
		}
		if err != nil {
			return Result{}, s.fail(ctx, op, fmt.Errorf("state commit %s: %w", op.OperationID, err))
		}
		if !ok {
			st, mine, err := s.States.FindByOperationID(ctx, op.Space, op.DocumentID, op.OperationID)
			if err != nil {
				return Result{}, fmt.Errorf("state commit %s: %w", op.OperationID, err)
			}
			if !mine {
				cur, ok, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID)
				if err != nil {
					return Result{}, fmt.Errorf("state commit %s: %w", op.OperationID, err)
				}
				if ok && cur.Revision == exp || !ok && exp == 0 {
					// Refused, yet no competing revision won: an
					// ambiguous store answer. Retry the same plan later.
					return Result{}, fmt.Errorf("state commit %s: refused at revision %d with no competing revision: %w", op.OperationID, exp, ErrRevisionConflict)
				}
				return s.conflict(ctx, op, plan, lease)
			}
			next = st
		} else {
			s.emit(Event{Kind: EvStateCommit, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Expected: exp, Revision: next.Revision, Holder: lease.Holder})
		}
		res, err := s.finishCommitted(ctx, op, plan, next, lease)
		res.Writes = writes
		return res, err
	}
	return s.finishCommitted(ctx, op, plan, *plan.NextState, lease)
}

// renew is the fencing check before each write: it extends the document
// lease, and a holder whose lease expired or was taken over is refused
// (ErrLeaseLost) and the refusal is recorded. While more than half of the
// lease is left the check is local: nobody else can be granted the lease
// before it expires (grants compare expiry with the same clock), so the
// store round trip would only confirm what the holder already knows. A
// holder that stalled (GC, pause) finds its lease short or gone and asks
// the store, which refuses it if another holder took over.
func (s *Service) renew(ctx context.Context, op Operation, lease *Lease) error {
	now, ttl := s.now(), s.leaseTTL()
	if lease.ExpiresAt-now > ttl/2 && lease.ExpiresAt-now <= ttl {
		return nil
	}
	l, err := s.Locks.Renew(ctx, *lease, now, ttl)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			s.emit(Event{Kind: EvLeaseLost, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Token: lease.Token, Holder: lease.Holder})
		}
		return err
	}
	*lease = l
	s.emit(Event{Kind: EvLeaseRenew, Space: l.Space, DocumentID: l.DocumentID, Token: l.Token, ExpiresAt: l.ExpiresAt, Holder: l.Holder})
	return nil
}

// finishCommitted completes an operation whose state is committed: history,
// then the remaining stages.
func (s *Service) finishCommitted(ctx context.Context, op Operation, plan Plan, st DocumentState, lease *Lease) (Result, error) {
	if plan.NextState != nil && (st.ContentHash != plan.NextState.ContentHash || st.Status != plan.NextState.Status) {
		return Result{}, fmt.Errorf("operation %s: committed state does not match its plan: %w", op.OperationID, ErrPlanConflict)
	}
	if err := s.at(ctx, faults.BeforeRecordVersion, func() error { return s.States.RecordVersion(ctx, st) }); err != nil {
		return Result{}, s.fail(ctx, op, fmt.Errorf("history %s: %w", op.OperationID, err))
	}
	s.emit(Event{Kind: EvVersion, OperationID: st.OperationID, Space: st.Space, DocumentID: st.DocumentID, Revision: st.Revision})
	if op.Stage.Rank() < StateCommitted.Rank() {
		if err := s.cleanupStale(ctx, op, plan, lease); err != nil {
			return Result{}, fmt.Errorf("stale edges of %s: %w", op.OperationID, err)
		}
	}
	for _, step := range []struct {
		to Stage
		p  faults.Point
	}{{GraphApplied, faults.BeforeGraphApplied}, {StateCommitted, faults.BeforeStateCommitted}, {Completed, faults.BeforeCompleted}} {
		if op.Stage.Rank() < step.to.Rank() {
			if op.Stage == Failed {
				if err := s.advance(ctx, &op, Prepared, faults.BeforeRetryPrepared); err != nil {
					return Result{}, err
				}
			}
			if err := s.advance(ctx, &op, step.to, step.p); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{OperationID: op.OperationID, Outcome: OutcomeCompleted, Revision: st.Revision}, nil
}

// writeGraph applies the plan's mutation in batches. Deletes of edges that
// another ACTIVE document supports by now are dropped (reconciliation with
// concurrent ingestions).
func (s *Service) writeGraph(ctx context.Context, op Operation, plan Plan, lease *Lease) (int, error) {
	m := plan.Mutation
	if len(m.DeleteEdges) > 0 {
		keep, err := s.unsupported(ctx, op, op.DocumentID, m.DeleteEdges)
		if err != nil {
			return 0, fmt.Errorf("graph write %s: %w", op.OperationID, err)
		}
		m.DeleteEdges = keep
	}
	if m.Empty() {
		return 0, nil
	}
	size := s.BatchSize
	if size <= 0 {
		size = 4
	}
	writes := 0
	for i, b := range m.Batches(size) {
		p := faults.BeforeGraphWrite
		if i > 0 {
			p = faults.BetweenGraphBatches
		}
		if err := s.at(ctx, p, func() error {
			// Fencing: a holder that stalled (GC, pause) past its lease
			// must not write: the new holder may already have moved on.
			if err := s.renew(ctx, op, lease); err != nil {
				return err
			}
			return s.Writer.Apply(ctx, op.Space, b)
		}); err != nil {
			return writes, fmt.Errorf("graph write %s batch %d: %w", op.OperationID, i+1, err)
		}
		s.emit(Event{Kind: EvGraphBatch, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Detail: fmt.Sprint(i + 1), Batch: &b})
		writes++
	}
	return writes, nil
}

// fail records a failed attempt: PREPARED -> FAILED before the graph write
// is confirmed; later stages keep their stage and count the attempt. A
// permanent error dead-letters the operation. The original error is
// returned.
func (s *Service) fail(ctx context.Context, op Operation, cause error) error {
	cur, err := s.Ops.Get(ctx, op.OperationID)
	if err != nil || cur.Finished() {
		return cause
	}
	next := cur
	next.UpdatedAt = max(s.now(), cur.UpdatedAt)
	next.Attempts = cur.Attempts + 1
	next.FailureReason = truncate(cause.Error(), 2000)
	if !IsRetryable(cause) || strings.HasPrefix(cur.FailureReason, DeadLetterPending) {
		// A dead letter under way, or one begun before: the graph may
		// lack this plan's effects until it is written again, and the
		// mark stays until then.
		next.FailureReason = truncate(DeadLetterPending+cause.Error(), 2000)
	}
	if cur.Stage == Prepared {
		next.Stage = Failed
	}
	var ok bool
	if err := s.at(ctx, faults.BeforeMarkFailed, func() error {
		var e error
		ok, e = s.Ops.CompareAndSet(ctx, cur, next)
		return e
	}); err != nil {
		return errors.Join(cause, err)
	}
	if ok && next.Stage != cur.Stage {
		s.emit(Event{Kind: EvStage, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, From: cur.Stage, To: next.Stage, Detail: next.FailureReason})
	}
	if !ok || IsRetryable(cause) {
		return cause
	}
	if err := s.deadLetter(ctx, next, cause.Error()); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// DeadLetterPending starts the failure reason of an operation whose dead
// letter is under way: its graph effects may be partly reconciled away, so
// whoever resumes it writes its graph again first.
const DeadLetterPending = "dead letter pending: "

// deadLetter gives an operation that failed for good to a person. Its
// graph effects are reconciled first, while the operation is still active
// and carries its failure reason: a crash between the two leaves it to
// recovery, which writes its graph again before going on (see execute), so
// the graph never keeps effects of a dead letter and never lacks effects of
// an operation that may still commit. The disposition is recorded last.
func (s *Service) deadLetter(ctx context.Context, cur Operation, reason string) error {
	if err := s.reconcileDeadLetter(ctx, cur); err != nil {
		if IsRetryable(err) {
			return fmt.Errorf("reconcile dead letter %s: %w", cur.OperationID, err)
		}
		// Nothing can reconcile it (an unreadable plan): the person
		// who takes the dead letter is told.
		reason += "; not reconciled: " + err.Error()
	}
	next := cur
	next.UpdatedAt = max(s.now(), cur.UpdatedAt)
	next.Disposition, next.FailureReason = DeadLetter, truncate(reason, 2000)
	var ok bool
	if err := s.at(ctx, faults.BeforeDeadLetter, func() error {
		var e error
		ok, e = s.Ops.CompareAndSet(ctx, cur, next)
		return e
	}); err != nil {
		return fmt.Errorf("dead letter %s: %w", cur.OperationID, err)
	}
	if ok {
		s.emit(Event{Kind: EvDisposition, OperationID: cur.OperationID, Space: cur.Space, DocumentID: cur.DocumentID, Detail: string(DeadLetter) + ": " + next.FailureReason})
	}
	return nil
}

// reconcileDeadLetter leaves the stores consistent for the person who will
// look at a dead-lettered operation: a state it committed gets its history
// and its stale edges cleaned up; graph effects of a plan that never
// committed are removed where no ACTIVE document supports them.
func (s *Service) reconcileDeadLetter(ctx context.Context, op Operation) error {
	plan, err := s.Ops.GetPlan(ctx, op.OperationID)
	if err != nil {
		return err
	}
	if st, ok, err := s.States.FindByOperationID(ctx, op.Space, op.DocumentID, op.OperationID); err != nil {
		return err
	} else if ok {
		// The state is committed: what its completion would still have
		// done, the history and the removal of the edges it made stale
		// that nothing supports any more, is done here.
		if err := s.States.RecordVersion(ctx, st); err != nil {
			return err
		}
		return s.cleanupStale(ctx, op, plan, nil)
	}
	return s.reconcileAbandoned(ctx, op, plan)
}

// DeadLetter records a terminal disposition for an operation whose retry
// budget ran out.
func (s *Service) DeadLetter(ctx context.Context, operationID, reason string) error {
	cur, err := s.Ops.Get(ctx, operationID)
	if err != nil {
		return err
	}
	if cur.Finished() {
		return nil
	}
	if !strings.HasPrefix(cur.FailureReason, DeadLetterPending) {
		// The reason is what tells recovery to write the graph again
		// should a crash come between the reconciliation and the record.
		next := cur
		next.UpdatedAt = max(s.now(), cur.UpdatedAt)
		next.FailureReason = truncate(DeadLetterPending+reason, 2000)
		ok, err := s.Ops.CompareAndSet(ctx, cur, next)
		if err != nil || !ok {
			return err
		}
		cur = next
	}
	return s.deadLetter(ctx, cur, reason)
}

// conflict handles a lost revision race: the plan is never forced over the
// newer state. It plans anew against the latest revision (a new operation,
// derived deterministically so a crash here converges), then abandons the
// old operation and removes graph effects of the old plan that no ACTIVE
// document supports.
func (s *Service) conflict(ctx context.Context, op Operation, plan Plan, lease *Lease) (Result, error) {
	cur, ok, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID)
	if err != nil {
		return Result{}, fmt.Errorf("conflict %s: %w", op.OperationID, err)
	}
	latest := int64(0)
	if ok {
		latest = cur.Revision
	}
	superseding := ""
	if plan.Kind == Ingestion {
		newID := "replan-" + hashParts(op.OperationID, fmt.Sprint(latest))[:32]
		err := s.at(ctx, faults.ConflictBeforeReplan, func() error {
			if _, err := s.Ops.Get(ctx, newID); err == nil {
				return nil
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			np, err := s.Plan(ctx, IngestRequest{Space: op.Space, DocumentID: op.DocumentID, OperationID: newID, Content: plan.Content})
			if err != nil {
				return err
			}
			if np.Kind == NoOp {
				return nil
			}
			_, err = s.prepare(ctx, np, lease)
			return err
		})
		if err != nil {
			return Result{}, fmt.Errorf("conflict %s: replan: %w", op.OperationID, err)
		}
		if _, err := s.Ops.Get(ctx, newID); err == nil {
			superseding = newID
		}
	}
	// The old plan can never commit (the revision it expects is gone for
	// good), so its graph effects are reconciled before it is marked
	// abandoned: a crash in between leaves it active, and recovery comes
	// back here.
	if err := s.reconcileAbandoned(ctx, op, plan); err != nil {
		return Result{}, fmt.Errorf("conflict %s: reconcile: %w", op.OperationID, err)
	}
	fresh, err := s.Ops.Get(ctx, op.OperationID)
	if err != nil {
		return Result{}, fmt.Errorf("conflict %s: %w", op.OperationID, err)
	}
	if !fresh.Finished() {
		next := fresh
		next.UpdatedAt = max(s.now(), fresh.UpdatedAt)
		next.Disposition = Abandoned
		next.SupersededBy = superseding
		next.FailureReason = fmt.Sprintf("revision conflict: expected %d, latest %d", plan.ExpectedRevision(), latest)
		var ok bool
		if err := s.at(ctx, faults.ConflictBeforeAbandon, func() error {
			var e error
			ok, e = s.Ops.CompareAndSet(ctx, fresh, next)
			return e
		}); err != nil {
			return Result{}, fmt.Errorf("conflict %s: abandon: %w", op.OperationID, err)
		}
		if ok {
			s.emit(Event{Kind: EvDisposition, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Detail: string(Abandoned) + ": " + next.FailureReason})
		}
	}
	res := Result{OperationID: op.OperationID, Outcome: OutcomeAbandoned, SupersededBy: superseding, Revision: latest}
	if superseding != "" {
		nop, err := s.Ops.Get(ctx, superseding)
		if err != nil {
			return Result{}, err
		}
		nplan, err := s.Ops.GetPlan(ctx, superseding)
		if err != nil {
			return Result{}, err
		}
		r, err := s.execute(ctx, nop, nplan, lease)
		if err != nil {
			return Result{}, fmt.Errorf("conflict %s: superseding %s: %w", op.OperationID, superseding, err)
		}
		res.Outcome, res.Revision = OutcomeSuperseded, r.Revision
	}
	return res, nil
}

// reconcileAbandoned deletes edges an abandoned plan may have written that
// no ACTIVE document (this one included) supports.
func (s *Service) reconcileAbandoned(ctx context.Context, op Operation, plan Plan) error {
	keys := make([]EdgeKey, 0, len(plan.Mutation.UpsertEdges))
	for _, e := range plan.Mutation.UpsertEdges {
		keys = append(keys, e.Key)
	}
	del, err := s.unsupported(ctx, op, "", keys)
	if err != nil {
		return err
	}
	if len(del) > 0 {
		if err := s.Writer.Apply(ctx, op.Space, Mutation{OperationID: op.OperationID, DeleteEdges: del}); err != nil {
			return err
		}
	}
	// The plan may also have deleted edges (stale for it) that a committed
	// ACTIVE state still supports: put them back as that state's plan wrote
	// them.
	return s.restoreSupported(ctx, op, append(append([]EdgeKey(nil), plan.Mutation.DeleteEdges...), plan.StaleEdges...))
}

// restoreSupported re-applies, from the plans that committed them, the
// edges among keys that an ACTIVE state supports but the graph lacks.
func (s *Service) restoreSupported(ctx context.Context, op Operation, keys []EdgeKey) error {
	if len(keys) == 0 {
		return nil
	}
	g, err := s.Writer.ReadGraph(ctx, op.Space)
	if err != nil {
		return err
	}
	states, err := s.States.List(ctx, op.Space)
	if err != nil {
		return err
	}
	m := Mutation{OperationID: op.OperationID}
	nodes := map[string]bool{}
	done := map[EdgeKey]bool{}
	for _, k := range keys {
		if _, ok := g.Edges[k]; ok || done[k] {
			continue
		}
		for _, st := range states {
			if st.Status != DocActive || !st.Supports(k) {
				continue
			}
			p, err := s.Ops.GetPlan(ctx, st.OperationID)
			if err != nil {
				return fmt.Errorf("restore %s: plan of %s: %w", k, st.OperationID, err)
			}
			for _, e := range p.Mutation.UpsertEdges {
				if e.Key == k {
					m.UpsertEdges = append(m.UpsertEdges, e)
					done[k] = true
				}
			}
			for _, n := range p.Mutation.UpsertNodes {
				if done[k] && (n.ID == k.Source || n.ID == k.Target) && !nodes[n.ID] {
					if _, ok := g.Nodes[n.ID]; !ok {
						m.UpsertNodes = append(m.UpsertNodes, n)
						nodes[n.ID] = true
					}
				}
			}
			if done[k] {
				break
			}
		}
	}
	if m.Empty() {
		return nil
	}
	return s.Writer.Apply(ctx, op.Space, m)
}

// unsupported returns the edges of keys that nothing supports: no ACTIVE
// committed state (of a document other than excludeDoc; "" excludes
// nothing) and no other unfinished operation whose plan will commit them.
// Counting pending plans closes the race where one document's stale edge
// is deleted between another's graph write and its state commit.
func (s *Service) unsupported(ctx context.Context, op Operation, excludeDoc string, keys []EdgeKey) ([]EdgeKey, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var pending []Plan
	loaded := false
	var out []EdgeKey
	for _, k := range keys {
		ref, err := s.States.IsReferencedByOtherDocument(ctx, op.Space, excludeDoc, k)
		if err != nil {
			return nil, err
		}
		if ref {
			continue
		}
		if !loaded {
			loaded = true
			ops, err := s.Ops.ListRecoverable(ctx, 10000)
			if err != nil {
				return nil, err
			}
			for _, o := range ops {
				if o.Space != op.Space || o.OperationID == op.OperationID {
					continue
				}
				p, err := s.Ops.GetPlan(ctx, o.OperationID)
				if err != nil {
					continue // I5 will speak of an unloadable plan
				}
				if p.NextState == nil || p.NextState.Status != DocActive {
					continue
				}
				// A plan whose revision is committed (or overtaken) no
				// longer stands for future support: its document's
				// current state speaks for it.
				cur, ok, err := s.States.FindCurrent(ctx, o.Space, o.DocumentID)
				if err != nil {
					return nil, err
				}
				if ok && cur.Revision >= p.NextState.Revision {
					continue
				}
				pending = append(pending, p)
			}
		}
		held := false
		for _, p := range pending {
			if p.NextState.Supports(k) {
				held = true
				break
			}
		}
		if !held {
			out = append(out, k)
		}
	}
	return out, nil
}

// cleanupStale deletes, after this operation's state commit, the edges its
// plan made stale that nothing supports any more. The write-time check may
// have kept an edge for a document whose support has since gone (it was
// retracted or re-ingested meanwhile); idempotent, so recovery repeats it.
func (s *Service) cleanupStale(ctx context.Context, op Operation, plan Plan, lease *Lease) error {
	cand := append(append([]EdgeKey(nil), plan.StaleEdges...), plan.Mutation.DeleteEdges...)
	del, err := s.unsupported(ctx, op, "", cand)
	if err != nil || len(del) == 0 {
		return err
	}
	if lease != nil {
		if err := s.renew(ctx, op, lease); err != nil {
			return err
		}
	}
	return s.Writer.Apply(ctx, op.Space, Mutation{OperationID: op.OperationID, DeleteEdges: del})
}

// IsOutcomeUnknown reports whether err says a write may or may not have
// taken effect: its request may have reached the store, and no reply came
// back (a lost reply, a cut connection). Such an error is neither a
// definite failure (retry as new) nor a permanent one; the service reads
// back by operationId before it decides. Stores report it with an
// OutcomeUnknown() bool method on their errors.
func IsOutcomeUnknown(err error) bool {
	var u interface{ OutcomeUnknown() bool }
	return errors.As(err, &u) && u.OutcomeUnknown()
}

// IsRetryable classifies an error: permanent errors (schema, protocol,
// permission, a broken plan, an injected permanent fault) go to the dead
// letter; anything else may be retried with the same plan.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var ie *faults.InjectedError
	if errors.As(err, &ie) {
		return ie.Retryable
	}
	var p interface{ Permanent() bool }
	if errors.As(err, &p) && p.Permanent() {
		return false
	}
	for _, perm := range []error{ErrMissingEndpoint, ErrRegistryConflict, ErrInvalidPlan, ErrCorruptPlan, ErrFingerprint,
		ErrPlanConflict, ErrInvalidArgument, ErrIdentityMismatch, ErrNoPersistedPlan, ErrIllegalTransition, ErrUnknownStage, ErrInvalidRevision} {
		if errors.Is(err, perm) {
			return false
		}
	}
	return true
}

// definiteStoreFailure reports whether err is a store's definite,
// retryable failure of a write: not an injected fault, not a refused lease,
// not a permanent error, and not an unknown outcome.
func definiteStoreFailure(err error) bool {
	return IsRetryable(err) && !IsOutcomeUnknown(err) && !faults.IsInjected(err) &&
		!errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLockTimeout) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
