package worker

import (
	"context"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Stalls between store calls: the outermost wrapper of the stores a
// worker's service uses (observed) passes every store call through the
// worker's runtime at the faults.StoreCall pseudo-point, so that a pause
// armed there ("pause:500@7") stalls the worker before its seventh store
// call, whatever the call is. The named windows sit before the protocol's
// durable steps; these sit before every call, reads included, so a
// competitor can run between any two of them.

// stallable wraps st so that rt is asked before each store call; detach
// runs each call under a context that cannot end (callGate.detached).
func stallable(st reference.Stores, rt *faults.Runtime, detach bool, mark *callMark) reference.Stores {
	if rt == nil {
		return st
	}
	c := &callGate{rt: rt, detached: detach, mark: mark}
	st.Ops = &gatedOps{inner: st.Ops, g: c}
	st.States = &gatedStates{inner: st.States, g: c}
	st.Registry = &gatedRegistry{inner: st.Registry, g: c}
	st.Writer = &gatedWriter{inner: st.Writer, g: c}
	st.Locks = &gatedLocks{inner: st.Locks, g: c}
	return st
}

type callGate struct {
	rt *faults.Runtime
	// detached: the in-process mode on an embedded or simulated store,
	// where a store call is a few microseconds of this process's CPU
	// and never waits on a server. A context that can end (the
	// command's, ended by Ctrl-C) costs a SQL driver two goroutines and
	// a cancellable context per statement to watch it: a fifth of an
	// in-process exploration's CPU. Such a call runs under
	// context.WithoutCancel instead, once the gate has seen that the
	// context has not ended: an interruption stops the next store call,
	// not the one running.
	detached bool
	// mark, when set, tells the supervisor which store call (its number
	// and method, the protocol's name) the worker is in (sim/casefaults/durable.go).
	mark *callMark
}

// before runs call after whatever is armed at StoreCall for this hit. Only
// a pause applies there (faults.StoreCallSpec); the call's own result is
// returned as it is. call gets the context the store call runs under.
func (g *callGate) before(ctx context.Context, method string, call func(context.Context) error) error {
	callCtx := ctx
	if g.detached {
		if err := ctx.Err(); err != nil {
			return err
		}
		callCtx = context.WithoutCancel(ctx)
	}
	if g.mark != nil {
		defer g.mark.enter(method)()
	}
	return g.rt.At(ctx, faults.StoreCall, func() error { return call(callCtx) })
}

// gated runs one store call returning a value behind the gate.
func gated[T any](ctx context.Context, g *callGate, method string, call func(context.Context) (T, error)) (T, error) {
	var v T
	err := g.before(ctx, method, func(ctx context.Context) error {
		var e error
		v, e = call(ctx)
		return e
	})
	return v, err
}

// gated2 is gated for a call returning a value and a found flag.
func gated2[T any](ctx context.Context, g *callGate, method string, call func(context.Context) (T, bool, error)) (T, bool, error) {
	var v T
	var ok bool
	err := g.before(ctx, method, func(ctx context.Context) error {
		var e error
		v, ok, e = call(ctx)
		return e
	})
	return v, ok, err
}

type gatedOps struct {
	inner reference.OperationStore
	g     *callGate
}

func (o *gatedOps) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	return gated(ctx, o.g, "ops.create", func(ctx context.Context) (bool, error) { return o.inner.CreateIfAbsent(ctx, op, plan) })
}

func (o *gatedOps) Get(ctx context.Context, id string) (reference.Operation, error) {
	return gated(ctx, o.g, "ops.get", func(ctx context.Context) (reference.Operation, error) { return o.inner.Get(ctx, id) })
}

func (o *gatedOps) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	return gated(ctx, o.g, "ops.getPlan", func(ctx context.Context) (reference.Plan, error) { return o.inner.GetPlan(ctx, id) })
}

func (o *gatedOps) CompareAndSet(ctx context.Context, cur, next reference.Operation) (bool, error) {
	return gated(ctx, o.g, "ops.cas", func(ctx context.Context) (bool, error) { return o.inner.CompareAndSet(ctx, cur, next) })
}

func (o *gatedOps) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	return gated(ctx, o.g, "ops.listRecoverable", func(ctx context.Context) ([]reference.Operation, error) { return o.inner.ListRecoverable(ctx, limit) })
}

func (o *gatedOps) List(ctx context.Context) ([]reference.Operation, error) {
	return gated(ctx, o.g, "ops.list", func(ctx context.Context) ([]reference.Operation, error) { return o.inner.List(ctx) })
}

func (o *gatedOps) Claim(ctx context.Context, id, holder string, now, ttl int64) (bool, error) {
	return gated(ctx, o.g, "ops.claim", func(ctx context.Context) (bool, error) { return o.inner.Claim(ctx, id, holder, now, ttl) })
}

func (o *gatedOps) ReleaseClaim(ctx context.Context, id, holder string) (bool, error) {
	return gated(ctx, o.g, "ops.releaseClaim", func(ctx context.Context) (bool, error) { return o.inner.ReleaseClaim(ctx, id, holder) })
}

type gatedStates struct {
	inner reference.DocumentStateStore
	g     *callGate
}

