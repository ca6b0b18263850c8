package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// PlanSave is System B's two stores on SQLite (plansave.CheckpointStore and
// plansave.PlanStore): the checkpoints and the plan table live in separate
// database files, so they commit separately, as a checkpointer and a
// business database do. Both files survive a SIGKILL as Open's does.
type PlanSave struct {
	checkpoints, plans *db
	// unique is false for the mutant that lacks UNIQUE(owner,
	// operation_id) and inserts a row on every save.
	unique bool
}

var (
	_ plansave.CheckpointStore = (*PlanSave)(nil)
	_ plansave.PlanStore       = (*PlanSave)(nil)
)

// OpenPlanSave opens (creating if needed) the two databases in dir
// (checkpoints.db and plans.db). unique false builds the mutant without
// UNIQUE(owner, operation_id). Close it when done.
func OpenPlanSave(dir string, unique bool) (*PlanSave, error) {
	if strings.TrimSpace(dir) == "" || strings.ContainsRune(dir, '?') {
		return nil, fmt.Errorf("%w: plansave directory %q", reference.ErrInvalidArgument, dir)
	}
	constraint := ", UNIQUE(owner, operation_id)"
	if !unique {
		constraint = ""
	}
	cps, err := openPlanSaveDB(filepath.Join(dir, "checkpoints.db"),
		`CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT PRIMARY KEY, payload TEXT NOT NULL)`)
	if err != nil {
		return nil, err
	}
	plans, err := openPlanSaveDB(filepath.Join(dir, "plans.db"),
		`CREATE TABLE IF NOT EXISTS plans (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL,
			question TEXT NOT NULL, minutes INTEGER NOT NULL`+constraint+`)`)
	if err != nil {
		cps.close()
		return nil, err
	}
	return &PlanSave{checkpoints: cps, plans: plans, unique: unique}, nil
}

// openPlanSaveDB opens one of the two files on one connection and creates
// its table.
func openPlanSaveDB(path, ddl string) (*db, error) {
	d, err := connect(path, DSN(path), false)
	if err != nil {
		return nil, fmt.Errorf("plansave: %w", err)
	}
	d.sql.SetMaxOpenConns(1)
	if _, err := d.exec(context.Background(), ddl); err != nil {
		d.close()
		return nil, fmt.Errorf("plansave: schema of %s: %w", path, err)
	}
	return d, nil
}

// Close closes both databases.
func (s *PlanSave) Close() error {
	return errors.Join(s.checkpoints.close(), s.plans.close())
}

