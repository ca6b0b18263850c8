package explore

import (
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// A random kill anchored to the worker's k-th store call or j-th commit
// (sim.RandomKillCase) counts from the worker's start: dropping an action
// before the kill moves every later call down by the calls that action
// made, and the kill, left at k, would land somewhere else. shiftedKills
// proposes, for each action of such a worker that finished before its kill,
// the case without that action and with the kill's hit moved down by what
// the action took of calls or commits (its Result records, h: the timeline
// of a run of c). Whether the moved kill still breaks the invariant is the
// shrinker's confirm runs' to say.
func shiftedKills(c catalogue.Case, h history.Log) []catalogue.Case {
	if len(h) == 0 {
		return nil
	}
	var out []catalogue.Case
	for i, st := range c.Steps {
		if st.Worker == "quiesce" || len(st.Actions) < 2 {
			continue
		}
		for _, p := range []faults.Point{faults.StoreCall, faults.StoreCommit} {
			a, ok := st.Arms[p]
			if !ok || a.Kind != faults.Crash || a.Hit < 1 {
				continue
			}
			took := actionInstants(h, st.Worker, p)
			done := 0 // the running count at the end of action j
			for j, n := range took {
				done += n
				if j >= len(st.Actions) || n <= 0 || done >= a.Hit {
					continue // nothing to move, or the kill came first
				}
				d := clone(c)
				d.Steps[i].Actions = slices.Delete(d.Steps[i].Actions, j, j+1)
				moved := a
				moved.Hit -= n
				d.Steps[i].Arms[p] = moved
				out = append(out, d)
			}
		}
	}
	return out
}

// actionInstants says, for each action of worker's first run (phase 0)
// that finished, how many store calls (p = StoreCall) or commits it made:
// the difference of the running counts of its Result record and the one
// before. An action the kill ended has no Result record.
func actionInstants(h history.Log, worker string, p faults.Point) []int {
	var out []int
	prev := 0
	for _, r := range h {
		if r.Worker != worker || r.Phase != 0 || r.Kind != history.Result {
			continue
		}
		n := r.Calls
		if p == faults.StoreCommit {
			n = r.Commits
		}
		for len(out) < r.Index {
			out = append(out, 0)
		}
		out = append(out, n-prev)
		prev = n
	}
	return out
}
