package faults_test

import (
	"context"
	"errors"
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
	if spec, ok := faults.Lookup(faults.StoreCall); !ok || !spec.Applies(faults.Pause) || !spec.Applies(faults.Crash) || spec.Applies(faults.Unknown) {
		t.Fatalf("Lookup(storeCall) = %+v, %v; want a spec that applies pause and crash only", spec, ok)
	}
	if got := rt.Passed(faults.StoreCall); got != 2 {
		t.Fatalf("Passed(storeCall) = %d, want 2 (the calls outside the fenced step)", got)
	}
	if _, err := faults.ParsePoint("storeCall"); err != nil {
		t.Fatal(err)
	}
}

// StoreCommit numbers the write commits of the process whose runtime takes
// them: a crash armed at its j-th hit fires at the j-th commit, and none
// is counted once the runtime lets go.
func TestStoreCommitNumbersCommits(t *testing.T) {
	sched := faults.NewSchedule()
	sched.Arm(faults.StoreCommit, faults.On(faults.Crash, 3))
	var crashedAt []int
	commits := 0
	rt := &faults.Runtime{Injector: sched, Crash: func(faults.Hit) { crashedAt = append(crashedAt, commits); panic(errCrashed) }}
	commit := func() {
		defer func() {
			if r := recover(); r != nil && r != errCrashed {
				panic(r)
			}
		}()
		faults.AtCommit()
		commits++
	}
	commit() // no runtime takes the commits yet: not counted
	faults.CommitsTo(rt)
	for i := 0; i < 4; i++ {
		commit()
	}
	faults.CommitsTo(nil)
	commit()
	if len(crashedAt) != 1 || crashedAt[0] != 3 {
		t.Fatalf("crashes after %v commits, want one, before the third commit the runtime saw (after 3 in all)", crashedAt)
	}
	if got := rt.Passed(faults.StoreCommit); got != 4 {
		t.Fatalf("Passed(storeCommit) = %d, want 4", got)
	}
	if spec, ok := faults.Lookup(faults.StoreCommit); !ok || !spec.Applies(faults.Crash) || spec.Applies(faults.Pause) {
		t.Fatalf("Lookup(storeCommit) = %+v, %v; want a spec that applies crash only", spec, ok)
	}
}

var errCrashed = errors.New("crashed")
