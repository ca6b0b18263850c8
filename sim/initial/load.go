package initial

import (
	"context"
	"fmt"
	"slices"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Target says where and when a state is loaded.
type Target struct {
	// Space replaces the state's space everywhere.
	Space string
	// OpID scopes an operationId of the state to the target (operationIds
	// are globally unique; many runs share one store). Nil keeps ids.
	OpID func(id string) string
	// Now is the run's clock (unix milliseconds) when the steps start:
	// every time of the state moves by Now - State.At.
	Now int64
}

// LoaderHolder is the holder name Load uses for the leases it takes only
// to bring a document's fencing token up to the stored one.
const LoaderHolder = "crashmatrix-initial-load"

// Load puts the state into a backend's stores, renamed to the target's
// space and operationIds, with every time moved to the target's clock.
// It goes through the stores' own interfaces, so whatever a store refuses
// is an error, never a silent fix-up: the graph in one writer batch, the
// registry in one SaveAll, each version by RecordVersion, each current
// state by revision compare-and-sets (placeholder revisions below the
// stored one are overwritten and never recorded as versions), each
// operation created PREPARED with its plan (its fingerprint recomputed for
// the renamed plan) and moved along legal stage changes to its stored
// stage, attempts, failure reason and disposition, its claim by Claim, and
// each lease by acquisitions until the store hands out the stored token.
// Validate the state first.
func Load(ctx context.Context, st reference.Stores, s *State, t Target) error {
	if ps := s.Validate(); len(ps) > 0 {
		return fmt.Errorf("initial state: %w (and %d more problems)", ps[0], len(ps)-1)
	}
	r := renamer{from: s.Space, t: t, shift: t.Now - s.At}
	if len(s.Graph.Nodes) > 0 {
		m := reference.Mutation{OperationID: LoaderHolder}
		for _, n := range s.Graph.Nodes {
			m.UpsertNodes = append(m.UpsertNodes, reference.NodeUpsert(n))
		}
		for _, e := range s.Graph.Edges {
			m.UpsertEdges = append(m.UpsertEdges, reference.EdgeUpsert(e))
		}
		if err := st.Writer.Apply(ctx, t.Space, m); err != nil {
			return fmt.Errorf("initial state: graph: %w", err)
		}
	}
	if len(s.Registry) > 0 {
		regs := make([]reference.EntityRegistration, 0, len(s.Registry))
		for _, e := range s.Registry {
			canon := reference.Normalize(e.CanonicalName)
			regs = append(regs, reference.EntityRegistration{NodeID: e.NodeID, Type: e.Type, CanonicalName: e.CanonicalName,
				Aliases: slices.DeleteFunc(slices.Clone(e.Names), func(n string) bool { return n == canon }), Properties: e.Properties})
		}
		if err := st.Registry.SaveAll(ctx, t.Space, regs); err != nil {
			return fmt.Errorf("initial state: registry: %w", err)
		}
	}
	for _, d := range s.Documents {
		for _, v := range d.Versions {
			if err := st.States.RecordVersion(ctx, r.state(v)); err != nil {
				return fmt.Errorf("initial state: document %s: version %d: %w", d.ID, v.Revision, err)
			}
		}
		if d.Current == nil {
			continue
		}
		cur := r.state(*d.Current)
		for rev := int64(1); rev <= cur.Revision; rev++ {
			next := cur
			if rev < cur.Revision {
				next.Revision, next.OperationID = rev, LoaderHolder
			}
			ok, err := st.States.CompareAndSet(ctx, rev-1, next)
			if err != nil || !ok {
				return fmt.Errorf("initial state: document %s: current revision %d: compare-and-set %d -> %d refused (%v): is the target space empty?", d.ID, cur.Revision, rev-1, rev, err)
			}
		}
	}
	for _, op := range s.Operations {
		if err := loadOperation(ctx, st.Ops, r, op); err != nil {
			return fmt.Errorf("initial state: operation %s: %w", op.ID, err)
		}
	}
	for _, l := range s.Leases {
		if err := loadLease(ctx, st.Locks, r, l); err != nil {
			return fmt.Errorf("initial state: lease of document %s: %w", l.Document, err)
		}
	}
	return nil
}

// renamer moves a state's names and times to a target.
type renamer struct {
	from  string
	t     Target
	shift int64
}

func (r renamer) op(id string) string {
	if id == "" || r.t.OpID == nil {
		return id
	}
	return r.t.OpID(id)
}

func (r renamer) time(at int64) int64 {
	if at == 0 {
		return 0
	}
	return at + r.shift
}

func (r renamer) state(s reference.DocumentState) reference.DocumentState {
	s.Space, s.OperationID, s.CommittedAt = r.t.Space, r.op(s.OperationID), r.time(s.CommittedAt)
	return s
}

func (r renamer) plan(p reference.Plan) reference.Plan {
	p.Space, p.OperationID, p.Mutation.OperationID = r.t.Space, r.op(p.OperationID), r.op(p.Mutation.OperationID)
	if p.Options.Space == r.from {
		p.Options.Space = r.t.Space
	}
	if p.PreviousState != nil {
		s := r.state(*p.PreviousState)
		p.PreviousState = &s
	}
	if p.NextState != nil {
		s := r.state(*p.NextState)
		p.NextState = &s
	}
	return p
}

// stagePath is the chain of legal stage changes from PREPARED to a stage.
func stagePath(to reference.Stage) []reference.Stage {
	switch to {
	case reference.GraphApplied:
		return []reference.Stage{reference.GraphApplied}
	case reference.StateCommitted:
		return []reference.Stage{reference.GraphApplied, reference.StateCommitted}
	case reference.Completed:
		return []reference.Stage{reference.GraphApplied, reference.StateCommitted, reference.Completed}
	case reference.Failed:
		return []reference.Stage{reference.Failed}
	}
	return nil
}

func loadOperation(ctx context.Context, ops reference.OperationStore, r renamer, o Operation) error {
	plan := r.plan(o.Plan)
	cur := reference.Operation{OperationID: r.op(o.ID), Space: r.t.Space, DocumentID: o.Document, ExpectedRevision: o.ExpectedRevision,
		PlanFingerprint: reference.Fingerprint(plan), Stage: reference.Prepared, UpdatedAt: r.time(o.UpdatedAt)}
	created, err := ops.CreateIfAbsent(ctx, cur, plan)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if !created {
		return fmt.Errorf("create: operationId %s exists already in the target store", cur.OperationID)
	}
	if o.Claim != nil {
		exp := r.time(o.Claim.ExpiresAt)
		now, ttl := r.t.Now, exp-r.t.Now
		if ttl <= 0 {
			now, ttl = exp-1, 1
		}
		if ok, err := ops.Claim(ctx, cur.OperationID, o.Claim.Holder, now, ttl); err != nil || !ok {
			return fmt.Errorf("claim for %s refused (%v)", o.Claim.Holder, err)
		}
	}
	cas := func(next reference.Operation) error {
		ok, err := ops.CompareAndSet(ctx, cur, next)
		if err != nil || !ok {
			return fmt.Errorf("compare-and-set %s -> %s refused (%v)", cur.Stage, next.Stage, err)
		}
		cur = next
		return nil
	}
	if o.Attempts != 0 || o.FailureReason != "" {
		next := cur
		next.Attempts, next.FailureReason = o.Attempts, o.FailureReason
		if err := cas(next); err != nil {
			return err
		}
	}
	for _, stage := range stagePath(o.Stage) {
		next := cur
		next.Stage = stage
		if err := cas(next); err != nil {
			return err
		}
	}
	if o.Disposition != reference.Active {
		next := cur
		next.Disposition, next.SupersededBy = o.Disposition, r.op(o.SupersededBy)
		if err := cas(next); err != nil {
			return err
		}
	}
	return nil
}

// MaxLeaseToken bounds the fencing tokens Load reproduces: it reaches a
// token by that many acquisitions.
const MaxLeaseToken = 100_000

// Fingerprints are the planFingerprints the state's operations have once
// loaded into t (their plans renamed to t's space and operationIds), by
// loaded operationId.
func (s *State) Fingerprints(t Target) map[string]string {
	r := renamer{from: s.Space, t: t}
	out := make(map[string]string, len(s.Operations))
	for _, op := range s.Operations {
		out[r.op(op.ID)] = reference.Fingerprint(r.plan(op.Plan))
	}
	return out
}

func loadLease(ctx context.Context, locks reference.LockProvider, r renamer, l Lease) error {
	if l.Token > MaxLeaseToken {
		return fmt.Errorf("token %d: Load reaches a token by acquiring the lease that many times, at most %d", l.Token, MaxLeaseToken)
	}
	// The acquisition that hands out the stored token happens at `at`
	// and lasts until the stored expiry; the fillers before it each hold
	// the lease for a millisecond, long expired by then.
	exp := r.time(l.ExpiresAt)
	var at, ttl int64
	switch {
	case l.Holder == "":
		at, ttl = r.t.Now-1, 1
	case exp > r.t.Now:
		at, ttl = r.t.Now, exp-r.t.Now
	default:
		at, ttl = exp-1, 1
	}
	base := at - 2*l.Token - 10
	var got reference.Lease
	for k := int64(1); k <= l.Token; k++ {
		holder, now, d := LoaderHolder, base+2*k, int64(1)
		if k == l.Token {
			now, d = at, ttl
			if l.Holder != "" {
				holder = l.Holder
			}
		}
		lease, ok, err := locks.TryAcquire(ctx, r.t.Space, l.Document, holder, now, d)
		if err != nil || !ok {
			return fmt.Errorf("acquire %d of %d refused (%v)", k, l.Token, err)
		}
		got = lease
	}
	if got.Token != l.Token {
		return fmt.Errorf("the store handed out token %d where the state holds token %d (does the target space hold this document's lease already?)", got.Token, l.Token)
	}
	if l.Holder == "" {
		if err := locks.Release(ctx, got); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}
