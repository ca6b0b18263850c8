package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Locks is an in-memory reference.LockProvider with fencing tokens that
// strictly increase per document, across releases.
type Locks struct {
	mu     sync.Mutex
	leases map[docKey]reference.Lease
	tokens map[docKey]int64
}

// NewLocks returns an empty lock provider.
func NewLocks() *Locks {
	return &Locks{leases: map[docKey]reference.Lease{}, tokens: map[docKey]int64{}}
}

// TryAcquire implements reference.LockProvider.
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Lease{}, false, err
	}
	if err := reference.CheckLease(space, documentID, holder, ttlMillis); err != nil {
		return reference.Lease{}, false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := docKey{space, documentID}
	if cur, ok := p.leases[k]; ok && cur.ExpiresAt > now {
		if cur.Holder != holder {
			return cur, false, nil
		}
		cur.ExpiresAt = now + ttlMillis
		p.leases[k] = cur
		return cur, true, nil
	}
	p.tokens[k]++
	l := reference.Lease{Space: space, DocumentID: documentID, Holder: holder, Token: p.tokens[k], ExpiresAt: now + ttlMillis}
	p.leases[k] = l
	return l, true, nil
}

// Renew implements reference.LockProvider.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Lease{}, err
	}
	if err := reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := docKey{l.Space, l.DocumentID}
	cur, ok := p.leases[k]
	switch {
	case !ok:
		return reference.Lease{}, reference.LeaseLost(l, "no lease is held")
	case cur.Holder != l.Holder || cur.Token != l.Token:
		return reference.Lease{}, reference.LeaseLost(l, fmt.Sprintf("held by %s with token %d", cur.Holder, cur.Token))
	case cur.ExpiresAt <= now:
		return reference.Lease{}, reference.LeaseLost(l, fmt.Sprintf("expired at %d (now %d)", cur.ExpiresAt, now))
	}
	cur.ExpiresAt = now + ttlMillis
	p.leases[k] = cur
	return cur, nil
}

// Release implements reference.LockProvider.
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := docKey{l.Space, l.DocumentID}
	cur, ok := p.leases[k]
	if !ok {
		return reference.LeaseLost(l, "no lease is held")
	}
	if cur.Holder != l.Holder || cur.Token != l.Token {
		return reference.LeaseLost(l, fmt.Sprintf("held by %s with token %d", cur.Holder, cur.Token))
	}
	delete(p.leases, k)
	return nil
}
