package verdict

import (
	"sort"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Probe is what the probe run found (catalogue.Probe, which the
// catalogue draws the store windows, random kills and sweeps from) and the
// probe cases' results, which must pass like any case.
type Probe struct {
	catalogue.Probe
	Results []CaseResult `json:"-"`
}

// FaultWorkerTime is the fault worker's own run time (its exit record).
func (cr CaseResult) FaultWorkerTime() time.Duration {
	for _, rec := range cr.Timeline {
		if rec.Worker == "fault" && rec.Kind == history.Exit {
			return time.Duration(rec.Micros) * time.Microsecond
		}
	}
	return 0
}

// FaultWorkerInstants are the fault worker's store calls and commits (its
// exit record).
func (cr CaseResult) FaultWorkerInstants() (calls, commits int) {
	for _, rec := range cr.Timeline {
		if rec.Worker == "fault" && rec.Kind == history.Exit {
			return rec.Calls, rec.Commits
		}
	}
	return 0, 0
}

// storeWindowsOf lists the store windows of a run's cases, sorted.
func storeWindowsOf(results []CaseResult) []faults.Point {
	seen := map[faults.Point]bool{}
	var out []faults.Point
	for _, r := range results {
		if r.Case.Store && !seen[r.Case.Point] {
			seen[r.Case.Point] = true
			out = append(out, r.Case.Point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// WithProbe records in a report what the probe found. A probe that did not
// pass fails the report with its cases when the run is the whole matrix;
// a narrowed run judges only the cases it selected.
func (rep *Report) WithProbe(pr Probe, err error, sel catalogue.Selection) {
	// A probe that failed found nothing to report: saying "the probe
	// found none" would claim a probe that did not run to its end.
	rep.Probed = err == nil
	rep.StoreWindows = pr.Windows
	rep.DurableCalls = len(pr.Durable)
	for _, c := range pr.Durable {
		if len(c.Ops) > 1 {
			rep.DurableMulti++
		}
	}
	for srv, calls := range pr.ServerDurable {
		if rep.ServerDurable == nil {
			rep.ServerDurable = map[string]int{}
		}
		rep.ServerDurable[srv] = len(calls)
	}
	rep.Subset = sel.Describe()
	if err != nil && sel.Whole() {
		for _, r := range pr.Results {
			if r.Verdict != Pass {
				rep.Results = append(rep.Results, r)
			}
		}
		rep.Finish()
	}
}
