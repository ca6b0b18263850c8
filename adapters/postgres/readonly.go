package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crashmatrix/crashmatrix/reference"
)

// ListLeases returns every lease row of a space ordered by document: held,
// expired, or released (no holder, with the last token issued). It lets
// `crashmatrix snapshot` put leases into a scenario's initial state
// (initial.LeaseLister).
func (p *Locks) ListLeases(ctx context.Context, space string) ([]reference.Lease, error) {
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	rows, err := p.d.pool.Query(ctx, `SELECT document_id, holder, CASE WHEN holder = '' THEN last_token ELSE token END, expires_at
		FROM crashmatrix_leases WHERE space = $1 AND last_token > 0 ORDER BY document_id COLLATE "C"`, space)
	if err != nil {
		return nil, p.d.wrap("locks.listLeases", "space "+space, err)
	}
	defer rows.Close()
	var out []reference.Lease
	for rows.Next() {
		l := reference.Lease{Space: space}
		if err := rows.Scan(&l.DocumentID, &l.Holder, &l.Token, &l.ExpiresAt); err != nil {
			return nil, p.d.wrap("locks.listLeases", "space "+space, err)
		}
		if l.Holder == "" {
			l.ExpiresAt = 0
		}
		out = append(out, l)
	}
	return out, p.d.wrap("locks.listLeases", "space "+space, rows.Err())
}

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
	return reference.Stores{Ops: &OperationStore{d}, States: &StateStore{d}, Registry: &Registry{d}, Writer: newWriter(d), Locks: &Locks{d}, Closer: &closer{d}}, nil
}
