package properties

import (
	"errors"
	"fmt"
	"math/rand"

	"github.com/crashmatrix/crashmatrix/reference"
)

// runLockProvider runs the LockProvider suite on a suiteT (a *testing.T or a recorder).
func runLockProvider(t suiteT, newStore func(t suiteT) reference.LockProvider) {
	t.Helper()
	confRun(t, newStore, lockCases)
}

// The subtest names of the LockProvider suite.
const (
	subLockMutualExclusion = "MutualExclusion"                  // a live lease refuses other holders
	subLockScopes          = "DifferentScopesDoNotBlock"        // other documents and other spaces are other leases
	subLockExpiry          = "ExpiryHandsOverWithGreaterToken"  // an expired lease passes on with a greater token
	subLockRenew           = "RenewOnlyByLiveHolder"            // only the live holder with its token renews
	subLockRelease         = "ReleaseOnlyByHolder"              // only the holder with its token releases, once
	subLockReacquire       = "ReacquireByHolderKeepsToken"      // a holder re-acquiring keeps its token and extends
	subLockTokens          = "TokensStrictlyIncrease"           // tokens strictly increase across releases and expiries
	subLockConcurrent      = "ConcurrentTryAcquireSingleWinner" // racing acquirers of a free lease: exactly one wins
	subLockBlankIDs        = "BlankIDsAreInvalid"               // blank space, documentId or holder wrap ErrInvalidArgument
	subLockModel           = "ModelBasedCommands"               // gopter commands against a model of the provider
)

// lockTTL is the lease length the lock subtests use.
const lockTTL int64 = 1000

var lockCases = []confCase[reference.LockProvider]{
	{subLockMutualExclusion, lockMutualExclusion},
	{subLockScopes, lockScopes},
	{subLockExpiry, lockExpiry},
	{subLockRenew, lockRenew},
	{subLockRelease, lockRelease},
	{subLockReacquire, lockReacquire},
	{subLockTokens, lockTokens},
	{subLockConcurrent, lockConcurrent},
	{subLockBlankIDs, lockBlankIDs},
	{subLockModel, lockModel},
}

// lockAcquire runs TryAcquire and fails t unless ok matches want.
func lockAcquire(t suiteT, p reference.LockProvider, space, doc, holder string, now int64, want bool, why string) reference.Lease {
	t.Helper()
	l, ok, err := p.TryAcquire(confCtx, space, doc, holder, now, lockTTL)
	if err != nil || ok != want {
		t.Fatalf("TryAcquire(%s, %s, %s, now=%d, ttl=%d) = %s, %v, %v; want ok=%v, nil: %s", space, doc, holder, now, lockTTL, confShow(l), ok, err, want, why)
	}
	if ok && (l.Holder != holder || l.Space != space || l.DocumentID != doc || l.ExpiresAt != now+lockTTL) {
		t.Errorf("TryAcquire(%s, %s, %s, now=%d) granted %s; want holder %s until %d", space, doc, holder, now, confShow(l), holder, now+lockTTL)
	}
	return l
}

func lockLost(t suiteT, err error, what string) {
	t.Helper()
	if !errors.Is(err, reference.ErrLeaseLost) {
		t.Errorf("%s = %v; want an error wrapping ErrLeaseLost", what, err)
	}
}

func lockMutualExclusion(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	a := lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "the lease is free")
	for _, at := range []int64{confNow, confNow + 1, confNow + lockTTL/2, confNow + lockTTL - 1} {
		l, ok, err := p.TryAcquire(confCtx, "space_a", "doc-1", "B", at, lockTTL)
		if err != nil || ok {
			t.Errorf("TryAcquire by B at %d while A holds until %d = %s, %v, %v; want ok=false", at, a.ExpiresAt, confShow(l), ok, err)
		} else if l.Holder != "A" || l.Token != a.Token {
			t.Errorf("refused TryAcquire by B returned lease %s; want the current lease of A (token %d)", confShow(l), a.Token)
		}
	}
	// B's refusals must not have disturbed A.
	if _, err := p.Renew(confCtx, a, confNow+lockTTL-1, lockTTL); err != nil {
		t.Errorf("Renew by A after B's refused attempts = %v; want nil", err)
	}
}

