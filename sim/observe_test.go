package sim

import (
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// TestObservePlanSaveThreadIDs: a service's operation_ids are its own
// (not the reference's "op-"+thread): Observe holds each thread to the
// id its first successful start returned, and takes a saved invoke's
// plan id as the thread's by the action it answered, whatever id the
// invoke named.
func TestObservePlanSaveThreadIDs(t *testing.T) {
	c := catalogue.Case{Steps: []catalogue.Step{
		{Worker: "fault", Actions: []catalogue.Action{{Do: "plansave-start", Thread: "t1", Owner: "alice"}, {Do: "plansave-invoke", Thread: "t1"}}},
		{Worker: "retry", Actions: []catalogue.Action{{Do: "plansave-start", Thread: "t1", Owner: "alice"}, {Do: "plansave-invoke", Thread: "t1"}}},
	}}
	h := history.Log{
		{Worker: "fault", PID: 10, Kind: history.Action, Index: 0, Do: "plansave-start", Thread: "t1"},
		{Worker: "fault", PID: 10, Kind: history.Result, Index: 0, Do: "plansave-start", Result: &history.Outcome{Op: "alice/op-a", Status: "started"}},
		{Worker: "fault", PID: 10, Kind: history.Action, Index: 1, Do: "plansave-invoke", Thread: "t1"},
		{Worker: "retry", PID: 11, Kind: history.Action, Index: 0, Do: "plansave-start", Thread: "t1"},
		{Worker: "retry", PID: 11, Kind: history.Result, Index: 0, Do: "plansave-start", Result: &history.Outcome{Op: "alice/op-b", Status: "approved"}},
		{Worker: "retry", PID: 11, Kind: history.Action, Index: 1, Do: "plansave-invoke", Thread: "t1"},
		{Worker: "retry", PID: 11, Kind: history.Result, Index: 1, Do: "plansave-invoke", Result: &history.Outcome{Op: "alice/op-b", Status: "saved", PlanID: 7}},
	}
	obs := Observe(h, c, "s")
	if len(obs.Threads) != 1 {
		t.Fatalf("threads %+v", obs.Threads)
	}
	th := obs.Threads[0]
	if th.Thread != ThreadID("s", "t1") || th.StartedOp != "alice/op-a" || !slices.Equal(th.ReturnedIDs, []int64{7}) {
		t.Errorf("thread %+v: want started op alice/op-a (the first start's) and returned ids [7]", th)
	}
}