// Load implements plansave.CheckpointStore.
func (s *PlanSave) Load(ctx context.Context, threadID string) (plansave.Checkpoint, bool, error) {
	var payload string
	err := s.checkpoints.retry(ctx, func() error {
		return s.checkpoints.sql.QueryRowContext(ctx, `SELECT payload FROM checkpoints WHERE thread_id = ?`, threadID).Scan(&payload)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return plansave.Checkpoint{}, false, nil
	}
	if err != nil {
		return plansave.Checkpoint{}, false, fmt.Errorf("checkpoint %s: %w", threadID, err)
	}
	var cp plansave.Checkpoint
	if err := json.Unmarshal([]byte(payload), &cp); err != nil {
		return plansave.Checkpoint{}, false, fmt.Errorf("checkpoint %s: corrupt payload: %w", threadID, err)
	}
	return cp, true, nil
}

// Put implements plansave.CheckpointStore.
func (s *PlanSave) Put(ctx context.Context, cp plansave.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if _, err := s.checkpoints.exec(ctx, `INSERT INTO checkpoints(thread_id, payload) VALUES (?, ?)
		ON CONFLICT(thread_id) DO UPDATE SET payload = excluded.payload`, cp.ThreadID, string(b)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", cp.ThreadID, err)
	}
	return nil
}

// Save implements plansave.PlanStore, as seed 000 does: INSERT ... ON
// CONFLICT DO NOTHING, then read the row back and compare its content, in
// one IMMEDIATE transaction.
func (s *PlanSave) Save(ctx context.Context, owner, operationID, question string, minutes int) (int64, error) {
	var row plansave.PlanRow
	err := s.plans.tx(ctx, func(tx *sql.Tx) error {
		q := `INSERT INTO plans(owner, operation_id, question, minutes) VALUES (?, ?, ?, ?)`
		if s.unique {
			q += ` ON CONFLICT(owner, operation_id) DO NOTHING`
		}
		if _, err := tx.ExecContext(ctx, q, owner, operationID, question, minutes); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT id, question, minutes FROM plans WHERE owner = ? AND operation_id = ? ORDER BY id DESC LIMIT 1`,
			owner, operationID).Scan(&row.ID, &row.Question, &row.Minutes); err != nil {
			return err
		}
		if row.Question != question || row.Minutes != minutes {
			return fmt.Errorf("%w (stored %q/%d, got %q/%d)", plansave.ErrConflict, row.Question, row.Minutes, question, minutes)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("plan %s/%s: %w", owner, operationID, err)
	}
	return row.ID, nil
}

// List implements plansave.PlanStore.
func (s *PlanSave) List(ctx context.Context, owner string) ([]plansave.PlanRow, error) {
	var out []plansave.PlanRow
	err := s.plans.each(ctx, func() { out = nil }, func(rows *sql.Rows) error {
		var r plansave.PlanRow
		err := rows.Scan(&r.ID, &r.Owner, &r.OperationID, &r.Question, &r.Minutes)
		out = append(out, r)
		return err
	}, `SELECT id, owner, operation_id, question, minutes FROM plans WHERE owner = ? ORDER BY id`, owner)
	if err != nil {
		return nil, fmt.Errorf("plans of %s: %w", owner, err)
	}
	return out, nil
}

// TwoStepPlans is a System B plan store (plansave.PlanStore) on SQLite
// that keeps its rows and the (owner, operation_id) key of each in two
// tables, each save taking two synced transactions: the durable-step
// sweep's example of a plan save with a crash window inside it. Apart,
// it commits the row, then its key, in two transactions (a deliberate
// defect: killed between the two, the row is there without its key, and
// the resumed save inserts a second row). Otherwise it commits row and key
// in one transaction, then an audit row in a second: two durable steps
// too, and no window between them.
type TwoStepPlans struct {
	db    *sql.DB
	apart bool
}

var _ plansave.PlanStore = (*TwoStepPlans)(nil)

// OpenTwoStepPlans opens (creating) twostep-plans.db in dir.
func OpenTwoStepPlans(dir string, apart bool) (*TwoStepPlans, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", DSN(filepath.Join(dir, "twostep-plans.db")))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS plan_rows (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL, question TEXT NOT NULL, minutes INTEGER NOT NULL);
		CREATE TABLE IF NOT EXISTS plan_keys (owner TEXT NOT NULL, operation_id TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (owner, operation_id));
		CREATE TABLE IF NOT EXISTS audit (id INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	return &TwoStepPlans{db: db, apart: apart}, nil
}

// Close closes the database.
func (p *TwoStepPlans) Close() error { return p.db.Close() }

// Save stores a plan row once per (owner, key), as plansave.PlanStore says.
func (p *TwoStepPlans) Save(ctx context.Context, owner, key, question string, minutes int) (int64, error) {
	var id int64
	var q string
	var m int
	err := p.db.QueryRowContext(ctx, `SELECT r.id, r.question, r.minutes FROM plan_keys k JOIN plan_rows r ON r.id = k.id WHERE k.owner = ? AND k.operation_id = ?`, owner, key).Scan(&id, &q, &m)
	switch {
	case err == nil && (q != question || m != minutes):
		return 0, fmt.Errorf("%w (stored %q/%d)", plansave.ErrConflict, q, m)
	case err == nil:
		return id, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, err
	}
	if p.apart {
		res, err := p.db.ExecContext(ctx, `INSERT INTO plan_rows (owner, operation_id, question, minutes) VALUES (?, ?, ?, ?)`, owner, key, question, minutes)
		if err != nil {
			return 0, err
		}
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
		_, err = p.db.ExecContext(ctx, `INSERT INTO plan_keys (owner, operation_id, id) VALUES (?, ?, ?)`, owner, key, id)
		return id, err
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO plan_rows (owner, operation_id, question, minutes) VALUES (?, ?, ?, ?)`, owner, key, question, minutes)
	if err == nil {
		id, err = res.LastInsertId()
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO plan_keys (owner, operation_id, id) VALUES (?, ?, ?)`, owner, key, id)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return 0, err
	}
	_, err = p.db.ExecContext(ctx, `INSERT INTO audit (id) VALUES (?)`, id)
	return id, err
}

// List returns owner's rows in id order.
func (p *TwoStepPlans) List(ctx context.Context, owner string) (out []plansave.PlanRow, err error) {
	rows, err := p.db.QueryContext(ctx, `SELECT id, owner, operation_id, question, minutes FROM plan_rows WHERE owner = ? ORDER BY id`, owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for err == nil && rows.Next() {
		var r plansave.PlanRow
		err = rows.Scan(&r.ID, &r.Owner, &r.OperationID, &r.Question, &r.Minutes)
		out = append(out, r)
	}
	return out, errors.Join(err, rows.Err())
}
