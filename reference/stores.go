package reference

import (
	"context"
	"io"
	"maps"
)

// OperationStore keeps operations and their frozen plans. Every method is
// safe for concurrent use, also from several processes sharing the store.
//
// Conventions shared by every store in this file: a blank space,
// documentId, operationId or holder is an error wrapping ErrInvalidArgument;
// an unknown operationId is an error wrapping ErrNotFound (Get and GetPlan
// of a blank operationId may answer either: nothing is stored under it);
// IsReferencedByOtherDocument takes a blank documentId as "exclude no
// document"; a claim or lease stamped to expire at E is live while now < E
// and free from now >= E.
//
// Requirements (protocol.md, "Operation store requirements"): operationId is
// globally unique; the operation and its plan are created in one storage
// transaction, first write wins; the stage change is an atomic
// compare-and-set; plans round-trip completely; unfinished operations scan in
// a stable order; failure reason, update time and attempts are kept; one
// recovery claim per operation across instances.
type OperationStore interface {
	// CreateIfAbsent stores op (stage PREPARED) and its plan in one
	// transaction. It returns false, changing nothing, if the operationId
	// exists already (whatever its plan). It rejects an invalid pair (see
	// CheckNewOperation) with an error.
	CreateIfAbsent(ctx context.Context, op Operation, plan Plan) (bool, error)
	// Get returns the operation, or an error wrapping ErrNotFound.
	Get(ctx context.Context, operationID string) (Operation, error)
	// GetPlan returns the stored plan, checked against the stored
	// fingerprint (DecodePlan); ErrNotFound if there is none.
	GetPlan(ctx context.Context, operationID string) (Plan, error)
	// CompareAndSet replaces the mutable fields (Stage, UpdatedAt,
	// FailureReason, Attempts, Disposition, SupersededBy) with next's, if
	// and only if the stored record has expected's identity
	// (Operation.SameIdentity), stage, attempts and disposition. Checks in
	// this order: ValidateUpdate(expected, next) (the caller's own step is
	// illegal: error); unknown id (ErrNotFound); stored record differs from
	// expected (false, nil: someone else moved it); ValidateUpdate(stored,
	// next) (e.g. time backwards against the stored record: error). Nothing
	// changes unless it returns true.
	CompareAndSet(ctx context.Context, expected, next Operation) (bool, error)
	// ListRecoverable returns at most limit unfinished operations (stage
	// not COMPLETED, no disposition) ordered by UpdatedAt, then
	// OperationID. limit must be positive. The result is a fresh slice the
	// caller may keep.
	ListRecoverable(ctx context.Context, limit int) ([]Operation, error)
	// List returns every operation (finished or not) ordered by
	// OperationID, for checking invariants.
	List(ctx context.Context) ([]Operation, error)
	// Claim gives holder the recovery claim on an operation until
	// now+ttlMillis, if nobody else holds an unexpired claim (a holder may
	// renew its own). It returns false if another holder's claim is live.
	Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error)
	// ReleaseClaim drops holder's claim; it returns false if holder does
	// not hold it.
	ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error)
}

// SpaceLister is an optional OperationStore method: the operations of one
// space ordered by operationId, without reading the others (checkers and
// tools use it when a store offers it).
type SpaceLister interface {
	ListSpace(ctx context.Context, space string) ([]Operation, error)
}

// SpacePlanReader is an optional OperationStore method: every plan of a
// space at once, by operation id (an unreadable plan as an error, as
// GetPlan would return it). The checkers use it when a store offers it;
// properties.Stores checks it against GetPlan.
type SpacePlanReader interface {
	SpacePlans(ctx context.Context, space string) (map[string]Plan, map[string]error, error)
}

