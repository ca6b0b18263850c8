package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/crashmatrix/crashmatrix/reference"
)

type opRecord struct {
	op   reference.Operation
	plan []byte // reference.EncodePlan output; decoding gives a deep copy
}

// OperationStore is an in-memory reference.OperationStore.
type OperationStore struct {
	mu  sync.Mutex
	ops map[string]*opRecord
}

// NewOperationStore returns an empty operation store.
func NewOperationStore() *OperationStore {
	return &OperationStore{ops: map[string]*opRecord{}}
}

func notFound(id string) error { return fmt.Errorf("operation %s: %w", id, reference.ErrNotFound) }

// CheckCreate validates an operation + plan pair as CreateIfAbsent does:
// blank ids wrap ErrInvalidArgument, then reference.CheckNewOperation.
func CheckCreate(op reference.Operation, plan reference.Plan) error {
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
	err := reference.CheckNewOperation(op, plan)
	if len(missing) > 0 {
		if err != nil {
			return fmt.Errorf("%w: blank %s: %w", reference.ErrInvalidArgument, strings.Join(missing, ", "), err)
		}
		return fmt.Errorf("%w: blank %s", reference.ErrInvalidArgument, strings.Join(missing, ", "))
	}
	return err
}

// CreateIfAbsent implements reference.OperationStore.
func (s *OperationStore) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := CheckCreate(op, plan); err != nil {
		return false, err
	}
	payload, err := reference.EncodePlan(plan)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ops[op.OperationID]; ok {
		return false, nil
	}
	s.ops[op.OperationID] = &opRecord{op: op, plan: payload}
	return true, nil
}

// Get implements reference.OperationStore.
func (s *OperationStore) Get(ctx context.Context, operationID string) (reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Operation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return reference.Operation{}, notFound(operationID)
	}
	return r.op, nil
}

// GetPlan implements reference.OperationStore.
func (s *OperationStore) GetPlan(ctx context.Context, operationID string) (reference.Plan, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Plan{}, err
	}
	s.mu.Lock()
	r, ok := s.ops[operationID]
	var payload []byte
	var fp string
	if ok {
		payload, fp = r.plan, r.op.PlanFingerprint
	}
	s.mu.Unlock()
	if !ok {
		return reference.Plan{}, notFound(operationID)
	}
	return DecodeStoredPlan(operationID, payload, fp)
}

// DecodeStoredPlan decodes the plan payload stored with an operation and
// checks it against the operation's fingerprint, as every store's GetPlan
// does: an empty payload is ErrNoPersistedPlan, and the operation id is
// named in every error.
func DecodeStoredPlan(operationID string, payload []byte, fp string) (reference.Plan, error) {
	if len(payload) == 0 {
		return reference.Plan{}, fmt.Errorf("operation %s: %w", operationID, reference.ErrNoPersistedPlan)
	}
	p, err := reference.DecodePlan(payload, fp)
	if err != nil {
		return reference.Plan{}, fmt.Errorf("operation %s: %w", operationID, err)
	}
	return p, nil
}

// CorruptPlan overwrites the stored plan payload of an operation (a test
// hook for the corruption checks). It returns ErrNotFound for an unknown id.
func (s *OperationStore) CorruptPlan(operationID string, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return notFound(operationID)
	}
	r.plan = slices.Clone(payload)
	return nil
}

// ByDocument groups states by document id, keeping their order.
func ByDocument(states []reference.DocumentState) map[string][]reference.DocumentState {
	out := map[string][]reference.DocumentState{}
	for _, v := range states {
		out[v.DocumentID] = append(out[v.DocumentID], v)
	}
	return out
}

// MatchesExpected reports whether the stored record is the one a
// compare-and-set expects: same identity, stage, attempts and disposition.
func MatchesExpected(stored, expected reference.Operation) bool {
	return stored.SameIdentity(expected) && stored.Stage == expected.Stage &&
		stored.Attempts == expected.Attempts && stored.Disposition == expected.Disposition
}

// ApplyMutable returns stored with next's mutable fields (Stage, UpdatedAt,
// FailureReason, Attempts, Disposition, SupersededBy).
func ApplyMutable(stored, next reference.Operation) reference.Operation {
	stored.Stage = next.Stage
	stored.UpdatedAt = next.UpdatedAt
	stored.FailureReason = next.FailureReason
	stored.Attempts = next.Attempts
	stored.Disposition = next.Disposition
	stored.SupersededBy = next.SupersededBy
	return stored
}

// CompareAndSet implements reference.OperationStore. An illegal expected ->
// next step is an error; a stored record that is not expected gives false
// (a lost race is not an error, even if next would be illegal after the
// record that won); otherwise next must be a legal successor of the stored
// record. An unknown operation is an error wrapping ErrNotFound.
func (s *OperationStore) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.ValidateUpdate(expected, next); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[expected.OperationID]
	if !ok {
		return false, notFound(expected.OperationID)
	}
	if !MatchesExpected(r.op, expected) {
		return false, nil
	}
	if err := reference.ValidateUpdate(r.op, next); err != nil {
		return false, err
	}
	r.op = ApplyMutable(r.op, next)
	return true, nil
}

// ListRecoverable implements reference.OperationStore.
func (s *OperationStore) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be positive", reference.ErrInvalidArgument, limit)
	}
	s.mu.Lock()
	out := make([]reference.Operation, 0)
	for _, r := range s.ops {
		if r.op.Stage != reference.Completed && r.op.Disposition == reference.Active {
			out = append(out, r.op)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].UpdatedAt != out[j].UpdatedAt {
			return out[i].UpdatedAt < out[j].UpdatedAt
		}
		return out[i].OperationID < out[j].OperationID
	})
	if len(out) > limit {
		out = out[:limit:limit]
	}
	return out, nil
}

// List implements reference.OperationStore.
func (s *OperationStore) List(ctx context.Context) ([]reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]reference.Operation, 0, len(s.ops))
	for _, r := range s.ops {
		out = append(out, r.op)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].OperationID < out[j].OperationID })
	return out, nil
}

// ListSpace returns the operations of one space ordered by operationId
// (reference.SpaceLister).
func (s *OperationStore) ListSpace(ctx context.Context, space string) ([]reference.Operation, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, op := range all {
		if op.Space == space {
			out = append(out, op)
		}
	}
	return out, nil
}

// CheckClaim validates claim arguments: a non-blank holder and a positive
// ttl.
func CheckClaim(holder string, ttlMillis int64) error {
	if blank(holder) {
		return fmt.Errorf("%w: holder is blank", reference.ErrInvalidArgument)
	}
	if ttlMillis <= 0 {
		return fmt.Errorf("%w: ttl %d must be positive", reference.ErrInvalidArgument, ttlMillis)
	}
	return nil
}

// Claim implements reference.OperationStore.
func (s *OperationStore) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := CheckClaim(holder, ttlMillis); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return false, notFound(operationID)
	}
	if r.op.ClaimHolder != "" && r.op.ClaimHolder != holder && r.op.ClaimExpiresAt > now {
		return false, nil
	}
	r.op.ClaimHolder, r.op.ClaimExpiresAt = holder, now+ttlMillis
	return true, nil
}

// ReleaseClaim implements reference.OperationStore.
func (s *OperationStore) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return false, notFound(operationID)
	}
	if blank(holder) || r.op.ClaimHolder != holder {
		return false, nil
	}
	r.op.ClaimHolder, r.op.ClaimExpiresAt = "", 0
	return true, nil
}
