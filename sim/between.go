package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Competitors between every pair of store calls.
//
// The lease-fault cases (leaseFaultCase) park the stale holder at a named
// window while a competitor, granted the broken lease, commits another
// version of the document. A bug of the stale holder that sits between two
// named windows (a revision read moved next to the write it guards, a
// check done after the write) is out of their reach. The between-calls
// cases are the same two holders with the stall moved: before the stale
// holder's k-th store call (faults.StoreCall, armed "pause@k"), for every
// k from 1 to the number of store calls the stale holder makes when nobody
// competes, which a probe counts.

// staleCallRuns is how many probe runs count the stale holder's calls: the
// fewest wins, so that a run which renewed its lease through the store
// (a slow step) does not add a call the cases may never reach.
const staleCallRuns = 2

// probeStaleCalls counts, for each lease fault kind, the store calls of the
// stale holder when nobody competes.
func (r *Runner) probeStaleCalls(ctx context.Context) (map[faults.Kind]int, []verdict.CaseResult, error) {
	out := map[faults.Kind]int{}
	var results []verdict.CaseResult
	runs := staleCallRuns
	if r.cfg.InProcess {
		runs = 1 // simulated time: every run is the same
	}
	for _, k := range catalogue.StaleCallKinds {
		c := catalogue.Lease(r.cfg.LeaseTTL).StaleCallProbe(k)
		if r.serviceCannot(c) {
			continue
		}
		for n := 0; n < runs; n++ {
			res := r.RunCase(ctx, c)
			results = append(results, res)
			if res.Verdict != verdict.Pass {
				return out, results, fmt.Errorf("probe %s: %s without any fault: %s %s", c.ID, res.Verdict, strings.Join(res.Broken(), ","), strings.Join(res.Notes, "; "))
			}
			calls := StoreCalls(res.Timeline, c.Steps[0].Worker, 0)
			if n == 0 || calls < out[k] {
				out[k] = calls
			}
		}
	}
	return out, results, nil
}

// StoreCalls counts the StoreCall hits of a worker's phase in a history.
func StoreCalls(h history.Log, worker string, phase int) int {
	n := 0
	for _, rec := range h {
		if rec.Worker == worker && rec.Phase == phase && rec.Kind == history.Hit && rec.Point == faults.StoreCall {
			n++
		}
	}
	return n
}