// DocumentStateStore keeps the committed state of each document, guarded by
// a revision compare-and-set, and its version history.
type DocumentStateStore interface {
	// FindCurrent returns the current state; ok is false if absent.
	FindCurrent(ctx context.Context, space, documentID string) (DocumentState, bool, error)
	// FindByOperationID returns the state committed by operationID, current
	// or in the history.
	FindByOperationID(ctx context.Context, space, documentID, operationID string) (DocumentState, bool, error)
	// CompareAndSet commits next if the current revision equals expected (0
	// means absent). next.Revision must be expected+1 and expected must not
	// be negative: otherwise an error wrapping ErrInvalidRevision. It returns
	// false when the current revision is not expected.
	CompareAndSet(ctx context.Context, expected int64, next DocumentState) (bool, error)
	// Remove deletes the current state if its revision is revision.
	Remove(ctx context.Context, space, documentID string, revision int64) (bool, error)
	// RecordVersion adds a state to the version history; recording the
	// same (space, documentId, revision) again is a no-op.
	RecordVersion(ctx context.Context, state DocumentState) error
	// Versions returns the history of a document in ascending revision.
	Versions(ctx context.Context, space, documentID string) ([]DocumentState, error)
	// List returns the current states of a space ordered by documentId.
	List(ctx context.Context, space string) ([]DocumentState, error)
	// IsReferencedByOtherDocument reports whether an ACTIVE current state of
	// another document in the same space supports edge (any document's,
	// when documentID is blank).
	IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge EdgeKey) (bool, error)
}

// SpaceVersionReader is an optional DocumentStateStore method: the version
// history of every document of a space at once, by document id. The
// checkers use it when a store offers it; properties.Stores checks it
// against Versions.
type SpaceVersionReader interface {
	SpaceVersions(ctx context.Context, space string) (map[string][]DocumentState, error)
}

// EntityRegistry binds entity names to node ids, unique on (space,
// normalised type, normalised name).
type EntityRegistry interface {
	// FindMatches returns the distinct registered entities of type
	// entityType bound to any of names, ordered by NodeID. The type and
	// the names are normalised (Normalize: NFKC, lower case, inner white
	// space folded) before matching, as SaveAll normalises them.
	FindMatches(ctx context.Context, space, entityType string, names []string) ([]RegisteredEntity, error)
	// SaveAll stores every registration or none. A name already bound to
	// another node id (in the store or within the batch) is an error
	// wrapping ErrRegistryConflict. Saving the same registrations again is
	// a no-op. Aliases of the same node are merged: the entity keeps the
	// Type and CanonicalName of its first registration, its Names are the
	// union of every name bound to it (normalised, sorted, distinct), and
	// its Properties are merged, a later registration's values replacing
	// earlier ones key by key.
	SaveAll(ctx context.Context, space string, regs []EntityRegistration) error
	// List returns every registered entity of a space ordered by NodeID.
	List(ctx context.Context, space string) ([]RegisteredEntity, error)
}

// EntityQuery asks for the entities of one type bound to any of names.
type EntityQuery struct {
	Type  string
	Names []string
}

// BatchMatcher is an optional EntityRegistry method: for each query, the
// distinct node ids FindMatches would return for it (ordered), all queries
// answered at once. Planning uses it when the registry offers it.
type BatchMatcher interface {
	MatchNodeIDs(ctx context.Context, space string, queries []EntityQuery) ([][]string, error)
}

// MatchNodeIDs answers queries with r's BatchMatcher if it has one, and
// one FindMatches per query otherwise.
func MatchNodeIDs(ctx context.Context, r EntityRegistry, space string, queries []EntityQuery) ([][]string, error) {
	if bm, ok := r.(BatchMatcher); ok {
		return bm.MatchNodeIDs(ctx, space, queries)
	}
	out := make([][]string, len(queries))
	for i, q := range queries {
		hits, err := r.FindMatches(ctx, space, q.Type, q.Names)
		if err != nil {
			return nil, err
		}
		ids := []string{}
		for _, h := range hits {
			if len(ids) == 0 || ids[len(ids)-1] != h.NodeID {
				ids = append(ids, h.NodeID)
			}
		}
		out[i] = ids
	}
	return out, nil
}

