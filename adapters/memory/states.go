package memory

import (
	"context"
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
	return st.Clone(), true, nil
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
	if err := reference.CheckOperationID(operationID); err != nil {
		return reference.DocumentState{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{space, documentID}
	if st, ok := s.current[k]; ok && st.OperationID == operationID {
		return st.Clone(), true, nil
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
	return best.Clone(), true, nil
}

// CompareAndSet implements reference.DocumentStateStore.
func (s *StateStore) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.CheckStateCAS(expected, next); err != nil {
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
	s.current[k] = next.Clone()
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
	if err := reference.CheckVersion(state); err != nil {
		return err
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
	vs[state.Revision] = state.Clone()
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
		out = append(out, st.Clone())
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
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]reference.DocumentState, 0)
	for k, st := range s.current {
		if k.space == space {
			out = append(out, st.Clone())
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
	if err := reference.CheckSpace(space); err != nil {
		return false, err
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
