package catalogue

import (
	"fmt"
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
)

// SlowSyncTakeoverClass names the slow-sync cases with a competitor: at a
// window where a pause applies, the worker's next fsync makes its data
// durable, moves the case's clock past the lease and holds until another
// worker, asking for another version of the document the worker holds,
// took the lease over and finished; then the fsync returns and the store
// call goes on. A store call that checked something (a revision, a lease)
// before its fsync and trusts it after is caught there; nothing else in
// the matrix runs a competitor inside a store call. Its cases run when
// the selection names the class (--class slow-sync-takeover, beside
// --kind slow-sync for the column), one class per window
// (slow-sync-takeover-beforestatecommit) selects one.
const SlowSyncTakeoverClass = "slow-sync-takeover"

// SlowSyncTakeoverCase is the case of the class at window p: the window's
// pause case (the faulted worker in the background, recovery after),
// slow-sync armed in place of the pause, a competitor ingesting another
// version of the worker's first document while the fsync holds, and the
// final step resubmitting what the competitor left unfinished.
func (b Builder) SlowSyncTakeoverCase(p faults.Point) (Case, bool) {
	spec, found := faults.Lookup(p)
	if !found || spec.System != faults.Ingestion {
		return Case{}, false
	}
	c, ok := b.WindowCase(p, faults.Pause)
	if !ok {
		return Case{}, false
	}
	c.ID = caseID(SlowSyncTakeoverClass, string(p))
	c.Class, c.Kind = c.ID, faults.SlowSync
	c.Description = fmt.Sprintf("slow-sync with a competitor at %q (%s): the worker's next fsync makes its data durable and holds past the lease while another worker takes the lease over and ingests another version of the document; then the fsync returns and the store call goes on; recovery must: %s", spec.Step, spec.Window, spec.Recovery)
	for i := range c.Steps {
		if _, armed := c.Steps[i].Arms[p]; armed && c.Steps[i].Worker == "fault" {
			c.Steps[i].Arms[p] = faults.On(faults.SlowSync, 1)
			c.Steps = slices.Insert(c.Steps, i+1, clockJumpCompetitor())
			break
		}
	}
	last := &c.Steps[len(c.Steps)-1]
	last.Resubmit = append(slices.Clone(last.Resubmit), "competitor")
	return c, true
}

// slowSyncTakeover are the class's cases the selection asks for: a
// class filter naming the class (or one of its cases), narrowed by
// points.
func (s Selection) slowSyncTakeover(b Builder) []Case {
	var out []Case
	for _, spec := range faults.Catalogue {
		c, ok := b.SlowSyncTakeoverCase(spec.Point)
		if !ok || len(s.Points) > 0 && !slices.Contains(s.Points, c.Point) {
			continue
		}
		if slices.Contains(s.Classes, SlowSyncTakeoverClass) || slices.Contains(s.Classes, c.Class) {
			out = append(out, c)
		}
	}
	return out
}