func lockScopes(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "free")
	b1 := lockAcquire(t, p, "space_a", "doc-2", "B", confNow, true, "another document is another lease")
	b2 := lockAcquire(t, p, "space_b", "doc-1", "B", confNow, true, "the same document id in another space is another lease")
	if err := p.Release(confCtx, b1); err != nil {
		t.Errorf("Release(space_a/doc-2 by B) = %v; want nil", err)
	}
	if err := p.Release(confCtx, b2); err != nil {
		t.Errorf("Release(space_b/doc-1 by B) = %v; want nil", err)
	}
	lockAcquire(t, p, "space_a", "doc-1", "C", confNow+1, false, "A still holds space_a/doc-1 after B released the others")
}

func lockExpiry(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	a := lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "free")
	lockAcquire(t, p, "space_a", "doc-1", "B", confNow+lockTTL-1, false, "A's lease is live until its expiry instant")
	b := lockAcquire(t, p, "space_a", "doc-1", "B", confNow+lockTTL, true, "A's lease expired (free from now >= ExpiresAt)")
	if b.Token <= a.Token {
		t.Errorf("token after expiry = %d; want greater than the expired holder's %d (fencing)", b.Token, a.Token)
	}
	_, err := p.Renew(confCtx, a, confNow+lockTTL+2, lockTTL)
	lockLost(t, err, "Renew by the expired holder A after B took over")
	lockLost(t, p.Release(confCtx, a), "Release by the expired holder A after B took over")
	lockAcquire(t, p, "space_a", "doc-1", "C", confNow+lockTTL+3, false, "B holds the lease; A's release must not free it")
	l, ok, err := p.TryAcquire(confCtx, "space_a", "doc-1", "A", confNow+lockTTL+4, lockTTL)
	if err != nil || ok {
		t.Errorf("TryAcquire by the old holder A while B holds = %s, %v, %v; want ok=false", confShow(l), ok, err)
	}
}

func lockRenew(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	a := lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "free")
	r, err := p.Renew(confCtx, a, confNow+500, lockTTL)
	if err != nil {
		t.Fatalf("Renew by the live holder A at %d = %v; want nil", confNow+500, err)
	}
	if r.Token != a.Token || r.Holder != "A" || r.ExpiresAt != confNow+500+lockTTL {
		t.Errorf("Renew gave %s; want holder A, token %d, expiring at %d", confShow(r), a.Token, confNow+500+lockTTL)
	}
	lockAcquire(t, p, "space_a", "doc-1", "B", confNow+lockTTL+100, false, "A renewed until now+1500")
	forged := r
	forged.Token++
	_, err = p.Renew(confCtx, forged, confNow+600, lockTTL)
	lockLost(t, err, "Renew with another token")
	forged = r
	forged.Holder = "B"
	_, err = p.Renew(confCtx, forged, confNow+600, lockTTL)
	lockLost(t, err, "Renew by B with A's token")
	_, err = p.Renew(confCtx, r, r.ExpiresAt+1, lockTTL)
	lockLost(t, err, "Renew after the lease expired (nobody took over)")
	lockAcquire(t, p, "space_a", "doc-1", "B", r.ExpiresAt+2, true, "A's renewed lease expired and a late renew must not revive it")
}

func lockRelease(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	a := lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "free")
	forged := a
	forged.Holder = "B"
	lockLost(t, p.Release(confCtx, forged), "Release by B of A's lease")
	forged = a
	forged.Token = a.Token + 7
	lockLost(t, p.Release(confCtx, forged), "Release by A with a wrong token")
	lockAcquire(t, p, "space_a", "doc-1", "B", confNow+1, false, "the forged releases must not free A's lease")
	if err := p.Release(confCtx, a); err != nil {
		t.Errorf("Release by the holder A = %v; want nil", err)
	}
	lockLost(t, p.Release(confCtx, a), "releasing A's lease a second time")
	b := lockAcquire(t, p, "space_a", "doc-1", "B", confNow+2, true, "A released")
	if b.Token <= a.Token {
		t.Errorf("token after release = %d; want greater than %d", b.Token, a.Token)
	}
	lockLost(t, p.Release(confCtx, a), "A releasing after B acquired")
	lockAcquire(t, p, "space_a", "doc-1", "C", confNow+3, false, "A's stale release must not free B's lease")
}

