package check_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
)

// A holder killed between the store's release and its lease-release event
// leaves only lease-releasing in the history: the next grant is legal. A
// holder that never began releasing still makes it two live holders.
func TestI7ReleaseCutShortByAKill(t *testing.T) {
	acquire := func(holder string, token, at int64) reference.Event {
		return reference.Event{Kind: reference.EvLeaseAcquire, Space: "sp", DocumentID: "d4", Holder: holder, Token: token, At: at, ExpiresAt: at + 250}
	}
	releasing := reference.Event{Kind: reference.EvLeaseReleasing, Space: "sp", DocumentID: "d4", Holder: "fault/1", Token: 1, At: 1050}
	cut := []reference.Event{acquire("fault/1", 1, 1000), releasing, acquire("quiesce/2", 2, 1100)}
	if v := check.CheckI7(check.Snapshot{}, check.Observed{Events: cut}); len(v) != 0 {
		t.Fatalf("release begun, then a kill: %v, want no violation", v)
	}
	live := []reference.Event{acquire("fault/1", 1, 1000), acquire("quiesce/2", 2, 1100)}
	if v := check.CheckI7(check.Snapshot{}, check.Observed{Events: live}); len(v) != 1 {
		t.Fatalf("no release begun: %v, want one two-live-holders violation", v)
	}
}
