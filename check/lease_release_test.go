package check_test

import (
	"strings"
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

// A token that did not grow across a power loss is the lock provider
// forgetting a grant it had acknowledged: I7 says so and is the root
// cause (before, a store that skipped its fsyncs showed only "fencing
// token did not grow", with nothing pointing at durability). Without a
// restart between the grants the message is as before.
func TestI7TokenLostAcrossARestartIsTheRootCause(t *testing.T) {
	acquire := func(holder string, token, at int64) reference.Event {
		return reference.Event{Kind: reference.EvLeaseAcquire, Space: "sp", DocumentID: "d4", Holder: holder, Token: token, At: at, ExpiresAt: at + 250}
	}
	evs := []reference.Event{acquire("fault/1", 1, 1000), acquire("quiesce/2", 1, 2000)}
	power := []check.Restart{{Server: "machine (power loss)", Point: "beforeExtract", Worker: "fault", Events: 1}}
	v := check.CheckI7(check.Snapshot{}, check.Observed{Events: evs, Restarts: power})
	if len(v) != 1 || !v[0].RootCause || !strings.Contains(v[0].Message, "machine (power loss) restart #1 came between the two grants: the lock provider forgot the first grant") {
		t.Fatalf("token 1 twice across a power loss: %v, want one root-cause I7 naming the power loss", v)
	}
	v = check.CheckI7(check.Snapshot{}, check.Observed{Events: evs})
	if len(v) != 1 || v[0].RootCause || strings.Contains(v[0].Message, "restart") {
		t.Fatalf("token 1 twice without a restart: %v, want the plain I7", v)
	}
	// A restart before both grants explains nothing.
	early := []check.Restart{{Server: "machine (power loss)", Events: 0}}
	if v := check.CheckI7(check.Snapshot{}, check.Observed{Events: evs, Restarts: early}); len(v) != 1 || v[0].RootCause {
		t.Fatalf("restart before both grants: %v, want the plain I7", v)
	}
}

// A new grant needs a token greater than every earlier one of the
// document, released or expired ones included (LockProvider.TryAcquire);
// only a holder renewing its live lease keeps its token. Before, I7
// compared a grant with the current lease alone, so a provider that
// started its tokens again after a release, or kept an expired lease's
// token for the same holder, certified (found by a mutant of the bbolt
// example: token 1 granted five times in one case).
func TestI7TokenMustGrowAcrossReleaseAndExpiry(t *testing.T) {
	acquire := func(holder string, token, at int64) reference.Event {
		return reference.Event{Kind: reference.EvLeaseAcquire, Space: "sp", DocumentID: "d4", Holder: holder, Token: token, At: at, ExpiresAt: at + 250}
	}
	release := func(holder string, token, at int64) reference.Event {
		return reference.Event{Kind: reference.EvLeaseRelease, Space: "sp", DocumentID: "d4", Holder: holder, Token: token, At: at}
	}
	for _, c := range []struct {
		name string
		evs  []reference.Event
		want string // "" for no violation
	}{
		{"tokens restart after a release", []reference.Event{acquire("w/1", 1, 1000), release("w/1", 1, 1100), acquire("q/2", 1, 1200)},
			"q/2 got token 1 at 1200 after w/1 had been granted token 1"},
		{"the same holder after its own release", []reference.Event{acquire("w/1", 3, 1000), release("w/1", 3, 1100), acquire("w/1", 2, 1200)},
			"w/1 got token 2 at 1200 after w/1 had been granted token 3"},
		{"the same holder keeps an expired lease's token", []reference.Event{acquire("w/1", 1, 1000), acquire("w/1", 1, 1250)},
			"w/1 got token 1 at 1250 after w/1 had been granted token 1"},
		{"renewing a live lease keeps the token", []reference.Event{acquire("w/1", 1, 1000), acquire("w/1", 1, 1249), acquire("w/1", 1, 1400)}, ""},
		{"a greater token after a release", []reference.Event{acquire("w/1", 1, 1000), release("w/1", 1, 1100), acquire("q/2", 2, 1200), acquire("w/1", 3, 1500)}, ""},
		{"a greater token after expiry", []reference.Event{acquire("w/1", 1, 1000), acquire("w/1", 2, 1250)}, ""},
	} {
		v := check.CheckI7(check.Snapshot{}, check.Observed{Events: c.evs})
		switch {
		case c.want == "" && len(v) != 0:
			t.Errorf("%s: %v, want no violation", c.name, v)
		case c.want != "" && (len(v) != 1 || !strings.Contains(v[0].Message, c.want)):
			t.Errorf("%s: %v, want one I7 saying %q", c.name, v, c.want)
		}
	}
}
