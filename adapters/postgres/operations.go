package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OperationStore is a reference.OperationStore on PostgreSQL.
type OperationStore struct{ d *db }

const opColumns = `operation_id, space, document_id, expected_revision, plan_fingerprint, stage,
	updated_at, failure_reason, attempts, disposition, superseded_by, claim_holder, claim_expires_at`

func scanOp(r pgx.Row) (reference.Operation, error) {
	var o reference.Operation
	var stage, disp string
	err := r.Scan(&o.OperationID, &o.Space, &o.DocumentID, &o.ExpectedRevision, &o.PlanFingerprint, &stage,
		&o.UpdatedAt, &o.FailureReason, &o.Attempts, &disp, &o.SupersededBy, &o.ClaimHolder, &o.ClaimExpiresAt)
	o.Stage, o.Disposition = reference.Stage(stage), reference.Disposition(disp)
	return o, err
}

func notFound(id string) error { return fmt.Errorf("operation %s: %w", id, reference.ErrNotFound) }

func (s *OperationStore) get(ctx context.Context, q querier, id string) (reference.Operation, error) {
	o, err := scanOp(q.QueryRow(ctx, `SELECT `+opColumns+` FROM crashmatrix_operations WHERE operation_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return reference.Operation{}, notFound(id)
	}
	return o, s.d.wrap("operations.get", "operation "+id, err)
}

// CreateIfAbsent implements reference.OperationStore: the operation row and
// its plan payload are one row written by one INSERT ... ON CONFLICT
// (operation_id) DO NOTHING in one transaction; the first write wins.
func (s *OperationStore) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := reference.CheckCreate(op, plan); err != nil {
		return false, err
	}
	payload, err := reference.EncodePlan(plan)
	if err != nil {
		return false, err
	}
	var created bool
	err = s.d.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO crashmatrix_operations (`+opColumns+`, plan)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT (operation_id) DO NOTHING`,
			op.OperationID, op.Space, op.DocumentID, op.ExpectedRevision, op.PlanFingerprint, string(op.Stage),
			op.UpdatedAt, op.FailureReason, op.Attempts, string(op.Disposition), op.SupersededBy,
			op.ClaimHolder, op.ClaimExpiresAt, payload)
		created = err == nil && tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, s.d.wrap("operations.create", "operation "+op.OperationID+" document "+op.Space+"/"+op.DocumentID, err)
	}
	return created, nil
}

// Get implements reference.OperationStore.
func (s *OperationStore) Get(ctx context.Context, operationID string) (reference.Operation, error) {
	return s.get(ctx, s.d.pool, operationID)
}

// GetPlan implements reference.OperationStore: the payload is decoded and
// checked against the stored fingerprint (reference.DecodePlan).
func (s *OperationStore) GetPlan(ctx context.Context, operationID string) (reference.Plan, error) {
	var payload []byte
	var fp string
	err := s.d.pool.QueryRow(ctx, `SELECT plan, plan_fingerprint FROM crashmatrix_operations WHERE operation_id = $1`,
		operationID).Scan(&payload, &fp)
	if errors.Is(err, pgx.ErrNoRows) {
		return reference.Plan{}, notFound(operationID)
	}
	if err != nil {
		return reference.Plan{}, s.d.wrap("operations.getPlan", "operation "+operationID, err)
	}
	return reference.DecodeStoredPlan(operationID, payload, fp)
}

