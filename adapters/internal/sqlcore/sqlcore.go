// Package sqlcore is the store logic the SQL adapters (SQLite, PostgreSQL)
// share: the operation store and the document-state store whole, the
// lease renewal and release, the registry's batch binding, the SQL
// statements they have in common, and the property encoding and read-back
// of the graph tables. An adapter supplies a DB (how one statement runs on
// its driver: retries, error wrapping) and a Dialect (its table names and
// parameter style); what differs between the databases (transactions,
// the graph merge, lease acquisition, the registry writes) stays in the
// adapter.
package sqlcore

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Row is one result row: *sql.Row(s) and pgx.Row(s) both are.
type Row interface{ Scan(dest ...any) error }

// DB runs one statement at a time, as its adapter needs it run: retried on
// a busy or serialization failure, errors wrapped with op (the store
// method, e.g. "states.compareAndSet") and ids (the records concerned).
type DB interface {
	// Exec runs one statement and returns how many rows it changed.
	Exec(ctx context.Context, op, ids, query string, args ...any) (int64, error)
	// Query runs one statement and calls row for each result row; start
	// is called before each attempt (a retried query starts over).
	Query(ctx context.Context, op, ids string, start func(), row func(Row) error, query string, args ...any) error
}

// Dialect is how the statements of this package are written for one
// database.
type Dialect struct {
	// Prefix is put before every table name ("" on SQLite,
	// "crashmatrix_" on PostgreSQL, whose tables share a schema with
	// others).
	Prefix string
	// Numbered writes parameters $1, $2, ... instead of ?.
	Numbered bool
	// Column types in DDL: <text> a string, <key> a string ordered byte
	// by byte (ids that results are ordered by), <int> a 64-bit integer,
	// <bytes> binary.
	Text, Key, Int, Bytes string
}

// DDL writes a schema statement for the dialect: the column types of
// Dialect, then the table names (SQL).
func (d Dialect) DDL(q string) string {
	return d.SQL(strings.NewReplacer("<text>", d.Text, "<key>", d.Key, "<int>", d.Int, "<bytes>", d.Bytes).Replace(q))
}

// SQL writes q for the dialect: each {table} becomes Prefix+table and each
// ? a parameter of the dialect's style.
func (d Dialect) SQL(q string) string {
	var b strings.Builder
	b.Grow(len(q) + len(d.Prefix)*4)
	n, from := 0, 0 // q[from:i] is copied as it is
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '{':
			end := strings.IndexByte(q[i:], '}')
			if end < 0 {
				panic(fmt.Sprintf("sqlcore: unclosed table name in %q", q))
			}
			b.WriteString(q[from:i])
			b.WriteString(d.Prefix)
			b.WriteString(q[i+1 : i+end])
			i += end
			from = i + 1
		case '?':
			n++
			if d.Numbered {
				b.WriteString(q[from:i])
				b.WriteString("$" + strconv.Itoa(n))
				from = i + 1
			}
		}
	}
	b.WriteString(q[from:])
	return b.String()
}

// collect reads every row a query selects with scan, in order; never nil
// without an error.
func collect[T any](ctx context.Context, db DB, op, ids string, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := db.Query(ctx, op, ids, func() { out = make([]T, 0) }, func(r Row) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	}, query, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// one runs a query that returns at most one row; found reports whether it
// did.
func one(ctx context.Context, db DB, op, ids string, scan func(Row) error, query string, args ...any) (found bool, err error) {
	err = db.Query(ctx, op, ids, func() { found = false }, func(r Row) error {
		found = true
		return scan(r)
	}, query, args...)
	return found, err
}

// Stores assembles the stores of one SQL backend: the shared operation and
// document-state stores on db, and the adapter's own registry, writer and
// locks.
func Stores(db DB, d Dialect, registry reference.EntityRegistry, writer reference.GraphWriter, locks reference.LockProvider, closer io.Closer) reference.Stores {
	return reference.Stores{Ops: NewOperations(db, d), States: NewStates(db, d), Registry: registry, Writer: writer, Locks: locks, Closer: closer}
}

var (
	_ reference.OperationStore     = (*Operations)(nil)
	_ reference.SpaceLister        = (*Operations)(nil)
	_ reference.DocumentStateStore = (*States)(nil)
)

// Rows is a result set: *sql.Rows and pgx.Rows both are.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Each calls row for every row of rows, then returns rows' error; the
// caller closes rows.
func Each(rows Rows, row func(Row) error) error {
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
