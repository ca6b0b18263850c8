package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
)

func cachedDB(t *testing.T) *sql.DB {
	t.Helper()
	conn, err := newCachingConnector(DSN(filepath.Join(t.TempDir(), "cache.db")), "BEGIN IMMEDIATE")
	storetest.Must(t, err)
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1) // every statement below runs on the one connection
	_, err = db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`)
	storetest.Must(t, err)
	_, err = db.Exec(`INSERT INTO t (k, v) VALUES (1, 'a'), (2, 'b'), (3, 'c')`)
	storetest.Must(t, err)
	return db
}

// Running a statement many times prepares it once on the connection.
func TestStatementCacheReuses(t *testing.T) {
	db := cachedDB(t)
	ctx := context.Background()
	const q = `SELECT v FROM t WHERE k = ?`
	for i := 0; i < 50; i++ {
		var v string
		storetest.Must(t, db.QueryRowContext(ctx, q, 1+i%3).Scan(&v))
		if want := string(rune('a' + i%3)); v != want {
			t.Fatalf("run %d: got %q, want %q", i, v, want)
		}
	}
	conn, err := db.Conn(ctx)
	storetest.Must(t, err)
	defer conn.Close()
	storetest.Must(t, conn.Raw(func(dc any) error {
		c := dc.(*cachingConn)
		if s, ok := c.stmts[q]; !ok || s.busy {
			t.Fatalf("the statement is not cached idle after use: %+v", c.stmts)
		}
		if len(c.stmts) > 3 {
			t.Fatalf("%d statements cached for 3 distinct SQL texts", len(c.stmts))
		}
		return nil
	}))
}

// A statement run again while the rows of its first run are still open
// gets a statement of its own: neither result is cut short or mixed.
func TestStatementCacheNestedQuery(t *testing.T) {
	db := cachedDB(t)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	storetest.Must(t, err)
	defer tx.Rollback()
	const q = `SELECT k, v FROM t WHERE k >= ? ORDER BY k`
	outer, err := tx.QueryContext(ctx, q, 1)
	storetest.Must(t, err)
	var got []string
	for outer.Next() {
		var k int
		var v string
		storetest.Must(t, outer.Scan(&k, &v))
		inner, err := tx.QueryContext(ctx, q, k)
		storetest.Must(t, err)
		n := 0
		for inner.Next() {
			n++
		}
		storetest.Must(t, inner.Err())
		inner.Close()
		if n != 4-k {
			t.Fatalf("inner run from k=%d saw %d rows, want %d", k, n, 4-k)
		}
		got = append(got, v)
	}
	storetest.Must(t, outer.Err())
	if len(got) != 3 {
		t.Fatalf("outer run saw %v, want a b c", got)
	}
}

// A cached statement survives a schema change under it.
func TestStatementCacheSchemaChange(t *testing.T) {
	db := cachedDB(t)
	const q = `SELECT * FROM t WHERE k = 1`
	cols := func() int {
		rows, err := db.Query(q)
		storetest.Must(t, err)
		defer rows.Close()
		c, err := rows.Columns()
		storetest.Must(t, err)
		return len(c)
	}
	if n := cols(); n != 2 {
		t.Fatalf("%d columns, want 2", n)
	}
	_, err := db.Exec(`ALTER TABLE t ADD COLUMN w TEXT`)
	storetest.Must(t, err)
	if n := cols(); n != 3 {
		t.Fatalf("after ALTER TABLE the cached statement returns %d columns, want 3", n)
	}
}

// Transactions run on cached BEGIN/COMMIT/ROLLBACK statements: a commit
// keeps, a rollback discards, and a COMMIT that fails (here a deferred
// foreign key) leaves no transaction open and nothing written.
func TestStatementCacheTransactions(t *testing.T) {
	db := cachedDB(t)
	ctx := context.Background()
	_, err := db.Exec(`CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES t (k) DEFERRABLE INITIALLY DEFERRED)`)
	storetest.Must(t, err)
	count := func(q string) int {
		var n int
		storetest.Must(t, db.QueryRowContext(ctx, q).Scan(&n))
		return n
	}
	for i := 0; i < 3; i++ {
		tx, err := db.BeginTx(ctx, nil)
		storetest.Must(t, err)
		_, err = tx.Exec(`INSERT INTO t (v) VALUES ('kept')`)
		storetest.Must(t, err)
		storetest.Must(t, tx.Commit())
		tx, err = db.BeginTx(ctx, nil)
		storetest.Must(t, err)
		_, err = tx.Exec(`INSERT INTO t (v) VALUES ('discarded')`)
		storetest.Must(t, err)
		storetest.Must(t, tx.Rollback())
		tx, err = db.BeginTx(ctx, nil)
		storetest.Must(t, err)
		_, err = tx.Exec(`INSERT INTO child (parent) VALUES (999)`)
		storetest.Must(t, err)
		if err := tx.Commit(); err == nil {
			t.Fatal("a COMMIT breaking a deferred foreign key succeeded")
		}
	}
	if n := count(`SELECT count(*) FROM t WHERE v = 'kept'`); n != 3 {
		t.Fatalf("%d committed rows, want 3", n)
	}
	if n := count(`SELECT count(*) FROM t WHERE v = 'discarded'`) + count(`SELECT count(*) FROM child`); n != 0 {
		t.Fatalf("%d rows of rolled back or failed transactions", n)
	}
}
