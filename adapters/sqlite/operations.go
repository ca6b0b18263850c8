package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OperationStore is a reference.OperationStore on SQLite.
type OperationStore struct{ d *db }

const opColumns = `operation_id, space, document_id, expected_revision, plan_fingerprint, stage,
	updated_at, failure_reason, attempts, disposition, superseded_by, claim_holder, claim_expires_at`

type scanner interface{ Scan(dest ...any) error }

func scanOp(r scanner) (reference.Operation, error) {
	var o reference.Operation
	var stage, disp string
	err := r.Scan(&o.OperationID, &o.Space, &o.DocumentID, &o.ExpectedRevision, &o.PlanFingerprint, &stage,
		&o.UpdatedAt, &o.FailureReason, &o.Attempts, &disp, &o.SupersededBy, &o.ClaimHolder, &o.ClaimExpiresAt)
	o.Stage, o.Disposition = reference.Stage(stage), reference.Disposition(disp)
	return o, err
}

func notFound(id string) error { return fmt.Errorf("operation %s: %w", id, reference.ErrNotFound) }

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getOp(ctx context.Context, q queryer, id string) (reference.Operation, error) {
	o, err := scanOp(q.QueryRowContext(ctx, `SELECT `+opColumns+` FROM operations WHERE operation_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return reference.Operation{}, notFound(id)
	}
	return o, err
}

// CreateIfAbsent implements reference.OperationStore.
func (s *OperationStore) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := reference.CheckCreate(op, plan); err != nil {
		return false, err
	}
	payload, err := reference.EncodePlan(plan)
	if err != nil {
		return false, err
	}
	// One statement: the record and its plan are one row, created
	// together or not at all; the first write wins.
	n, err := s.d.affected(ctx, `INSERT INTO operations (`+opColumns+`, plan)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (operation_id) DO NOTHING`,
		op.OperationID, op.Space, op.DocumentID, op.ExpectedRevision, op.PlanFingerprint, string(op.Stage),
		op.UpdatedAt, op.FailureReason, op.Attempts, string(op.Disposition), op.SupersededBy,
		op.ClaimHolder, op.ClaimExpiresAt, payload)
	if err != nil {
		return false, fmt.Errorf("create operation %s: %w", op.OperationID, err)
	}
	return n == 1, nil
}

// Get implements reference.OperationStore.
func (s *OperationStore) Get(ctx context.Context, operationID string) (reference.Operation, error) {
	var o reference.Operation
	err := s.d.retry(ctx, func() error {
		var err error
		o, err = getOp(ctx, s.d.sql, operationID)
		return err
	})
	return o, err
}

// GetPlan implements reference.OperationStore: the payload is decoded and
// checked against the stored fingerprint (reference.DecodePlan).
func (s *OperationStore) GetPlan(ctx context.Context, operationID string) (reference.Plan, error) {
	var payload []byte
	var fp string
	err := s.d.retry(ctx, func() error {
		return s.d.sql.QueryRowContext(ctx, `SELECT plan, plan_fingerprint FROM operations WHERE operation_id = ?`, operationID).Scan(&payload, &fp)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return reference.Plan{}, notFound(operationID)
	}
	if err != nil {
		return reference.Plan{}, fmt.Errorf("operation %s: %w", operationID, err)
	}
	return reference.DecodeStoredPlan(operationID, payload, fp)
}

// CompareAndSet implements reference.OperationStore with the semantics of
// reference.OperationStore.CompareAndSet, in one IMMEDIATE transaction.
func (s *OperationStore) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := reference.ValidateUpdate(expected, next); err != nil {
		return false, err
	}
	// One conditional UPDATE: the stored record must be the expected one
	// (identity, stage, attempts, disposition) and not newer than next.
	// expected -> next was validated above, so a matching record makes
	// the step legal.
	n, err := s.d.affected(ctx, `UPDATE operations SET stage = ?, updated_at = ?, failure_reason = ?,
		attempts = ?, disposition = ?, superseded_by = ?
		WHERE operation_id = ? AND space = ? AND document_id = ? AND expected_revision = ? AND plan_fingerprint = ?
		AND stage = ? AND attempts = ? AND disposition = ? AND updated_at <= ?`,
		string(next.Stage), next.UpdatedAt, next.FailureReason, next.Attempts, string(next.Disposition), next.SupersededBy,
		expected.OperationID, expected.Space, expected.DocumentID, expected.ExpectedRevision, expected.PlanFingerprint,
		string(expected.Stage), expected.Attempts, string(expected.Disposition), next.UpdatedAt)
	if err != nil || n == 1 {
		return n == 1, err
	}
	// Not applied: a missing operation and time running backwards are
	// errors; another record is a lost race.
	var stored reference.Operation
	if err := s.d.retry(ctx, func() error {
		var err error
		stored, err = getOp(ctx, s.d.sql, expected.OperationID)
		return err
	}); err != nil {
		return false, err
	}
	return false, reference.CompareAndSetMiss(stored, expected, next)
}

func (s *OperationStore) query(ctx context.Context, q string, args ...any) ([]reference.Operation, error) {
	var out []reference.Operation
	err := s.d.each(ctx, func() { out = make([]reference.Operation, 0) }, func(rows *sql.Rows) error {
		o, err := scanOp(rows)
		out = append(out, o)
		return err
	}, q, args...)
	return out, err
}

// ListRecoverable implements reference.OperationStore.
func (s *OperationStore) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := reference.CheckLimit(limit); err != nil {
		return nil, err
	}
	return s.query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE stage <> 'COMPLETED' AND disposition = ''
		ORDER BY updated_at, operation_id LIMIT ?`, limit)
}

// List implements reference.OperationStore.
func (s *OperationStore) List(ctx context.Context) ([]reference.Operation, error) {
	return s.query(ctx, `SELECT `+opColumns+` FROM operations ORDER BY operation_id`)
}

// SpacePlans implements check.SpacePlanReader: every plan of a space in
// one statement, each decoded and checked as GetPlan does.
func (s *OperationStore) SpacePlans(ctx context.Context, space string) (map[string]reference.Plan, map[string]error, error) {
	var plans map[string]reference.Plan
	var bad map[string]error
	err := s.d.each(ctx, func() { plans, bad = map[string]reference.Plan{}, map[string]error{} }, func(rows *sql.Rows) error {
		var id, fp string
		var payload []byte
		if err := rows.Scan(&id, &payload, &fp); err != nil {
			return err
		}
		if p, err := reference.DecodeStoredPlan(id, payload, fp); err != nil {
			bad[id] = err
		} else {
			plans[id] = p
		}
		return nil
	}, `SELECT operation_id, plan, plan_fingerprint FROM operations WHERE space = ?`, space)
	return plans, bad, err
}

// ListSpace returns the operations of one space ordered by operationId
// (reference.SpaceLister).
func (s *OperationStore) ListSpace(ctx context.Context, space string) ([]reference.Operation, error) {
	return s.query(ctx, `SELECT `+opColumns+` FROM operations WHERE space = ? ORDER BY operation_id`, space)
}

// Claim implements reference.OperationStore.
func (s *OperationStore) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := reference.CheckClaim(holder, ttlMillis); err != nil {
		return false, err
	}
	var ok bool
	err := s.d.tx(ctx, func(tx *sql.Tx) error {
		ok = false
		var cur string
		var exp int64
		err := tx.QueryRowContext(ctx, `SELECT claim_holder, claim_expires_at FROM operations WHERE operation_id = ?`, operationID).Scan(&cur, &exp)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(operationID)
		}
		if err != nil {
			return err
		}
		if cur != "" && cur != holder && exp > now {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET claim_holder = ?, claim_expires_at = ? WHERE operation_id = ?`,
			holder, now+ttlMillis, operationID); err != nil {
			return err
		}
		ok = true
		return nil
	})
	return ok, err
}

// ReleaseClaim implements reference.OperationStore.
func (s *OperationStore) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	var ok bool
	err := s.d.tx(ctx, func(tx *sql.Tx) error {
		ok = false
		if _, err := getOp(ctx, tx, operationID); err != nil {
			return err
		}
		if blank(holder) {
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE operations SET claim_holder = '', claim_expires_at = 0
			WHERE operation_id = ? AND claim_holder = ?`, operationID, holder)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, err
}
