package check

import (
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
)

// A worker stalled before one of its store calls (faults.StoreCall) may
// stall between its check that an operation has no frozen plan and its
// model call: while it stands, another holder freezes the plan, and the
// stalled worker, waking, asks the model for an operation that by then is
// frozen. Nothing in a client can fence a model call (it writes nothing);
// its fence comes at the freeze, which refuses it (its lease is gone), so
// the answer is never used. Such a call is not the service asking again
// for a frozen plan, and I1 does not count it.

// faultedWorkers are the workers a fault left out of step with the
// others, which the plan and stale-write checks excuse: those whose lease a
// fault broke (split, expire), those a fault stalled before one of their
// store calls (faults.StoreCall), and those whose request a server-pause
// or a partition held in flight past their lease.
type faultedWorkers struct {
	leaseFaulted, stalled map[string]bool
}

func faultedWorkersOf(h history.Log) faultedWorkers {
	fw := faultedWorkers{leaseFaulted: map[string]bool{}, stalled: map[string]bool{}}
	for _, r := range h {
		if r.Kind != history.Hit || r.Fault == nil {
			continue
		}
		if r.Fault.Kind.IsLeaseFault() {
			fw.leaseFaulted[r.Worker] = true
		}
		if r.Point == faults.StoreCall && r.Fault.Kind == faults.Pause {
			fw.stalled[r.Worker] = true
		}
		// A server stopped or a partition at the window holds the
		// worker's next request in flight past its lease: the request
		// (a graph write, a commit) passed its lease check before, and
		// lands after another holder took the lease over, as a stall
		// between a lease check and the write it fences does. No client
		// can fence that: the revision CAS, the claim and the plan
		// fingerprint must stop it, and the graph and state invariants
		// judge what it left.
		// So does a slow fsync inside a store call (slow-sync): the call
		// checked what it checked before the fsync, and its write lands
		// after the competitor's.
		if r.Fault.Kind == faults.ServerPause || r.Fault.Kind == faults.Partition || r.Fault.Kind == faults.SlowSync {
			fw.stalled[r.Worker] = true
		}
	}
	return fw
}

// stalledCallsAfterFreeze counts the model calls for op that workers
// stalled before a store call made after op's plan was frozen.
func stalledCallsAfterFreeze(h history.Log, op string, fw faultedWorkers) int {
	stalled := fw.stalled
	if len(stalled) == 0 {
		return 0
	}
	frozen, n := false, 0
	for _, r := range h {
		if r.Kind != history.Seen || r.Obs == nil || r.Obs.Op != op {
			continue
		}
		switch {
		case r.Obs.What == history.SeenFreeze && r.Obs.Created:
			frozen = true
		case r.Obs.What == history.SeenModel && frozen && stalled[r.Worker]:
			n++
		}
	}
	return n
}

// concurrentCallsBeforeFreeze counts the model calls for op that another
// holder made between the call whose answer was frozen and the freeze,
// where that holder's lease a fault broke (split, expire) or a stall
// before a store call outlived: two holders of one document then plan it
// at once, and the one that freezes first wins. The loser's model call
// came after the winner's, so its number is past the frozen plan's
// extraction call, yet it was not made after the freeze: the freeze refuses
// the loser's plan (or the loser dies first), and one plan stands.
func concurrentCallsBeforeFreeze(h history.Log, op string, fw faultedWorkers) int {
	freezeAt, freezer := -1, ""
	for i, r := range h {
		if r.Kind == history.Seen && r.Obs != nil && r.Obs.Op == op && r.Obs.What == history.SeenFreeze && r.Obs.Created {
			freezeAt, freezer = i, r.Worker
			break
		}
	}
	if freezeAt < 0 {
		return 0
	}
	frozenCall := -1 // the freezer's last model call before its freeze
	for i := freezeAt - 1; i >= 0; i-- {
		if r := h[i]; r.Kind == history.Seen && r.Obs != nil && r.Obs.Op == op && r.Obs.What == history.SeenModel && r.Worker == freezer {
			frozenCall = i
			break
		}
	}
	if frozenCall < 0 {
		return 0
	}
	broken := func(w string) bool { return fw.leaseFaulted[w] || fw.stalled[w] }
	n := 0
	for _, r := range h[frozenCall+1 : freezeAt] {
		if r.Kind == history.Seen && r.Obs != nil && r.Obs.Op == op && r.Obs.What == history.SeenModel && r.Worker != freezer && (broken(r.Worker) || broken(freezer)) {
			n++
		}
	}
	return n
}
