package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Locks is a reference.LockProvider on PostgreSQL. A lease is a row with an
// expiry time (passed-in unix milliseconds), not a session lock: closing the
// pool or losing the connection does not end it, expiry does. last_token
// keeps the last fencing token per document across releases.
type Locks struct{ d *db }

func leaseIDs(space, documentID, holder string) string {
	return "lease " + space + "/" + documentID + " holder " + holder
}

// TryAcquire implements reference.LockProvider in one transaction that
// locks the document's row (created if absent) with SELECT ... FOR UPDATE.
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := reference.CheckLease(space, documentID, holder, ttlMillis); err != nil {
		return reference.Lease{}, false, err
	}
	var out reference.Lease
	var ok bool
	err := p.d.tx(ctx, func(tx pgx.Tx) error {
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
		return reference.Lease{}, false, p.d.wrap("locks.tryAcquire", leaseIDs(space, documentID, holder), err)
	}
	return out, ok, nil
}

// Renew implements reference.LockProvider with one conditional UPDATE.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	tag, err := p.d.pool.Exec(ctx, `UPDATE crashmatrix_leases SET expires_at = $1
		WHERE space = $2 AND document_id = $3 AND holder = $4 AND token = $5 AND expires_at > $6`,
		now+ttlMillis, l.Space, l.DocumentID, l.Holder, l.Token, now)
	if err != nil {
		return reference.Lease{}, p.d.wrap("locks.renew", leaseIDs(l.Space, l.DocumentID, l.Holder), err)
	}
	if tag.RowsAffected() != 1 {
		return reference.Lease{}, reference.LeaseLost(l, fmt.Sprintf("not held live at %d", now))
	}
	l.ExpiresAt = now + ttlMillis
	return l, nil
}

// Release implements reference.LockProvider with one conditional UPDATE
// that clears the holder (the token counter stays).
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	tag, err := p.d.pool.Exec(ctx, `UPDATE crashmatrix_leases SET holder = '', expires_at = 0
		WHERE space = $1 AND document_id = $2 AND holder = $3 AND holder <> '' AND token = $4`,
		l.Space, l.DocumentID, l.Holder, l.Token)
	if err != nil {
		return p.d.wrap("locks.release", leaseIDs(l.Space, l.DocumentID, l.Holder), err)
	}
	if tag.RowsAffected() != 1 {
		return reference.LeaseLost(l, "not held")
	}
	return nil
}
