package sqlcore

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/reference"
)

// States is a reference.DocumentStateStore on the {document_states} and
// {document_versions} tables. States are stored as reference.EncodeState
// payloads, with the key columns beside them; every method is one
// statement (the compare-and-set a conditional INSERT or UPDATE checked by
// the rows it changed).
type States struct {
	db DB
	q  struct {
		current, currentByOp, versionByOp, insert, update, remove, record, spaceVersions, versions, list, active string
	}
}

// NewStates returns the document-state store on db.
func NewStates(db DB, d Dialect) *States {
	s := &States{db: db}
	s.q.current = d.SQL(`SELECT payload FROM {document_states} WHERE space = ? AND document_id = ?`)
	s.q.currentByOp = d.SQL(`SELECT payload FROM {document_states} WHERE space = ? AND document_id = ? AND operation_id = ?`)
	s.q.versionByOp = d.SQL(`SELECT payload FROM {document_versions} WHERE space = ? AND document_id = ? AND operation_id = ?
		ORDER BY revision DESC LIMIT 1`)
	s.q.insert = d.SQL(`INSERT INTO {document_states} (space, document_id, revision, operation_id, status, payload)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (space, document_id) DO NOTHING`)
	s.q.update = d.SQL(`UPDATE {document_states} SET revision = ?, operation_id = ?, status = ?, payload = ?
		WHERE space = ? AND document_id = ? AND revision = ?`)
	s.q.remove = d.SQL(`DELETE FROM {document_states} WHERE space = ? AND document_id = ? AND revision = ?`)
	s.q.record = d.SQL(`INSERT INTO {document_versions} (space, document_id, revision, operation_id, payload)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (space, document_id, revision) DO NOTHING`)
	s.q.spaceVersions = d.SQL(`SELECT payload FROM {document_versions} WHERE space = ? ORDER BY document_id, revision`)
	s.q.versions = d.SQL(`SELECT payload FROM {document_versions} WHERE space = ? AND document_id = ? ORDER BY revision`)
	s.q.list = d.SQL(`SELECT payload FROM {document_states} WHERE space = ? ORDER BY document_id`)
	s.q.active = d.SQL(`SELECT payload FROM {document_states} WHERE space = ? AND status = ? AND document_id <> ?
		ORDER BY document_id`)
	return s
}

// StatesTables returns the CREATE TABLE statements of the two tables
// States keeps its records in, for d. PostgreSQL's migration 1 holds them:
// never change them, add a migration (a test pins that migration's text).
func StatesTables(d Dialect) []string {
	return []string{
		d.DDL(`CREATE TABLE IF NOT EXISTS {document_states} (
			space        <text> NOT NULL,
			document_id  <key> NOT NULL,
			revision     <int> NOT NULL,
			operation_id <text> NOT NULL,
			status       <text> NOT NULL,
			payload      <bytes> NOT NULL,
			PRIMARY KEY (space, document_id)
		)`),
		d.DDL(`CREATE TABLE IF NOT EXISTS {document_versions} (
			space        <text> NOT NULL,
			document_id  <text> NOT NULL,
			revision     <int> NOT NULL,
			operation_id <text> NOT NULL,
			payload      <bytes> NOT NULL,
			PRIMARY KEY (space, document_id, revision)
		)`),
	}
}

func docIDs(space, documentID string) string { return "document " + space + "/" + documentID }

// many reads the states a query selects, in its order.
func (s *States) many(ctx context.Context, op, ids, q string, args ...any) ([]reference.DocumentState, error) {
	return collect(ctx, s.db, op, ids, func(r Row) (reference.DocumentState, error) {
		var payload []byte
		if err := r.Scan(&payload); err != nil {
			return reference.DocumentState{}, err
		}
		st, err := reference.DecodeState(payload)
		if err != nil {
			return st, fmt.Errorf("%s: %w", ids, err)
		}
		return st, nil
	}, q, args...)
}

// first reads the first state a query selects; ok is false if none.
func (s *States) first(ctx context.Context, op, ids, q string, args ...any) (reference.DocumentState, bool, error) {
	all, err := s.many(ctx, op, ids, q, args...)
	if err != nil || len(all) == 0 {
		return reference.DocumentState{}, false, err
	}
	return all[0], true, nil
}

