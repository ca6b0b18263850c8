package sim

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A stalled step's Meanwhile must land inside the stall: between the
// stalled worker's pause hit and its next record. A competitor that
// committed only after the stale holder woke (a loaded machine let the
// holder's pause run out first), or never, leaves the case not exercised,
// never a pass.
func TestInterleavingMissed(t *testing.T) {
	pause := faults.PauseOn(100, 1)
	c := catalogue.Case{Steps: []catalogue.Step{
		{Worker: "holder", Meanwhile: &catalogue.Meanwhile{Worker: "fault", Does: catalogue.DeedCommit}},
		{Worker: "fault"},
	}}
	hit := history.Record{Worker: "holder", Phase: 0, Kind: history.Hit, Point: faults.BeforeStateCommit, Fault: &pause}
	commit := history.Record{Worker: "fault", Phase: 1, Kind: history.Seen, Obs: &history.Observation{What: history.SeenCommit, Op: "b"}}
	lease := history.Record{Worker: "fault", Phase: 1, Kind: history.Event, Event: &reference.Event{Kind: reference.EvLeaseAcquire}}
	woke := history.Record{Worker: "holder", Phase: 0, Kind: history.Event, Event: &reference.Event{Kind: reference.EvError}}
	// A service whose state store is its own: the harness sees its
	// commit only as the event it reports.
	reported := history.Record{Worker: "fault", Phase: 1, Kind: history.Event, Event: &reference.Event{Kind: reference.EvStateCommit, OperationID: "b"}}
	for name, tc := range map[string]struct {
		log  history.Log
		want string // "" for landed
	}{
		"inside":        {history.Log{hit, lease, commit, woke}, ""},
		"reported":      {history.Log{hit, lease, reported, woke}, ""},
		"reported late": {history.Log{hit, lease, woke, reported}, "did only after holder woke"},
		"after wake":    {history.Log{hit, lease, woke, commit}, "fault had to commit while holder stalled at beforeStateCommit, and did only after holder woke"},
		"never":         {history.Log{hit, lease, woke}, "and never did"},
		"before stall":  {history.Log{commit, hit, woke}, "and never did"},
		"no stall":      {history.Log{lease, commit}, "worker holder never stalled"},
		"holder died":   {history.Log{hit, commit}, ""},
	} {
		got := verdict.InterleavingMissed(c, tc.log, catalogue.Timing{})
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %+v, want exercised", name, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Detail, tc.want) || got.Cause != verdict.CauseInterleaving):
			t.Errorf("%s: %+v, want cause %s saying %q", name, got, verdict.CauseInterleaving, tc.want)
		}
	}
}

// Nothing to tear is settled (not run again) where the store's files
// change only when its workers act; a database server writes in the
// background, so there the case runs again and may find something.
func TestNothingToTearIsSettledOffServersOnly(t *testing.T) {
	for _, c := range []struct {
		cause          verdict.Cause
		server, settle bool
	}{
		{verdict.CauseNothingToTear, false, true}, {verdict.CauseNothingToTear, true, false},
		{verdict.CauseDataElsewhere, false, true}, {verdict.CauseDataElsewhere, true, true},
		{verdict.CauseTiming, false, false},
	} {
		if got := c.cause.Settled(c.server); got != c.settle {
			t.Errorf("%s on a server %v: settled %v, want %v", c.cause, c.server, got, c.settle)
		}
	}
}
