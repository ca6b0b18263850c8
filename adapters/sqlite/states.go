package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// StateStore is a reference.DocumentStateStore on SQLite. States are stored
// as reference.EncodeState payloads, with the key columns beside them.
type StateStore struct{ d *db }

func (s *StateStore) one(ctx context.Context, q string, args ...any) (reference.DocumentState, bool, error) {
	var payload []byte
	err := s.d.retry(ctx, func() error { return s.d.sql.QueryRowContext(ctx, q, args...).Scan(&payload) })
	if errors.Is(err, sql.ErrNoRows) {
		return reference.DocumentState{}, false, nil
	}
	if err != nil {
		return reference.DocumentState{}, false, err
	}
	st, err := reference.DecodeState(payload)
	if err != nil {
		return reference.DocumentState{}, false, err
	}
	return st, true, nil
}

func (s *StateStore) many(ctx context.Context, q string, args ...any) ([]reference.DocumentState, error) {
	var out []reference.DocumentState
	err := s.d.each(ctx, func() { out = make([]reference.DocumentState, 0) }, func(rows *sql.Rows) error {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return err
		}
		st, err := reference.DecodeState(payload)
		out = append(out, st)
		return err
	}, q, args...)
	return out, err
}

// FindCurrent implements reference.DocumentStateStore.
func (s *StateStore) FindCurrent(ctx context.Context, space, documentID string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	return s.one(ctx, `SELECT payload FROM document_states WHERE space = ? AND document_id = ?`, space, documentID)
}

// FindByOperationID implements reference.DocumentStateStore: the current
// state first, then the highest recorded version committed by operationID.
func (s *StateStore) FindByOperationID(ctx context.Context, space, documentID, operationID string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckOperationID(operationID); err != nil {
		return reference.DocumentState{}, false, err
	}
	st, ok, err := s.one(ctx, `SELECT payload FROM document_states WHERE space = ? AND document_id = ? AND operation_id = ?`,
		space, documentID, operationID)
	if err != nil || ok {
		return st, ok, err
	}
	return s.one(ctx, `SELECT payload FROM document_versions WHERE space = ? AND document_id = ? AND operation_id = ?
		ORDER BY revision DESC LIMIT 1`, space, documentID, operationID)
}

// CompareAndSet implements reference.DocumentStateStore in one IMMEDIATE
// transaction.
func (s *StateStore) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := reference.CheckStateCAS(expected, next); err != nil {
		return false, err
	}
	payload, err := reference.EncodeState(next)
	if err != nil {
		return false, err
	}
	var n int64
	if expected == 0 {
		n, err = s.d.affected(ctx, `INSERT INTO document_states (space, document_id, revision, operation_id, status, payload)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (space, document_id) DO NOTHING`,
			next.Space, next.DocumentID, next.Revision, next.OperationID, string(next.Status), payload)
	} else {
		n, err = s.d.affected(ctx, `UPDATE document_states SET revision = ?, operation_id = ?, status = ?, payload = ?
			WHERE space = ? AND document_id = ? AND revision = ?`,
			next.Revision, next.OperationID, string(next.Status), payload, next.Space, next.DocumentID, expected)
	}
	if err != nil {
		return false, fmt.Errorf("document %s/%s: %w", next.Space, next.DocumentID, err)
	}
	return n == 1, nil
}

// Remove implements reference.DocumentStateStore.
func (s *StateStore) Remove(ctx context.Context, space, documentID string, revision int64) (bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return false, err
	}
	var ok bool
	err := s.d.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM document_states WHERE space = ? AND document_id = ? AND revision = ?`,
			space, documentID, revision)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, err
}

// RecordVersion implements reference.DocumentStateStore.
func (s *StateStore) RecordVersion(ctx context.Context, state reference.DocumentState) error {
	if err := reference.CheckVersion(state); err != nil {
		return err
	}
	payload, err := reference.EncodeState(state)
	if err != nil {
		return err
	}
	_, err = s.d.exec(ctx, `INSERT INTO document_versions (space, document_id, revision, operation_id, payload)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (space, document_id, revision) DO NOTHING`,
		state.Space, state.DocumentID, state.Revision, state.OperationID, payload)
	return err
}

// SpaceVersions implements check.SpaceVersionReader: one statement.
func (s *StateStore) SpaceVersions(ctx context.Context, space string) (map[string][]reference.DocumentState, error) {
	all, err := s.many(ctx, `SELECT payload FROM document_versions WHERE space = ? ORDER BY document_id, revision`, space)
	if err != nil {
		return nil, err
	}
	return sqlcore.ByDocument(all), nil
}

// Versions implements reference.DocumentStateStore.
func (s *StateStore) Versions(ctx context.Context, space, documentID string) ([]reference.DocumentState, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return nil, err
	}
	return s.many(ctx, `SELECT payload FROM document_versions WHERE space = ? AND document_id = ? ORDER BY revision`, space, documentID)
}

// List implements reference.DocumentStateStore.
func (s *StateStore) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	return s.many(ctx, `SELECT payload FROM document_states WHERE space = ? ORDER BY document_id`, space)
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if err := reference.CheckSpace(space); err != nil {
		return false, err
	}
	states, err := s.many(ctx, `SELECT payload FROM document_states WHERE space = ? AND status = ? AND document_id <> ?
		ORDER BY document_id`, space, string(reference.DocActive), documentID)
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
