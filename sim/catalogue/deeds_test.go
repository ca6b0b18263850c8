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
	event := func(worker, kind string) history.Record {
		return history.Record{Worker: worker, Kind: history.Event, Event: &reference.Event{Kind: kind}}
	}
	seen := history.Record{Worker: "other", Kind: history.Seen, Obs: &history.Observation{What: history.SeenCommit}}
	if !catalogue.DeedCommit.Did(seen, "other") {
		t.Error("a commit seen at the state store is not the deed commit")
	}
	if !catalogue.DeedCommit.Did(event("other", reference.EvStateCommit), "other") {
		t.Error("a commit the service reported (state-commit) is not the deed commit")
	}
	if catalogue.DeedCommit.Did(event("fault", reference.EvStateCommit), "other") {
		t.Error("another worker's commit counts as other's")
	}
	if catalogue.DeedCommit.Did(event("other", reference.EvLeaseAcquire), "other") {
		t.Error("a lease grant counts as a commit")
	}
}
