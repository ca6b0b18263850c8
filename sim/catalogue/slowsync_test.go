package catalogue

import (
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// The slow-sync cases with a competitor run only when their class is
// named; each is its window's pause case with
// slow-sync armed in the background worker and the competitor right
// after it.
func TestSlowSyncTakeoverCasesAreSelectedByTheirClass(t *testing.T) {
	b := Lease(0)
	sel := Selection{Kinds: []faults.Kind{faults.SlowSync}, Disk: []faults.Kind{faults.SlowSync}}
	if n := len(sel.slowSyncTakeover(b)); n != 0 {
		t.Fatalf("--kind slow-sync alone: %d takeover cases, want none", n)
	}
	sel.Classes = []string{SlowSyncTakeoverClass}
	all := sel.slowSyncTakeover(b)
	sel.Points = []faults.Point{faults.BeforeStateCommit}
	one := sel.slowSyncTakeover(b)
	if len(all) < 5 || len(one) != 1 || one[0].ID != "slow-sync-takeover-beforestatecommit" {
		t.Fatalf("%d cases for the class, %d at one point (%v)", len(all), len(one), one)
	}
	c := one[0]
	i := slices.IndexFunc(c.Steps, func(st Step) bool { return st.Worker == "fault" })
	if i < 0 || !c.Steps[i].Background || c.Steps[i].Arms[faults.BeforeStateCommit].Kind != faults.SlowSync ||
		c.Steps[i+1].Worker != "competitor" || !slices.Contains(c.Steps[len(c.Steps)-1].Resubmit, "competitor") || c.Kind != faults.SlowSync {
		t.Fatalf("case %s: %+v", c.ID, c.Steps)
	}
	for _, c := range all {
		if spec, _ := faults.Lookup(c.Point); !spec.Applies(faults.Pause) {
			t.Errorf("%s at a window where no pause applies", c.ID)
		}
	}
}
