package reference

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

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
	// Holder identifies this instance in leases and claims. Empty: a
	// name unique to this Service value is made on first use (two
	// instances must never share one, or the per-document lock and the
	// recovery claim no longer keep them apart).
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

	calls    atomic.Int64
	autoOnce sync.Once
	auto     string
}

// holder is the identity this Service uses in leases, claims and events:
// Holder, or a name unique to this Service value when Holder is empty.
func (s *Service) holder() string {
	if s.Holder != "" {
		return s.Holder
	}
	s.autoOnce.Do(func() {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("reference: no randomness for a service holder name: %v", err))
		}
		s.auto = fmt.Sprintf("service-%d-%x", os.Getpid(), b)
	})
	return s.auto
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
		e.Holder = firstNonEmpty(e.Holder, s.holder())
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
	derived := req.OperationID == ""
	if derived {
		// Named now for the invocation's event; named again under the
		// lease, from the read the plan is made against (derive.go).
		cur, ok, err := s.States.FindCurrent(ctx, req.Space, req.DocumentID)
		if err != nil {
			return Result{}, fmt.Errorf("ingest %s/%s: %w", req.Space, req.DocumentID, err)
		}
		req.OperationID = s.derivedID(ctx, req, cur, ok)
	}
	s.emit(Event{Kind: EvInvoke, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID, Detail: "ingest"})
	defer s.report(req.OperationID, &res, &err)
	err = s.withLease(ctx, req.Space, req.DocumentID, func(lease *Lease) error {
		var e error
		res, e = s.ingestLocked(ctx, req, lease, derived)
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

func (s *Service) ingestLocked(ctx context.Context, req IngestRequest, lease *Lease, derived bool) (Result, error) {
	read, err := s.readForPlan(ctx, &req, derived)
	if err != nil {
		return Result{}, err
	}
	// Duplicate delivery: the operation exists, so its plan is frozen.
	if op, err := s.Ops.Get(ctx, req.OperationID); err == nil {
		if op.Space != req.Space || op.DocumentID != req.DocumentID {
			return Result{}, fmt.Errorf("ingest %s/%s: %w: operation %s belongs to %s/%s", req.Space, req.DocumentID, ErrPlanConflict, op.OperationID, op.Space, op.DocumentID)
		}
		plan, err := s.Ops.GetPlan(ctx, op.OperationID)
		if err != nil {
			return Result{}, fmt.Errorf("ingest %s: %w", op.OperationID, err)
		}
		if plan.Content != req.Content && !s.has(BugResubmitIgnoresContent) {
			return Result{}, fmt.Errorf("ingest %s: %w: the same operationId was submitted with other content", op.OperationID, ErrPlanConflict)
		}
		return s.executeFresh(ctx, op, plan, lease)
	} else if !errors.Is(err, ErrNotFound) {
		return Result{}, fmt.Errorf("ingest %s: %w", req.OperationID, err)
	}
	plan, err := s.planOn(ctx, req, read.cur, read.found)
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
		if read, err = s.readForPlan(ctx, &req, derived); err != nil {
			return Result{}, err
		}
		if plan, err = s.planOn(ctx, req, read.cur, read.found); err != nil {
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
	if s.has(BugRebaseFreshPlan) {
		plan = s.rebase(ctx, op, plan)
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
	if s.has(BugPlanIdentityIgnoresProperties) && !created {
		if frozen, err := s.Ops.GetPlan(ctx, op.OperationID); err == nil && Fingerprint(withoutProperties(frozen)) == Fingerprint(withoutProperties(plan)) {
			return stored, nil
		}
	}
	if !stored.SameIdentity(op) {
		return Operation{}, fmt.Errorf("prepare %s: %w: stored fingerprint %s, new plan %s", op.OperationID, ErrPlanConflict, stored.PlanFingerprint, op.PlanFingerprint)
	}
	return stored, nil
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
		if s.has(BugRetractIDWithoutRevision) {
			opID = "retract-" + hashParts(space, documentID)[:32]
		}
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

// leaseContract describes how a TryAcquire answer at now with ttl breaks
// the LockProvider contract, or is "": a granted lease runs until exactly
// now+ttl, and a refusal comes from a lease still live at now.
func leaseContract(l Lease, ok bool, now, ttl int64) string {
	switch {
	case ok && l.ExpiresAt != now+ttl:
		return fmt.Sprintf("TryAcquire at %d with ttl %d granted a lease until %d, not %d (a lease that does not expire when asked never frees a dead holder's document)", now, ttl, l.ExpiresAt, now+ttl)
	case !ok && l.ExpiresAt <= now:
		return fmt.Sprintf("TryAcquire at %d was refused by %s's lease (token %d) that expired at %d (an expired lease must be free; it never expires)", now, l.Holder, l.Token, l.ExpiresAt)
	}
	return ""
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
	holder := fmt.Sprintf("%s#%d", s.holder(), s.calls.Add(1))
	for {
		now, ttl := s.now(), s.leaseTTL()
		var l Lease
		var ok bool
		err := s.at(ctx, faults.LeaseAcquire, func() error {
			var e error
			l, ok, e = s.Locks.TryAcquire(ctx, space, documentID, holder, now, ttl)
			return e
		})
		if err != nil {
			return fmt.Errorf("lease %s/%s: %w", space, documentID, err)
		}
		if broken := leaseContract(l, ok, now, ttl); broken != "" {
			// A lease that never expires (or expires early) would wedge
			// the document or let two holders in; say so at once rather
			// than time out waiting.
			s.emit(Event{Kind: EvLeaseBroken, Space: space, DocumentID: documentID, Token: l.Token, ExpiresAt: l.ExpiresAt, Holder: l.Holder, Detail: broken})
			if ok {
				_ = s.Locks.Release(ctx, l)
			}
			return fmt.Errorf("lease %s/%s: %w: %s", space, documentID, ErrLeaseContract, broken)
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
	s.emit(Event{Kind: EvLeaseReleasing, Space: space, DocumentID: documentID, Token: lease.Token, Holder: lease.Holder})
	if rerr := s.Locks.Release(ctx, lease); rerr == nil {
		s.emit(Event{Kind: EvLeaseRelease, Space: space, DocumentID: documentID, Token: lease.Token, Holder: lease.Holder})
	}
	return err
}
