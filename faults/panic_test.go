package faults_test

import (
	"context"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// A crash under PanicCrash ends the call at the point and is reported with
// it; a call that returns reports nil; another panic is not swallowed.
func TestPanicCrash(t *testing.T) {
	s := faults.NewSchedule()
	s.Arm(faults.BeforeGraphWrite, faults.On(faults.Crash, 2))
	rt := faults.PanicCrash(s)
	ran := 0
	step := func() { _ = rt.At(context.Background(), faults.BeforeGraphWrite, func() error { ran++; return nil }) }
	if hit := faults.RunUntilCrash(step); hit != nil || ran != 1 {
		t.Fatalf("first hit: crash %v, step ran %d times; want no crash, one run", hit, ran)
	}
	hit := faults.RunUntilCrash(step)
	if hit == nil || hit.Point != faults.BeforeGraphWrite || hit.Action.Kind != faults.Crash || ran != 1 {
		t.Fatalf("second hit: crash %+v, step ran %d times; want a crash at %s before the step", hit, ran, faults.BeforeGraphWrite)
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("another panic: recovered %v, want it to go on", r)
		}
	}()
	faults.RunUntilCrash(func() { panic("boom") })
}
