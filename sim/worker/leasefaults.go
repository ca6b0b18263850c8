package worker

import (
	"context"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// leaseFaults is the lock provider a worker's service uses: the backend's,
// broken on demand by a lease fault armed at faults.LeaseAcquire.
//
//   - split: when another holder's lease is live, the grant is made anyway,
//     as a holder whose clock runs ahead (or that woke from a GC pause)
//     would get it: the store is asked at the instant the live lease
//     expires, so it issues a new, higher fencing token while the other
//     holder still believes its lease;
//   - expire: the store records the lease as expiring at once while the
//     holder is told the full TTL, so the next holder is granted it while
//     this one still believes it.
//
// Either way the lease, the first line of defence, is gone: the revision
// CAS, the recovery claim and the plan fingerprint must keep the
// invariants alone.
type leaseFaults struct {
	reference.LockProvider
	rt *faults.Runtime
	w  *worker // tells the case's stops how long a split grant lasts in the store
}

func (l *leaseFaults) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	k, armed := l.rt.LeaseFault()
	if armed && k == faults.Expire {
		lease, ok, err := l.LockProvider.TryAcquire(ctx, space, doc, holder, now, 1)
		if ok && err == nil {
			lease.ExpiresAt = now + ttl
		}
		return lease, ok, err
	}
	lease, ok, err := l.LockProvider.TryAcquire(ctx, space, doc, holder, now, ttl)
	if armed && k == faults.Split && err == nil && !ok && lease.ExpiresAt > now {
		// The live lease's expiry is "now" on this holder's clock; the
		// holder, on its own clock, believes a lease of ttl from now.
		lease, ok, err = l.LockProvider.TryAcquire(ctx, space, doc, holder, lease.ExpiresAt, ttl)
		if ok && err == nil {
			if l.w != nil && l.w.stops != nil {
				// The store holds this lease until lease.ExpiresAt, later
				// than its holder believes: a waiter must not take that
				// for a provider that never hands leases over.
				l.w.stops.Record(StopLine{Worker: l.w.spec.Worker, Phase: l.w.spec.Phase, PID: l.w.pid, What: stopGranted, At: lease.ExpiresAt})
			}
			lease.ExpiresAt = now + ttl
		}
		return lease, ok, err
	}
	return lease, ok, err
}
