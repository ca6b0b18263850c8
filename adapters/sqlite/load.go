package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenReadOnly opens an existing database file for reading only: the
// connection is opened read-only (mode=ro) with query_only on, so SQLite
// refuses every write, and nothing is created or migrated. The schema
// must be this build's (SchemaVersion). `crashmatrix snapshot` reads a
// production file through it.
func OpenReadOnly(path string) (reference.Stores, error) {
	if strings.TrimSpace(path) == "" || strings.ContainsRune(path, '?') {
		return reference.Stores{}, fmt.Errorf("%w: sqlite path %q", reference.ErrInvalidArgument, path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeoutMillis))
	q.Add("_pragma", "query_only(1)")
	q.Set("mode", "ro")
	conn, err := newCachingConnector("file:"+path+"?"+q.Encode(), "BEGIN")
	if err != nil {
		return reference.Stores{}, err
	}
	d := &db{sql: sql.OpenDB(conn)}
	ctx := context.Background()
	var v sql.NullInt64
	if err := d.retry(ctx, func() error {
		return d.sql.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v)
	}); err != nil {
		d.close()
		return reference.Stores{}, fmt.Errorf("open %s read-only: %w (is it a crashmatrix SQLite database?)", path, err)
	}
	if v.Int64 != SchemaVersion {
		d.close()
		return reference.Stores{}, fmt.Errorf("open %s read-only: schema version %d, this build reads %d (open it once read-write to migrate)", path, v.Int64, SchemaVersion)
	}
	return d.stores(), nil
}