func (s *gatedStates) FindCurrent(ctx context.Context, space, doc string) (reference.DocumentState, bool, error) {
	return gated2(ctx, s.g, "states.findCurrent", func(ctx context.Context) (reference.DocumentState, bool, error) {
		return s.inner.FindCurrent(ctx, space, doc)
	})
}

func (s *gatedStates) FindByOperationID(ctx context.Context, space, doc, op string) (reference.DocumentState, bool, error) {
	return gated2(ctx, s.g, "states.findByOperationId", func(ctx context.Context) (reference.DocumentState, bool, error) {
		return s.inner.FindByOperationID(ctx, space, doc, op)
	})
}

func (s *gatedStates) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	return gated(ctx, s.g, "states.cas", func(ctx context.Context) (bool, error) { return s.inner.CompareAndSet(ctx, expected, next) })
}

func (s *gatedStates) Remove(ctx context.Context, space, doc string, revision int64) (bool, error) {
	return gated(ctx, s.g, "states.remove", func(ctx context.Context) (bool, error) { return s.inner.Remove(ctx, space, doc, revision) })
}

func (s *gatedStates) RecordVersion(ctx context.Context, st reference.DocumentState) error {
	return s.g.before(ctx, "states.recordVersion", func(ctx context.Context) error { return s.inner.RecordVersion(ctx, st) })
}

func (s *gatedStates) Versions(ctx context.Context, space, doc string) ([]reference.DocumentState, error) {
	return gated(ctx, s.g, "states.versions", func(ctx context.Context) ([]reference.DocumentState, error) { return s.inner.Versions(ctx, space, doc) })
}

func (s *gatedStates) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	return gated(ctx, s.g, "states.list", func(ctx context.Context) ([]reference.DocumentState, error) { return s.inner.List(ctx, space) })
}

func (s *gatedStates) IsReferencedByOtherDocument(ctx context.Context, space, doc string, edge reference.EdgeKey) (bool, error) {
	return gated(ctx, s.g, "states.isReferenced", func(ctx context.Context) (bool, error) {
		return s.inner.IsReferencedByOtherDocument(ctx, space, doc, edge)
	})
}

type gatedRegistry struct {
	inner reference.EntityRegistry
	g     *callGate
}

func (r *gatedRegistry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	return gated(ctx, r.g, "registry.findMatches", func(ctx context.Context) ([]reference.RegisteredEntity, error) {
		return r.inner.FindMatches(ctx, space, entityType, names)
	})
}

// MatchNodeIDs keeps the registry's batch matcher, when it has one, as
// one store call.
func (r *gatedRegistry) MatchNodeIDs(ctx context.Context, space string, queries []reference.EntityQuery) ([][]string, error) {
	if _, ok := r.inner.(reference.BatchMatcher); ok {
		return gated(ctx, r.g, "registry.findMatches", func(ctx context.Context) ([][]string, error) {
			return reference.MatchNodeIDs(ctx, r.inner, space, queries)
		})
	}
	return reference.MatchNodeIDs(ctx, findOnly{r}, space, queries)
}

// findOnly is a registry without a batch matcher: one gated FindMatches
// per query, as the service calls a registry that has none.
type findOnly struct{ reference.EntityRegistry }

func (r *gatedRegistry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	return r.g.before(ctx, "registry.saveAll", func(ctx context.Context) error { return r.inner.SaveAll(ctx, space, regs) })
}

func (r *gatedRegistry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	return gated(ctx, r.g, "registry.list", func(ctx context.Context) ([]reference.RegisteredEntity, error) { return r.inner.List(ctx, space) })
}

type gatedWriter struct {
	inner reference.GraphWriter
	g     *callGate
}

func (w *gatedWriter) Apply(ctx context.Context, space string, m reference.Mutation) error {
	return w.g.before(ctx, "graph.apply", func(ctx context.Context) error { return w.inner.Apply(ctx, space, m) })
}

func (w *gatedWriter) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	return gated(ctx, w.g, "graph.readRecords", func(ctx context.Context) (reference.Graph, error) { return w.inner.ReadGraph(ctx, space) })
}

func (w *gatedWriter) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	return gated(ctx, w.g, "graph.readRecords", func(ctx context.Context) (reference.GraphRecords, error) { return w.inner.ReadRecords(ctx, space) })
}

type gatedLocks struct {
	inner reference.LockProvider
	g     *callGate
}

func (l *gatedLocks) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	return gated2(ctx, l.g, "locks.tryAcquire", func(ctx context.Context) (reference.Lease, bool, error) {
		return l.inner.TryAcquire(ctx, space, doc, holder, now, ttl)
	})
}

func (l *gatedLocks) Renew(ctx context.Context, lease reference.Lease, now, ttl int64) (reference.Lease, error) {
	return gated(ctx, l.g, "locks.renew", func(ctx context.Context) (reference.Lease, error) { return l.inner.Renew(ctx, lease, now, ttl) })
}

func (l *gatedLocks) Release(ctx context.Context, lease reference.Lease) error {
	return l.g.before(ctx, "locks.release", func(ctx context.Context) error { return l.inner.Release(ctx, lease) })
}
