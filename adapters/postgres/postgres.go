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
//
// The operation store, the document-state store, the graph writer's checks
// and read-back and the lock provider's renewal and release are the ones
// SQLite runs too (adapters/internal/sqlcore); this package gives them
// PostgreSQL's statement execution and error classification, and adds
// what is PostgreSQL's own: the registry's claims with RETURNING, the graph
// merge under a per-space advisory lock, the lease acquisition with SELECT
// ... FOR UPDATE, and System B's stores (OpenPlanSave).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
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
	// RenewIgnoresHolder is a mutant: a lease renewal matches the
	// document and a live expiry, not the holder and its token
	// (sqlcore.Locks.RenewAnyHolder).
	RenewIgnoresHolder bool
	// ServerClockLeases takes and renews leases on the server's own clock
	// (clock_timestamp()), not the caller's now (serverClockLocks): a
	// lock provider that trusts its database's clock, which a jump of
	// that clock breaks.
	ServerClockLeases bool
	// PlanApart is a mutant: operations.create commits the operation row
	// and its plan in two transactions, with no window declared between
	// them (sqlcore.Operations.PlanApart).
	PlanApart bool
}

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

var _ reference.EntityRegistry = (*Registry)(nil)

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
	return d.stores(), nil
}

// stores are every store on the pool.
func (d *db) stores() reference.Stores {
	locks := sqlcore.NewLocks(d, dialect, d.acquireLease)
	if d.opts.RenewIgnoresHolder {
		locks.RenewAnyHolder(dialect)
	}
	var lp reference.LockProvider = locks
	if d.opts.ServerClockLeases {
		lp = serverClockLocks{locks, d}
	}
	st := sqlcore.Stores(d, dialect, &Registry{d}, sqlcore.NewWriter(d.applyMutation, d.snapshot, dialect), lp, &closer{d})
	if d.opts.PlanApart {
		st.Ops.(*sqlcore.Operations).PlanApart(dialect)
	}
	return st
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

const maxAttempts = 20

// tx runs f in a READ COMMITTED transaction, committing if f returns nil
// and rolling back otherwise. A serialization failure or deadlock (the
// transaction was rolled back by the server) runs it again, so f must be
// safe to repeat; any other error is returned as it is.
func (d *db) tx(ctx context.Context, f func(tx pgx.Tx) error) error {
	return d.retry(ctx, func() error { return pgx.BeginFunc(ctx, d.pool, f) })
}

// retry runs f until it does not fail with a serialization failure or a
// deadlock, up to maxAttempts times with a growing pause.
func (d *db) retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		err = f()
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

// dialect is how the statements the SQL adapters share (sqlcore) are
// written for PostgreSQL: crashmatrix_ tables, $n parameters, and the "C"
// collation on ids that results are ordered by (byte order, as Go
// compares strings, whatever the database's default collation).
var dialect = sqlcore.Dialect{Prefix: "crashmatrix_", Numbered: true, Text: "text", Key: `text COLLATE "C"`, Int: "bigint", Bytes: "bytea"}

// Exec implements sqlcore.DB: one statement in its own transaction, run
// again after a serialization failure or deadlock.
func (d *db) Exec(ctx context.Context, op, ids, query string, args ...any) (int64, error) {
	var n int64
	err := d.retry(ctx, func() error {
		tag, err := d.pool.Exec(ctx, query, args...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, d.wrap(op, ids, err)
	}
	return n, nil
}

// Query implements sqlcore.DB: one statement, run again after a
// serialization failure or deadlock.
func (d *db) Query(ctx context.Context, op, ids string, start func(), row func(sqlcore.Row) error, query string, args ...any) error {
	return d.wrap(op, ids, d.retry(ctx, func() error {
		start()
		rows, err := d.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return sqlcore.Each(rows, row)
	}))
}

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
