// Package sqlite implements the reference store interfaces on one SQLite
// database file (modernc.org/sqlite, no cgo). The file survives a SIGKILL
// (WAL journal, synchronous=FULL) and may be shared by several OS processes:
// every write runs in a BEGIN IMMEDIATE transaction, and a busy database is
// waited for (busy_timeout) and retried.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlgraph"
	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Options configures the SQLite stores.
type Options struct {
	// CreateInsteadOfMerge makes the graph writer INSERT a new node or edge
	// row on every upsert instead of merging into the existing one: a
	// mutant that produces duplicates.
	CreateInsteadOfMerge bool
}

// DuplicateReporter is implemented by graph writers that can report node ids
// or edge keys stored more than once.
type DuplicateReporter = memory.DuplicateReporter

// SchemaVersion is the version of the schema Open creates (and migrates
// older databases to).
const SchemaVersion = 2

// BusyTimeoutMillis is how long one statement waits for a lock held by
// another connection or process before SQLITE_BUSY.
const BusyTimeoutMillis = 10000

// db is the shared handle of one Open call.
type db struct {
	sql  *sql.DB
	pin  *sql.Conn
	opts Options
}

func (d *db) close() error {
	var err error
	if d.pin != nil {
		err = d.pin.Close()
	}
	return errors.Join(err, d.sql.Close())
}

// closer closes the database handle of one Open call.
type closer struct{ d *db }

// Close closes the database handle.
func (c *closer) Close() error { return c.d.close() }

var (
	_ reference.OperationStore     = (*OperationStore)(nil)
	_ reference.DocumentStateStore = (*StateStore)(nil)
	_ reference.EntityRegistry     = (*Registry)(nil)
	_ reference.GraphWriter        = (*Writer)(nil)
	_ reference.LockProvider       = (*Locks)(nil)
	_ DuplicateReporter            = (*Writer)(nil)
)

// DSN returns the data source name Open uses for path: WAL journal,
// synchronous=FULL, a busy timeout, foreign keys on, and BEGIN IMMEDIATE
// for every transaction started with BeginTx.
func DSN(path string) string {
	q := baseQuery()
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "cache_size(-32768)") // 32 MiB of page cache per connection
	return path + "?" + q.Encode()
}

// memoryDSN is the data source name of OpenMemory: SQLite's memdb VFS,
// shared by every connection of the process that names it.
func memoryDSN(name string) string {
	q := baseQuery()
	q.Set("vfs", "memdb")
	return "file:/" + name + "?" + q.Encode()
}

// baseQuery holds what every connection gets: a busy timeout, foreign keys,
// BEGIN IMMEDIATE for every transaction started with BeginTx.
func baseQuery() url.Values {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeoutMillis))
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return q
}

// Open opens (creating if needed) the database file at path and returns
// every store on it. Close the result's Closer when done.
func Open(path string, opts Options) (reference.Stores, error) {
	if strings.TrimSpace(path) == "" || strings.ContainsRune(path, '?') {
		return reference.Stores{}, fmt.Errorf("%w: sqlite path %q", reference.ErrInvalidArgument, path)
	}
	return open(path, DSN(path), false, opts)
}

// OpenMemory opens (creating if needed) a database that lives in this
// process's memory under name (SQLite's memdb VFS: the same engine, schema,
// statements and transactions as Open, without a file). Every handle of
// the process that opens the same name shares the database until the last
// one is closed. It keeps what it committed exactly as long as the process
// lives: the in-process simulator, whose simulated crashes never end the
// process, runs on it; a real process kill needs Open.
func OpenMemory(name string, opts Options) (reference.Stores, error) {
	if strings.TrimSpace(name) == "" || strings.ContainsAny(name, "?/#") {
		return reference.Stores{}, fmt.Errorf("%w: sqlite memory database name %q (no '/', '?' or '#')", reference.ErrInvalidArgument, name)
	}
	return open("memory:"+name, memoryDSN(name), true, opts)
}

// open opens dsn; pin keeps one connection open for the life of the handle
// (a memory database ends with its last connection).
func open(what, dsn string, pin bool, opts Options) (reference.Stores, error) {
	conn, err := newCachingConnector(dsn, "BEGIN IMMEDIATE")
	if err != nil {
		return reference.Stores{}, err
	}
	sdb := sql.OpenDB(conn)
	d := &db{sql: sdb, opts: opts}
	ctx := context.Background()
	if pin {
		c, err := sdb.Conn(ctx)
		if err != nil {
			sdb.Close()
			return reference.Stores{}, fmt.Errorf("open %s: %w", what, err)
		}
		d.pin = c
	}
	if err := d.retry(ctx, func() error { return sdb.PingContext(ctx) }); err != nil {
		d.close()
		return reference.Stores{}, fmt.Errorf("open %s: %w", what, err)
	}
	if err := d.migrate(ctx); err != nil {
		d.close()
		return reference.Stores{}, fmt.Errorf("open %s: %w", what, err)
	}
	return reference.Stores{
		Ops:      &OperationStore{d},
		States:   &StateStore{d},
		Registry: &Registry{d},
		Writer:   newWriter(d),
		Locks:    &Locks{d},
		Closer:   &closer{d},
	}, nil
}

