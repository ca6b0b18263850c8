package reference

import (
	"context"
	"slices"
)

// The between-calls mutants (bugs.go): each reads the document's current
// state at a point between two named windows and lets that read decide a
// write the plan should have decided. Without a competitor the read
// returns what the plan expects, so each is invisible until another holder
// commits right before it.

// current is the document's current state, if the store can say.
func (s *Service) current(ctx context.Context, op Operation) (DocumentState, bool) {
	cur, ok, err := s.States.FindCurrent(ctx, op.Space, op.DocumentID)
	return cur, ok && err == nil
}

// rebase is BugRebaseFreshPlan: the plan moved onto the current revision.
func (s *Service) rebase(ctx context.Context, op Operation, plan Plan) Plan {
	cur, ok := s.current(ctx, op)
	if !ok || plan.NextState == nil || cur.Revision == plan.ExpectedRevision() {
		return plan
	}
	prev, next := cur, *plan.NextState
	next.Revision = cur.Revision + 1
	plan.PreviousState, plan.NextState = &prev, &next
	return plan
}

// staleFromCurrent is BugStaleEdgesFromCurrent: the edges the current
// state supports and the plan's state does not are taken for stale and
// deleted unless another document supports them.
func (s *Service) staleFromCurrent(ctx context.Context, op Operation, plan Plan) error {
	cur, ok := s.current(ctx, op)
	if !ok || plan.NextState == nil {
		return nil
	}
	var cand []EdgeKey
	for _, k := range cur.FactSources {
		if !slices.Contains(plan.NextState.FactSources, k) {
			cand = append(cand, k)
		}
	}
	del, err := s.unsupported(ctx, op, op.DocumentID, cand)
	if err != nil || len(del) == 0 {
		return err
	}
	return s.applyGraph(ctx, op, Mutation{OperationID: op.OperationID, DeleteEdges: del}, "stale edges")
}
