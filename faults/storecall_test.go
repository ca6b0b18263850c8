package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// StoreCall counts the store calls made outside fenced steps, and a pause
// armed at its k-th hit stalls before that call; inside a fenced step
// (the lease check, then the write) it never fires.
func TestStoreCallSkipsFencedSteps(t *testing.T) {
	sched := faults.NewSchedule()
	sched.Arm(faults.StoreCall, faults.PauseOn(time.Second, 2))
	var calls []string
	var slept []int // how many calls were made when a stall began
	rt := &faults.Runtime{Injector: sched, Sleep: func(context.Context, time.Duration) { slept = append(slept, len(calls)) }}
	ctx := context.Background()
	call := func(name string) {
		_ = rt.At(ctx, faults.StoreCall, func() error { calls = append(calls, name); return nil })
	}
	call("read")
	_ = rt.At(ctx, faults.BeforeGraphWrite, func() error { call("renew"); call("apply"); return nil }) // fenced
	if len(slept) != 0 {
		t.Fatalf("a stall fired inside the fenced step: %v", slept)
	}
	_ = rt.At(ctx, faults.BeforeRecordVersion, func() error { call("record"); return nil }) // not fenced
	if len(slept) != 1 || slept[0] != 3 {
		t.Fatalf("want one stall, before the second call outside fenced steps (record, after 3 calls); stalls after %v calls, calls %v", slept, calls)
	}
	if got := sched.Hits(faults.StoreCall); got != 2 {
		t.Fatalf("StoreCall counted %d hits, want 2 (the calls outside the fenced step)", got)
	}
	if spec, ok := faults.Lookup(faults.StoreCall); !ok || !spec.Applies(faults.Pause) || spec.Applies(faults.Crash) {
		t.Fatalf("Lookup(storeCall) = %+v, %v; want a spec that applies pause only", spec, ok)
	}
	if _, err := faults.ParsePoint("storeCall"); err != nil {
		t.Fatal(err)
	}
}
