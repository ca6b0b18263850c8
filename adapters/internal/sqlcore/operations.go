package sqlcore

import (
	"context"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OpColumns are the columns of an operation row in ScanOp's order (the plan
// payload is read apart).
const OpColumns = `operation_id, space, document_id, expected_revision, plan_fingerprint, stage,
	updated_at, failure_reason, attempts, disposition, superseded_by, claim_holder, claim_expires_at`

// ScanOp reads the OpColumns of one row.
func ScanOp(r Row) (reference.Operation, error) {
	var o reference.Operation
	var stage, disp string
	err := r.Scan(&o.OperationID, &o.Space, &o.DocumentID, &o.ExpectedRevision, &o.PlanFingerprint, &stage,
		&o.UpdatedAt, &o.FailureReason, &o.Attempts, &disp, &o.SupersededBy, &o.ClaimHolder, &o.ClaimExpiresAt)
	o.Stage, o.Disposition = reference.Stage(stage), reference.Disposition(disp)
	return o, err
}

func notFound(id string) error { return fmt.Errorf("operation %s: %w", id, reference.ErrNotFound) }

// Operations is a reference.OperationStore on the {operations} table: the
// record and its plan are one row, so creating them is one statement
// (first write wins), and every change is one conditional UPDATE checked
// by the rows it changed.
type Operations struct {
	db DB
	q  struct {
		insert, get, plan, cas, recoverable, list, listSpace, spacePlans, claim, release string
		// setPlan is the mutant's second statement (PlanApart).
		setPlan string
	}
}

// PlanApart makes s a mutant (sim.MutantTwoTransactionCreate): CreateIfAbsent
// inserts the operation row with an empty plan, then writes the plan with
// a second statement, its own transaction, and declares no window between
// the two. A crash between them leaves an operation without its plan
// (reference.ErrNoPersistedPlan), which recovery cannot finish.
func (s *Operations) PlanApart(d Dialect) *Operations {
	s.q.setPlan = d.SQL(`UPDATE {operations} SET plan = ? WHERE operation_id = ?`)
	return s
}

// NewOperations returns the operation store on db.
func NewOperations(db DB, d Dialect) *Operations {
	s := &Operations{db: db}
	s.q.insert = d.SQL(`INSERT INTO {operations} (` + OpColumns + `, plan)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (operation_id) DO NOTHING`)
	s.q.get = d.SQL(`SELECT ` + OpColumns + ` FROM {operations} WHERE operation_id = ?`)
	s.q.plan = d.SQL(`SELECT plan, plan_fingerprint FROM {operations} WHERE operation_id = ?`)
	s.q.cas = d.SQL(`UPDATE {operations} SET stage = ?, updated_at = ?, failure_reason = ?,
		attempts = ?, disposition = ?, superseded_by = ?
		WHERE operation_id = ? AND space = ? AND document_id = ? AND expected_revision = ? AND plan_fingerprint = ?
		AND stage = ? AND attempts = ? AND disposition = ? AND updated_at <= ?`)
	// Served by the partial index on unfinished rows.
	s.q.recoverable = d.SQL(`SELECT ` + OpColumns + ` FROM {operations}
		WHERE stage <> 'COMPLETED' AND disposition = ''
		ORDER BY updated_at, operation_id LIMIT ?`)
	s.q.list = d.SQL(`SELECT ` + OpColumns + ` FROM {operations} ORDER BY operation_id`)
	s.q.listSpace = d.SQL(`SELECT ` + OpColumns + ` FROM {operations} WHERE space = ? ORDER BY operation_id`)
	s.q.spacePlans = d.SQL(`SELECT operation_id, plan, plan_fingerprint FROM {operations} WHERE space = ?`)
	s.q.claim = d.SQL(`UPDATE {operations} SET claim_holder = ?, claim_expires_at = ?
		WHERE operation_id = ? AND (claim_holder = '' OR claim_holder = ? OR claim_expires_at <= ?)`)
	s.q.release = d.SQL(`UPDATE {operations} SET claim_holder = '', claim_expires_at = 0
		WHERE operation_id = ? AND claim_holder = ?`)
	return s
}

// CreateIfAbsent implements reference.OperationStore: one INSERT ... ON
// CONFLICT (operation_id) DO NOTHING writes the record and its plan.
func (s *Operations) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := reference.CheckCreate(op, plan); err != nil {
		return false, err
	}
	payload, err := reference.EncodePlan(plan)
	if err != nil {
		return false, err
	}
	ids := "operation " + op.OperationID + " document " + op.Space + "/" + op.DocumentID
	stored := payload
	if s.q.setPlan != "" {
		stored = []byte{}
	}
	n, err := s.db.Exec(ctx, "operations.create", ids, s.q.insert,
		op.OperationID, op.Space, op.DocumentID, op.ExpectedRevision, op.PlanFingerprint, string(op.Stage),
		op.UpdatedAt, op.FailureReason, op.Attempts, string(op.Disposition), op.SupersededBy,
		op.ClaimHolder, op.ClaimExpiresAt, stored)
	if err == nil && n == 1 && s.q.setPlan != "" {
		_, err = s.db.Exec(ctx, "operations.create", ids, s.q.setPlan, payload, op.OperationID)
	}
	return n == 1, err
}

