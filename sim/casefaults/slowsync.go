package casefaults

import (
	"fmt"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// A slow sync with a competitor (catalogue.SlowSyncTakeoverCase): the
// faulted worker runs in the background, and its slow fsync, its data
// durable and the case's clock past the lease, holds until the supervisor
// releases the worker (the next foreground worker, the competitor, is
// done). The supervisor moves on to that worker once the hold is in
// effect, which the record holdSlowSync appends says (a history.Server
// record of the slow-sync: the supervisor carried the fault out), as it
// does for a request a server-pause or a partition holds.

// slowSyncHoldLimit bounds a hold whose release does not come: the next
// worker waits on this one (a store that holds a lock across its fsync,
// as SQLite holds its write lock across its commit's), or the supervisor
// gave the case up. The fsync returns then, and the record says so.
const slowSyncHoldLimit = 5 * time.Second

// holdSlowSync records that worker spec's slow fsync after point p holds
// past its lease (moved: how far the case's clock went on), and waits
// for the worker's release; false when the release did not come within
// slowSyncHoldLimit.
func holdSlowSync(spec *worker.WorkerSpec, p faults.Point, a faults.Action, moved time.Duration) bool {
	h, err := history.Open(spec.History, spec.Worker, spec.Phase, func() int64 { return time.Now().UnixMilli() })
	if err != nil {
		return true // no record: the supervisor waits for the worker's end instead
	}
	defer h.Close()
	h.Append(history.Record{Kind: history.Server, Point: p, Fault: &a,
		Note: fmt.Sprintf("slow-sync: the fsync made its data durable and holds, the case's clock %s on (past the lease), until the next worker is done", moved)})
	for deadline := time.Now().Add(slowSyncHoldLimit); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(spec.ReleaseFile); err == nil {
			return true
		}
	}
	h.Append(history.Record{Kind: history.Server, Point: p, Fault: &a, Note: fmt.Sprintf("slow-sync: no release after %s: the fsync returns while the next worker still runs (it may wait on a lock the store holds across its fsync)", slowSyncHoldLimit)})
	return false
}

// slowSyncUnreleased is why a slow sync whose hold found no release is
// not exercised: the competitor could not run inside the store call.
func slowSyncUnreleased(p faults.Point, worker string) *verdict.NotExercisedReason {
	return &verdict.NotExercisedReason{Cause: verdict.CauseInterleaving,
		Detail: fmt.Sprintf("slow-sync at %s (worker %s): the next worker did not finish while the fsync held (%s): it waited on the store call", p, worker, slowSyncHoldLimit),
		Advice: "the store holds a lock across its fsync (SQLite holds its write lock across its commit's), so no other worker can act inside the call: the slow-sync column without a competitor judges such a store"}
}
