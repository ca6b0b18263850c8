package reference

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

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
		err = fmt.Errorf("operation %s %s -> %s: %w", op.OperationID, op.Stage, to, err)
		if !s.retryable(err) {
			// Failed for good: recorded and dead-lettered now, as every
			// other step's permanent failure is, so that no caller or
			// recovery retries it.
			return s.fail(ctx, *op, err)
		}
		return err
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
	if strings.HasPrefix(op.FailureReason, DeadLetterPending) {
		// A permanent failure was recorded and its dead letter cut short
		// (a crash between the mark and the record): a permanent error is
		// never retried, so the dead letter is finished, not the plan.
		return s.finishDeadLetter(ctx, op)
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
		if s.has(BugRebaseAfterGraphWrite) {
			plan = s.rebase(ctx, op, plan)
			expected = plan.ExpectedRevision()
		}
		if op.Stage == Prepared {
			if err := s.advance(ctx, &op, GraphApplied, faults.BeforeGraphApplied); err != nil {
				return s.wroteAfterFinish(ctx, op, plan, err)
			}
			if op.Finished() || op.Stage.Rank() > GraphApplied.Rank() {
				// Another instance took the operation past this stage, or
				// settled it, while this holder wrote: the write came late
				// (derive.go).
				if err := s.reconcileAbandoned(ctx, op, plan); err != nil {
					return Result{}, fmt.Errorf("reconciling the late graph write of %s: %w", op.OperationID, err)
				}
				if op.Finished() {
					return finishedResult(op), nil
				}
			}
		}
	}
	if op.Stage == GraphApplied {
		if len(plan.Registrations) > 0 && !s.has(BugStateBeforeRegistry) {
			if err := s.at(ctx, faults.BeforeRegistrySave, func() error {
				return s.Registry.SaveAll(ctx, op.Space, plan.Registrations)
			}); err != nil {
				return Result{}, s.fail(ctx, op, fmt.Errorf("registry %s: %w", op.OperationID, err))
			}
		}
		early, readEarly := DocumentState{}, false
		if s.has(BugRevisionReadBeforeLeaseCheck) {
			early, readEarly = s.current(ctx, op)
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
		if readEarly {
			exp, next.Revision = early.Revision, early.Revision+1
		}
		if s.has(BugCASOnHealedRevision) {
			if cur, ok := s.current(ctx, op); ok {
				exp, next.Revision = cur.Revision, cur.Revision+1
			}
		}
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
			if e := s.renew(ctx, op, lease); e != nil && !s.has(BugCommitWithoutLeaseCheck) {
				refused = true
				return e
			}
			// With the lease broken, another instance may have ended the
			// operation meanwhile, or begun its dead letter (reconciling
			// its edges away): its plan must not commit. The revision CAS
			// cannot tell, since nothing else committed.
			if cur, e := s.Ops.Get(ctx, op.OperationID); e != nil {
				return e
			} else if cur.Finished() || strings.HasPrefix(cur.FailureReason, DeadLetterPending) {
				refused = true
				return fmt.Errorf("operation %s ended meanwhile (%s): %w", op.OperationID, describeFinish(cur), ErrLeaseLost)
			}
			if s.has(BugCASOnFreshRevision) {
				// The defect: "expected" is what was just read.
				if cur, found, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID); err == nil && found {
					exp, next.Revision = cur.Revision, cur.Revision+1
				}
			}
			var e error
			ok, e = s.States.CompareAndSet(ctx, exp, next)
			return e
		})
		if ok && s.has(BugStateBeforeRegistry) && len(plan.Registrations) > 0 {
			s.emit(Event{Kind: EvStateCommit, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Expected: exp, Revision: next.Revision, Holder: lease.Holder})
			if err := s.at(ctx, faults.BeforeRegistrySave, func() error {
				return s.Registry.SaveAll(ctx, op.Space, plan.Registrations)
			}); err != nil {
				return Result{}, s.fail(ctx, op, fmt.Errorf("registry %s: %w", op.OperationID, err))
			}
			res, err := s.finishCommitted(ctx, op, plan, next, lease)
			res.Writes = writes
			return res, err
		}
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
		if !ok && s.has(BugIgnoreRefusedStateCAS) {
			ok = true
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
	if s.has(BugLeaseTrustedAfterExpiry) && now < lease.ExpiresAt+ttl/2 {
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
		if s.has(BugStaleEdgesFromCurrent) {
			if err := s.staleFromCurrent(ctx, op, plan); err != nil {
				return Result{}, fmt.Errorf("stale edges of %s: %w", op.OperationID, err)
			}
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
	rev := st.Revision
	if s.has(BugAnswerCurrentRevision) {
		if cur, ok := s.current(ctx, op); ok {
			rev = cur.Revision
		}
	}
	return Result{OperationID: op.OperationID, Outcome: OutcomeCompleted, Revision: rev}, nil
}

// writeGraph applies the plan's mutation in batches. Deletes of edges that
// another ACTIVE document supports by now are dropped (reconciliation with
// concurrent ingestions).
func (s *Service) writeGraph(ctx context.Context, op Operation, plan Plan, lease *Lease) (int, error) {
	m := plan.Mutation
	if len(m.DeleteEdges) > 0 && !s.has(BugDeleteSharedEdges) {
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
	if len(m.DeleteEdges) > 0 && !s.has(BugDeleteSharedEdges) {
		if err := s.resupport(ctx, op, m.DeleteEdges); err != nil {
			return writes, fmt.Errorf("graph write %s: %w", op.OperationID, err)
		}
	}
	return writes, nil
}

// describeFinish names how a finished operation ended (or that its dead
// letter is under way).
func describeFinish(op Operation) string {
	if strings.HasPrefix(op.FailureReason, DeadLetterPending) && !op.Finished() {
		return "dead letter under way"
	}
	if op.Disposition != Active {
		return string(op.Disposition)
	}
	return string(op.Stage)
}
