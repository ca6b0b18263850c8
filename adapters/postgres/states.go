package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// StateStore is a reference.DocumentStateStore on PostgreSQL. States are
// stored as reference.EncodeState payloads, with the key columns beside
// them.
type StateStore struct{ d *db }

func (s *StateStore) one(ctx context.Context, op, ids, q string, args ...any) (reference.DocumentState, bool, error) {
	var payload []byte
	err := s.d.pool.QueryRow(ctx, q, args...).Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return reference.DocumentState{}, false, nil
	}
	if err != nil {
		return reference.DocumentState{}, false, s.d.wrap(op, ids, err)
	}
	st, err := reference.DecodeState(payload)
	if err != nil {
		return reference.DocumentState{}, false, fmt.Errorf("%s: %w", ids, err)
	}
	return st, true, nil
}

func (s *StateStore) many(ctx context.Context, op, ids, q string, args ...any) ([]reference.DocumentState, error) {
	rows, err := s.d.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.d.wrap(op, ids, err)
	}
	defer rows.Close()
	out := make([]reference.DocumentState, 0)
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return nil, s.d.wrap(op, ids, err)
		}
		st, err := reference.DecodeState(payload)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ids, err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.wrap(op, ids, err)
	}
	return out, nil
}

func docIDs(space, documentID string) string { return "document " + space + "/" + documentID }

// FindCurrent implements reference.DocumentStateStore.
func (s *StateStore) FindCurrent(ctx context.Context, space, documentID string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	return s.one(ctx, "states.findCurrent", docIDs(space, documentID),
		`SELECT payload FROM crashmatrix_document_states WHERE space = $1 AND document_id = $2`, space, documentID)
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
	ids := docIDs(space, documentID) + " operation " + operationID
	st, ok, err := s.one(ctx, "states.findByOperationId", ids,
		`SELECT payload FROM crashmatrix_document_states WHERE space = $1 AND document_id = $2 AND operation_id = $3`,
		space, documentID, operationID)
	if err != nil || ok {
		return st, ok, err
	}
	return s.one(ctx, "states.findByOperationId", ids,
		`SELECT payload FROM crashmatrix_document_versions WHERE space = $1 AND document_id = $2 AND operation_id = $3
		ORDER BY revision DESC LIMIT 1`, space, documentID, operationID)
}

// CompareAndSet implements reference.DocumentStateStore: INSERT ... ON
// CONFLICT DO NOTHING when expected is 0, otherwise UPDATE ... WHERE
// revision = expected; true if exactly one row changed.
func (s *StateStore) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := reference.CheckStateCAS(expected, next); err != nil {
		return false, err
	}
	payload, err := reference.EncodeState(next)
	if err != nil {
		return false, err
	}
	var tag pgconn.CommandTag
	if expected == 0 {
		tag, err = s.d.pool.Exec(ctx, `INSERT INTO crashmatrix_document_states (space, document_id, revision, operation_id, status, payload)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (space, document_id) DO NOTHING`,
			next.Space, next.DocumentID, next.Revision, next.OperationID, string(next.Status), payload)
	} else {
		tag, err = s.d.pool.Exec(ctx, `UPDATE crashmatrix_document_states SET revision = $1, operation_id = $2, status = $3, payload = $4
			WHERE space = $5 AND document_id = $6 AND revision = $7`,
			next.Revision, next.OperationID, string(next.Status), payload, next.Space, next.DocumentID, expected)
	}
	if err != nil {
		return false, s.d.wrap("states.compareAndSet", fmt.Sprintf("%s expected revision %d", docIDs(next.Space, next.DocumentID), expected), err)
	}
	return tag.RowsAffected() == 1, nil
}

// Remove implements reference.DocumentStateStore.
func (s *StateStore) Remove(ctx context.Context, space, documentID string, revision int64) (bool, error) {
	if err := reference.CheckKey(space, documentID); err != nil {
		return false, err
	}
	tag, err := s.d.pool.Exec(ctx, `DELETE FROM crashmatrix_document_states WHERE space = $1 AND document_id = $2 AND revision = $3`,
		space, documentID, revision)
	if err != nil {
		return false, s.d.wrap("states.remove", docIDs(space, documentID), err)
	}
	return tag.RowsAffected() == 1, nil
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
	_, err = s.d.pool.Exec(ctx, `INSERT INTO crashmatrix_document_versions (space, document_id, revision, operation_id, payload)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (space, document_id, revision) DO NOTHING`,
		state.Space, state.DocumentID, state.Revision, state.OperationID, payload)
	return s.d.wrap("states.recordVersion", fmt.Sprintf("%s revision %d", docIDs(state.Space, state.DocumentID), state.Revision), err)
}

// SpaceVersions implements check.SpaceVersionReader: one query.
func (s *StateStore) SpaceVersions(ctx context.Context, space string) (map[string][]reference.DocumentState, error) {
	all, err := s.many(ctx, "states.spaceVersions", "space "+space,
		`SELECT payload FROM crashmatrix_document_versions WHERE space = $1 ORDER BY document_id, revision`, space)
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
	return s.many(ctx, "states.versions", docIDs(space, documentID),
		`SELECT payload FROM crashmatrix_document_versions WHERE space = $1 AND document_id = $2 ORDER BY revision`, space, documentID)
}

// List implements reference.DocumentStateStore.
func (s *StateStore) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	return s.many(ctx, "states.list", "space "+space,
		`SELECT payload FROM crashmatrix_document_states WHERE space = $1 ORDER BY document_id`, space)
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if err := reference.CheckSpace(space); err != nil {
		return false, err
	}
	states, err := s.many(ctx, "states.isReferencedByOtherDocument", docIDs(space, documentID),
		`SELECT payload FROM crashmatrix_document_states WHERE space = $1 AND status = $2 AND document_id <> $3
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