// FindCurrent implements reference.DocumentStateStore.
func (s *States) FindCurrent(ctx context.Context, space, documentID string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	return s.first(ctx, "states.findCurrent", docIDs(space, documentID), s.q.current, space, documentID)
}

// FindByOperationID implements reference.DocumentStateStore: the current
// state first, then the highest recorded version committed by operationID.
func (s *States) FindByOperationID(ctx context.Context, space, documentID, operationID string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckOperationID(operationID); err != nil {
		return reference.DocumentState{}, false, err
	}
	ids := docIDs(space, documentID) + " operation " + operationID
	st, ok, err := s.first(ctx, "states.findByOperationId", ids, s.q.currentByOp, space, documentID, operationID)
	if err != nil || ok {
		return st, ok, err
	}
	return s.first(ctx, "states.findByOperationId", ids, s.q.versionByOp, space, documentID, operationID)
}

// CompareAndSet implements reference.DocumentStateStore: INSERT ... ON
// CONFLICT DO NOTHING when expected is 0, otherwise UPDATE ... WHERE
// revision = expected; true if exactly one row changed.
func (s *States) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := reference.CheckStateCAS(expected, next); err != nil {
		return false, err
	}
	payload, err := reference.EncodeState(next)
	if err != nil {
		return false, err
	}
	ids := fmt.Sprintf("%s expected revision %d", docIDs(next.Space, next.DocumentID), expected)
	var n int64
	if expected == 0 {
		n, err = s.db.Exec(ctx, "states.compareAndSet", ids, s.q.insert,
			next.Space, next.DocumentID, next.Revision, next.OperationID, string(next.Status), payload)
	} else {
		n, err = s.db.Exec(ctx, "states.compareAndSet", ids, s.q.update,
			next.Revision, next.OperationID, string(next.Status), payload, next.Space, next.DocumentID, expected)
	}
	return n == 1, err
}

// Remove implements reference.DocumentStateStore.
func (s *States) Remove(ctx context.Context, space, documentID string, revision int64) (bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return false, err
	}
	n, err := s.db.Exec(ctx, "states.remove", docIDs(space, documentID), s.q.remove, space, documentID, revision)
	return n == 1, err
}

// RecordVersion implements reference.DocumentStateStore.
func (s *States) RecordVersion(ctx context.Context, state reference.DocumentState) error {
	if err := reference.CheckVersion(state); err != nil {
		return err
	}
	payload, err := reference.EncodeState(state)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, "states.recordVersion", fmt.Sprintf("%s revision %d", docIDs(state.Space, state.DocumentID), state.Revision),
		s.q.record, state.Space, state.DocumentID, state.Revision, state.OperationID, payload)
	return err
}

// SpaceVersions implements reference.SpaceVersionReader: every version of a
// space in one statement, by document.
func (s *States) SpaceVersions(ctx context.Context, space string) (map[string][]reference.DocumentState, error) {
	all, err := s.many(ctx, "states.spaceVersions", "space "+space, s.q.spaceVersions, space)
	if err != nil {
		return nil, err
	}
	out := map[string][]reference.DocumentState{}
	for _, v := range all {
		out[v.DocumentID] = append(out[v.DocumentID], v)
	}
	return out, nil
}

// Versions implements reference.DocumentStateStore.
func (s *States) Versions(ctx context.Context, space, documentID string) ([]reference.DocumentState, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return nil, err
	}
	return s.many(ctx, "states.versions", docIDs(space, documentID), s.q.versions, space, documentID)
}

// List implements reference.DocumentStateStore.
func (s *States) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	return s.many(ctx, "states.list", "space "+space, s.q.list, space)
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *States) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if err := reference.CheckSpace(space); err != nil {
		return false, err
	}
	states, err := s.many(ctx, "states.isReferencedByOtherDocument", docIDs(space, documentID), s.q.active,
		space, string(reference.DocActive), documentID)
	if err != nil {
		return false, err
	}
	for _, st := range states {
		if st.Status == reference.DocActive && st.Supports(edge) {
			return true, nil
		}
	}
	return false, nil
}