func lockReacquire(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	a := lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "free")
	again := lockAcquire(t, p, "space_a", "doc-1", "A", confNow+400, true, "the holder re-acquires its own live lease")
	if again.Token != a.Token {
		t.Errorf("re-acquire by the holder gave token %d; want the same token %d", again.Token, a.Token)
	}
	lockAcquire(t, p, "space_a", "doc-1", "B", confNow+lockTTL+100, false, "the re-acquire extended A's lease to now+1400")
}

func lockTokens(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	var last int64 = -1 << 62
	now := confNow
	for i := 0; i < 8; i++ {
		holder := fmt.Sprintf("H%d", i%3)
		l := lockAcquire(t, p, "space_a", "doc-1", holder, now, true, "the previous lease was released or expired")
		if l.Token <= last {
			t.Errorf("cycle %d: token %d; want strictly greater than the previous %d", i, l.Token, last)
		}
		last = l.Token
		// Interleave another document, which must not matter.
		o := lockAcquire(t, p, "space_a", fmt.Sprintf("other-%d", i), holder, now, true, "another document")
		if err := p.Release(confCtx, o); err != nil {
			t.Errorf("Release(other document) = %v", err)
		}
		if i%2 == 0 {
			if err := p.Release(confCtx, l); err != nil {
				t.Errorf("cycle %d: Release = %v; want nil", i, err)
			}
			now++
		} else {
			now += lockTTL + 1 // let it expire instead
		}
	}
}

func lockConcurrent(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	for round := 0; round < 5; round++ {
		doc := fmt.Sprintf("doc-%d", round)
		type res struct {
			l   reference.Lease
			ok  bool
			err error
		}
		results := confRace(confWorkers, func(i int) res {
			l, ok, err := p.TryAcquire(confCtx, "space_a", doc, fmt.Sprintf("H%d", i), confNow, lockTTL)
			return res{l, ok, err}
		})
		var winners []int
		for i, r := range results {
			if r.err != nil {
				t.Errorf("round %d: concurrent TryAcquire #%d error: %v", round, i, r.err)
			}
			if r.ok {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d concurrent TryAcquire on a free lease: winners %s; want exactly one", round, confWorkers, confShow(winners))
		}
		win := results[winners[0]].l
		for i, r := range results {
			if !r.ok && (r.l.Holder != win.Holder || r.l.Token != win.Token) {
				t.Errorf("round %d: refused TryAcquire #%d saw lease %s; want the winner's %s", round, i, confShow(r.l), confShow(win))
			}
		}
	}
}

func lockBlankIDs(t suiteT, fresh func() reference.LockProvider) {
	p := fresh()
	for _, c := range [][3]string{{"", "doc-1", "A"}, {" ", "doc-1", "A"}, {"space_a", "", "A"}, {"space_a", "\t", "A"}, {"space_a", "doc-1", ""}, {"space_a", "doc-1", "  "}} {
		l, ok, err := p.TryAcquire(confCtx, c[0], c[1], c[2], confNow, lockTTL)
		if ok || !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("TryAcquire(space %q, doc %q, holder %q) = %s, %v, %v; want ok=false and ErrInvalidArgument", c[0], c[1], c[2], confShow(l), ok, err)
		}
	}
	lockAcquire(t, p, "space_a", "doc-1", "A", confNow, true, "nothing was acquired by the blank calls")
}

// lockModelState is the model of a LockProvider: the live lease and the
// last token per document.
type lockModelState struct {
	p      reference.LockProvider
	clock  int64
	leases map[string]reference.Lease
	held   map[string]reference.Lease // last lease handed to each holder, per doc
	last   map[string]int64
}

func lockModel(t suiteT, fresh func() reference.LockProvider) {
	prop := confModelProp(t, func() *lockModelState {
		return &lockModelState{p: fresh(), clock: confNow, leases: map[string]reference.Lease{}, held: map[string]reference.Lease{}, last: map[string]int64{}}
	}, lockModelPick)
	confCheckProp(t, "LockProvider commands", prop, 40, 40)
}

