package properties

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The crash-level members of the zoo: stores that pass much of the
// conformance suite's single-process view but break under real process
// kills; each is a negative control of CertifyCrashSafety
// (CrashOptions.ExpectBroken) caught by the invariant named for it, whose
// verdict names the real cause.

// brokenSQLite is the embedded SQLite backend with one store broken by
// breakStores (in every worker process alike).
func brokenSQLite(name string, breakStores func(reference.Stores) reference.Stores) sim.Backend {
	return sim.Backend{
		Name: name,
		Open: func(_ context.Context, env sim.CaseEnv) (reference.Stores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return reference.Stores{}, err
			}
			st, err := sqlite.Open(filepath.Join(env.Dir, "store.db"), sqlite.Options{CreateInsteadOfMerge: env.Mutant == sim.MutantCreateNotMerge})
			if err != nil {
				return reference.Stores{}, err
			}
			return breakStores(st), nil
		},
	}
}

// plainWriter hides every method beyond reference.GraphWriter: a
// third-party writer that offers nothing optional.
type plainWriter struct{ reference.GraphWriter }

// planInMemory persists the operation row but keeps its plan in the
// process's memory only (a write-behind cache that never flushed).
type planInMemory struct {
	reference.OperationStore
	plans map[string]reference.Plan
}

func (s *planInMemory) CreateIfAbsent(ctx context.Context, op reference.Operation, p reference.Plan) (bool, error) {
	ok, err := s.OperationStore.CreateIfAbsent(ctx, op, p)
	if ok && err == nil {
		s.plans[op.OperationID] = p
	}
	return ok, err
}

func (s *planInMemory) GetPlan(_ context.Context, id string) (reference.Plan, error) {
	if p, ok := s.plans[id]; ok {
		return p, nil
	}
	return reference.Plan{}, reference.ErrNotFound
}

// expiryIgnored refuses every holder but the last one it granted, expired
// or not (the expiry column is written but never read).
type expiryIgnored struct {
	reference.LockProvider
}

func (p *expiryIgnored) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	// Ask as if time stood still at the first grant: a lease is never
	// seen as expired.
	l, ok, err := p.LockProvider.TryAcquire(ctx, space, doc, holder, 1, ttl)
	if err != nil || !ok {
		return l, ok, err
	}
	// Stamp the grant as the contract wants, so only the refusal shows.
	l.ExpiresAt = now + ttl
	return l, ok, err
}

// questionOnlyPlans compares only the question of a repeated save: the
// same operation_id with other minutes returns the first row instead of
// the conflict (a store that checks some of the fields).
type questionOnlyPlans struct{ plansave.PlanStore }

func (p questionOnlyPlans) Save(ctx context.Context, owner, operationID, question string, minutes int) (int64, error) {
	rows, err := p.PlanStore.List(ctx, owner)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if r.OperationID == operationID && r.Question == question {
			return r.ID, nil
		}
	}
	return p.PlanStore.Save(ctx, owner, operationID, question, minutes)
}

// leaseKeptForever writes "never" in the expiry column (a NULL read back
// as infinity, say) while it tells each holder the TTL it asked for: the
// grant looks right, and a refusal reports the lease as still live, so
// the service's own check of the contract (reference.leaseContract) sees
// nothing wrong. Only the clock can tell: the lease of a holder that died
// is never handed over.
type leaseKeptForever struct{ reference.LockProvider }

func (p *leaseKeptForever) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	l, ok, err := p.LockProvider.TryAcquire(ctx, space, doc, holder, now, forever)
	if ok && err == nil {
		l.ExpiresAt = now + ttl
	}
	return l, ok, err
}

func (p *leaseKeptForever) Renew(ctx context.Context, l reference.Lease, now, ttl int64) (reference.Lease, error) {
	out, err := p.LockProvider.Renew(ctx, l, now, forever)
	if err == nil {
		out.ExpiresAt = now + ttl
	}
	return out, err
}

// A lock provider whose leases are never handed over fails the whole
// matrix on I7, naming the lease, as a negative control that passes: no
// case waits for the lease of a dead worker beyond a few TTLs, and no
// worker is ended by a timeout. (Before, the same run took 15 minutes and
// came back undecided; its wall time now is measured by
// BenchmarkLeaseNeverHandedOver.)
func TestZooLeaseNeverHandedOver(t *testing.T) {
	res := CertifyCrashSafety(t, leaseNeverHandedOver(), CrashOptions{ExpectBroken: []string{"I7"}})
	assertLeaseNotHandedOver(t, res)
	t.Log(res.Timing)
}

func leaseNeverHandedOver() sim.Backend {
	return brokenSQLite("sqlite-lease-kept-forever", func(st reference.Stores) reference.Stores {
		st.Locks = &leaseKeptForever{st.Locks}
		return st
	})
}

// assertLeaseNotHandedOver checks that a run against leaseKeptForever
// names the lease in I7 and that no worker ran into its deadline.
func assertLeaseNotHandedOver(t testing.TB, res verdict.Report) {
	t.Helper()
	var vs []string
	found := false
	for _, r := range res.Results {
		for _, v := range r.Violations {
			if v.Invariant.Short() == "I7" {
				vs = append(vs, v.Message)
				found = found || strings.Contains(v.Message, "the lock provider did not hand over an expired lease")
			}
		}
	}
	if !found {
		t.Errorf("no I7 violation says the lock provider did not hand over an expired lease; I7 says %v", vs)
	}
	for _, r := range res.Results {
		for _, w := range r.Workers {
			if w.Exit == "timeout" || strings.Contains(w.Exit, "timed out") {
				t.Errorf("case %s: worker %s ended by a timeout (%s), not by the evidence", r.Case.ID, w.Worker, w.Exit)
			}
		}
		for _, n := range r.Notes {
			if strings.Contains(n, "interrupted") {
				t.Errorf("case %s was interrupted: %s", r.Case.ID, n)
			}
		}
	}
}