var schema = []string{
	`CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER NOT NULL PRIMARY KEY
	)`,
	`CREATE TABLE IF NOT EXISTS operations (
		operation_id      TEXT    NOT NULL PRIMARY KEY,
		space             TEXT    NOT NULL,
		document_id       TEXT    NOT NULL,
		expected_revision INTEGER NOT NULL,
		plan_fingerprint  TEXT    NOT NULL,
		stage             TEXT    NOT NULL,
		updated_at        INTEGER NOT NULL,
		failure_reason    TEXT    NOT NULL DEFAULT '',
		attempts          INTEGER NOT NULL DEFAULT 0,
		disposition       TEXT    NOT NULL DEFAULT '',
		superseded_by     TEXT    NOT NULL DEFAULT '',
		claim_holder      TEXT    NOT NULL DEFAULT '',
		claim_expires_at  INTEGER NOT NULL DEFAULT 0,
		plan              BLOB    NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS operations_recovery_idx
		ON operations (updated_at, operation_id)
		WHERE stage <> 'COMPLETED' AND disposition = ''`,
	`CREATE INDEX IF NOT EXISTS operations_space_idx ON operations (space, operation_id)`,
	`CREATE TABLE IF NOT EXISTS document_states (
		space        TEXT    NOT NULL,
		document_id  TEXT    NOT NULL,
		revision     INTEGER NOT NULL,
		operation_id TEXT    NOT NULL,
		status       TEXT    NOT NULL,
		payload      BLOB    NOT NULL,
		PRIMARY KEY (space, document_id)
	)`,
	`CREATE TABLE IF NOT EXISTS document_versions (
		space        TEXT    NOT NULL,
		document_id  TEXT    NOT NULL,
		revision     INTEGER NOT NULL,
		operation_id TEXT    NOT NULL,
		payload      BLOB    NOT NULL,
		PRIMARY KEY (space, document_id, revision)
	)`,
	`CREATE INDEX IF NOT EXISTS document_operation_idx
		ON document_versions (space, document_id, operation_id)`,
	`CREATE TABLE IF NOT EXISTS entities (
		space           TEXT NOT NULL,
		node_id         TEXT NOT NULL,
		entity_type     TEXT NOT NULL,
		canonical_name  TEXT NOT NULL,
		properties_json TEXT NOT NULL DEFAULT '{}',
		PRIMARY KEY (space, node_id)
	)`,
	`CREATE TABLE IF NOT EXISTS entity_names (
		space           TEXT NOT NULL,
		entity_type     TEXT NOT NULL,
		normalized_name TEXT NOT NULL,
		node_id         TEXT NOT NULL,
		PRIMARY KEY (space, entity_type, normalized_name),
		FOREIGN KEY (space, node_id) REFERENCES entities (space, node_id)
	)`,
	`CREATE INDEX IF NOT EXISTS entity_names_node_idx ON entity_names (space, node_id)`,
	// No unique constraint on the node and edge identities: the
	// CreateInsteadOfMerge mutant must be able to store duplicates.
	`CREATE TABLE IF NOT EXISTS graph_nodes (
		seq             INTEGER PRIMARY KEY,
		space           TEXT NOT NULL,
		node_id         TEXT NOT NULL,
		label           TEXT NOT NULL,
		properties_json TEXT NOT NULL DEFAULT '{}'
	)`,
	`CREATE INDEX IF NOT EXISTS graph_nodes_id_idx ON graph_nodes (space, node_id)`,
	`CREATE TABLE IF NOT EXISTS graph_edges (
		seq             INTEGER PRIMARY KEY,
		space           TEXT    NOT NULL,
		source          TEXT    NOT NULL,
		type            TEXT    NOT NULL,
		target          TEXT    NOT NULL,
		rank            INTEGER NOT NULL,
		properties_json TEXT    NOT NULL DEFAULT '{}'
	)`,
	`CREATE INDEX IF NOT EXISTS graph_edges_key_idx ON graph_edges (space, source, type, target, rank)`,
	`CREATE INDEX IF NOT EXISTS graph_edges_target_idx ON graph_edges (space, target)`,
	// One row per document ever leased: a release empties holder and
	// expiry but keeps the token, so fencing tokens strictly increase.
	`CREATE TABLE IF NOT EXISTS leases (
		space       TEXT    NOT NULL,
		document_id TEXT    NOT NULL,
		holder      TEXT    NOT NULL,
		token       INTEGER NOT NULL,
		expires_at  INTEGER NOT NULL,
		PRIMARY KEY (space, document_id)
	)`,
}

