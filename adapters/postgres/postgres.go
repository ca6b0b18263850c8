// Package postgres implements the reference store interfaces on PostgreSQL
// with pgx/v5 (pgxpool): the operation store, the document-state store, the
// entity registry, a PostgreSQL-backed graph writer and the lease provider.
//
// Every table carries the space (operations are keyed by their globally
// unique operationId and carry a space column), so many test cases may share
// one database. The schema is created by versioned, idempotent migrations
// applied on Open under a transaction-scoped advisory lock, so several
// processes may open the same database at once. Compare-and-set operations
// are conditional UPDATEs (or INSERT ... ON CONFLICT DO NOTHING), checked by
// the number of rows affected; multi-statement writes run in transactions
// that are retried on serialization failures and deadlocks.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlgraph"
	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Options configures the PostgreSQL stores.
type Options struct {
	// CreateInsteadOfMerge makes the graph writer INSERT a new node or edge
	// row on every upsert instead of merging into the existing one: a
	// mutant that produces duplicates.
	CreateInsteadOfMerge bool
	// LostCommitIsFailure is a mutant: a write whose reply was lost is
	// reported as a definite failure instead of an unknown outcome.
	LostCommitIsFailure bool
}

// DuplicateReporter is implemented by graph writers that can report node ids
// or edge keys stored more than once.
type DuplicateReporter = memory.DuplicateReporter

// db is the shared pool of one Open call.
type db struct {
	pool     *pgxpool.Pool
	opts     Options
	password string
}

// closer closes the pool of one Open call.
type closer struct{ d *db }

// Close closes the connection pool. Leases and claims are rows with an
// expiry time: closing the pool does not end them.
func (c *closer) Close() error {
	c.d.pool.Close()
	return nil
}

var (
	_ reference.OperationStore     = (*OperationStore)(nil)
	_ reference.DocumentStateStore = (*StateStore)(nil)
	_ reference.EntityRegistry     = (*Registry)(nil)
	_ reference.GraphWriter        = (*Writer)(nil)
	_ reference.LockProvider       = (*Locks)(nil)
	_ DuplicateReporter            = (*Writer)(nil)
)