// GraphWriter applies mutations to a graph.
type GraphWriter interface {
	// Apply applies m to space atomically and idempotently: applying it
	// twice equals applying it once; deleting what is absent is no error;
	// an edge whose endpoint does not exist is an error wrapping
	// ErrMissingEndpoint and nothing of m is applied.
	Apply(ctx context.Context, space string, m Mutation) error
	// ReadGraph returns the whole graph of a space: the fold of
	// ReadRecords (one entry per node id and edge key, the last record
	// winning); Properties maps are never nil.
	ReadGraph(ctx context.Context, space string) (Graph, error)
	// ReadRecords returns every node and edge record stored for space,
	// one entry per stored record, in any order: a store that holds two
	// records for one node id or edge key (a CREATE where a MERGE was
	// due) returns both. The convergence and registry checks (I3, I6) see
	// duplicates through it, so it must read what is stored, not a map.
	ReadRecords(ctx context.Context, space string) (GraphRecords, error)
}

// GraphRecords is a space's graph as stored, duplicates included (see
// GraphWriter.ReadRecords).
type GraphRecords struct {
	Nodes []Node
	Edges []Edge
}

// Graph folds the records into one entry per node id and edge key, the
// last record of each winning; Properties maps are copies, never nil.
func (r GraphRecords) Graph() Graph {
	g := NewGraph()
	props := func(m map[string]string) map[string]string {
		if m == nil {
			return map[string]string{}
		}
		return maps.Clone(m)
	}
	for _, n := range r.Nodes {
		n.Properties = props(n.Properties)
		g.Nodes[n.ID] = n
	}
	for _, e := range r.Edges {
		e.Properties = props(e.Properties)
		g.Edges[e.Key] = e
	}
	return g
}

// Duplicates lists the node ids and edge keys stored more than once, as
// FormatDuplicates renders them ("node person:abc x2"); nil when there
// are none.
func (r GraphRecords) Duplicates() []string {
	nodes, edges := map[string]int{}, map[EdgeKey]int{}
	for _, n := range r.Nodes {
		nodes[n.ID]++
	}
	for _, e := range r.Edges {
		edges[e.Key]++
	}
	return FormatDuplicates(nodes, edges)
}

// Records lists a graph as records (one per node and edge): what
// ReadRecords returns for a store that keeps no duplicates.
func (g Graph) Records() GraphRecords {
	var r GraphRecords
	for _, n := range g.Nodes {
		r.Nodes = append(r.Nodes, n)
	}
	for _, e := range g.Edges {
		r.Edges = append(r.Edges, e)
	}
	return r
}

// LockProvider hands out per-document leases with fencing tokens. Time is
// passed in (unix milliseconds) so expiry is testable.
type LockProvider interface {
	// TryAcquire gives holder the lease on (space, documentID) until
	// now+ttlMillis if it is free or expired; the token is greater than any
	// token issued before for that document. It returns ok=false with the
	// current lease if another holder's lease is live. A holder that holds
	// it already gets it renewed with the same token.
	TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (Lease, bool, error)
	// Renew extends a lease; ErrLeaseLost if it expired or another holder
	// (or another token) holds it now.
	Renew(ctx context.Context, l Lease, now, ttlMillis int64) (Lease, error)
	// Release frees the lease; only its holder with its token may;
	// ErrLeaseLost otherwise. Releasing twice is ErrLeaseLost the second
	// time.
	Release(ctx context.Context, l Lease) error
}

// Stores bundles the stores one backend provides.
type Stores struct {
	Ops      OperationStore
	States   DocumentStateStore
	Registry EntityRegistry
	Writer   GraphWriter
	Locks    LockProvider
	// Closer releases the backend's resources (may be nil).
	Closer io.Closer
}

// Close closes the backend, if it has anything to close.
func (s Stores) Close() error {
	if s.Closer == nil {
		return nil
	}
	return s.Closer.Close()
}
