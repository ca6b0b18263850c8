package explore

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Dropping an action before a kill anchored to the worker's k-th store
// call moves the kill down by the calls that action made, so that it
// lands where it did; an action the kill ended, or one after it, moves
// nothing.
func TestShiftedKillsFollowTheDroppedAction(t *testing.T) {
	c := catalogue.Case{Steps: []catalogue.Step{
		{Worker: "fault", Actions: []catalogue.Action{{Do: "ingest", Doc: "a"}, {Do: "ingest", Doc: "b"}, {Do: "ingest", Doc: "c"}},
			Arms: faults.Arms{faults.StoreCall: faults.On(faults.Crash, 30)}},
		{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover"}}},
	}}
	h := history.Log{
		{Worker: "fault", Kind: history.Result, Index: 0, Calls: 12, Commits: 4},
		{Worker: "quiesce", Kind: history.Result, Index: 0, Calls: 50},
		{Worker: "fault", Kind: history.Result, Index: 1, Calls: 25, Commits: 9},
		// action 2 was killed at call 30: no result
	}
	got := shiftedKills(c, h)
	if len(got) != 2 {
		t.Fatalf("%d candidates, want 2 (drop action 0 or 1, the kill moved by its calls): %+v", len(got), got)
	}
	for i, want := range []struct {
		hit  int
		docs string
	}{{30 - 12, "bc"}, {30 - 13, "ac"}} {
		st := got[i].Steps[0]
		docs := ""
		for _, a := range st.Actions {
			docs += a.Doc
		}
		if st.Arms[faults.StoreCall].Hit != want.hit || docs != want.docs {
			t.Errorf("candidate %d: actions %s, kill %s; want actions %s, kill at hit %d", i, docs, st.Arms[faults.StoreCall], want.docs, want.hit)
		}
	}
	if c.Steps[0].Arms[faults.StoreCall].Hit != 30 || len(c.Steps[0].Actions) != 3 {
		t.Errorf("shiftedKills changed the case it was given: %+v", c.Steps[0])
	}
	commit := c
	commit.Steps = []catalogue.Step{{Worker: "fault", Actions: c.Steps[0].Actions, Arms: faults.Arms{faults.StoreCommit: faults.On(faults.Crash, 7)}}, c.Steps[1]}
	if got := shiftedKills(commit, h); len(got) != 1 || got[0].Steps[0].Arms[faults.StoreCommit].Hit != 3 {
		t.Errorf("a kill at commit 7: candidates %+v, want one, dropping action 0 (4 commits) with the kill at commit 3; action 1 ended after commit 9, so the kill came in it", got)
	}
}
