package reference

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The argument checks and record rules every store of stores.go applies the
// same way, exported so that a store written outside this module (and each
// adapter of this one) rejects exactly what the conformance suites expect,
// with the same errors. Each check returns nil or an error wrapping
// ErrInvalidArgument (ErrInvalidRevision for revisions).

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// CheckSpace rejects a blank space: every store method that takes a space
// alone (lists, registry calls) starts with it.
func CheckSpace(space string) error {
	if blank(space) {
		return fmt.Errorf("%w: space is blank", ErrInvalidArgument)
	}
	return nil
}

// CheckCreate validates the arguments of OperationStore.CreateIfAbsent:
// blank ids wrap ErrInvalidArgument (naming every blank one), then the
// pair must pass CheckNewOperation.
func CheckCreate(op Operation, plan Plan) error {
	var missing []string
	if blank(op.OperationID) {
		missing = append(missing, "operationId")
	}
	if blank(op.Space) {
		missing = append(missing, "space")
	}
	if blank(op.DocumentID) {
		missing = append(missing, "documentId")
	}
	err := CheckNewOperation(op, plan)
	if len(missing) > 0 {
		if err != nil {
			return fmt.Errorf("%w: blank %s: %w", ErrInvalidArgument, strings.Join(missing, ", "), err)
		}
		return fmt.Errorf("%w: blank %s", ErrInvalidArgument, strings.Join(missing, ", "))
	}
	return err
}

// CheckLimit validates the limit of OperationStore.ListRecoverable: it
// must be positive.
func CheckLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("%w: limit %d must be positive", ErrInvalidArgument, limit)
	}
	return nil
}

// CheckClaim validates the arguments of OperationStore.Claim: a non-blank
// holder and a positive ttl.
func CheckClaim(holder string, ttlMillis int64) error {
	if blank(holder) {
		return fmt.Errorf("%w: holder is blank", ErrInvalidArgument)
	}
	if ttlMillis <= 0 {
		return fmt.Errorf("%w: ttl %d must be positive", ErrInvalidArgument, ttlMillis)
	}
	return nil
}

// MatchesExpected reports whether a stored operation is the one a
// compare-and-set expects: same identity, stage, attempts and disposition
// (OperationStore.CompareAndSet).
func MatchesExpected(stored, expected Operation) bool {
	return stored.SameIdentity(expected) && stored.Stage == expected.Stage &&
		stored.Attempts == expected.Attempts && stored.Disposition == expected.Disposition
}

// ApplyMutable returns stored with next's mutable fields (Stage, UpdatedAt,
// FailureReason, Attempts, Disposition, SupersededBy): what a successful
// OperationStore.CompareAndSet stores.
func ApplyMutable(stored, next Operation) Operation {
	stored.Stage = next.Stage
	stored.UpdatedAt = next.UpdatedAt
	stored.FailureReason = next.FailureReason
	stored.Attempts = next.Attempts
	stored.Disposition = next.Disposition
	stored.SupersededBy = next.SupersededBy
	return stored
}

// CompareAndSetMiss is the outcome of an OperationStore.CompareAndSet that
// changed nothing although expected -> next was legal, given the record
// stored now: a record other than expected is a lost race (nil); the
// expected record itself means next is not a legal successor of it (e.g.
// time ran backwards), an error. A store that applies the compare-and-set
// as one conditional write reads the record back and returns this.
func CompareAndSetMiss(stored, expected, next Operation) error {
	if !MatchesExpected(stored, expected) {
		return nil
	}
	return ValidateUpdate(stored, next)
}

// DecodeStoredPlan decodes the plan payload stored with an operation and
// checks it against the operation's fingerprint, as every store's GetPlan
// does: an empty payload is ErrNoPersistedPlan, a damaged one
// ErrCorruptPlan, and the operation id is named in every error.
func DecodeStoredPlan(operationID string, payload []byte, fingerprint string) (Plan, error) {
	if len(payload) == 0 {
		return Plan{}, fmt.Errorf("operation %s: %w", operationID, ErrNoPersistedPlan)
	}
	p, err := DecodePlan(payload, fingerprint)
	if err != nil {
		return Plan{}, fmt.Errorf("operation %s: %w", operationID, err)
	}
	return p, nil
}

// CheckOperationID rejects a blank operationId
// (DocumentStateStore.FindByOperationID).
func CheckOperationID(operationID string) error {
	if blank(operationID) {
		return fmt.Errorf("%w: operationId is blank", ErrInvalidArgument)
	}
	return nil
}