// migrations[v] takes a database from schema version v to v+1.
var migrations = map[int64][]string{
	// Version 1 kept the last token of each document in lease_tokens and
	// deleted a lease row on release; version 2 keeps the row.
	1: {
		`INSERT INTO leases (space, document_id, holder, token, expires_at)
			SELECT space, document_id, '', last_token, 0 FROM lease_tokens WHERE true
			ON CONFLICT (space, document_id) DO UPDATE SET token = max(leases.token, excluded.token)`,
		`DROP TABLE lease_tokens`,
	},
}

func (d *db) migrate(ctx context.Context) error {
	return d.tx(ctx, func(tx *sql.Tx) error {
		var v sql.NullInt64
		// The table may not exist yet; create everything first.
		for _, stmt := range schema {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("schema: %w", err)
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil {
			return err
		}
		switch {
		case !v.Valid:
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, SchemaVersion)
			return err
		case v.Int64 > SchemaVersion:
			return fmt.Errorf("database schema version %d is newer than %d", v.Int64, SchemaVersion)
		}
		for from := v.Int64; from < SchemaVersion; from++ {
			for _, stmt := range migrations[from] {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migrate schema %d -> %d: %w", from, from+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, from+1); err != nil {
				return err
			}
		}
		return nil
	})
}

// IsBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any extended
// code).
func IsBusy(err error) bool {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

const maxAttempts = 50

// retry runs f until it does not fail with a busy database, up to
// maxAttempts times with a growing pause.
func (d *db) retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err = f(); err == nil || !IsBusy(err) {
			return err
		}
		pause := time.Duration(attempt+1) * 2 * time.Millisecond
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(min(pause, 50*time.Millisecond)):
		}
	}
	return err
}

