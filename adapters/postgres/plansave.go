package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PlanSave is System B's two stores on PostgreSQL: the workflow checkpoints
// and the business plan table (UNIQUE(owner, operation_id)), committed
// separately as a checkpointer and a business database are.
type PlanSave struct {
	pool   *pgxpool.Pool
	unique bool
}

// OpenPlanSave opens (creating if needed) System B's tables. unique false
// builds the mutant without the unique constraint (a separate table, so
// both can live in one database).
func OpenPlanSave(ctx context.Context, dsn string, unique bool) (*PlanSave, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("plansave: parse DSN %s: %w", RedactDSN(dsn), errors.New(redact(err.Error(), cfgPassword(dsn))))
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("plansave: connect %s: %s", RedactDSN(dsn), redact(err.Error(), cfgPassword(dsn)))
	}
	p := &PlanSave{pool: pool, unique: unique}
	ddl := `CREATE TABLE IF NOT EXISTS crashmatrix_checkpoints (thread_id TEXT PRIMARY KEY, payload JSONB NOT NULL);
CREATE TABLE IF NOT EXISTS crashmatrix_plans (id BIGSERIAL PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL,
	question TEXT NOT NULL, minutes INT NOT NULL, UNIQUE (owner, operation_id));
CREATE TABLE IF NOT EXISTS crashmatrix_plans_nounique (id BIGSERIAL PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL,
	question TEXT NOT NULL, minutes INT NOT NULL);`
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('crashmatrix_plansave' || current_schema()))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl)
		return err
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("plansave: schema: %s", redact(err.Error(), cfgPassword(dsn)))
	}
	return p, nil
}

func cfgPassword(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil || cfg.Password == "" {
		return "\x00none"
	}
	return cfg.Password
}

func (p *PlanSave) table() string {
	if p.unique {
		return "crashmatrix_plans"
	}
	return "crashmatrix_plans_nounique"
}

// Close closes the pool.
func (p *PlanSave) Close() error { p.pool.Close(); return nil }

// Load implements plansave.CheckpointStore.
func (p *PlanSave) Load(ctx context.Context, threadID string) (plansave.Checkpoint, bool, error) {
	var payload []byte
	err := p.pool.QueryRow(ctx, `SELECT payload FROM crashmatrix_checkpoints WHERE thread_id = $1`, threadID).Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return plansave.Checkpoint{}, false, nil
	}
	if err != nil {
		return plansave.Checkpoint{}, false, fmt.Errorf("checkpoint %s: %w", threadID, err)
	}
	var cp plansave.Checkpoint
	if err := json.Unmarshal(payload, &cp); err != nil {
		return cp, false, fmt.Errorf("checkpoint %s: corrupt payload: %w", threadID, err)
	}
	return cp, true, nil
}

// Put implements plansave.CheckpointStore.
func (p *PlanSave) Put(ctx context.Context, cp plansave.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO crashmatrix_checkpoints (thread_id, payload) VALUES ($1, $2)
		ON CONFLICT (thread_id) DO UPDATE SET payload = excluded.payload`, cp.ThreadID, b)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", cp.ThreadID, err)
	}
	return nil
}

// Save implements plansave.PlanStore: INSERT ... ON CONFLICT DO NOTHING,
// then read the row back and compare its content, in one transaction.
func (p *PlanSave) Save(ctx context.Context, owner, operationID, question string, minutes int) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		q := `INSERT INTO ` + p.table() + ` (owner, operation_id, question, minutes) VALUES ($1, $2, $3, $4)`
		if p.unique {
			q += ` ON CONFLICT (owner, operation_id) DO NOTHING`
		}
		if _, err := tx.Exec(ctx, q, owner, operationID, question, minutes); err != nil {
			return err
		}
		var gotQ string
		var gotM int
		if err := tx.QueryRow(ctx, `SELECT id, question, minutes FROM `+p.table()+` WHERE owner = $1 AND operation_id = $2 ORDER BY id DESC LIMIT 1`,
			owner, operationID).Scan(&id, &gotQ, &gotM); err != nil {
			return err
		}
		if gotQ != question || gotM != minutes {
			return fmt.Errorf("plan %s/%s: %w (stored %q/%d, got %q/%d)", owner, operationID, plansave.ErrConflict, gotQ, gotM, question, minutes)
		}
		return nil
	})
	return id, err
}

// List implements plansave.PlanStore.
func (p *PlanSave) List(ctx context.Context, owner string) ([]plansave.PlanRow, error) {
	rows, err := p.pool.Query(ctx, `SELECT id, owner, operation_id, question, minutes FROM `+p.table()+` WHERE owner = $1 ORDER BY id`, owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []plansave.PlanRow
	for rows.Next() {
		var r plansave.PlanRow
		if err := rows.Scan(&r.ID, &r.Owner, &r.OperationID, &r.Question, &r.Minutes); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
