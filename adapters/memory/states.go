package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/crashmatrix/crashmatrix/reference"
)

type docKey struct{ space, doc string }

// StateStore is an in-memory reference.DocumentStateStore.
type StateStore struct {
	mu       sync.Mutex
	current  map[docKey]reference.DocumentState
	versions map[docKey]map[int64]reference.DocumentState
}

// NewStateStore returns an empty document state store.
func NewStateStore() *StateStore {
	return &StateStore{current: map[docKey]reference.DocumentState{}, versions: map[docKey]map[int64]reference.DocumentState{}}
}

// CloneState returns a deep copy of a document state.
func CloneState(s reference.DocumentState) reference.DocumentState {
	s.FactSources = slices.Clone(s.FactSources)
	s.NodeIDs = slices.Clone(s.NodeIDs)
	return s
}

// FindCurrent implements reference.DocumentStateStore.
func (s *StateStore) FindCurrent(ctx context.Context, space, documentID string) (reference.DocumentState, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.current[docKey{space, documentID}]
	if !ok {
		return reference.DocumentState{}, false, nil
	}
	return CloneState(st), true, nil
}

// FindByOperationID implements reference.DocumentStateStore: the current
// state first, then the highest recorded version committed by operationID.
func (s *StateStore) FindByOperationID(ctx context.Context, space, documentID, operationID string) (reference.DocumentState, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	if blank(operationID) {
		return reference.DocumentState{}, false, fmt.Errorf("%w: operationId is blank", reference.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{space, documentID}
	if st, ok := s.current[k]; ok && st.OperationID == operationID {
		return CloneState(st), true, nil
	}
	var best reference.DocumentState
	found := false
	for rev, st := range s.versions[k] {
		if st.OperationID == operationID && (!found || rev > best.Revision) {
			best, found = st, true
		}
	}
	if !found {
		return reference.DocumentState{}, false, nil
	}
	return CloneState(best), true, nil
}

// CheckStateCAS validates the arguments of a document-state compare-and-set.
func CheckStateCAS(expected int64, next reference.DocumentState) error {
	if err := reference.CheckKey(next.Space, next.DocumentID); err != nil {
		return err
	}
	if expected < 0 {
		return fmt.Errorf("document %s/%s: %w: expected revision %d is negative", next.Space, next.DocumentID, reference.ErrInvalidRevision, expected)
	}
	if next.Revision != expected+1 {
		return fmt.Errorf("document %s/%s: %w: next revision %d is not %d+1", next.Space, next.DocumentID, reference.ErrInvalidRevision, next.Revision, expected)
	}
	return nil
}

// CompareAndSet implements reference.DocumentStateStore.
func (s *StateStore) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := CheckStateCAS(expected, next); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{next.Space, next.DocumentID}
	cur, ok := s.current[k]
	if expected == 0 {
		if ok {
			return false, nil
		}
	} else if !ok || cur.Revision != expected {
		return false, nil
	}
	s.current[k] = CloneState(next)
	return true, nil
}

// Remove implements reference.DocumentStateStore.
func (s *StateStore) Remove(ctx context.Context, space, documentID string, revision int64) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{space, documentID}
	cur, ok := s.current[k]
	if !ok || cur.Revision != revision {
		return false, nil
	}
	delete(s.current, k)
	return true, nil
}

// RecordVersion implements reference.DocumentStateStore.
func (s *StateStore) RecordVersion(ctx context.Context, state reference.DocumentState) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := reference.CheckKey(state.Space, state.DocumentID); err != nil {
		return err
	}
	if state.Revision <= 0 {
		return fmt.Errorf("document %s/%s: %w: version revision %d must be positive", state.Space, state.DocumentID, reference.ErrInvalidRevision, state.Revision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{state.Space, state.DocumentID}
	vs := s.versions[k]
	if vs == nil {
		vs = map[int64]reference.DocumentState{}
		s.versions[k] = vs
	}
	if _, ok := vs[state.Revision]; ok {
		return nil
	}
	vs[state.Revision] = CloneState(state)
	return nil
}

// Versions implements reference.DocumentStateStore.
func (s *StateStore) Versions(ctx context.Context, space, documentID string) ([]reference.DocumentState, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]reference.DocumentState, 0)
	for _, st := range s.versions[docKey{space, documentID}] {
		out = append(out, CloneState(st))
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out, nil
}

// List implements reference.DocumentStateStore.
func (s *StateStore) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	s.mu.Lock()
	out := make([]reference.DocumentState, 0)
	for k, st := range s.current {
		if k.space == space {
			out = append(out, CloneState(st))
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].DocumentID < out[j].DocumentID })
	return out, nil
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if blank(space) {
		return false, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, st := range s.current {
		if k.space != space || (documentID != "" && k.doc == documentID) {
			continue
		}
		if st.Status == reference.DocActive && st.Supports(edge) {
			return true, nil
		}
	}
	return false, nil
}
