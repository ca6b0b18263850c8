package sqlcore

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Leases renews and releases the per-document leases of the {leases}
// table, one row per document ever leased: a release empties holder and
// expiry but keeps the token, so fencing tokens strictly increase. How a
// lease is acquired is the adapter's (it differs by database).
type Leases struct {
	db             DB
	renew, release string
}

// NewLeases returns the lease renewal and release on db.
func NewLeases(db DB, d Dialect) *Leases {
	return &Leases{db: db,
		renew: d.SQL(`UPDATE {leases} SET expires_at = ?
			WHERE space = ? AND document_id = ? AND holder = ? AND token = ? AND expires_at > ?`),
		release: d.SQL(`UPDATE {leases} SET holder = '', expires_at = 0
			WHERE space = ? AND document_id = ? AND holder = ? AND token = ? AND holder <> ''`),
	}
}

// LeaseIDs names a lease in errors.
func LeaseIDs(space, documentID, holder string) string {
	return "lease " + space + "/" + documentID + " holder " + holder
}

// Renew implements reference.LockProvider with one conditional UPDATE.
func (p *Leases) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	n, err := p.db.Exec(ctx, "locks.renew", LeaseIDs(l.Space, l.DocumentID, l.Holder), p.renew,
		now+ttlMillis, l.Space, l.DocumentID, l.Holder, l.Token, now)
	if err != nil {
		return reference.Lease{}, err
	}
	if n != 1 {
		return reference.Lease{}, reference.LeaseLost(l, fmt.Sprintf("not held live at %d", now))
	}
	l.ExpiresAt = now + ttlMillis
	return l, nil
}

// Release implements reference.LockProvider with one conditional UPDATE
// that clears the holder (the token stays).
func (p *Leases) Release(ctx context.Context, l reference.Lease) error {
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	n, err := p.db.Exec(ctx, "locks.release", LeaseIDs(l.Space, l.DocumentID, l.Holder), p.release,
		l.Space, l.DocumentID, l.Holder, l.Token)
	if err != nil {
		return err
	}
	if n != 1 {
		return reference.LeaseLost(l, "not held")
	}
	return nil
}