// CheckStateCAS validates the arguments of DocumentStateStore.CompareAndSet:
// a non-blank key, a non-negative expected revision and next.Revision ==
// expected+1.
func CheckStateCAS(expected int64, next DocumentState) error {
	if err := CheckKey(next.Space, next.DocumentID); err != nil {
		return err
	}
	if expected < 0 {
		return fmt.Errorf("document %s/%s: %w: expected revision %d is negative", next.Space, next.DocumentID, ErrInvalidRevision, expected)
	}
	if next.Revision != expected+1 {
		return fmt.Errorf("document %s/%s: %w: next revision %d is not %d+1", next.Space, next.DocumentID, ErrInvalidRevision, next.Revision, expected)
	}
	return nil
}

// CheckVersion validates the argument of DocumentStateStore.RecordVersion:
// a non-blank key and a positive revision.
func CheckVersion(state DocumentState) error {
	if err := CheckKey(state.Space, state.DocumentID); err != nil {
		return err
	}
	if state.Revision <= 0 {
		return fmt.Errorf("document %s/%s: %w: version revision %d must be positive", state.Space, state.DocumentID, ErrInvalidRevision, state.Revision)
	}
	return nil
}

// CheckRegistration validates one registration of EntityRegistry.SaveAll:
// a non-blank space, node id, type and canonical name.
func CheckRegistration(space string, r EntityRegistration) error {
	switch {
	case blank(space):
		return fmt.Errorf("%w: space is blank", ErrInvalidArgument)
	case blank(r.NodeID):
		return fmt.Errorf("%w: registration nodeId is blank", ErrInvalidArgument)
	case Normalize(r.Type) == "":
		return fmt.Errorf("%w: registration %s: type is blank", ErrInvalidArgument, r.NodeID)
	case Normalize(r.CanonicalName) == "":
		return fmt.Errorf("%w: registration %s: canonical name is blank", ErrInvalidArgument, r.NodeID)
	}
	return nil
}

// NormalizedNames returns the distinct non-blank normalised names of the
// registration (canonical name and aliases), sorted: the names a registry
// binds to its node id.
func (r EntityRegistration) NormalizedNames() []string {
	set := map[string]bool{}
	for _, n := range r.Names() {
		if nn := Normalize(n); nn != "" {
			set[nn] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// NormalizeNames returns the distinct non-blank normalised forms of names,
// in first-seen order: what EntityRegistry.FindMatches matches on.
func NormalizeNames(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if nn := Normalize(n); nn != "" && !seen[nn] {
			seen[nn] = true
			out = append(out, nn)
		}
	}
	return out
}

// CheckMutation validates the arguments of GraphWriter.Apply: a non-blank
// space, node ids, edge endpoints and edge types.
func CheckMutation(space string, m Mutation) error {
	if blank(space) {
		return fmt.Errorf("%w: space is blank", ErrInvalidArgument)
	}
	for _, n := range m.UpsertNodes {
		if blank(n.ID) {
			return fmt.Errorf("%w: node upsert with blank id", ErrInvalidArgument)
		}
	}
	for _, e := range m.UpsertEdges {
		if blank(e.Key.Source) || blank(e.Key.Target) || blank(e.Key.Type) {
			return fmt.Errorf("%w: edge upsert %s has a blank part", ErrInvalidArgument, e.Key)
		}
	}
	return nil
}

// MissingEndpoint is the error of a GraphWriter.Apply refused because an
// edge's endpoint does not exist: it wraps ErrMissingEndpoint and names the
// space and the edge.
func MissingEndpoint(space string, edge EdgeKey) error {
	return fmt.Errorf("space %s: edge %s: %w", space, edge, ErrMissingEndpoint)
}

// FormatDuplicates renders per-identity counts as duplicate entries
// (GraphRecords.Duplicates), so every report reads alike: "node person:abc x2" and "edge
// (a)-[KNOWS#0]->(b) x3", nodes first, each group sorted, identities stored
// once skipped.
func FormatDuplicates(nodes map[string]int, edges map[EdgeKey]int) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		if c := nodes[id]; c > 1 {
			out = append(out, fmt.Sprintf("node %s x%d", id, c))
		}
	}
	keys := slices.SortedFunc(maps.Keys(edges), func(a, b EdgeKey) int {
		return strings.Compare(a.PortableID(), b.PortableID())
	})
	for _, k := range keys {
		if c := edges[k]; c > 1 {
			out = append(out, fmt.Sprintf("edge %s x%d", k, c))
		}
	}
	return out
}

// CheckLease validates the arguments of LockProvider.TryAcquire and
// Renew: a non-blank space, document and holder, and a positive ttl.
func CheckLease(space, documentID, holder string, ttlMillis int64) error {
	if err := CheckKey(space, documentID); err != nil {
		return err
	}
	return CheckClaim(holder, ttlMillis)
}

// LeaseLost is the error of a LockProvider.Renew or Release refused
// because l is not held (any more): it wraps ErrLeaseLost and names the
// lease and why.
func LeaseLost(l Lease, why string) error {
	return fmt.Errorf("lease %s/%s holder %s token %d: %s: %w", l.Space, l.DocumentID, l.Holder, l.Token, why, ErrLeaseLost)
}
