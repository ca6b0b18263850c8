package worker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The stopped-holders file: a paused holder is stopped until it goes on,
// an ended one for good, and one killed while paused since its pause.
func TestStoppedHolders(t *testing.T) {
	f := StopFile(filepath.Join(t.TempDir(), StoppedHoldersFile))
	if _, ok := f.since("fault/7#1"); ok {
		t.Fatal("a holder is stopped before anything was recorded")
	}
	f.Record(StopLine{Worker: "fault", PID: 7, What: stopPaused, At: 100})
	if at, ok := f.since("fault/7#1"); !ok || at != 100 {
		t.Errorf("paused at 100: since %d, %v", at, ok)
	}
	f.Record(StopLine{Worker: "fault", PID: 7, What: stopResumed, At: 900})
	if _, ok := f.since("fault/7#2"); ok {
		t.Error("a resumed holder is still stopped")
	}
	f.Record(StopLine{Worker: "fault", PID: 7, What: stopPaused, At: 1000})
	f.Record(StopLine{Worker: "fault", PID: 7, What: StopEnded, At: 1500})
	if at, ok := f.since("fault/7#3"); !ok || at != 1000 {
		t.Errorf("killed while paused at 1000: since %d, %v", at, ok)
	}
	f.Record(StopLine{Worker: "recover", PID: 8, What: StopEnded, At: 2000})
	if at, ok := f.since("recover/8#1"); !ok || at != 2000 {
		t.Errorf("ended at 2000: since %d, %v", at, ok)
	}
	for _, h := range []string{"recover/8", "recover#1", "recover/9#1", ""} {
		if _, ok := f.since(h); ok {
			t.Errorf("holder %q counts as the stopped recover/8", h)
		}
	}
}

// refusingLocks refuses every acquire with one holder's lease.
type refusingLocks struct {
	reference.LockProvider
	lease reference.Lease
}

func (r refusingLocks) TryAcquire(context.Context, string, string, string, int64, int64) (reference.Lease, bool, error) {
	return r.lease, false, nil
}

// A refusal by a stopped holder's lease waits until DeadHolderBound like
// any refusal; past it the acquire fails at once as a lock timeout, with
// what the worker saw in the history.
func TestDeadHolderLocks(t *testing.T) {
	mem := &history.Mem{}
	st := &StopMap{}
	st.Record(StopLine{Worker: "fault", PID: 7, What: StopEnded, At: 1000})
	w := &worker{spec: WorkerSpec{Worker: "recover", LeaseTTLMillis: 250}, hist: mem.Writer("recover", 1, nil), stops: st}
	locks := &deadHolderLocks{LockProvider: refusingLocks{lease: reference.Lease{Holder: "fault/7#1", Token: 2, ExpiresAt: 1 << 50}}, w: w}
	bound := check.DeadHolderBound(1000, 250)
	if _, ok, err := locks.TryAcquire(context.Background(), "sp", "d4", "recover/8#1", bound, 250); ok || err != nil {
		t.Fatalf("at the bound: ok %v err %v, want a plain refusal", ok, err)
	}
	if len(mem.Snapshot()) != 0 {
		t.Fatalf("a refusal within the bound was recorded: %v", mem.Snapshot())
	}
	_, ok, err := locks.TryAcquire(context.Background(), "sp", "d4", "recover/8#1", bound+1, 250)
	if ok || !errors.Is(err, reference.ErrLockTimeout) {
		t.Fatalf("past the bound: ok %v err %v, want a lock timeout", ok, err)
	}
	h := mem.Snapshot()
	if len(h) != 1 || h[0].Obs == nil || h[0].Obs.What != history.SeenDeadHolder || h[0].Obs.Holder != "fault/7#1" || h[0].Obs.Stopped != 1000 {
		t.Fatalf("history %+v: want one dead-holder observation of fault/7#1 stopped at 1000", h)
	}
}
