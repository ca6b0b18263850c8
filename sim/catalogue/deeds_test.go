package catalogue_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// TestCommitDeedFromEvent: a state commit counts as the meanwhile deed
// "commit" when the harness saw it at the state store, and when a service
// whose state store is its own reported it (its state-commit event; the
// Java example's stale-reader class was never exercised for want of it);
// another worker's commit, or another event, does not.
func TestCommitDeedFromEvent(t *testing.T) {
	for _, c := range []struct {
		name string
		r    history.Record
		want bool
	}{
		{"seen at the store", history.Record{Worker: "other", Kind: history.Seen, Obs: &history.Observation{What: history.SeenCommit}}, true},
		{"reported by the service", history.Record{Worker: "other", Kind: history.Event, Event: &reference.Event{Kind: reference.EvStateCommit}}, true},
		{"another worker's", history.Record{Worker: "fault", Kind: history.Event, Event: &reference.Event{Kind: reference.EvStateCommit}}, false},
		{"another event", history.Record{Worker: "other", Kind: history.Event, Event: &reference.Event{Kind: reference.EvLeaseAcquire}}, false},
	} {
		if got := catalogue.DeedCommit.Did(c.r, "other"); got != c.want {
			t.Errorf("%s: Did = %v, want %v", c.name, got, c.want)
		}
	}
}
