package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"

	msqlite "modernc.org/sqlite"
)

// The driver parses and plans every statement again on each Exec and Query:
// with the protocol's two dozen statements per ingestion that was a third of
// the CPU time of a crash-matrix run. cachingConnector keeps each
// connection's prepared statements, keyed by their SQL text, for the life of
// the connection. SQLite re-prepares a cached statement by itself when the
// schema changes under it (sqlite3_prepare_v2), so a cached statement never
// runs against a stale schema.

// maxCachedStatements bounds the statements one connection keeps; the
// adapter's SQL is a fixed set well below it, so the bound only guards
// against a caller that builds SQL text dynamically.
const maxCachedStatements = 256

// Transactions are begun, committed and rolled back with cached statements
// too (the driver prepares BEGIN and COMMIT anew for each transaction).
type cachingConnector struct {
	driver.Connector
	begin string // the statement that begins a read-write transaction
}

// newCachingConnector opens dsn, whose read-write transactions begin with
// begin ("BEGIN IMMEDIATE" for the DSNs of this package).
func newCachingConnector(dsn, begin string) (driver.Connector, error) {
	base, err := msqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return cachingConnector{base, begin}, nil
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cachingConn{inner: conn, begin: c.begin, stmts: map[string]*cachedStmt{}}, nil
}

// innerConn is what every connection of the driver implements; cachingConn
// forwards all of it.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type cachedStmt struct {
	st   driver.Stmt
	busy bool // rows of an earlier query on it are still open
}

type cachingConn struct {
	inner driver.Conn
	begin string
	mu    sync.Mutex // database/sql uses a connection from one goroutine at a time; this guards Close racing a late Rows.Close
	stmts map[string]*cachedStmt
}

var (
	_ driver.ConnBeginTx        = (*cachingConn)(nil)
	_ driver.ConnPrepareContext = (*cachingConn)(nil)
	_ driver.ExecerContext      = (*cachingConn)(nil)
	_ driver.QueryerContext     = (*cachingConn)(nil)
	_ driver.Pinger             = (*cachingConn)(nil)
	_ driver.SessionResetter    = (*cachingConn)(nil)
	_ driver.Validator          = (*cachingConn)(nil)
)

func (c *cachingConn) full() innerConn {
	ic, ok := c.inner.(innerConn)
	if !ok {
		panic("sqlite: driver connection lacks the context interfaces")
	}
	return ic
}

// Unwrap returns the driver's own connection.
func (c *cachingConn) Unwrap() driver.Conn { return c.inner }

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.full().PrepareContext(ctx, query)
}

func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.Isolation != driver.IsolationLevel(0) {
		return c.full().BeginTx(ctx, opts) // the driver judges other levels
	}
	begin := c.begin
	if opts.ReadOnly {
		begin = "BEGIN"
	}
	if _, err := c.ExecContext(ctx, begin, nil); err != nil {
		return nil, err
	}
	return &cachedTx{c: c, ctx: ctx}, nil
}

// cachedTx ends a transaction begun by BeginTx. Like the driver's, Commit
// waits for locks only as long as the context given to BeginTx lives, and
// a failed COMMIT leaves no transaction open.
type cachedTx struct {
	c   *cachingConn
	ctx context.Context
}

func (t *cachedTx) Commit() error {
	if _, err := t.c.ExecContext(t.ctx, "COMMIT", nil); err != nil {
		_ = t.Rollback() // an error if SQLite already rolled back: nothing left open either way
		return err
	}
	return nil
}

func (t *cachedTx) Rollback() error {
	_, err := t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

func (c *cachingConn) Ping(ctx context.Context) error         { return c.full().Ping(ctx) }
func (c *cachingConn) ResetSession(ctx context.Context) error { return c.full().ResetSession(ctx) }
func (c *cachingConn) IsValid() bool                          { return c.full().IsValid() }
func (c *cachingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return checkNamedValue(c.inner, nv)
}

func checkNamedValue(conn driver.Conn, nv *driver.NamedValue) error {
	if ch, ok := conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *cachingConn) Close() error {
	c.mu.Lock()
	var errs []error
	for q, s := range c.stmts {
		if !s.busy {
			errs = append(errs, s.st.Close())
		}
		delete(c.stmts, q)
	}
	c.mu.Unlock()
	errs = append(errs, c.inner.Close())
	return errors.Join(errs...)
}

// acquire returns a prepared statement for query that no open rows use,
// and a release function. A statement whose rows are still open (a query
// run again while iterating its own results) gets a fresh, uncached one.
func (c *cachingConn) acquire(ctx context.Context, query string) (*cachedStmt, func(), error) {
	c.mu.Lock()
	s, ok := c.stmts[query]
	if ok && !s.busy {
		s.busy = true
		c.mu.Unlock()
		return s, func() { c.mu.Lock(); s.busy = false; c.mu.Unlock() }, nil
	}
	cache := !ok && len(c.stmts) < maxCachedStatements
	c.mu.Unlock()
	st, err := c.full().PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	s = &cachedStmt{st: st, busy: true}
	if !cache {
		return s, func() { _ = st.Close() }, nil
	}
	c.mu.Lock()
	c.stmts[query] = s
	c.mu.Unlock()
	return s, func() { c.mu.Lock(); s.busy = false; c.mu.Unlock() }, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, release, err := c.acquire(ctx, query)
	if err != nil {
		return nil, err
	}
	defer release()
	ex, ok := s.st.(driver.StmtExecContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return ex.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, release, err := c.acquire(ctx, query)
	if err != nil {
		return nil, err
	}
	q, ok := s.st.(driver.StmtQueryContext)
	if !ok {
		release()
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, args)
	if err != nil {
		release()
		return nil, err
	}
	return &releasingRows{Rows: rows, release: release}, nil
}

// releasingRows hands its statement back to the cache when closed.
type releasingRows struct {
	driver.Rows
	once    sync.Once
	release func()
}

func (r *releasingRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.release)
	return err
}
