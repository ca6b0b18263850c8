package sqlcore

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Acquire takes the lease of a document for holder, its arguments checked
// already: a new fencing token if the lease is free or expired, the same
// token extended if holder holds it live, and ok false with the current
// lease if another holder's is live.
type Acquire func(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error)

// Locks is a reference.LockProvider on the {leases} table, one row per
// document ever leased: a release empties holder and expiry but keeps the
// token, so fencing tokens strictly increase. Renewal and release are one
// conditional UPDATE each; how a lease is taken is the adapter's Acquire
// (it differs by database).
type Locks struct {
	db             DB
	acquire        Acquire
	renew, release string
	list           string
	// renewAny, when set, is the renewal of the renew-ignores-holder
	// mutant (RenewAnyHolder).
	renewAny string
}

var _ reference.LockProvider = (*Locks)(nil)

// NewLocks returns the lock provider on db whose leases acquire takes.
func NewLocks(db DB, d Dialect, acquire Acquire) *Locks {
	return &Locks{db: db, acquire: acquire,
		renew: d.SQL(`UPDATE {leases} SET expires_at = ?
			WHERE space = ? AND document_id = ? AND holder = ? AND token = ? AND expires_at > ?`),
		release: d.SQL(`UPDATE {leases} SET holder = '', expires_at = 0
			WHERE space = ? AND document_id = ? AND holder = ? AND token = ? AND holder <> ''`),
		list: d.SQL(listLeases),
	}
}

// RenewAnyHolder makes p a mutant (sim.MutantRenewIgnoresHolder): its
// renewal matches the document and a live expiry but not the holder and
// its token, so a stale holder whose lease another holder was granted
// since renews (the other holder's lease) and goes on writing.
func (p *Locks) RenewAnyHolder(d Dialect) *Locks {
	p.renewAny = d.SQL(`UPDATE {leases} SET expires_at = ?
		WHERE space = ? AND document_id = ? AND expires_at > ?`)
	return p
}

// LeaseIDs names a lease in errors.
func LeaseIDs(space, documentID, holder string) string {
	return "lease " + space + "/" + documentID + " holder " + holder
}

// TryAcquire implements reference.LockProvider.
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := reference.CheckLease(space, documentID, holder, ttlMillis); err != nil {
		return reference.Lease{}, false, err
	}
	return p.acquire(ctx, space, documentID, holder, now, ttlMillis)
}

// Renew implements reference.LockProvider with one conditional UPDATE.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	query, args := p.renew, []any{now + ttlMillis, l.Space, l.DocumentID, l.Holder, l.Token, now}
	if p.renewAny != "" {
		query, args = p.renewAny, []any{now + ttlMillis, l.Space, l.DocumentID, now}
	}
	n, err := p.db.Exec(ctx, "locks.renew", LeaseIDs(l.Space, l.DocumentID, l.Holder), query, args...)
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
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
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