// Get implements reference.OperationStore.
func (s *Operations) Get(ctx context.Context, operationID string) (reference.Operation, error) {
	var o reference.Operation
	found, err := one(ctx, s.db, "operations.get", "operation "+operationID, func(r Row) error {
		var err error
		o, err = ScanOp(r)
		return err
	}, s.q.get, operationID)
	if err == nil && !found {
		err = notFound(operationID)
	}
	return o, err
}

// GetPlan implements reference.OperationStore: the payload is decoded and
// checked against the stored fingerprint (reference.DecodeStoredPlan).
func (s *Operations) GetPlan(ctx context.Context, operationID string) (reference.Plan, error) {
	var payload []byte
	var fp string
	found, err := one(ctx, s.db, "operations.getPlan", "operation "+operationID, func(r Row) error {
		return r.Scan(&payload, &fp)
	}, s.q.plan, operationID)
	switch {
	case err != nil:
		return reference.Plan{}, err
	case !found:
		return reference.Plan{}, notFound(operationID)
	}
	return reference.DecodeStoredPlan(operationID, payload, fp)
}

// SpacePlans implements reference.SpacePlanReader: every plan of a space in
// one statement, each decoded and checked as GetPlan does.
func (s *Operations) SpacePlans(ctx context.Context, space string) (map[string]reference.Plan, map[string]error, error) {
	var plans map[string]reference.Plan
	var bad map[string]error
	err := s.db.Query(ctx, "operations.spacePlans", "space "+space, func() { plans, bad = map[string]reference.Plan{}, map[string]error{} }, func(r Row) error {
		var id, fp string
		var payload []byte
		if err := r.Scan(&id, &payload, &fp); err != nil {
			return err
		}
		if p, err := reference.DecodeStoredPlan(id, payload, fp); err != nil {
			bad[id] = err
		} else {
			plans[id] = p
		}
		return nil
	}, s.q.spacePlans, space)
	if err != nil {
		return nil, nil, err
	}
	return plans, bad, nil
}

// CompareAndSet implements reference.OperationStore as one conditional
// UPDATE on the identity, stage, attempts and disposition of expected (and
// a stored time not after next's). expected -> next is validated first, so
// a matching record makes the step legal; when no row changes, the stored
// record tells a lost race from an unknown operation or time running
// backwards (reference.CompareAndSetMiss).
func (s *Operations) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := reference.ValidateUpdate(expected, next); err != nil {
		return false, err
	}
	n, err := s.db.Exec(ctx, "operations.compareAndSet", "operation "+expected.OperationID, s.q.cas,
		string(next.Stage), next.UpdatedAt, next.FailureReason, next.Attempts, string(next.Disposition), next.SupersededBy,
		expected.OperationID, expected.Space, expected.DocumentID, expected.ExpectedRevision, expected.PlanFingerprint,
		string(expected.Stage), expected.Attempts, string(expected.Disposition), next.UpdatedAt)
	if err != nil || n == 1 {
		return n == 1, err
	}
	stored, err := s.Get(ctx, expected.OperationID)
	if err != nil {
		return false, err
	}
	return false, reference.CompareAndSetMiss(stored, expected, next)
}

func (s *Operations) query(ctx context.Context, op, ids, q string, args ...any) ([]reference.Operation, error) {
	return collect(ctx, s.db, op, ids, ScanOp, q, args...)
}

// ListRecoverable implements reference.OperationStore.
func (s *Operations) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := reference.CheckLimit(limit); err != nil {
		return nil, err
	}
	return s.query(ctx, "operations.listRecoverable", "", s.q.recoverable, limit)
}

// List implements reference.OperationStore.
func (s *Operations) List(ctx context.Context) ([]reference.Operation, error) {
	return s.query(ctx, "operations.list", "", s.q.list)
}

// ListSpace returns the operations of one space ordered by operationId
// (reference.SpaceLister).
func (s *Operations) ListSpace(ctx context.Context, space string) ([]reference.Operation, error) {
	return s.query(ctx, "operations.listSpace", "space "+space, s.q.listSpace, space)
}

// Claim implements reference.OperationStore with one conditional UPDATE:
// two processes can never both win an unexpired claim.
func (s *Operations) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := reference.CheckClaim(holder, ttlMillis); err != nil {
		return false, err
	}
	n, err := s.db.Exec(ctx, "operations.claim", "operation "+operationID+" holder "+holder, s.q.claim,
		holder, now+ttlMillis, operationID, holder, now)
	if err != nil || n == 1 {
		return n == 1, err
	}
	_, err = s.Get(ctx, operationID) // unknown: ErrNotFound
	return false, err
}

// ReleaseClaim implements reference.OperationStore with one conditional
// UPDATE; false if holder does not hold the claim.
func (s *Operations) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	if strings.TrimSpace(holder) != "" {
		n, err := s.db.Exec(ctx, "operations.releaseClaim", "operation "+operationID+" holder "+holder, s.q.release, operationID, holder)
		if err != nil || n == 1 {
			return n == 1, err
		}
	}
	_, err := s.Get(ctx, operationID) // unknown: ErrNotFound
	return false, err
}
