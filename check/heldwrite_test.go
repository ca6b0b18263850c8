package check_test

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
)

// A graph write that a partition or a stopped server held in flight past
// the holder's lease lands after another holder was granted the lease: the
// stale-write check leaves it to the CAS, as it does a worker stalled
// between a lease check and its write. The same write with no such fault
// (or after a clock jump, which holds no request) is a stale holder that
// was not stopped.
func TestI7StaleWriteHeldInFlightByTheNetwork(t *testing.T) {
	const op = "op1"
	log := func(fault *faults.Action) history.Log {
		ev := func(w string, e reference.Event) history.Record {
			e.Space, e.DocumentID = "sp", "d4"
			return history.Record{Kind: history.Event, Worker: w, Event: &e}
		}
		h := history.Log{
			ev("fault", reference.Event{Kind: reference.EvInvoke, OperationID: op, Holder: "fault/1"}),
			ev("fault", reference.Event{Kind: reference.EvLeaseAcquire, Holder: "fault/1#1", Token: 1, At: 1000, ExpiresAt: 1600}),
		}
		if fault != nil {
			h = append(h, history.Record{Kind: history.Hit, Worker: "fault", Point: faults.BeforeGraphWrite, Fault: fault})
		}
		return append(h,
			ev("recover", reference.Event{Kind: reference.EvLeaseAcquire, Holder: "recover/2#1", Token: 2, At: 2400, ExpiresAt: 3000}),
			history.Record{Kind: history.Seen, Worker: "fault", Obs: &history.Observation{What: history.SeenGraph, Op: op, Doc: "d4", Items: []string{"node person:a"}}})
	}
	stale := func(h history.Log) bool {
		for _, v := range check.CheckIntents(check.Snapshot{}, check.Observed{Log: h}) {
			if v.Invariant == check.I7 && strings.Contains(v.Message, "a stale holder was not stopped") {
				return true
			}
		}
		return false
	}
	for _, k := range []faults.Kind{faults.Partition, faults.ServerPause} {
		if stale(log(&faults.Action{Kind: k, Hit: 1, Server: "neo4j"})) {
			t.Errorf("a graph write %s held in flight: judged a stale write", k)
		}
	}
	if !stale(log(nil)) {
		t.Error("a stale holder's graph write with no fault: not judged")
	}
	if !stale(log(&faults.Action{Kind: faults.ClockJump, Hit: 1, Server: "postgres"})) {
		t.Error("a stale holder's graph write after a clock jump: not judged")
	}
}