func lockModelPick(r *rand.Rand) *confStep[*lockModelState] {
	doc := confOneOf(r, "doc-1", "doc-2")
	holder := confOneOf(r, "A", "B", "C")
	dt := 2 * int64(r.Intn(300)) // even; ttls are odd, so no tie with an expiry
	ttl := confOneOf(r, int64(101), int64(501), int64(1001))
	switch r.Intn(3) {
	case 0:
		return &confStep[*lockModelState]{fmt.Sprintf("TryAcquire(%s, %s, +%d, ttl %d)", doc, holder, dt, ttl), func(m *lockModelState) string { return m.acquire(doc, holder, dt, ttl) }}
	case 1:
		return &confStep[*lockModelState]{fmt.Sprintf("Renew(%s's last lease on %s, +%d, ttl %d)", holder, doc, dt, ttl), func(m *lockModelState) string { return m.renew(doc, holder, dt, ttl) }}
	default:
		return &confStep[*lockModelState]{fmt.Sprintf("Release(%s's last lease on %s)", holder, doc), func(m *lockModelState) string { return m.release(doc, holder) }}
	}
}

func (m *lockModelState) acquire(doc, holder string, dt, ttl int64) string {
	m.clock += dt
	l, ok, err := m.p.TryAcquire(confCtx, "space_a", doc, holder, m.clock, ttl)
	if err != nil {
		return confMismatch("TryAcquire", "no error", err)
	}
	cur, live := m.leases[doc]
	live = live && m.clock < cur.ExpiresAt
	switch {
	case live && cur.Holder != holder:
		if ok || l.Holder != cur.Holder || l.Token != cur.Token {
			return confMismatch("TryAcquire while another holder's lease is live", fmt.Sprintf("refused, current lease %s", confShow(cur)), fmt.Sprintf("ok=%v %s", ok, confShow(l)))
		}
		return ""
	case live:
		if !ok || l.Token != cur.Token || l.ExpiresAt != m.clock+ttl {
			return confMismatch("TryAcquire by the live holder (renew, same token)", fmt.Sprintf("token %d until %d", cur.Token, m.clock+ttl), fmt.Sprintf("ok=%v %s", ok, confShow(l)))
		}
	default:
		if !ok || l.Token <= m.last[doc] || l.Holder != holder || l.ExpiresAt != m.clock+ttl {
			return confMismatch("TryAcquire of a free or expired lease", fmt.Sprintf("granted to %s, token > %d, until %d", holder, m.last[doc], m.clock+ttl), fmt.Sprintf("ok=%v %s", ok, confShow(l)))
		}
	}
	m.leases[doc] = l
	m.held[doc+"/"+holder] = l
	m.last[doc] = max(m.last[doc], l.Token)
	return ""
}

func (m *lockModelState) renew(doc, holder string, dt, ttl int64) string {
	mine, had := m.held[doc+"/"+holder]
	if !had {
		return ""
	}
	m.clock += dt
	l, err := m.p.Renew(confCtx, mine, m.clock, ttl)
	cur, exists := m.leases[doc]
	valid := exists && cur.Holder == mine.Holder && cur.Token == mine.Token && m.clock < cur.ExpiresAt
	if !valid {
		if !errors.Is(err, reference.ErrLeaseLost) {
			return confMismatch(fmt.Sprintf("Renew of a lost lease (current %s)", confShow(cur)), "ErrLeaseLost", fmt.Sprintf("%s, %v", confShow(l), err))
		}
		return ""
	}
	if err != nil || l.Token != cur.Token || l.ExpiresAt != m.clock+ttl {
		return confMismatch("Renew by the live holder", fmt.Sprintf("token %d until %d", cur.Token, m.clock+ttl), fmt.Sprintf("%s, %v", confShow(l), err))
	}
	m.leases[doc] = l
	m.held[doc+"/"+holder] = l
	return ""
}

func (m *lockModelState) release(doc, holder string) string {
	mine, had := m.held[doc+"/"+holder]
	if !had {
		return ""
	}
	err := m.p.Release(confCtx, mine)
	cur, exists := m.leases[doc]
	same := exists && cur.Holder == mine.Holder && cur.Token == mine.Token
	switch {
	case !same:
		if !errors.Is(err, reference.ErrLeaseLost) {
			return confMismatch(fmt.Sprintf("Release of a lease that is not current (current %s)", confShow(cur)), "ErrLeaseLost", err)
		}
	case m.clock < cur.ExpiresAt:
		if err != nil {
			return confMismatch("Release by the live holder", "nil", err)
		}
		delete(m.leases, doc)
	default:
		// Releasing one's own expired lease may succeed or report it
		// lost; either way nobody holds it now.
		if err != nil && !errors.Is(err, reference.ErrLeaseLost) {
			return confMismatch("Release of one's own expired lease", "nil or ErrLeaseLost", err)
		}
		delete(m.leases, doc)
	}
	return ""
}
