package plansave

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // the embedded default's driver
)

// SQLite is the embedded implementation of both stores: the checkpoint and
// the plan table live in separate database files, so they commit
// separately, as a checkpointer and a business database do.
type SQLite struct {
	checkpoints, plans *sql.DB
	// Unique is false for the mutant that lacks UNIQUE(owner,
	// operation_id) and inserts a row on every save.
	unique bool
}

// OpenSQLite opens (creating if needed) the two databases in dir. unique
// false builds the mutant without the unique constraint.
func OpenSQLite(dir string, unique bool) (*SQLite, error) {
	open := func(name string) (*sql.DB, error) {
		db, err := sql.Open("sqlite", "file:"+dir+"/"+name+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		return db, nil
	}
	cps, err := open("checkpoints.db")
	if err != nil {
		return nil, fmt.Errorf("plansave: open checkpoints: %w", err)
	}
	plans, err := open("plans.db")
	if err != nil {
		cps.Close()
		return nil, fmt.Errorf("plansave: open plans: %w", err)
	}
	s := &SQLite{checkpoints: cps, plans: plans, unique: unique}
	constraint := ", UNIQUE(owner, operation_id)"
	if !unique {
		constraint = ""
	}
	stmts := []struct {
		db *sql.DB
		q  string
	}{
		{cps, `CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT PRIMARY KEY, payload TEXT NOT NULL)`},
		{plans, `CREATE TABLE IF NOT EXISTS plans (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL,
			question TEXT NOT NULL, minutes INTEGER NOT NULL` + constraint + `)`},
	}
	for _, st := range stmts {
		if err := retryBusy(func() error { _, e := st.db.Exec(st.q); return e }); err != nil {
			s.Close()
			return nil, fmt.Errorf("plansave: schema: %w", err)
		}
	}
	return s, nil
}

func retryBusy(f func() error) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	return err
}

// Close closes both databases.
func (s *SQLite) Close() error {
	return errors.Join(s.checkpoints.Close(), s.plans.Close())
}

// Load implements CheckpointStore.
func (s *SQLite) Load(ctx context.Context, threadID string) (Checkpoint, bool, error) {
	var payload string
	err := s.checkpoints.QueryRowContext(ctx, `SELECT payload FROM checkpoints WHERE thread_id = ?`, threadID).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, err
	}
	var cp Checkpoint
	if err := json.Unmarshal([]byte(payload), &cp); err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint %s: corrupt payload: %w", threadID, err)
	}
	return cp, true, nil
}

// Put implements CheckpointStore.
func (s *SQLite) Put(ctx context.Context, cp Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	_, err = s.checkpoints.ExecContext(ctx, `INSERT INTO checkpoints(thread_id, payload) VALUES (?, ?)
		ON CONFLICT(thread_id) DO UPDATE SET payload = excluded.payload`, cp.ThreadID, string(b))
	return err
}

// Save implements PlanStore, as seed 000 does: INSERT ... ON CONFLICT DO
// NOTHING, then read the row back and compare its content.
func (s *SQLite) Save(ctx context.Context, owner, operationID, question string, minutes int) (int64, error) {
	tx, err := s.plans.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if s.unique {
		_, err = tx.ExecContext(ctx, `INSERT INTO plans(owner, operation_id, question, minutes) VALUES (?,?,?,?)
			ON CONFLICT(owner, operation_id) DO NOTHING`, owner, operationID, question, minutes)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO plans(owner, operation_id, question, minutes) VALUES (?,?,?,?)`, owner, operationID, question, minutes)
	}
	if err != nil {
		return 0, err
	}
	var row PlanRow
	err = tx.QueryRowContext(ctx, `SELECT id, question, minutes FROM plans WHERE owner = ? AND operation_id = ? ORDER BY id DESC LIMIT 1`,
		owner, operationID).Scan(&row.ID, &row.Question, &row.Minutes)
	if err != nil {
		return 0, err
	}
	if row.Question != question || row.Minutes != minutes {
		return 0, fmt.Errorf("plan %s/%s: %w (stored %q/%d, got %q/%d)", owner, operationID, ErrConflict, row.Question, row.Minutes, question, minutes)
	}
	return row.ID, tx.Commit()
}

// List implements PlanStore.
func (s *SQLite) List(ctx context.Context, owner string) ([]PlanRow, error) {
	rows, err := s.plans.QueryContext(ctx, `SELECT id, owner, operation_id, question, minutes FROM plans WHERE owner = ? ORDER BY id`, owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PlanRow
	for rows.Next() {
		var r PlanRow
		if err := rows.Scan(&r.ID, &r.Owner, &r.OperationID, &r.Question, &r.Minutes); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
