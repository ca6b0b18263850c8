package faults

// StoreCall is a pseudo-point: not a window of the catalogue, but the
// instant before each call the service makes to one of its stores (any
// method of the operation store, the state store, the registry, the graph
// writer or the lock provider). The harness's store wrappers pass every call
// through Runtime.At(ctx, StoreCall, call), so the hit count is the call's
// number in the worker's run: "pause@7" stalls the worker before its
// seventh store call. It lets a competitor run between any two store calls
// of a stale holder, where a bug can sit that no named window reaches (a
// revision read moved next to the write it guards, a check done after the
// write instead of before).
//
// Pause and crash apply. A pause is a stall a competitor can run in; a
// crash there ("crash@k") is how a random kill is anchored to an instant
// the harness controls (sim.RandomKillCase): killed before its k-th store
// call, a worker dies at the same place on every replay.
//
// StoreCall does not fire inside a fenced step (FencedSteps): there the
// step checks the lease, then writes, and a stall between the two is one
// no check in a client can see (a pause there outlives any lease; only a
// store that checks a fencing token at the write could refuse it). The
// named window before the step is the stall before its first call, so
// nothing else is lost, and the hit count counts only the calls outside.
const StoreCall Point = "storeCall"

// StoreCallSpec is StoreCall as a catalogue entry, for Lookup (scenario
// files and the CLI accept it as a point).
var StoreCallSpec = Spec{StoreCall, Ingestion, "the service's next store call",
	"between any two store calls of the service (the hit-th call of the worker)",
	"a holder that stalled between two store calls, its lease broken meanwhile, must be stopped by the revision CAS, the claim and the plan fingerprint",
	[]Kind{Pause, Crash}, false}

// FencedSteps are the windows whose step checks the lease and then writes.
var FencedSteps = []Point{BeforePrepare, BeforeGraphWrite, BetweenGraphBatches, BeforeStateCommit}

func isFenced(p Point) bool {
	for _, f := range FencedSteps {
		if f == p {
			return true
		}
	}
	return false
}

func (r *Runtime) inFencedStep() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fenced > 0
}

// fencing wraps a fenced step so that StoreCall stays quiet while it runs.
func (r *Runtime) fencing(step func() error) func() error {
	return func() error {
		r.mu.Lock()
		r.fenced++
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.fenced--
			r.mu.Unlock()
		}()
		return step()
	}
}
