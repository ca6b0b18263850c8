// Package sqlite implements the reference store interfaces on one SQLite
// database file (modernc.org/sqlite, no cgo). The file survives a SIGKILL
// (WAL journal, synchronous=FULL) and may be shared by several OS processes:
// every write runs in a BEGIN IMMEDIATE transaction, and a busy database is
// waited for (busy_timeout) and retried.
//
// The operation store, the document-state store, the graph writer's checks
// and read-back and the lock provider's renewal and release are the ones
// PostgreSQL runs too (adapters/internal/sqlcore); this package gives them
// SQLite's statement execution, and adds what is SQLite's own: the
// registry's batched writes, the graph merge (json_patch), the lease
// acquisition in one upsert, and System B's stores (OpenPlanSave).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Options configures the SQLite stores.
type Options struct {
	// CreateInsteadOfMerge makes the graph writer INSERT a new node or edge
	// row on every upsert instead of merging into the existing one: a
	// mutant that produces duplicates.
	CreateInsteadOfMerge bool
	// SynchronousOff opens the database with PRAGMA synchronous=OFF: no
	// fsync ever, so a power loss loses committed transactions (a mutant
	// the power-loss fault must catch; a process kill does not).
	SynchronousOff bool
	// RenewIgnoresHolder is a mutant: a lease renewal matches the
	// document and a live expiry, not the holder and its token
	// (sqlcore.Locks.RenewAnyHolder).
	RenewIgnoresHolder bool
	// PlanApart is a mutant: operations.create commits the operation row
	// and its plan in two transactions (two WAL syncs), with no window
	// declared between them (sqlcore.Operations.PlanApart).
	PlanApart bool
}

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

var _ reference.EntityRegistry = (*Registry)(nil)

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
	copyTemplate, err := useTemplate()
	if err != nil {
		return reference.Stores{}, err
	}
	placed := false
	if copyTemplate {
		if placed, err = placeTemplate(path); err != nil {
			return reference.Stores{}, err
		}
	}
	dsn := DSN(path)
	if opts.SynchronousOff {
		dsn = strings.Replace(dsn, url.QueryEscape("synchronous(FULL)"), url.QueryEscape("synchronous(OFF)"), 1)
	}
	// A placed template is at SchemaVersion with every table and index
	// (TestTemplateIsTheMigratedSchema): nothing to check or migrate.
	s, err := open(path, dsn, false, !placed, opts)
	if err == nil && placed {
		if _, err = s.Closer.(*closer).d.exec(context.Background(), initWAL); err != nil {
			s.Close()
			return reference.Stores{}, fmt.Errorf("open %s: %w", path, err)
		}
	}
	return s, err
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
	return open("memory:"+name, memoryDSN(name), true, true, opts)
}

// open opens dsn and, with migrate, migrates it to SchemaVersion; pin
// keeps one connection open for the life of the handle (a memory database
// ends with its last connection).
func open(what, dsn string, pin, migrate bool, opts Options) (reference.Stores, error) {
	d, err := connect(what, dsn, pin)
	if err != nil {
		return reference.Stores{}, err
	}
	d.opts = opts
	if !migrate {
		return d.stores(), nil
	}
	if err := d.migrate(context.Background()); err != nil {
		d.close()
		return reference.Stores{}, fmt.Errorf("open %s: %w", what, err)
	}
	return d.stores(), nil
}

// stores are every store on the handle.
func (d *db) stores() reference.Stores {
	locks := sqlcore.NewLocks(d, dialect, d.acquireLease)
	if d.opts.RenewIgnoresHolder {
		locks.RenewAnyHolder(dialect)
	}
	st := sqlcore.Stores(d, dialect, &Registry{d}, sqlcore.NewWriter(d.applyMutation, d.snapshot, dialect), locks, &closer{d})
	if d.opts.PlanApart {
		st.Ops.(*sqlcore.Operations).PlanApart(dialect)
	}
	return st
}

// connect opens dsn with the statement cache and waits until the database
// answers; pin keeps one connection open for the life of the handle.
func connect(what, dsn string, pin bool) (*db, error) {
	conn, err := newCachingConnector(dsn, "BEGIN IMMEDIATE")
	if err != nil {
		return nil, err
	}
	sdb := sql.OpenDB(conn)
	d := &db{sql: sdb}
	ctx := context.Background()
	if pin {
		c, err := sdb.Conn(ctx)
		if err != nil {
			sdb.Close()
			return nil, fmt.Errorf("open %s: %w", what, err)
		}
		d.pin = c
	}
	if err := d.retry(ctx, func() error { return sdb.PingContext(ctx) }); err != nil {
		d.close()
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	return d, nil
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

// dialect is how the statements the SQL adapters share (sqlcore) are
// written for SQLite: plain table names, ? parameters, SQLite types (TEXT
// compares byte by byte already).
var dialect = sqlcore.Dialect{Text: "TEXT", Key: "TEXT", Int: "INTEGER", Bytes: "BLOB"}

// Exec implements sqlcore.DB: one statement, retried on SQLITE_BUSY.
func (d *db) Exec(ctx context.Context, op, ids, query string, args ...any) (int64, error) {
	n, err := d.affected(ctx, query, args...)
	return n, wrap(op, ids, err)
}

// Query implements sqlcore.DB: one statement, retried whole on SQLITE_BUSY.
func (d *db) Query(ctx context.Context, op, ids string, start func(), row func(sqlcore.Row) error, query string, args ...any) error {
	return wrap(op, ids, d.each(ctx, start, func(r *sql.Rows) error { return row(r) }, query, args...))
}

// wrap names the store method and the records concerned in an error of
// the driver; other errors (the stores' own, a context's) stay as they are.
func wrap(op, ids string, err error) error {
	var se *msqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	if ids != "" {
		return fmt.Errorf("%s %s: %w", op, ids, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
