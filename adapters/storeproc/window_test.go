package storeproc_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// TestStoreDeclaredWindow arms the window the two-transaction Python
// store declares between its operation row and its plan, with each fault
// kind, and reads back what a crash there leaves: the protocol gives the
// store what faults.At gives a Go store.
func TestStoreDeclaredWindow(t *testing.T) {
	const point = faults.Point("pystore/afterOperationRow")
	for _, c := range []struct {
		kind      faults.Kind
		crashes   bool
		planSaved bool // the step after the window ran
	}{
		{faults.Transient, false, false},
		{faults.Crash, true, false},
		{faults.Unknown, true, true},
		{faults.Pause, false, true},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			dir := t.TempDir()
			opts := storeproc.Options{Command: python(t, "sqlite_store.py", "--two-transactions"), Dir: dir}
			client, err := storeproc.Start(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			sched := faults.NewSchedule()
			arm := faults.On(c.kind, 1)
			if c.kind == faults.Pause {
				arm = faults.PauseOn(10*time.Millisecond, 1)
			}
			sched.Arm(point, arm)
			var reached []faults.Reach
			crashed := make(chan faults.Hit, 1)
			rt := &faults.Runtime{Injector: sched, OnReach: func(r faults.Reach) { reached = append(reached, r) },
				Crash: func(h faults.Hit) { crashed <- h; runtime.Goexit() }}
			op, plan := storetest.FixtureOp("sp", "d1", "op-1", 0, 1000)
			done := make(chan error, 1)
			go func() {
				_, err := client.Stores().Ops.CreateIfAbsent(faults.WithRuntime(context.Background(), rt), op, plan)
				done <- err
			}()
			select {
			case h := <-crashed:
				if !c.crashes {
					t.Fatalf("the worker crashed at %s, want no crash for %s", h.Point, c.kind)
				}
			case err := <-done:
				if c.crashes {
					t.Fatalf("CreateIfAbsent returned %v, want a crash at %s", err, point)
				}
				if c.kind == faults.Transient && !faults.IsInjected(err) {
					t.Fatalf("CreateIfAbsent = %v, want the injected fault", err)
				}
				if c.kind == faults.Pause && err != nil {
					t.Fatalf("CreateIfAbsent = %v", err)
				}
			}
			if !slices.Equal(reached, []faults.Reach{{Point: point, Method: "store-cmd ops.create"}}) {
				t.Errorf("reached %v, want the one window", reached)
			}
			// A fresh process (the restarted service) reads what stayed.
			after, err := storeproc.Start(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer after.Close()
			ops := after.Stores().Ops
			if _, err := ops.Get(context.Background(), "op-1"); err != nil {
				t.Fatalf("the operation row committed before the window is gone: %v", err)
			}
			_, err = ops.GetPlan(context.Background(), "op-1")
			if c.planSaved && err != nil {
				t.Errorf("GetPlan = %v, want the plan (the step ran)", err)
			}
			if !c.planSaved && !errors.Is(err, reference.ErrNoPersistedPlan) {
				t.Errorf("GetPlan = %v, want ErrNoPersistedPlan (the step did not run)", err)
			}
		})
	}
}