func TestZooCrashLevel(t *testing.T) {
	crash := []faults.Kind{faults.Crash}
	for _, c := range []struct {
		name      string
		backend   sim.Backend
		opts      CrashOptions
		invariant string
		says      string // the invariant's verdict must name the real cause
	}{
		{
			// The blind spot of a checker reading the graph as a map: a
			// CREATE-ing writer with nothing beyond the interface.
			name: "WriterCreatesNoOptionalMethods",
			backend: brokenSQLite("sqlite-create-plain", func(st reference.Stores) reference.Stores {
				st.Writer = plainWriter{st.Writer}
				return st
			}),
			opts:      CrashOptions{Mutant: sim.MutantCreateNotMerge, Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Unknown}},
			invariant: "I3", says: "duplicate in the graph",
		},
		{
			// The matrix's conflict probe changes one field at a time.
			name: "PlanSaveComparesQuestionOnly",
			backend: func() sim.Backend {
				b := brokenSQLite("sqlite-plansave-question-only", func(st reference.Stores) reference.Stores { return st })
				b.OpenPlanSave = func(_ context.Context, env sim.CaseEnv) (sim.PlanSaveStores, error) {
					if err := os.MkdirAll(env.Dir, 0o755); err != nil {
						return sim.PlanSaveStores{}, err
					}
					s, err := sqlite.OpenPlanSave(env.Dir, true)
					if err != nil {
						return sim.PlanSaveStores{}, err
					}
					return sim.PlanSaveStores{Checkpoints: s, Plans: questionOnlyPlans{s}, Closer: s}, nil
				}
				return b
			}(),
			opts:      CrashOptions{Points: []faults.Point{faults.PlanSaveBeforeCheckpoint}, Kinds: crash},
			invariant: "I8", says: "another minutes (every other field the same) was accepted",
		},
		{
			name: "PlanNotDurable",
			backend: brokenSQLite("sqlite-plan-in-memory", func(st reference.Stores) reference.Stores {
				st.Ops = &planInMemory{OperationStore: st.Ops, plans: map[string]reference.Plan{}}
				return st
			}),
			opts:      CrashOptions{Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: crash},
			invariant: "I5", says: "plan",
		},
		{
			// A lease that never expires: the restarted worker can never
			// take the dead worker's document.
			name: "LeaseNeverExpires",
			backend: brokenSQLite("sqlite-lease-forever", func(st reference.Stores) reference.Stores {
				st.Locks = &neverExpires{st.Locks}
				return st
			}),
			opts:      CrashOptions{Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: crash},
			invariant: "I7", says: "does not expire when asked",
		},
		{
			// Leases stamped correctly, but an expired one still refuses
			// other holders: the dead worker's document stays locked.
			name: "LeaseExpiryIgnored",
			backend: brokenSQLite("sqlite-lease-expiry-ignored", func(st reference.Stores) reference.Stores {
				st.Locks = &expiryIgnored{LockProvider: st.Locks}
				return st
			}),
			opts:      CrashOptions{Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: crash},
			invariant: "I7", says: "that expired at",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			o := c.opts
			o.ExpectBroken = []string{c.invariant}
			res := CertifyCrashSafety(t, c.backend, o)
			var said []string
			for _, r := range res.Results {
				for _, v := range r.Violations {
					if v.Invariant.Short() == c.invariant {
						said = append(said, v.Message)
					}
				}
			}
			if !slices.ContainsFunc(said, func(m string) bool { return strings.Contains(m, c.says) }) {
				t.Errorf("no %s violation says %q: %q", c.invariant, c.says, said)
			}
			t.Logf("caught by %v in %v", res.Broken(), time.Since(start).Round(time.Millisecond))
		})
	}
}

// registryHangs answers FindMatches never: a lost connection the driver
// waits on for ever, say.
type registryHangs struct{ reference.EntityRegistry }

func (r registryHangs) FindMatches(ctx context.Context, space, typ string, names []string) ([]reference.RegisteredEntity, error) {
	for ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return nil, ctx.Err()
}

// A store call that never returns is undecided, not a failure (no
// invariant is about how long a store takes, and a stalled server or
// machine looks the same from outside), and it costs the run one worker
// deadline, not one per case: the fault-free probe hangs, its worker's
// stacks name the store method, and the matrix is not run.
func TestZooStoreCallHangs(t *testing.T) {
	b := brokenSQLite("sqlite-registry-hangs", func(st reference.Stores) reference.Stores {
		st.Registry = registryHangs{st.Registry}
		return st
	})
	res := crashrun.Run(t, b, crashrun.Options{ProcessTimeout: 3 * time.Second})
	if res.Dir != "" {
		defer os.RemoveAll(res.Dir)
	}
	if res.ExitCode != 2 || len(res.Results) != 1 || res.Results[0].Verdict != verdict.Undecided {
		t.Fatalf("exit %d, %d results; want exit 2 (undecided) and the probe's case alone\n%s", res.ExitCode, len(res.Results), crashrun.Describe(b.Name, res))
	}
	notes := strings.Join(res.Results[0].Notes, "; ")
	if !strings.Contains(notes, "store method properties.registryHangs.FindMatches (zoo_crash_test.go:") {
		t.Errorf("the notes do not name the store method that hung: %s", notes)
	}
}
