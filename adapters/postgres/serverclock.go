package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// serverNowMillis is the server's own wall clock in unix milliseconds.
const serverNowMillis = `(extract(epoch from clock_timestamp()) * 1000)::bigint`

// serverClockLocks is the lock provider of Options.ServerClockLeases: a
// lease's expiry is set and compared with the server's own clock
// (clock_timestamp()), not with the caller's now, as a lock provider that
// trusts its database's now() does. It answers in the caller's time
// (a grant runs until now+ttl, a refusal names the time left by the
// server's clock), so that the service sees the LockProvider contract
// kept. It holds while every clock agrees: the service trusts a lease with
// more than half of it left without asking (grants compare expiry with the
// same clock, it assumes), so a server clock that jumps ahead hands the
// lease to another holder while the first still writes under it.
type serverClockLocks struct {
	*sqlcore.Locks
	d *db
}

// TryAcquire implements reference.LockProvider on the server's clock.
func (p serverClockLocks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
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
		var last, srv int64
		if err := tx.QueryRow(ctx, `SELECT holder, token, expires_at, last_token, `+serverNowMillis+` FROM crashmatrix_leases
			WHERE space = $1 AND document_id = $2 FOR UPDATE`, space, documentID).Scan(&cur.Holder, &cur.Token, &cur.ExpiresAt, &last, &srv); err != nil {
			return err
		}
		if cur.Holder != "" && cur.ExpiresAt > srv {
			left := cur.ExpiresAt - srv
			if cur.Holder != holder {
				cur.ExpiresAt = now + left
				out, ok = cur, false
				return nil
			}
			if _, err := tx.Exec(ctx, `UPDATE crashmatrix_leases SET expires_at = $3 WHERE space = $1 AND document_id = $2`,
				space, documentID, srv+ttlMillis); err != nil {
				return err
			}
			cur.ExpiresAt = now + ttlMillis
			out, ok = cur, true
			return nil
		}
		l := reference.Lease{Space: space, DocumentID: documentID, Holder: holder, Token: last + 1, ExpiresAt: now + ttlMillis}
		if _, err := tx.Exec(ctx, `UPDATE crashmatrix_leases SET holder = $3, token = $4, expires_at = $5, last_token = $4
			WHERE space = $1 AND document_id = $2`, space, documentID, holder, l.Token, srv+ttlMillis); err != nil {
			return err
		}
		out, ok = l, true
		return nil
	})
	if err != nil {
		return reference.Lease{}, false, p.d.wrap("locks.tryAcquire", sqlcore.LeaseIDs(space, documentID, holder), err)
	}
	return out, ok, nil
}

// Renew implements reference.LockProvider on the server's clock.
func (p serverClockLocks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	n, err := p.d.Exec(ctx, "locks.renew", sqlcore.LeaseIDs(l.Space, l.DocumentID, l.Holder),
		`UPDATE crashmatrix_leases SET expires_at = `+serverNowMillis+` + $1
			WHERE space = $2 AND document_id = $3 AND holder = $4 AND token = $5 AND expires_at > `+serverNowMillis,
		ttlMillis, l.Space, l.DocumentID, l.Holder, l.Token)
	if err != nil {
		return reference.Lease{}, err
	}
	if n != 1 {
		return reference.Lease{}, reference.LeaseLost(l, "not held live by the server's clock")
	}
	l.ExpiresAt = now + ttlMillis
	return l, nil
}
