package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/crashmatrix/crashmatrix/reference"
)

// acquireLease is the Acquire of the SQLite sqlcore.Locks: a document's
// lease row keeps its last fencing token across releases.
func (d *db) acquireLease(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	l := reference.Lease{Space: space, DocumentID: documentID, Holder: holder, ExpiresAt: now + ttlMillis}
	// One statement: a lease that is free, expired or already this
	// holder's is taken (a new token unless it is this holder's live
	// lease, which is extended); another holder's live lease is left alone
	// and no row comes back.
	err := d.retry(ctx, func() error {
		l.Token = 0
		err := d.sql.QueryRowContext(ctx, `INSERT INTO leases (space, document_id, holder, token, expires_at) VALUES (?, ?, ?, 1, ?)
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
	err = d.retry(ctx, func() error {
		return d.sql.QueryRowContext(ctx, `SELECT holder, token, expires_at FROM leases WHERE space = ? AND document_id = ?`,
			space, documentID).Scan(&cur.Holder, &cur.Token, &cur.ExpiresAt)
	})
	if err != nil {
		return reference.Lease{}, false, err
	}
	return cur, false, nil
}
