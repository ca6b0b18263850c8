package reference

import (
	"context"
	"errors"
	"fmt"
)

// An ingestion without a caller's operationId takes the id of its intent:
// this content on top of the document's current revision. The id and the
// plan must come from one read of that revision. Read twice (once to name
// the operation, once to plan it), a holder that stalls between the two
// reads while another commits the document names its operation after one
// revision and plans it against the next: a resubmission of the same
// content then derives the id of the newer revision and freezes a second
// plan for one intent (I1; explore found it once holders could stall
// between any two store calls).

// derivedID is the operationId of req's intent on top of cur (found: the
// document exists).
func (s *Service) derivedID(ctx context.Context, req IngestRequest, cur DocumentState, found bool) string {
	base := int64(0)
	if found {
		base = cur.Revision
	}
	id := IngestOperationID(req.Space, req.DocumentID, ContentHash(req.Content), base)
	if s.has(BugNewOperationOnRetry) {
		if op, err := s.Ops.Get(ctx, id); err == nil && !op.Finished() && op.Attempts > 0 {
			id = fmt.Sprintf("%s-retry%d", id, op.Attempts)
		}
	}
	return id
}

// readForPlan reads the document's current state under the lease, and
// for a derived operationId names the operation after that read.
type planRead struct {
	cur   DocumentState
	found bool
}

func (s *Service) readForPlan(ctx context.Context, req *IngestRequest, derived bool) (planRead, error) {
	cur, ok, err := s.States.FindCurrent(ctx, req.Space, req.DocumentID)
	if err != nil {
		return planRead{}, fmt.Errorf("plan %s/%s: %w", req.Space, req.DocumentID, err)
	}
	if derived {
		req.OperationID = s.derivedID(ctx, *req, cur, ok)
	}
	return planRead{cur, ok}, nil
}

// A late graph write: a holder whose lease a split brain or an early
// expiry broke (or that stalled past it between its lease check and its
// write) writes its plan after another instance took the operation past
// the graph stage, and maybe after later revisions were written. Its
// effects are reconciled as an abandoned plan's are: what no ACTIVE state
// supports goes, what one supports and the write deleted comes back. For
// a plan whose state is current that changes nothing.

// wroteAfterFinish handles a stage advance after this holder's graph write
// that failed (err): if another instance finished the operation meanwhile
// (a holder whose lease a split brain or an early expiry broke wrote on;
// the other settled it as a dead letter, or abandoned it, and reconciled
// its graph effects before this write landed), the effects this holder
// just wrote are reconciled again (that needs no lease: it only removes
// what no ACTIVE document supports), and the operation's own end is the
// answer. Otherwise err stands.
func (s *Service) wroteAfterFinish(ctx context.Context, op Operation, plan Plan, err error) (Result, error) {
	if !errors.Is(err, ErrRevisionConflict) {
		return Result{}, err // this holder's own failure (a permanent error is dead-lettered and reported)
	}
	fresh, gerr := s.Ops.Get(ctx, op.OperationID)
	if gerr != nil || !fresh.Finished() {
		return Result{}, err
	}
	if fresh.Disposition != Active {
		if rerr := s.reconcileAbandoned(ctx, fresh, plan); rerr != nil {
			return Result{}, fmt.Errorf("%w (and reconciling its late graph write: %v)", err, rerr)
		}
	}
	return finishedResult(fresh), nil
}
