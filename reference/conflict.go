package reference

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// conflict handles a lost revision race: the plan is never forced over the
// newer state. It plans anew against the latest revision (a new operation
// whose id is the one a fresh ingestion of the same content on top of the
// latest revision would derive, so a crash here converges and a caller's
// resubmission of the content is the same operation), then abandons the
// old operation and removes graph effects of the old plan that no ACTIVE
// document supports.
func (s *Service) conflict(ctx context.Context, op Operation, plan Plan, lease *Lease) (Result, error) {
	// The newer revision may be this operation's own: another instance
	// (recovery, while this holder stood still between its checks) resumed
	// and committed it. That is no conflict: the operation is finished, or
	// finishes from its commit.
	if plan.NextState != nil {
		st, mine, err := s.States.FindByOperationID(ctx, op.Space, op.DocumentID, op.OperationID)
		if err != nil {
			return Result{}, fmt.Errorf("conflict %s: %w", op.OperationID, err)
		}
		if mine {
			fresh, err := s.Ops.Get(ctx, op.OperationID)
			if err != nil {
				return Result{}, fmt.Errorf("conflict %s: %w", op.OperationID, err)
			}
			if fresh.Finished() {
				return finishedResult(fresh), nil
			}
			return s.finishCommitted(ctx, fresh, plan, st, lease)
		}
	}
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
		// The new plan is the same intent as a fresh ingestion of this
		// content on top of the latest revision: it takes that intent's
		// operationId, so a caller who resubmitted the content meanwhile
		// and this re-plan share one plan (and a crash here converges).
		newID := IngestOperationID(op.Space, op.DocumentID, ContentHash(plan.Content), latest)
		if s.has(BugReplanIDFromOldOperation) {
			newID = "replan-" + hashParts(op.OperationID, fmt.Sprint(latest))[:32]
		}
		if s.has(BugReplanIDPerAttempt) {
			newID = "replan-" + hashParts(op.OperationID, fmt.Sprint(latest), fmt.Sprint(s.now()))[:32]
		}
		err := s.at(ctx, faults.ConflictBeforeReplan, func() error {
			if _, err := s.Ops.Get(ctx, newID); err == nil {
				return nil
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			// Planned against the read newID was named after.
			np, err := s.planOn(ctx, IngestRequest{Space: op.Space, DocumentID: op.DocumentID, OperationID: newID, Content: plan.Content}, cur, ok)
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
		// The superseding operation may have finished before this holder
		// came here (a resubmission of the same content on the latest
		// revision is the same operation): abandoned in its turn, its own
		// successor carries the intent on.
		r := Result{Outcome: OutcomeAbandoned, SupersededBy: superseding}
		for seen := map[string]bool{}; r.Outcome == OutcomeAbandoned && r.SupersededBy != "" && !seen[r.SupersededBy]; {
			next := r.SupersededBy
			seen[next] = true
			nop, err := s.Ops.Get(ctx, next)
			if err != nil {
				return Result{}, fmt.Errorf("conflict %s: superseding %s: %w", op.OperationID, next, err)
			}
			nplan, err := s.Ops.GetPlan(ctx, next)
			if err != nil {
				return Result{}, fmt.Errorf("conflict %s: superseding %s: %w", op.OperationID, next, err)
			}
			if r, err = s.execute(ctx, nop, nplan, lease); err != nil {
				return Result{}, fmt.Errorf("conflict %s: superseding %s: %w", op.OperationID, next, err)
			}
		}
		// SUPERSEDED says the intent took effect at the answered revision.
		// A successor that failed for good (dead-lettered, or abandoned
		// with no successor of its own) did not carry it out: the answer is
		// this operation's own disposition, ABANDONED, naming the successor.
		if tookEffect(r.Outcome) {
			res.Outcome, res.Revision = OutcomeSuperseded, r.Revision
		}
	}
	return res, nil
}

// tookEffect says whether an answer means its intent is in the stores.
func tookEffect(o Outcome) bool {
	switch o {
	case OutcomeCompleted, OutcomeAlreadyDone, OutcomeNoOp, OutcomeSuperseded:
		return true
	}
	return false
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
		if err := s.applyGraph(ctx, op, Mutation{OperationID: op.OperationID, DeleteEdges: del}, "reconcile"); err != nil {
			return err
		}
		if err := s.putBack(ctx, op, del); err != nil {
			return err
		}
	}
	// The plan may also have deleted edges (stale for it) that a committed
	// ACTIVE state still supports: put them back as that state's plan wrote
	// them.
	return s.restoreSupported(ctx, op, "", append(append([]EdgeKey(nil), plan.Mutation.DeleteEdges...), plan.StaleEdges...))
}

// resupport re-applies the edges among deleted that something supports
// again: an ACTIVE state of another document, or another unfinished plan
// that will commit them (what unsupported counts). Each document has its
// own lease, so a delete checked while nothing supported an edge can land
// after another document's graph write of the same edge; that document's
// commit must not find it gone. Its prepare came before its graph write,
// so a check after the delete sees it.
func (s *Service) resupport(ctx context.Context, op Operation, deleted []EdgeKey) error {
	gone, err := s.unsupported(ctx, op, op.DocumentID, deleted)
	if err != nil {
		return err
	}
	var back []EdgeKey
	for _, k := range deleted {
		if !slices.Contains(gone, k) {
			back = append(back, k)
		}
	}
	return s.restoreSupported(ctx, op, op.DocumentID, back)
}

// restoreSupported re-applies the edges among keys that an ACTIVE state
// (of a document other than excludeDoc; "" excludes nothing) supports, from
// the plan that committed it, or that another unfinished plan will commit,
// from that plan, where the graph lacks them.
func (s *Service) restoreSupported(ctx context.Context, op Operation, excludeDoc string, keys []EdgeKey) error {
	return s.restoreFrom(ctx, op, excludeDoc, excludeDoc != "", keys)
}

// restoreFrom is restoreSupported with the pending plans consulted when
// withPending is set.
func (s *Service) restoreFrom(ctx context.Context, op Operation, excludeDoc string, withPending bool, keys []EdgeKey) error {
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
	var pending []Plan
	for _, k := range keys {
		if _, ok := g.Edges[k]; ok || done[k] {
			continue
		}
		var from []Plan
		for _, st := range states {
			if st.Status != DocActive || !st.Supports(k) || st.DocumentID == excludeDoc && excludeDoc != "" {
				continue
			}
			p, err := s.Ops.GetPlan(ctx, st.OperationID)
			if err != nil {
				return fmt.Errorf("restore %s: plan of %s: %w", k, st.OperationID, err)
			}
			from = append(from, p)
		}
		if len(from) == 0 && withPending {
			if pending == nil {
				if pending, err = s.pendingPlans(ctx, op); err != nil {
					return err
				}
			}
			for _, p := range pending {
				if p.NextState.Supports(k) {
					from = append(from, p)
				}
			}
		}
		for _, p := range from {
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
	return s.applyGraph(ctx, op, m, "reconcile")
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
			if pending, err = s.pendingPlans(ctx, op); err != nil {
				return nil, err
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

// pendingPlans are the plans of the space's other unfinished operations
// that will commit an ACTIVE state not yet committed.
func (s *Service) pendingPlans(ctx context.Context, op Operation) ([]Plan, error) {
	if s.has(BugSupportIgnoresPendingPlans) {
		return []Plan{}, nil // the defect: committed states alone support edges
	}
	ops, err := s.Ops.ListRecoverable(ctx, 10000)
	if err != nil {
		return nil, err
	}
	pending := []Plan{}
	for _, o := range ops {
		if o.Space != op.Space || o.OperationID == op.OperationID {
			continue
		}
		if strings.HasPrefix(o.FailureReason, DeadLetterPending) {
			// Failed for good: its dead letter is under way and its plan
			// never commits, so it supports nothing (a stale edge kept
			// for it would outlive it once its reconciliation, which
			// checked before this commit, has passed).
			continue
		}
		p, err := s.Ops.GetPlan(ctx, o.OperationID)
		if err != nil {
			continue // I5 will speak of an unloadable plan
		}
		if p.NextState == nil || p.NextState.Status != DocActive {
			continue
		}
		// A plan whose revision is committed (or overtaken) no longer
		// stands for future support: its document's current state speaks
		// for it.
		cur, ok, err := s.States.FindCurrent(ctx, o.Space, o.DocumentID)
		if err != nil {
			return nil, err
		}
		if ok && cur.Revision >= p.NextState.Revision {
			continue
		}
		pending = append(pending, p)
	}
	return pending, nil
}

// cleanupStale deletes, after this operation's state commit, the edges its
// plan made stale that nothing supports any more. The write-time check may
// have kept an edge for a document whose support has since gone (it was
// retracted or re-ingested meanwhile); idempotent, so recovery repeats it.
func (s *Service) cleanupStale(ctx context.Context, op Operation, plan Plan, lease *Lease) error {
	if plan.Kind == Retraction && s.has(BugRetractionSkipsStaleCleanup) {
		return nil
	}
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
	if err := s.applyGraph(ctx, op, Mutation{OperationID: op.OperationID, DeleteEdges: del}, "stale edges"); err != nil {
		return err
	}
	return s.putBack(ctx, op, del)
}

// putBack re-applies the edges among deleted that something supports by
// now. A check that an edge is unsupported and its delete are two store
// calls: another document, or a later revision of this one, may have
// written (or committed) one of them in between. Unlike at the plan's own
// graph write (resupport), this document is not left out: its current
// state is a later one's, or one that does not support them.
func (s *Service) putBack(ctx context.Context, op Operation, deleted []EdgeKey) error {
	gone, err := s.unsupported(ctx, op, "", deleted)
	if err != nil {
		return err
	}
	var back []EdgeKey
	for _, k := range deleted {
		if !slices.Contains(gone, k) {
			back = append(back, k)
		}
	}
	return s.restoreFrom(ctx, op, "", true, back)
}

// applyGraph is a graph write outside the plan's batches (reconciliation,
// stale edges); what the writer confirmed is reported as EvGraphBatch, so
// the history knows every acknowledged graph write (I9).
func (s *Service) applyGraph(ctx context.Context, op Operation, m Mutation, what string) error {
	if err := s.Writer.Apply(ctx, op.Space, m); err != nil {
		return err
	}
	s.emit(Event{Kind: EvGraphBatch, OperationID: op.OperationID, Space: op.Space, DocumentID: op.DocumentID, Detail: what, Batch: &m})
	return nil
}
