package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenReadOnly connects to an existing crashmatrix database for reading
// only: every session runs with default_transaction_read_only=on, so the
// server itself refuses any write (each statement runs in a read-only
// transaction), and no migration runs; the schema must be this build's
// (SchemaVersion). `crashmatrix snapshot` reads a production database
// through it.
func OpenReadOnly(ctx context.Context, dsn string) (reference.Stores, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return reference.Stores{}, &Error{Op: "open", IDs: "dsn " + RedactDSN(dsn), Err: errors.New(redact(err.Error(), "")), permanent: true}
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	d := &db{password: cfg.ConnConfig.Password}
	ids := fmt.Sprintf("host %s port %d database %s user %s (read-only)", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return reference.Stores{}, d.wrap("open", ids, err)
	}
	var version int
	if err := d.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+MigrationsTable).Scan(&version); err != nil {
		d.pool.Close()
		return reference.Stores{}, d.wrapConnect("open", ids, err)
	}
	if version != SchemaVersion {
		d.pool.Close()
		return reference.Stores{}, &Error{Op: "open", IDs: ids, Err: fmt.Errorf("schema version %d, this build reads %d (open it once read-write to migrate)", version, SchemaVersion), permanent: true}
	}
	return d.stores(), nil
}
