package reference

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

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
	if !s.retryable(cause) || strings.HasPrefix(cur.FailureReason, DeadLetterPending) {
		// Failed for good, or a dead letter begun meanwhile by another
		// instance: the mark stays, and whoever resumes the operation
		// finishes the dead letter (finishDeadLetter).
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
	if !ok || s.retryable(cause) {
		return cause
	}
	if err := s.deadLetter(ctx, next, cause.Error()); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// DeadLetterPending starts the failure reason of an operation whose dead
// letter is under way: it failed for good and its graph effects may be
// partly reconciled away. Whoever resumes it finishes the dead letter
// (finishDeadLetter) and never runs its plan again: a permanent error is
// not retried, even when the process that met it died before recording
// the dead letter.
const DeadLetterPending = "dead letter pending: "

// finishDeadLetter finishes the dead letter of an operation found with a
// pending mark: the reconciliation again (idempotent), then the record.
func (s *Service) finishDeadLetter(ctx context.Context, op Operation) (Result, error) {
	if err := s.deadLetter(ctx, op, strings.TrimPrefix(op.FailureReason, DeadLetterPending)); err != nil {
		return Result{}, err
	}
	final, err := s.Ops.Get(ctx, op.OperationID)
	if err != nil {
		return Result{}, fmt.Errorf("dead letter %s: %w", op.OperationID, err)
	}
	if !final.Finished() {
		return Result{}, fmt.Errorf("dead letter %s: the record changed concurrently: %w", op.OperationID, ErrRevisionConflict)
	}
	return finishedResult(final), nil
}

// deadLetter gives an operation that failed for good to a person. Its
// graph effects are reconciled first, while the operation is still active
// and carries its failure reason: a crash between the two leaves it to
// recovery, which writes its graph again before going on (see execute), so
// the graph never keeps effects of a dead letter and never lacks effects of
// an operation that may still commit. The disposition is recorded last.
func (s *Service) deadLetter(ctx context.Context, cur Operation, reason string) error {
	if s.has(BugDeadLetterWithoutReconcile) {
		// The defect: the disposition alone.
	} else if err := s.reconcileDeadLetter(ctx, cur); err != nil {
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

// retryable is IsRetryable, or its mutant.
func (s *Service) retryable(err error) bool {
	var ie *faults.InjectedError
	if s.has(BugRetryPermanentErrors) && errors.As(err, &ie) {
		return true
	}
	return IsRetryable(err)
}

// withoutProperties is a plan with its node and edge properties left out,
// for BugPlanIdentityIgnoresProperties.
func withoutProperties(p Plan) Plan {
	m := p.Mutation
	m.UpsertNodes = append([]NodeUpsert(nil), m.UpsertNodes...)
	for i := range m.UpsertNodes {
		m.UpsertNodes[i].Properties = nil
	}
	m.UpsertEdges = append([]EdgeUpsert(nil), m.UpsertEdges...)
	for i := range m.UpsertEdges {
		m.UpsertEdges[i].Properties = nil
	}
	p.Mutation, p.ExtractionCall = m, 0
	return p
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

// definiteStoreFailure reports whether err is a store's definite,
// retryable failure of a write: not an injected fault, not a refused lease,
// not a permanent error, and not an unknown outcome.
func definiteStoreFailure(err error) bool {
	return IsRetryable(err) && !IsOutcomeUnknown(err) && !faults.IsInjected(err) &&
		!errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLockTimeout) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
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
		ErrPlanConflict, ErrInvalidArgument, ErrIdentityMismatch, ErrNoPersistedPlan, ErrIllegalTransition, ErrUnknownStage, ErrInvalidRevision, ErrLeaseContract} {
		if errors.Is(err, perm) {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