// tx runs f in a BEGIN IMMEDIATE transaction (the DSN's _txlock), committing
// if f returns nil and rolling back otherwise; it retries the whole
// transaction on SQLITE_BUSY, so f must be safe to run again.
func (d *db) tx(ctx context.Context, f func(tx *sql.Tx) error) error {
	return d.retry(ctx, func() error {
		tx, err := d.sql.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := f(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// exec runs one statement on its own (a statement is atomic without an
// explicit transaction), retrying it on SQLITE_BUSY.
func (d *db) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := d.retry(ctx, func() error {
		var err error
		res, err = d.sql.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// affected runs one statement and returns how many rows it changed.
func (d *db) affected(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// each runs a query and calls row for every result row, retrying the whole
// query on SQLITE_BUSY (start is called before each attempt, to reset
// what the rows fill in).
func (d *db) each(ctx context.Context, start func(), row func(*sql.Rows) error, query string, args ...any) error {
	return d.retry(ctx, func() error {
		start()
		return scanRows(ctx, d.sql, query, args, row)
	})
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// ---------------------------------------------------------------------------
// Operation store

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
	if err := memory.CheckCreate(op, plan); err != nil {
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
	return memory.DecodeStoredPlan(operationID, payload, fp)
}

// CompareAndSet implements reference.OperationStore with the semantics of
// memory.OperationStore.CompareAndSet, in one IMMEDIATE transaction.
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
	if !memory.MatchesExpected(stored, expected) {
		return false, nil
	}
	return false, reference.ValidateUpdate(stored, next)
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
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be positive", reference.ErrInvalidArgument, limit)
	}
	return s.query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE stage <> 'COMPLETED' AND disposition = ''
		ORDER BY updated_at, operation_id LIMIT ?`, limit)
}

// List implements reference.OperationStore.
func (s *OperationStore) List(ctx context.Context) ([]reference.Operation, error) {
	return s.query(ctx, `SELECT `+opColumns+` FROM operations ORDER BY operation_id`)
}

// SpacePlans implements reference.SpacePlanReader: every plan of a space in
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
		if p, err := memory.DecodeStoredPlan(id, payload, fp); err != nil {
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
	if err := memory.CheckClaim(holder, ttlMillis); err != nil {
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

// ---------------------------------------------------------------------------
// Document state store

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
	if blank(operationID) {
		return reference.DocumentState{}, false, fmt.Errorf("%w: operationId is blank", reference.ErrInvalidArgument)
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
	if err := memory.CheckStateCAS(expected, next); err != nil {
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
	if err := reference.CheckKey(state.Space, state.DocumentID); err != nil {
		return err
	}
	if state.Revision <= 0 {
		return fmt.Errorf("document %s/%s: %w: version revision %d must be positive", state.Space, state.DocumentID, reference.ErrInvalidRevision, state.Revision)
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

// SpaceVersions implements reference.SpaceVersionReader: one statement.
func (s *StateStore) SpaceVersions(ctx context.Context, space string) (map[string][]reference.DocumentState, error) {
	all, err := s.many(ctx, `SELECT payload FROM document_versions WHERE space = ? ORDER BY document_id, revision`, space)
	if err != nil {
		return nil, err
	}
	return memory.ByDocument(all), nil
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
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	return s.many(ctx, `SELECT payload FROM document_states WHERE space = ? ORDER BY document_id`, space)
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if blank(space) {
		return false, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
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

// ---------------------------------------------------------------------------
// Entity registry

// Registry is a reference.EntityRegistry on SQLite: entity_names is unique
// on (space, normalised type, normalised name).
type Registry struct{ d *db }

// views returns the registered entities whose ids idsQuery selects, each
// with its names, ordered by node id: one statement, so one snapshot.
func (g *Registry) views(ctx context.Context, space string, idsQuery string, args ...any) ([]reference.RegisteredEntity, error) {
	q := `WITH ids(node_id) AS (` + idsQuery + `)
		SELECT ids.node_id, coalesce(e.entity_type, ''), coalesce(e.canonical_name, ''), coalesce(e.properties_json, ''), n.normalized_name
		FROM ids
		LEFT JOIN entities e ON e.space = ? AND e.node_id = ids.node_id
		LEFT JOIN entity_names n ON n.space = ? AND n.node_id = ids.node_id
		ORDER BY ids.node_id, n.normalized_name`
	args = append(args, space, space)
	var out []reference.RegisteredEntity
	err := g.d.each(ctx, func() { out = make([]reference.RegisteredEntity, 0) }, func(rows *sql.Rows) error {
		var id, typ, canonical, props string
		var name sql.NullString
		if err := rows.Scan(&id, &typ, &canonical, &props, &name); err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].NodeID != id {
			re := reference.RegisteredEntity{Space: space, NodeID: id, Type: typ, CanonicalName: canonical}
			p, err := sqlgraph.DecodeProps(props)
			if err != nil {
				return err
			}
			if len(p) > 0 {
				re.Properties = p
			}
			out = append(out, re)
		}
		re := &out[len(out)-1]
		if name.Valid && (len(re.Names) == 0 || re.Names[len(re.Names)-1] != name.String) {
			re.Names = append(re.Names, name.String)
		}
		return nil
	}, q, args...)
	return out, err
}

// MatchNodeIDs implements reference.BatchMatcher: every query in one
// statement.
func (g *Registry) MatchNodeIDs(ctx context.Context, space string, queries []reference.EntityQuery) ([][]string, error) {
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	type key struct {
		i         int
		typ, name string
	}
	var keys []key
	for i, q := range queries {
		typ, seen := reference.Normalize(q.Type), map[string]bool{}
		for _, n := range q.Names {
			if nn := reference.Normalize(n); nn != "" && !seen[nn] {
				seen[nn] = true
				keys = append(keys, key{i, typ, nn})
			}
		}
	}
	out := make([][]string, len(queries))
	for i := range out {
		out[i] = []string{}
	}
	for part := range slices.Chunk(keys, maxRowsPerStatement) {
		args := make([]any, 0, 3*len(part)+1)
		for _, k := range part {
			args = append(args, k.i, k.typ, k.name)
		}
		args = append(args, space)
		err := g.d.each(ctx, func() {}, func(rows *sql.Rows) error {
			var i int
			var id string
			err := rows.Scan(&i, &id)
			out[i] = append(out[i], id) // a retry may add an id twice: compacted below
			return err
		}, `WITH q(i, entity_type, normalized_name) AS (VALUES `+placeholders(len(part), 3)+`)
			SELECT q.i, n.node_id FROM q
			JOIN entity_names n ON n.space = ? AND n.entity_type = q.entity_type AND n.normalized_name = q.normalized_name`, args...)
		if err != nil {
			return nil, err
		}
	}
	for i := range out {
		slices.Sort(out[i])
		out[i] = slices.Compact(out[i])
	}
	return out, nil
}

// FindMatches implements reference.EntityRegistry. The result is ordered by
// NodeID.
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	var norm []any
	seen := map[string]bool{}
	for _, n := range names {
		if nn := reference.Normalize(n); nn != "" && !seen[nn] {
			seen[nn] = true
			norm = append(norm, nn)
		}
	}
	if len(norm) == 0 {
		return []reference.RegisteredEntity{}, nil
	}
	q := `SELECT DISTINCT node_id FROM entity_names WHERE space = ? AND entity_type = ? AND normalized_name IN (?` +
		strings.Repeat(", ?", len(norm)-1) + `) ORDER BY node_id`
	return g.views(ctx, space, q, append([]any{space, reference.Normalize(entityType)}, norm...)...)
}

// SaveAll implements reference.EntityRegistry in one IMMEDIATE transaction.
func (g *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	if blank(space) {
		return fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	type bound struct{ typ, name string }
	batch := map[bound]string{}
	for _, r := range regs {
		if err := memory.CheckRegistration(space, r); err != nil {
			return err
		}
		typ := reference.Normalize(r.Type)
		for _, n := range memory.NormalizedNames(r) {
			k := bound{typ, n}
			if id, ok := batch[k]; ok && id != r.NodeID {
				return fmt.Errorf("name %q (type %s) is bound to %s and %s in one batch: %w", n, typ, id, r.NodeID, reference.ErrRegistryConflict)
			}
			batch[k] = r.NodeID
		}
	}
	if len(regs) == 0 {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(batch), func(a, b bound) int { return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.name, b.name)) })
	return g.d.tx(ctx, func(tx *sql.Tx) error {
		// Names already bound elsewhere refuse the whole batch.
		for part := range slices.Chunk(keys, maxRowsPerStatement) {
			args := []any{space}
			for _, k := range part {
				args = append(args, k.typ, k.name)
			}
			rows, err := tx.QueryContext(ctx, `SELECT entity_type, normalized_name, node_id FROM entity_names
				WHERE space = ? AND (entity_type, normalized_name) IN (VALUES `+placeholders(len(part), 2)+`)`, args...)
			if err != nil {
				return err
			}
			var conflicts []string
			for rows.Next() {
				var k bound
				var cur string
				if err := rows.Scan(&k.typ, &k.name, &cur); err != nil {
					rows.Close()
					return err
				}
				if id := batch[k]; cur != id {
					conflicts = append(conflicts, fmt.Sprintf("name %q (type %s) is bound to %s, not %s", k.name, k.typ, cur, id))
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(conflicts) > 0 {
				slices.Sort(conflicts)
				return fmt.Errorf("%s: %w", conflicts[0], reference.ErrRegistryConflict)
			}
		}
		// Entities: created with their first registration; later ones
		// add properties (a JSON merge of string values).
		for part := range slices.Chunk(regs, maxRowsPerStatement) {
			args := make([]any, 0, 5*len(part))
			for _, r := range part {
				p, err := sqlgraph.EncodeProps(r.Properties)
				if err != nil {
					return err
				}
				args = append(args, space, r.NodeID, strings.TrimSpace(r.Type), strings.TrimSpace(r.CanonicalName), p)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO entities (space, node_id, entity_type, canonical_name, properties_json)
				VALUES `+placeholders(len(part), 5)+`
				ON CONFLICT (space, node_id) DO UPDATE SET properties_json = json_patch(entities.properties_json, excluded.properties_json)
				WHERE excluded.properties_json <> '{}'`, args...); err != nil {
				return err
			}
		}
		for part := range slices.Chunk(keys, maxRowsPerStatement) {
			args := make([]any, 0, 4*len(part))
			for _, k := range part {
				args = append(args, space, k.typ, k.name, batch[k])
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO entity_names (space, entity_type, normalized_name, node_id)
				VALUES `+placeholders(len(part), 4)+` ON CONFLICT (space, entity_type, normalized_name) DO NOTHING`, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// maxRowsPerStatement bounds the rows of one multi-row statement (SQLite
// limits the parameters of a statement).
const maxRowsPerStatement = 200

// placeholders returns n parenthesised groups of k parameters: "(?, ?), (?, ?)".
func placeholders(n, k int) string {
	group := "(?" + strings.Repeat(", ?", k-1) + ")"
	return group + strings.Repeat(", "+group, n-1)
}

// List implements reference.EntityRegistry.
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	return g.views(ctx, space, `SELECT node_id FROM entities WHERE space = ? ORDER BY node_id`, space)
}

// ---------------------------------------------------------------------------
// Graph writer

// Writer is a reference.GraphWriter on SQLite. MERGE is an UPDATE of every
// row with the identity (patching the JSON properties) followed by an
// INSERT if none was updated, in one IMMEDIATE transaction; with
// Options.CreateInsteadOfMerge it always INSERTs.
type Writer struct {
	d               *db
	sqlgraph.Reader // ReadGraph, ReadGraphAndDuplicates, Duplicates
}

func newWriter(d *db) *Writer {
	w := &Writer{d: d}
	w.Reader = sqlgraph.Reader{Scan: w.scan}
	return w
}

// Apply implements reference.GraphWriter in one IMMEDIATE transaction: an
// edge with a missing endpoint rolls back all of m.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := memory.CheckMutation(space, m); err != nil {
		return err
	}
	create := w.d.opts.CreateInsteadOfMerge
	return w.d.tx(ctx, func(tx *sql.Tx) error {
		for _, id := range m.DeleteNodes {
			if _, err := tx.ExecContext(ctx, `DELETE FROM graph_edges WHERE space = ? AND (source = ? OR target = ?)`, space, id, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM graph_nodes WHERE space = ? AND node_id = ?`, space, id); err != nil {
				return err
			}
		}
		for _, k := range m.DeleteEdges {
			if _, err := tx.ExecContext(ctx, `DELETE FROM graph_edges WHERE space = ? AND source = ? AND type = ? AND target = ? AND rank = ?`,
				space, k.Source, k.Type, k.Target, k.Rank); err != nil {
				return err
			}
		}
		if create {
			return createAll(ctx, tx, space, m)
		}
		return upsertAll(ctx, tx, space, m)
	})
}

// upsertAll merges the node and edge upserts of m in a few statements
// whatever its size: which nodes and edges exist is read at once, the
// existing ones are patched together (a JSON merge of string values: keys
// added or overwritten, none removed), the new ones inserted together.
// Upserts of one id within m apply in order (the first label stays).
func upsertAll(ctx context.Context, tx *sql.Tx, space string, m reference.Mutation) error {
	nodes := mergeUpserts(m.UpsertNodes, func(n reference.NodeUpsert) string { return n.ID },
		func(into *reference.NodeUpsert, n reference.NodeUpsert) {
			into.Properties = mergeProps(into.Properties, n.Properties)
		})
	ids := make([]string, 0, len(nodes)+2*len(m.UpsertEdges))
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	for _, e := range m.UpsertEdges {
		ids = append(ids, e.Key.Source, e.Key.Target)
	}
	present, err := existingNodes(ctx, tx, space, ids)
	if err != nil {
		return err
	}
	var patchRows, insertRows [][]any
	for _, n := range nodes {
		p, err := sqlgraph.EncodeProps(n.Properties)
		if err != nil {
			return err
		}
		switch {
		case !present[n.ID]:
			insertRows = append(insertRows, []any{space, n.ID, n.Label, p})
			present[n.ID] = true
		case len(n.Properties) > 0:
			patchRows = append(patchRows, []any{n.ID, p})
		}
	}
	if err := execRows(ctx, tx, patchRows, `WITH v(id, p) AS (VALUES %s)
		UPDATE graph_nodes SET properties_json = json_patch(graph_nodes.properties_json, v.p) FROM v
		WHERE graph_nodes.space = ? AND graph_nodes.node_id = v.id`, space); err != nil {
		return err
	}
	if err := execRows(ctx, tx, insertRows, `INSERT INTO graph_nodes (space, node_id, label, properties_json) VALUES %s`); err != nil {
		return err
	}
	for _, e := range m.UpsertEdges {
		if !present[e.Key.Source] || !present[e.Key.Target] {
			return fmt.Errorf("space %s: edge %s: %w", space, e.Key, reference.ErrMissingEndpoint)
		}
	}
	edges := mergeUpserts(m.UpsertEdges, func(e reference.EdgeUpsert) reference.EdgeKey { return e.Key },
		func(into *reference.EdgeUpsert, e reference.EdgeUpsert) {
			into.Properties = mergeProps(into.Properties, e.Properties)
		})
	have, err := existingEdges(ctx, tx, space, edges)
	if err != nil {
		return err
	}
	patchRows, insertRows = nil, nil
	for _, e := range edges {
		k := e.Key
		p, err := sqlgraph.EncodeProps(e.Properties)
		if err != nil {
			return err
		}
		switch {
		case !have[k]:
			insertRows = append(insertRows, []any{space, k.Source, k.Type, k.Target, k.Rank, p})
		case len(e.Properties) > 0:
			patchRows = append(patchRows, []any{k.Source, k.Type, k.Target, k.Rank, p})
		}
	}
	if err := execRows(ctx, tx, patchRows, `WITH v(source, type, target, rank, p) AS (VALUES %s)
		UPDATE graph_edges SET properties_json = json_patch(graph_edges.properties_json, v.p) FROM v
		WHERE graph_edges.space = ? AND graph_edges.source = v.source AND graph_edges.type = v.type
		AND graph_edges.target = v.target AND graph_edges.rank = v.rank`, space); err != nil {
		return err
	}
	return execRows(ctx, tx, insertRows, `INSERT INTO graph_edges (space, source, type, target, rank, properties_json) VALUES %s`)
}

// createAll is the CREATE-instead-of-MERGE mutant: every upsert inserts a
// row, duplicates included.
func createAll(ctx context.Context, tx *sql.Tx, space string, m reference.Mutation) error {
	var rows [][]any
	ids := make([]string, 0, len(m.UpsertNodes)+2*len(m.UpsertEdges))
	for _, n := range m.UpsertNodes {
		p, err := sqlgraph.EncodeProps(n.Properties)
		if err != nil {
			return err
		}
		rows = append(rows, []any{space, n.ID, n.Label, p})
	}
	if err := execRows(ctx, tx, rows, `INSERT INTO graph_nodes (space, node_id, label, properties_json) VALUES %s`); err != nil {
		return err
	}
	for _, e := range m.UpsertEdges {
		ids = append(ids, e.Key.Source, e.Key.Target)
	}
	present, err := existingNodes(ctx, tx, space, ids)
	if err != nil {
		return err
	}
	rows = nil
	for _, e := range m.UpsertEdges {
		if !present[e.Key.Source] || !present[e.Key.Target] {
			return fmt.Errorf("space %s: edge %s: %w", space, e.Key, reference.ErrMissingEndpoint)
		}
		p, err := sqlgraph.EncodeProps(e.Properties)
		if err != nil {
			return err
		}
		rows = append(rows, []any{space, e.Key.Source, e.Key.Type, e.Key.Target, e.Key.Rank, p})
	}
	return execRows(ctx, tx, rows, `INSERT INTO graph_edges (space, source, type, target, rank, properties_json) VALUES %s`)
}

// mergeUpserts folds upserts of one identity into the first, in order.
func mergeUpserts[T any, K comparable](xs []T, key func(T) K, merge func(into *T, x T)) []T {
	out := make([]T, 0, len(xs))
	at := make(map[K]int, len(xs))
	for _, x := range xs {
		if i, ok := at[key(x)]; ok {
			merge(&out[i], x)
			continue
		}
		at[key(x)] = len(out)
		out = append(out, x)
	}
	return out
}

// mergeProps returns a copy of a with b's keys added or overwritten.
func mergeProps(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// execRows runs query (whose %s takes the VALUES groups) over rows, in
// statements of at most maxRowsPerStatement rows; after are the
// parameters that follow the groups.
func execRows(ctx context.Context, tx *sql.Tx, rows [][]any, query string, after ...any) error {
	for part := range slices.Chunk(rows, maxRowsPerStatement) {
		args := make([]any, 0, len(part)*len(part[0])+len(after))
		for _, r := range part {
			args = append(args, r...)
		}
		args = append(args, after...)
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(query, placeholders(len(part), len(part[0]))), args...); err != nil {
			return err
		}
	}
	return nil
}

// existingNodes reports which of ids are nodes of space.
func existingNodes(ctx context.Context, tx *sql.Tx, space string, ids []string) (map[string]bool, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	present := make(map[string]bool, len(ids))
	for part := range slices.Chunk(ids, maxRowsPerStatement) {
		args := []any{space}
		for _, id := range part {
			args = append(args, id)
		}
		err := scanRows(ctx, tx, `SELECT node_id FROM graph_nodes WHERE space = ? AND node_id IN (?`+strings.Repeat(", ?", len(part)-1)+`)`, args,
			func(rows *sql.Rows) error {
				var id string
				err := rows.Scan(&id)
				present[id] = true
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return present, nil
}

// existingEdges reports which of edges' keys are edges of space.
func existingEdges(ctx context.Context, tx *sql.Tx, space string, edges []reference.EdgeUpsert) (map[reference.EdgeKey]bool, error) {
	have := make(map[reference.EdgeKey]bool, len(edges))
	for part := range slices.Chunk(edges, maxRowsPerStatement) {
		args := []any{space}
		for _, e := range part {
			args = append(args, e.Key.Source, e.Key.Type, e.Key.Target, e.Key.Rank)
		}
		err := scanRows(ctx, tx, `SELECT source, type, target, rank FROM graph_edges
			WHERE space = ? AND (source, type, target, rank) IN (VALUES `+placeholders(len(part), 4)+`)`, args,
			func(rows *sql.Rows) error {
				var k reference.EdgeKey
				err := rows.Scan(&k.Source, &k.Type, &k.Target, &k.Rank)
				have[k] = true
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return have, nil
}

// scanRows runs query and calls row for each result row.
func scanRows(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args []any, row func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scan reads every node and edge row of a space, in insertion order, in one
// read transaction; reset is called before each (re)try.
func (w *Writer) scan(ctx context.Context, space string, reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error {
	return w.d.retry(ctx, func() error {
		reset()
		tx, err := w.d.sql.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := scanRows(ctx, tx, `SELECT node_id, label, properties_json FROM graph_nodes WHERE space = ? ORDER BY seq`, []any{space},
			func(rows *sql.Rows) error {
				var id, label, props string
				if err := rows.Scan(&id, &label, &props); err != nil {
					return err
				}
				return node(id, label, props)
			}); err != nil {
			return err
		}
		return scanRows(ctx, tx, `SELECT source, type, target, rank, properties_json FROM graph_edges WHERE space = ? ORDER BY seq`, []any{space},
			func(rows *sql.Rows) error {
				var k reference.EdgeKey
				var props string
				if err := rows.Scan(&k.Source, &k.Type, &k.Target, &k.Rank, &props); err != nil {
					return err
				}
				return edge(k, props)
			})
	})
}

// ---------------------------------------------------------------------------
// Lock provider

// Locks is a reference.LockProvider on SQLite; a document's lease row keeps
// its last fencing token across releases.
type Locks struct{ d *db }

// TryAcquire implements reference.LockProvider in one IMMEDIATE transaction.
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := memory.CheckLease(space, documentID, holder, ttlMillis); err != nil {
		return reference.Lease{}, false, err
	}
	l := reference.Lease{Space: space, DocumentID: documentID, Holder: holder, ExpiresAt: now + ttlMillis}
	// One statement: a lease that is free, expired or already this
	// holder's is taken (a new token unless it is this holder's live
	// lease, which is extended); another holder's live lease is left alone
	// and no row comes back.
	err := p.d.retry(ctx, func() error {
		l.Token = 0
		err := p.d.sql.QueryRowContext(ctx, `INSERT INTO leases (space, document_id, holder, token, expires_at) VALUES (?, ?, ?, 1, ?)
			ON CONFLICT (space, document_id) DO UPDATE SET
				token = CASE WHEN leases.holder = excluded.holder AND leases.expires_at > ? THEN leases.token ELSE leases.token + 1 END,
				holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leases.expires_at <= ? OR leases.holder = excluded.holder
			RETURNING token`, space, documentID, holder, l.ExpiresAt, now, now).Scan(&l.Token)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return reference.Lease{}, false, err
	}
	if l.Token > 0 {
		return l, true, nil
	}
	cur := reference.Lease{Space: space, DocumentID: documentID}
	err = p.d.retry(ctx, func() error {
		return p.d.sql.QueryRowContext(ctx, `SELECT holder, token, expires_at FROM leases WHERE space = ? AND document_id = ?`,
			space, documentID).Scan(&cur.Holder, &cur.Token, &cur.ExpiresAt)
	})
	if err != nil {
		return reference.Lease{}, false, err
	}
	return cur, false, nil
}

// Renew implements reference.LockProvider with one conditional UPDATE.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := memory.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	n, err := p.d.affected(ctx, `UPDATE leases SET expires_at = ?
		WHERE space = ? AND document_id = ? AND holder = ? AND token = ? AND expires_at > ?`,
		now+ttlMillis, l.Space, l.DocumentID, l.Holder, l.Token, now)
	if err != nil {
		return reference.Lease{}, err
	}
	if n != 1 {
		return reference.Lease{}, memory.LeaseLost(l, fmt.Sprintf("not held live at %d", now))
	}
	l.ExpiresAt = now + ttlMillis
	return l, nil
}

// Release implements reference.LockProvider with one conditional DELETE.
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	n, err := p.d.affected(ctx, `UPDATE leases SET holder = '', expires_at = 0
		WHERE space = ? AND document_id = ? AND holder = ? AND token = ? AND holder <> ''`,
		l.Space, l.DocumentID, l.Holder, l.Token)
	if err != nil {
		return err
	}
	if n != 1 {
		return memory.LeaseLost(l, "not held")
	}
	return nil
}
