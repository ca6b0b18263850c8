package worker

import (
	"context"
	"strings"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The harness's own eyes: thin wrappers around the model and the stores the
// service writes to, which record in the history what really reached them
// (history.Seen records), and the worker's intent before each call. The
// invariants judge the service against these, not against the events the
// service reports about itself.

// seen appends one observation.
func (w *worker) seen(o history.Observation) {
	w.hist.Append(history.Record{Kind: history.Seen, Obs: &o})
}

// revision reads the document's current revision as the harness sees it
// (0 when absent, -1 when the store cannot say).
func (w *worker) revision(ctx context.Context, space, doc string) int64 {
	if w.stores == nil {
		return -1
	}
	if w.opt.DetachStores {
		if ctx.Err() != nil {
			return -1
		}
		ctx = context.WithoutCancel(ctx) // as the service's calls (callGate.detached)
	}
	cur, ok, err := w.stores.States.FindCurrent(ctx, space, doc)
	switch {
	case err != nil:
		return -1
	case !ok:
		return 0
	}
	return cur.Revision
}

// intent records what the worker is about to ask the service for.
func (w *worker) intent(ctx context.Context, a catalogue.Action) {
	o := history.Observation{What: history.SeenIntent, Do: a.Do, Doc: a.Doc, Op: a.Op, Base: w.revision(ctx, w.spec.Space, a.Doc)}
	if a.Do == "ingest" {
		o.ContentHash = reference.ContentHash(a.Content)
	}
	w.seen(o)
}

// observed wraps the stores the service uses.
func (w *worker) observed(st reference.Stores) reference.Stores {
	st.Ops = &seenOps{OperationStore: st.Ops, w: w}
	st.States = &seenStates{DocumentStateStore: st.States, w: w}
	st.Writer = &seenWriter{GraphWriter: st.Writer, w: w}
	st.Locks = &leaseFaults{LockProvider: &deadHolderLocks{LockProvider: st.Locks, w: w}, rt: w.rt, w: w}
	return stallable(st, w.rt, w.opt.DetachStores, w.mark) // outermost: a stall comes before the call is seen
}

type seenOps struct {
	reference.OperationStore
	w *worker
}

func (o *seenOps) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	base := o.w.revision(ctx, op.Space, op.DocumentID)
	created, err := o.OperationStore.CreateIfAbsent(ctx, op, plan)
	if err == nil {
		o.w.seen(history.Observation{What: history.SeenFreeze, Do: string(plan.Kind), Op: op.OperationID, Doc: op.DocumentID,
			Plan: check.PlanDigest(plan), Items: check.MutationItems(plan.Mutation), Created: created, Base: base})
	}
	return created, err
}

func (o *seenOps) CompareAndSet(ctx context.Context, cur, next reference.Operation) (bool, error) {
	ok, err := o.OperationStore.CompareAndSet(ctx, cur, next)
	if err == nil && ok && failedForGood(next) && !failedForGood(cur) {
		o.w.seen(history.Observation{What: history.SeenMark, Op: next.OperationID, Doc: next.DocumentID})
	}
	return ok, err
}

// failedForGood says whether op's record says it failed permanently: a
// pending dead letter, or a recorded one.
func failedForGood(op reference.Operation) bool {
	return op.Disposition == reference.DeadLetter || strings.HasPrefix(op.FailureReason, reference.DeadLetterPending)
}

func (o *seenOps) Claim(ctx context.Context, id, holder string, now, ttl int64) (bool, error) {
	ok, err := o.OperationStore.Claim(ctx, id, holder, now, ttl)
	if err == nil {
		o.w.seen(history.Observation{What: history.SeenClaim, Op: id, Holder: holder, Now: now, Until: now + ttl, Granted: ok})
	}
	return ok, err
}

func (o *seenOps) ReleaseClaim(ctx context.Context, id, holder string) (bool, error) {
	ok, err := o.OperationStore.ReleaseClaim(ctx, id, holder)
	if err == nil {
		o.w.seen(history.Observation{What: history.SeenUnclaim, Op: id, Holder: holder, Granted: ok})
	}
	return ok, err
}

type seenStates struct {
	reference.DocumentStateStore
	w *worker
}

func (s *seenStates) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	ok, err := s.DocumentStateStore.CompareAndSet(ctx, expected, next)
	if err == nil && ok {
		s.w.seen(history.Observation{What: history.SeenCommit, Op: next.OperationID, Doc: next.DocumentID, Expected: expected,
			Revision: next.Revision, Status: string(next.Status), ContentHash: next.ContentHash})
	}
	return ok, err
}

type seenWriter struct {
	reference.GraphWriter
	w *worker
}

func (g *seenWriter) Apply(ctx context.Context, space string, m reference.Mutation) error {
	err := g.GraphWriter.Apply(ctx, space, m)
	if err == nil {
		g.w.seen(history.Observation{What: history.SeenGraph, Op: m.OperationID, Items: mutationItems(m), Deleted: len(m.DeleteEdges) + len(m.DeleteNodes)})
	}
	return err
}

// mutationItems is check.MutationItems, nil for a mutation that
// upserts nothing (a history line stays short).
func mutationItems(m reference.Mutation) []string {
	if len(m.UpsertNodes)+len(m.UpsertEdges) == 0 {
		return nil
	}
	return check.MutationItems(m)
}

// seenModel is the harness's model seen from outside: it records, with
// each answer, the revision of the document when the model was asked.
type seenModel struct {
	reference.Extractor
	w *worker
}

func (m *seenModel) Extract(ctx context.Context, req reference.ExtractRequest) (reference.Extraction, error) {
	base := m.w.revision(ctx, req.Space, req.DocumentID)
	ex, err := m.Extractor.Extract(ctx, req)
	if err == nil {
		m.w.seen(history.Observation{What: history.SeenModel, Op: req.OperationID, Doc: req.DocumentID, ContentHash: reference.ContentHash(req.Content), Base: base})
	}
	return ex, err
}

// seenPlans records every business save with the thread the worker is
// running: one logical save is (owner, thread), whatever key the code
// chose.
type seenPlans struct {
	plansave.PlanStore
	w      *worker
	thread *string
}

func (p *seenPlans) Save(ctx context.Context, owner, key, question string, minutes int) (int64, error) {
	id, err := p.PlanStore.Save(ctx, owner, key, question, minutes)
	o := history.Observation{What: history.SeenSave, Thread: *p.thread, Owner: owner, Op: key, ID: id}
	if err != nil {
		o.Err = err.Error()
	}
	p.w.seen(o)
	return id, err
}
