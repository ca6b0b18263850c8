package reference

import (
	"context"
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
