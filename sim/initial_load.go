package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// loadInitial puts the case's initial state (Case.Initial) into the case's
// space before its first step, renamed to the space (operationIds scoped
// by OpID) and moved to the run's clock, and seeds the case's model-call
// log with the calls that made the loaded plans.
func (r *Runner) loadInitial(ctx context.Context, c catalogue.Case, cx execmode.Case, env CaseEnv, space, dir string) error {
	if c.Initial.Empty() {
		return nil
	}
	t := target(space, time.Now().UnixMilli())
	if x, ok := cx.(execmode.InProcessCase); ok {
		st, now, calls := x.Shared()
		if st == nil {
			return fmt.Errorf("backend %s is volatile: each worker starts from empty stores, so no initial state can reach the steps", r.backend.Name)
		}
		t.Now = now
		if err := initial.Load(ctx, *st, c.Initial, t); err != nil {
			return err
		}
		for op, n := range initialCalls(c.Initial, space) {
			for range n {
				if _, err := calls.Record(op); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if r.backend.Volatile {
		return fmt.Errorf("backend %s is volatile: every worker process starts from empty stores, so no initial state can reach the steps", r.backend.Name)
	}
	st, err := r.backend.Open(ctx, env)
	if err != nil {
		return fmt.Errorf("open backend %s: %w", r.backend.Name, err)
	}
	defer st.Close()
	if err := initial.Load(ctx, st, c.Initial, t); err != nil {
		return err
	}
	for op, n := range initialCalls(c.Initial, space) {
		if err := os.WriteFile(worker.CallLogFile(filepath.Join(dir, "calls"), op), []byte(strings.Repeat(".", n)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// initialCalls are the model calls the loaded ingestion plans came from,
// by scoped operationId: plan.extractionCall of each.
func initialCalls(s *initial.State, space string) map[string]int {
	out := map[string]int{}
	for _, op := range s.Operations {
		if op.Plan.Kind == reference.Ingestion && op.Plan.ExtractionCall > 0 {
			out[OpID(space, op.ID)] = op.Plan.ExtractionCall
		}
	}
	return out
}

// observeInitial puts what happened before the run into obs: the model
// calls the loaded plans came from (so that I1 sees a call during the run
// for a loaded operation as a call after its plan was frozen) and each
// loaded operation as persisted with its fingerprint (so that I1 and I5
// judge it like an operation the run persisted).
func observeInitial(c catalogue.Case, space string, obs *check.Observed) {
	if c.Initial.Empty() {
		return
	}
	if obs.ModelCalls == nil {
		obs.ModelCalls = map[string]int{}
	}
	for op, n := range initialCalls(c.Initial, space) {
		obs.ModelCalls[op] += n
	}
	if obs.Prepared == nil {
		obs.Prepared = map[string][]string{}
	}
	for op, fp := range c.Initial.Fingerprints(target(space, 0)) {
		obs.Prepared[op] = append(obs.Prepared[op], fp)
	}
	byID := map[string]string{}
	for _, op := range c.Initial.Operations {
		byID[op.ID] = op.Document
	}
	for _, id := range c.Initial.Unfinished() {
		obs.Pending = append(obs.Pending, check.PendingIntent{Operation: OpID(space, id), Document: byID[id]})
	}
}

// target is where a case's initial state is loaded.
func target(space string, now int64) initial.Target {
	return initial.Target{Space: space, OpID: func(id string) string { return OpID(space, id) }, Now: now}
}