// Open connects to the PostgreSQL server named by dsn (a URL or key=value
// connection string understood by pgx), applies the schema migrations and
// returns every store on one connection pool. Close the result's Closer
// when done. Errors never contain the password of dsn.
func Open(ctx context.Context, dsn string, opts Options) (reference.Stores, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// ParseConfigError may quote the connection string.
		return reference.Stores{}, &Error{Op: "open", IDs: "dsn " + RedactDSN(dsn), Err: errors.New(redact(err.Error(), "")), permanent: true}
	}
	d := &db{opts: opts, password: cfg.ConnConfig.Password}
	ids := fmt.Sprintf("host %s port %d database %s user %s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return reference.Stores{}, d.wrap("open", ids, err)
	}
	d.pool = pool
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return reference.Stores{}, d.wrapConnect("open", ids, err)
	}
	if err := d.migrate(ctx); err != nil {
		pool.Close()
		return reference.Stores{}, d.wrapConnect("migrate", ids, err)
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

// wrapConnect wraps an error of Open; a failure to connect that is not a
// server error (refused, unreachable) is transient.
func (d *db) wrapConnect(op, ids string, err error) error {
	w := d.wrap(op, ids, err)
	var e *Error
	if errors.As(w, &e) {
		return w
	}
	return &Error{Op: op, IDs: ids, Code: SQLState(err), Err: err, permanent: IsPermanentCode(SQLState(err)), secret: d.password}
}

// ---------------------------------------------------------------------------
// Schema migrations

// MigrationsTable records the applied schema migrations.
const MigrationsTable = "crashmatrix_schema_migrations"

// migration is one schema version: its statements run in one transaction.
type migration struct {
	version int
	stmts   []string
}

// migrations are applied in order; never edit a released one, append a
// new version instead.
//
// Ids that results are ordered by use the "C" collation: byte order, the
// order Go compares strings in, whatever the database's default collation.
var migrations = []migration{
	{1, []string{
		`CREATE TABLE IF NOT EXISTS crashmatrix_operations (
			operation_id      text    COLLATE "C" NOT NULL PRIMARY KEY,
			space             text    NOT NULL,
			document_id       text    NOT NULL,
			expected_revision bigint  NOT NULL,
			plan_fingerprint  text    NOT NULL,
			stage             text    NOT NULL,
			updated_at        bigint  NOT NULL,
			failure_reason    text    NOT NULL DEFAULT '',
			attempts          integer NOT NULL DEFAULT 0,
			disposition       text    NOT NULL DEFAULT '',
			superseded_by     text    NOT NULL DEFAULT '',
			claim_holder      text    NOT NULL DEFAULT '',
			claim_expires_at  bigint  NOT NULL DEFAULT 0,
			plan              bytea   NOT NULL
		)`,
		// The recovery scan: unfinished rows only, in scan order.
		`CREATE INDEX IF NOT EXISTS crashmatrix_operations_recovery_idx
			ON crashmatrix_operations (updated_at, operation_id)
			WHERE stage <> 'COMPLETED' AND disposition = ''`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_operations_document_idx
			ON crashmatrix_operations (space, document_id)`,
		`CREATE TABLE IF NOT EXISTS crashmatrix_document_states (
			space        text   NOT NULL,
			document_id  text   COLLATE "C" NOT NULL,
			revision     bigint NOT NULL,
			operation_id text   NOT NULL,
			status       text   NOT NULL,
			payload      bytea  NOT NULL,
			PRIMARY KEY (space, document_id)
		)`,
		`CREATE TABLE IF NOT EXISTS crashmatrix_document_versions (
			space        text   NOT NULL,
			document_id  text   NOT NULL,
			revision     bigint NOT NULL,
			operation_id text   NOT NULL,
			payload      bytea  NOT NULL,
			PRIMARY KEY (space, document_id, revision)
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_document_versions_operation_idx
			ON crashmatrix_document_versions (space, document_id, operation_id)`,
		`CREATE TABLE IF NOT EXISTS crashmatrix_entities (
			space           text NOT NULL,
			node_id         text COLLATE "C" NOT NULL,
			entity_type     text NOT NULL,
			canonical_name  text NOT NULL,
			properties_json text NOT NULL DEFAULT '{}',
			PRIMARY KEY (space, node_id)
		)`,
		// The registry's unique constraint: one node per (space,
		// normalised type, normalised name).
		`CREATE TABLE IF NOT EXISTS crashmatrix_entity_names (
			space           text NOT NULL,
			entity_type     text NOT NULL,
			normalized_name text COLLATE "C" NOT NULL,
			node_id         text COLLATE "C" NOT NULL,
			CONSTRAINT crashmatrix_entity_names_unique PRIMARY KEY (space, entity_type, normalized_name),
			FOREIGN KEY (space, node_id) REFERENCES crashmatrix_entities (space, node_id)
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_entity_names_node_idx
			ON crashmatrix_entity_names (space, node_id)`,
		// No unique constraint on the node and edge identities: the
		// CreateInsteadOfMerge mutant must be able to store duplicates.
		// Merges are serialised per space by an advisory lock instead.
		`CREATE TABLE IF NOT EXISTS crashmatrix_graph_nodes (
			seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			space           text NOT NULL,
			node_id         text NOT NULL,
			label           text NOT NULL,
			properties_json text NOT NULL DEFAULT '{}'
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_graph_nodes_id_idx
			ON crashmatrix_graph_nodes (space, node_id)`,
		`CREATE TABLE IF NOT EXISTS crashmatrix_graph_edges (
			seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			space           text   NOT NULL,
			source          text   NOT NULL,
			type            text   NOT NULL,
			target          text   NOT NULL,
			rank            bigint NOT NULL,
			properties_json text   NOT NULL DEFAULT '{}'
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_graph_edges_key_idx
			ON crashmatrix_graph_edges (space, source, type, target, rank)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_graph_edges_target_idx
			ON crashmatrix_graph_edges (space, target)`,
		// One row per document ever locked: last_token survives release
		// (holder = '') so fencing tokens strictly increase.
		`CREATE TABLE IF NOT EXISTS crashmatrix_leases (
			space       text   NOT NULL,
			document_id text   NOT NULL,
			holder      text   NOT NULL DEFAULT '',
			token       bigint NOT NULL DEFAULT 0,
			expires_at  bigint NOT NULL DEFAULT 0,
			last_token  bigint NOT NULL DEFAULT 0,
			PRIMARY KEY (space, document_id)
		)`,
	}},
}

// SchemaVersion is the latest schema version Open migrates to.
var SchemaVersion = migrations[len(migrations)-1].version

// migrateLockKey names the advisory lock taken around migrations; it is
// combined with the current schema so that databases with several
// crashmatrix schemas migrate independently.
const migrateLockKey = "crashmatrix-schema-migrations"

func (d *db) migrate(ctx context.Context) error {
	lock := `SELECT pg_advisory_xact_lock(hashtext($1 || current_schema()))`
	var latest int
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lock, migrateLockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+MigrationsTable+` (
			version    integer     NOT NULL PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+MigrationsTable).Scan(&latest)
	})
	if err != nil {
		return err
	}
	if latest > SchemaVersion {
		return &Error{Op: "migrate", Err: fmt.Errorf("database schema version %d is newer than this build's %d", latest, SchemaVersion), permanent: true}
	}
	for _, m := range migrations {
		if m.version <= latest {
			continue
		}
		err := d.tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lock, migrateLockKey); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+MigrationsTable+` WHERE version = $1)`, m.version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			for _, stmt := range m.stmts {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration %d: %w", m.version, err)
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+MigrationsTable+` (version, applied_at) VALUES ($1, now())`, m.version)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Transactions

const maxAttempts = 20

// tx runs f in a READ COMMITTED transaction, committing if f returns nil
// and rolling back otherwise. A serialization failure or deadlock (the
// transaction was rolled back by the server) runs it again, so f must be
// safe to repeat; any other error is returned as it is.
func (d *db) tx(ctx context.Context, f func(tx pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		err = pgx.BeginFunc(ctx, d.pool, f)
		if err == nil || !IsRetryableCode(SQLState(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 3 * time.Millisecond):
		}
	}
	return err
}

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// ---------------------------------------------------------------------------
// Operation store

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
	if err := memory.CheckCreate(op, plan); err != nil {
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
	return memory.DecodeStoredPlan(operationID, payload, fp)
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
		if p, err := memory.DecodeStoredPlan(id, payload, fp); err != nil {
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
// memory.OperationStore.CompareAndSet, as one conditional UPDATE on the
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
	if memory.MatchesExpected(stored, expected) {
		// Only the time check can have refused it.
		if err := reference.ValidateUpdate(stored, next); err != nil {
			return false, err
		}
	}
	return false, nil
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
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be positive", reference.ErrInvalidArgument, limit)
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
	if err := memory.CheckClaim(holder, ttlMillis); err != nil {
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

// ---------------------------------------------------------------------------
// Document state store

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
	if blank(operationID) {
		return reference.DocumentState{}, false, fmt.Errorf("%w: operationId is blank", reference.ErrInvalidArgument)
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
	if err := memory.CheckStateCAS(expected, next); err != nil {
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
	return memory.ByDocument(all), nil
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
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	return s.many(ctx, "states.list", "space "+space,
		`SELECT payload FROM crashmatrix_document_states WHERE space = $1 ORDER BY document_id`, space)
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if blank(space) {
		return false, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
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

// ---------------------------------------------------------------------------
// Entity registry

// Registry is a reference.EntityRegistry on PostgreSQL: entity_names has a
// primary key (a unique constraint) on (space, normalised type, normalised
// name).
type Registry struct{ d *db }

func (g *Registry) view(ctx context.Context, q querier, space, nodeID string) (reference.RegisteredEntity, error) {
	re := reference.RegisteredEntity{Space: space, NodeID: nodeID}
	var props string
	err := q.QueryRow(ctx, `SELECT entity_type, canonical_name, properties_json FROM crashmatrix_entities WHERE space = $1 AND node_id = $2`,
		space, nodeID).Scan(&re.Type, &re.CanonicalName, &props)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return re, err
	}
	if p, err := sqlgraph.DecodeProps(props); err != nil {
		return re, err
	} else if len(p) > 0 {
		re.Properties = p
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT normalized_name FROM crashmatrix_entity_names WHERE space = $1 AND node_id = $2
		ORDER BY 1`, space, nodeID)
	if err != nil {
		return re, err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return re, err
		}
		re.Names = append(re.Names, n)
	}
	return re, rows.Err()
}

// views reads the entities whose ids idsQuery selects, in one REPEATABLE
// READ snapshot.
func (g *Registry) views(ctx context.Context, op, space string, idsQuery string, args ...any) ([]reference.RegisteredEntity, error) {
	var out []reference.RegisteredEntity
	err := pgx.BeginTxFunc(ctx, g.d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = make([]reference.RegisteredEntity, 0)
		rows, err := tx.Query(ctx, idsQuery, args...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			re, err := g.view(ctx, tx, space, id)
			if err != nil {
				return err
			}
			out = append(out, re)
		}
		return nil
	})
	if err != nil {
		return nil, g.d.wrap(op, "space "+space, err)
	}
	return out, nil
}

// MatchNodeIDs implements reference.BatchMatcher: every query in one
// statement.
func (g *Registry) MatchNodeIDs(ctx context.Context, space string, queries []reference.EntityQuery) ([][]string, error) {
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	var idx []int32
	var types, names []string
	for i, q := range queries {
		typ, seen := reference.Normalize(q.Type), map[string]bool{}
		for _, n := range q.Names {
			if nn := reference.Normalize(n); nn != "" && !seen[nn] {
				seen[nn] = true
				idx, types, names = append(idx, int32(i)), append(types, typ), append(names, nn)
			}
		}
	}
	out := make([][]string, len(queries))
	for i := range out {
		out[i] = []string{}
	}
	if len(idx) == 0 {
		return out, nil
	}
	rows, err := g.d.pool.Query(ctx, `SELECT DISTINCT q.i, n.node_id
		FROM unnest($2::int[], $3::text[], $4::text[]) AS q(i, entity_type, normalized_name)
		JOIN crashmatrix_entity_names n ON n.space = $1 AND n.entity_type = q.entity_type AND n.normalized_name = q.normalized_name
		ORDER BY 1, 2`, space, idx, types, names)
	if err != nil {
		return nil, g.d.wrap("registry.matchNodeIDs", "space "+space, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int32
		var id string
		if err := rows.Scan(&i, &id); err != nil {
			return nil, g.d.wrap("registry.matchNodeIDs", "space "+space, err)
		}
		out[i] = append(out[i], id)
	}
	if err := rows.Err(); err != nil {
		return nil, g.d.wrap("registry.matchNodeIDs", "space "+space, err)
	}
	return out, nil
}

// FindMatches implements reference.EntityRegistry. The result is ordered by
// NodeID.
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	var norm []string
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
	return g.views(ctx, "registry.findMatches", space, `SELECT DISTINCT node_id FROM crashmatrix_entity_names
		WHERE space = $1 AND entity_type = $2 AND normalized_name = ANY($3) ORDER BY 1`,
		space, reference.Normalize(entityType), norm)
}

// SaveAll implements reference.EntityRegistry in one transaction: every
// name is claimed with INSERT ... ON CONFLICT DO UPDATE ... RETURNING
// node_id, which waits for a concurrent claimant and returns the winner's
// node id; a name bound to another node rolls everything back with
// ErrRegistryConflict. Names are claimed in sorted order to avoid
// deadlocks (which are retried anyway).
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
	keys := make([]bound, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].typ != keys[j].typ {
			return keys[i].typ < keys[j].typ
		}
		return keys[i].name < keys[j].name
	})
	// Entities in node-id order, merged per node.
	type ent struct {
		typ, canonical string
		props          map[string]string
	}
	ents := map[string]*ent{}
	var nodeIDs []string
	for _, r := range regs {
		e := ents[r.NodeID]
		if e == nil {
			e = &ent{typ: strings.TrimSpace(r.Type), canonical: strings.TrimSpace(r.CanonicalName), props: map[string]string{}}
			ents[r.NodeID] = e
			nodeIDs = append(nodeIDs, r.NodeID)
		}
		maps.Copy(e.props, r.Properties)
	}
	sort.Strings(nodeIDs)
	err := g.d.tx(ctx, func(tx pgx.Tx) error {
		for _, id := range nodeIDs {
			e := ents[id]
			p, err := sqlgraph.EncodeProps(e.props)
			if err != nil {
				return err
			}
			var stored string
			if err := tx.QueryRow(ctx, `INSERT INTO crashmatrix_entities AS t (space, node_id, entity_type, canonical_name, properties_json)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (space, node_id) DO UPDATE SET properties_json = t.properties_json
				RETURNING t.properties_json`, space, id, e.typ, e.canonical, p).Scan(&stored); err != nil {
				return err
			}
			if len(e.props) > 0 && stored != p {
				m, err := sqlgraph.DecodeProps(stored)
				if err != nil {
					return err
				}
				maps.Copy(m, e.props)
				merged, err := sqlgraph.EncodeProps(m)
				if err != nil {
					return err
				}
				if merged != stored {
					if _, err := tx.Exec(ctx, `UPDATE crashmatrix_entities SET properties_json = $3 WHERE space = $1 AND node_id = $2`,
						space, id, merged); err != nil {
						return err
					}
				}
			}
		}
		for _, k := range keys {
			id := batch[k]
			var cur string
			if err := tx.QueryRow(ctx, `INSERT INTO crashmatrix_entity_names AS t (space, entity_type, normalized_name, node_id)
				VALUES ($1, $2, $3, $4)
				ON CONFLICT (space, entity_type, normalized_name) DO UPDATE SET node_id = t.node_id
				RETURNING t.node_id`, space, k.typ, k.name, id).Scan(&cur); err != nil {
				return err
			}
			if cur != id {
				return fmt.Errorf("space %s: name %q (type %s) is bound to %s, not %s: %w", space, k.name, k.typ, cur, id, reference.ErrRegistryConflict)
			}
		}
		return nil
	})
	if SQLState(err) == "23505" {
		return fmt.Errorf("space %s: %w: %w", space, reference.ErrRegistryConflict, g.d.wrap("registry.saveAll", "space "+space, err))
	}
	return g.d.wrap("registry.saveAll", "space "+space, err)
}

// List implements reference.EntityRegistry.
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	return g.views(ctx, "registry.list", space,
		`SELECT node_id FROM crashmatrix_entities WHERE space = $1 ORDER BY 1`, space)
}

// ---------------------------------------------------------------------------
// Graph writer

// Writer is a reference.GraphWriter on PostgreSQL tables. There is no
// unique constraint on node and edge identities; instead every Apply runs
// in one transaction holding a per-space advisory lock, and MERGE is an
// UPDATE of every row with the identity (patching the JSON properties)
// followed by an INSERT if none was updated. With
// Options.CreateInsteadOfMerge it always INSERTs (a mutant).
type Writer struct {
	d               *db
	sqlgraph.Reader // ReadGraph, ReadGraphAndDuplicates, Duplicates
}

func newWriter(d *db) *Writer {
	w := &Writer{d: d}
	w.Reader = sqlgraph.Reader{Scan: w.scan}
	return w
}

func (w *Writer) patch(ctx context.Context, tx pgx.Tx, sel, upd string, props map[string]string, selArgs ...any) (int, error) {
	rows, err := tx.Query(ctx, sel, selArgs...)
	if err != nil {
		return 0, err
	}
	type row struct {
		seq   int64
		props string
	}
	var found []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.props); err != nil {
			rows.Close()
			return 0, err
		}
		found = append(found, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(props) == 0 {
		return len(found), nil
	}
	for _, r := range found {
		m, err := sqlgraph.DecodeProps(r.props)
		if err != nil {
			return 0, err
		}
		maps.Copy(m, props)
		p, err := sqlgraph.EncodeProps(m)
		if err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, upd, p, r.seq); err != nil {
			return 0, err
		}
	}
	return len(found), nil
}

const graphLockKey = "crashmatrix-graph:"

// Apply implements reference.GraphWriter in one transaction serialised per
// space by pg_advisory_xact_lock: an edge with a missing endpoint rolls back
// all of m.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := memory.CheckMutation(space, m); err != nil {
		return err
	}
	create := w.d.opts.CreateInsteadOfMerge
	err := w.d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1 || current_schema() || $2))`, graphLockKey, space); err != nil {
			return err
		}
		for _, id := range m.DeleteNodes {
			if _, err := tx.Exec(ctx, `DELETE FROM crashmatrix_graph_edges WHERE space = $1 AND (source = $2 OR target = $2)`, space, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2`, space, id); err != nil {
				return err
			}
		}
		for _, k := range m.DeleteEdges {
			if _, err := tx.Exec(ctx, `DELETE FROM crashmatrix_graph_edges WHERE space = $1 AND source = $2 AND type = $3 AND target = $4 AND rank = $5`,
				space, k.Source, k.Type, k.Target, k.Rank); err != nil {
				return err
			}
		}
		for _, n := range m.UpsertNodes {
			found := 0
			if !create {
				var err error
				found, err = w.patch(ctx, tx, `SELECT seq, properties_json FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2 ORDER BY seq`,
					`UPDATE crashmatrix_graph_nodes SET properties_json = $1 WHERE seq = $2`, n.Properties, space, n.ID)
				if err != nil {
					return err
				}
			}
			if found == 0 {
				p, err := sqlgraph.EncodeProps(n.Properties)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO crashmatrix_graph_nodes (space, node_id, label, properties_json) VALUES ($1, $2, $3, $4)`,
					space, n.ID, n.Label, p); err != nil {
					return err
				}
			}
		}
		for _, e := range m.UpsertEdges {
			for _, id := range []string{e.Key.Source, e.Key.Target} {
				var ok bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2)`,
					space, id).Scan(&ok); err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("space %s: edge %s: %w", space, e.Key, reference.ErrMissingEndpoint)
				}
			}
		}
		for _, e := range m.UpsertEdges {
			k := e.Key
			found := 0
			if !create {
				var err error
				found, err = w.patch(ctx, tx, `SELECT seq, properties_json FROM crashmatrix_graph_edges
					WHERE space = $1 AND source = $2 AND type = $3 AND target = $4 AND rank = $5 ORDER BY seq`,
					`UPDATE crashmatrix_graph_edges SET properties_json = $1 WHERE seq = $2`, e.Properties, space, k.Source, k.Type, k.Target, k.Rank)
				if err != nil {
					return err
				}
			}
			if found == 0 {
				p, err := sqlgraph.EncodeProps(e.Properties)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO crashmatrix_graph_edges (space, source, type, target, rank, properties_json)
					VALUES ($1, $2, $3, $4, $5, $6)`, space, k.Source, k.Type, k.Target, k.Rank, p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return w.d.wrap("graph.apply", fmt.Sprintf("space %s operation %s", space, m.OperationID), err)
}

// scan reads every node and edge row of a space, in insertion order, in one
// REPEATABLE READ snapshot.
func (w *Writer) scan(ctx context.Context, space string, reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error {
	err := pgx.BeginTxFunc(ctx, w.d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		reset()
		rows, err := tx.Query(ctx, `SELECT node_id, label, properties_json FROM crashmatrix_graph_nodes WHERE space = $1 ORDER BY seq`, space)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, label, props string
			if err := rows.Scan(&id, &label, &props); err != nil {
				rows.Close()
				return err
			}
			if err := node(id, label, props); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT source, type, target, rank, properties_json FROM crashmatrix_graph_edges WHERE space = $1 ORDER BY seq`, space)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k reference.EdgeKey
			var props string
			if err := rows.Scan(&k.Source, &k.Type, &k.Target, &k.Rank, &props); err != nil {
				return err
			}
			if err := edge(k, props); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return w.d.wrap("graph.read", "space "+space, err)
}

// ---------------------------------------------------------------------------
// Lock provider

// Locks is a reference.LockProvider on PostgreSQL. A lease is a row with an
// expiry time (passed-in unix milliseconds), not a session lock: closing the
// pool or losing the connection does not end it, expiry does. last_token
// keeps the last fencing token per document across releases.
type Locks struct{ d *db }

func leaseIDs(space, documentID, holder string) string {
	return "lease " + space + "/" + documentID + " holder " + holder
}

// TryAcquire implements reference.LockProvider in one transaction that
// locks the document's row (created if absent) with SELECT ... FOR UPDATE.
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := memory.CheckLease(space, documentID, holder, ttlMillis); err != nil {
		return reference.Lease{}, false, err
	}
	var out reference.Lease
	var ok bool
	err := p.d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO crashmatrix_leases (space, document_id) VALUES ($1, $2)
			ON CONFLICT (space, document_id) DO NOTHING`, space, documentID); err != nil {
			return err
		}
		cur := reference.Lease{Space: space, DocumentID: documentID}
		var last int64
		if err := tx.QueryRow(ctx, `SELECT holder, token, expires_at, last_token FROM crashmatrix_leases
			WHERE space = $1 AND document_id = $2 FOR UPDATE`, space, documentID).Scan(&cur.Holder, &cur.Token, &cur.ExpiresAt, &last); err != nil {
			return err
		}
		if cur.Holder != "" && cur.ExpiresAt > now {
			if cur.Holder != holder {
				out, ok = cur, false
				return nil
			}
			cur.ExpiresAt = now + ttlMillis
			if _, err := tx.Exec(ctx, `UPDATE crashmatrix_leases SET expires_at = $3 WHERE space = $1 AND document_id = $2`,
				space, documentID, cur.ExpiresAt); err != nil {
				return err
			}
			out, ok = cur, true
			return nil
		}
		l := reference.Lease{Space: space, DocumentID: documentID, Holder: holder, Token: last + 1, ExpiresAt: now + ttlMillis}
		if _, err := tx.Exec(ctx, `UPDATE crashmatrix_leases SET holder = $3, token = $4, expires_at = $5, last_token = $4
			WHERE space = $1 AND document_id = $2`, space, documentID, holder, l.Token, l.ExpiresAt); err != nil {
			return err
		}
		out, ok = l, true
		return nil
	})
	if err != nil {
		return reference.Lease{}, false, p.d.wrap("locks.tryAcquire", leaseIDs(space, documentID, holder), err)
	}
	return out, ok, nil
}

// Renew implements reference.LockProvider with one conditional UPDATE.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := memory.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	tag, err := p.d.pool.Exec(ctx, `UPDATE crashmatrix_leases SET expires_at = $1
		WHERE space = $2 AND document_id = $3 AND holder = $4 AND token = $5 AND expires_at > $6`,
		now+ttlMillis, l.Space, l.DocumentID, l.Holder, l.Token, now)
	if err != nil {
		return reference.Lease{}, p.d.wrap("locks.renew", leaseIDs(l.Space, l.DocumentID, l.Holder), err)
	}
	if tag.RowsAffected() != 1 {
		return reference.Lease{}, memory.LeaseLost(l, fmt.Sprintf("not held live at %d", now))
	}
	l.ExpiresAt = now + ttlMillis
	return l, nil
}

// Release implements reference.LockProvider with one conditional UPDATE
// that clears the holder (the token counter stays).
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	tag, err := p.d.pool.Exec(ctx, `UPDATE crashmatrix_leases SET holder = '', expires_at = 0
		WHERE space = $1 AND document_id = $2 AND holder = $3 AND holder <> '' AND token = $4`,
		l.Space, l.DocumentID, l.Holder, l.Token)
	if err != nil {
		return p.d.wrap("locks.release", leaseIDs(l.Space, l.DocumentID, l.Holder), err)
	}
	if tag.RowsAffected() != 1 {
		return memory.LeaseLost(l, "not held")
	}
	return nil
}
