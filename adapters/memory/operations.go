package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
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

// CreateIfAbsent implements reference.OperationStore.
func (s *OperationStore) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.CheckCreate(op, plan); err != nil {
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
	return reference.DecodeStoredPlan(operationID, payload, fp)
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
	return s.update(expected.OperationID, func(r *opRecord) (bool, error) {
		if !reference.MatchesExpected(r.op, expected) {
			return false, nil
		}
		if err := reference.ValidateUpdate(r.op, next); err != nil {
			return false, err
		}
		r.op = reference.ApplyMutable(r.op, next)
		return true, nil
	})
}

// update runs f on the record of an operation under the store's lock; an
// unknown operation is ErrNotFound.
func (s *OperationStore) update(operationID string, f func(r *opRecord) (bool, error)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return false, notFound(operationID)
	}
	return f(r)
}

// ListRecoverable implements reference.OperationStore.
func (s *OperationStore) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := reference.CheckLimit(limit); err != nil {
		return nil, err
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

// Claim implements reference.OperationStore.
func (s *OperationStore) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.CheckClaim(holder, ttlMillis); err != nil {
		return false, err
	}
	return s.update(operationID, func(r *opRecord) (bool, error) {
		if r.op.ClaimHolder != "" && r.op.ClaimHolder != holder && r.op.ClaimExpiresAt > now {
			return false, nil
		}
		r.op.ClaimHolder, r.op.ClaimExpiresAt = holder, now+ttlMillis
		return true, nil
	})
}

// ReleaseClaim implements reference.OperationStore.
func (s *OperationStore) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	return s.update(operationID, func(r *opRecord) (bool, error) {
		if blank(holder) || r.op.ClaimHolder != holder {
			return false, nil
		}
		r.op.ClaimHolder, r.op.ClaimExpiresAt = "", 0
		return true, nil
	})
}
