package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// acquireLease is the Acquire of the PostgreSQL sqlcore.Locks. A lease is
// a row with an expiry time (passed-in unix milliseconds), not a session
// lock: closing the pool or losing the connection does not end it, expiry
// does. last_token keeps the last fencing token per document across
// releases. One transaction locks the document's row (created if absent)
// with SELECT ... FOR UPDATE.
func (d *db) acquireLease(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	var out reference.Lease
	var ok bool
	err := d.tx(ctx, func(tx pgx.Tx) error {
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
		return reference.Lease{}, false, d.wrap("locks.tryAcquire", sqlcore.LeaseIDs(space, documentID, holder), err)
	}
	return out, ok, nil
}
