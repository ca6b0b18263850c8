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
)

// The crash-level members of the zoo: stores that pass much of the
// conformance suite's single-process view but break under real process
// kills; each is asserted to be caught by the crash matrix with the
// invariant named for it, and within a bound of wall time.

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

func TestZooCrashLevel(t *testing.T) {
	crash := []faults.Kind{faults.Crash}
	for _, c := range []struct {
		name      string
		backend   sim.Backend
		opts      crashrun.Options
		invariant string
		says      string        // the verdict must name the real cause
		within    time.Duration // wall time bound of the whole run
	}{
		{
			// The blind spot of a checker reading the graph as a map: a
			// CREATE-ing writer with nothing beyond the interface.
			name: "WriterCreatesNoOptionalMethods",
			backend: brokenSQLite("sqlite-create-plain", func(st reference.Stores) reference.Stores {
				st.Writer = plainWriter{st.Writer}
				return st
			}),
			opts:      crashrun.Options{Mutant: sim.MutantCreateNotMerge, Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Unknown}},
			invariant: "I3", says: "duplicate in the graph", within: 30 * time.Second,
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
			opts:      crashrun.Options{Points: []faults.Point{faults.PlanSaveBeforeCheckpoint}, Kinds: crash},
			invariant: "I8", says: "another minutes (every other field the same) was accepted", within: 30 * time.Second,
		},
		{
			name: "PlanNotDurable",
			backend: brokenSQLite("sqlite-plan-in-memory", func(st reference.Stores) reference.Stores {
				st.Ops = &planInMemory{OperationStore: st.Ops, plans: map[string]reference.Plan{}}
				return st
			}),
			opts:      crashrun.Options{Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: crash},
			invariant: "I5", says: "plan", within: 30 * time.Second,
		},
		{
			// A lease that never expires: the restarted worker can never
			// take the dead worker's document.
			name: "LeaseNeverExpires",
			backend: brokenSQLite("sqlite-lease-forever", func(st reference.Stores) reference.Stores {
				st.Locks = &neverExpires{st.Locks}
				return st
			}),
			opts:      crashrun.Options{Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: crash},
			invariant: "I7", says: "does not expire when asked", within: 20 * time.Second,
		},
		{
			// Leases stamped correctly, but an expired one still refuses
			// other holders: the dead worker's document stays locked.
			name: "LeaseExpiryIgnored",
			backend: brokenSQLite("sqlite-lease-expiry-ignored", func(st reference.Stores) reference.Stores {
				st.Locks = &expiryIgnored{LockProvider: st.Locks}
				return st
			}),
			opts:      crashrun.Options{Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: crash},
			invariant: "I7", says: "that expired at", within: 20 * time.Second,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			res := crashrun.Run(t, c.backend, c.opts)
			took := time.Since(start)
			desc := crashrun.Describe(c.backend.Name, res)
			if res.Dir != "" {
				defer os.RemoveAll(res.Dir)
			}
			if res.ExitCode != 1 || !slices.Contains(res.Broken(), c.invariant) {
				t.Fatalf("exit %d, broke %v; want exit 1 and %s\n%s", res.ExitCode, res.Broken(), c.invariant, desc)
			}
			if !strings.Contains(desc, c.says) {
				t.Errorf("the verdict does not say %q:\n%s", c.says, desc)
			}
			if took > c.within {
				t.Errorf("caught after %v; want within %v", took.Round(time.Millisecond), c.within)
			}
			t.Logf("caught by %v in %v", res.Broken(), took.Round(time.Millisecond))
		})
	}
}