// SpacePlans implements check.SpacePlanReader: every plan of a space in
// one query, each decoded and checked as GetPlan does.
func (s *OperationStore) SpacePlans(ctx context.Context, space string) (map[string]reference.Plan, map[string]error, error) {
	rows, err := s.d.pool.Query(ctx, `SELECT operation_id, plan, plan_fingerprint FROM crashmatrix_operations WHERE space = $1`, space)
	if err != nil {
		return nil, nil, s.d.wrap("operations.spacePlans", "space "+space, err)
	}
	defer rows.Close()
	plans, bad := map[string]reference.Plan{}, map[string]error{}
	for rows.Next() {
		var id, fp string
		var payload []byte
		if err := rows.Scan(&id, &payload, &fp); err != nil {
			return nil, nil, s.d.wrap("operations.spacePlans", "space "+space, err)
		}
		if p, err := reference.DecodeStoredPlan(id, payload, fp); err != nil {
			bad[id] = err
		} else {
			plans[id] = p
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, s.d.wrap("operations.spacePlans", "space "+space, err)
	}
	return plans, bad, nil
}

// CompareAndSet implements reference.OperationStore with the semantics of
// reference.OperationStore.CompareAndSet, as one conditional UPDATE on the
// identity, stage, attempts and disposition of expected. When no row
// changes, the stored record tells a lost race (false) from an unknown
// operation (ErrNotFound) or an illegal successor of the stored record
// (an error).
func (s *OperationStore) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := reference.ValidateUpdate(expected, next); err != nil {
		return false, err
	}
	tag, err := s.d.pool.Exec(ctx, `UPDATE crashmatrix_operations
		SET stage = $1, updated_at = $2, failure_reason = $3, attempts = $4, disposition = $5, superseded_by = $6
		WHERE operation_id = $7 AND space = $8 AND document_id = $9 AND expected_revision = $10
		  AND plan_fingerprint = $11 AND stage = $12 AND attempts = $13 AND disposition = $14
		  AND updated_at <= $2`,
		string(next.Stage), next.UpdatedAt, next.FailureReason, next.Attempts, string(next.Disposition), next.SupersededBy,
		expected.OperationID, expected.Space, expected.DocumentID, expected.ExpectedRevision,
		expected.PlanFingerprint, string(expected.Stage), expected.Attempts, string(expected.Disposition))
	if err != nil {
		return false, s.d.wrap("operations.compareAndSet", "operation "+expected.OperationID, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	stored, err := s.get(ctx, s.d.pool, expected.OperationID)
	if err != nil {
		return false, err
	}
	return false, reference.CompareAndSetMiss(stored, expected, next)
}

func (s *OperationStore) query(ctx context.Context, op, q string, args ...any) ([]reference.Operation, error) {
	rows, err := s.d.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.d.wrap(op, "", err)
	}
	defer rows.Close()
	out := make([]reference.Operation, 0)
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, s.d.wrap(op, "", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.wrap(op, "", err)
	}
	return out, nil
}

// ListRecoverable implements reference.OperationStore; the scan is served
// by the partial index on unfinished rows.
func (s *OperationStore) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := reference.CheckLimit(limit); err != nil {
		return nil, err
	}
	return s.query(ctx, "operations.listRecoverable", `SELECT `+opColumns+` FROM crashmatrix_operations
		WHERE stage <> 'COMPLETED' AND disposition = ''
		ORDER BY updated_at, operation_id LIMIT $1`, limit)
}

// List implements reference.OperationStore.
func (s *OperationStore) List(ctx context.Context) ([]reference.Operation, error) {
	return s.query(ctx, "operations.list", `SELECT `+opColumns+` FROM crashmatrix_operations ORDER BY operation_id`)
}

// ListSpace returns the operations of one space ordered by operationId
// (reference.SpaceLister).
func (s *OperationStore) ListSpace(ctx context.Context, space string) ([]reference.Operation, error) {
	return s.query(ctx, "operations.list", `SELECT `+opColumns+` FROM crashmatrix_operations WHERE space = $1 ORDER BY operation_id`, space)
}

// Claim implements reference.OperationStore with one conditional UPDATE:
// two processes can never both win an unexpired claim.
func (s *OperationStore) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := reference.CheckClaim(holder, ttlMillis); err != nil {
		return false, err
	}
	tag, err := s.d.pool.Exec(ctx, `UPDATE crashmatrix_operations SET claim_holder = $2, claim_expires_at = $3
		WHERE operation_id = $1 AND (claim_holder = '' OR claim_holder = $2 OR claim_expires_at <= $4)`,
		operationID, holder, now+ttlMillis, now)
	if err != nil {
		return false, s.d.wrap("operations.claim", "operation "+operationID+" holder "+holder, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	if _, err := s.get(ctx, s.d.pool, operationID); err != nil {
		return false, err
	}
	return false, nil
}

// ReleaseClaim implements reference.OperationStore.
func (s *OperationStore) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	if !blank(holder) {
		tag, err := s.d.pool.Exec(ctx, `UPDATE crashmatrix_operations SET claim_holder = '', claim_expires_at = 0
			WHERE operation_id = $1 AND claim_holder = $2`, operationID, holder)
		if err != nil {
			return false, s.d.wrap("operations.releaseClaim", "operation "+operationID+" holder "+holder, err)
		}
		if tag.RowsAffected() == 1 {
			return true, nil
		}
	}
	if _, err := s.get(ctx, s.d.pool, operationID); err != nil {
		return false, err
	}
	return false, nil
}
