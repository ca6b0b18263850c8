package faults_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// twoStepStore is what a store author writes: one method, two durable
// steps, a declared window between them.
type twoStepStore struct{ rows, plans int }

func (s *twoStepStore) Create(ctx context.Context) error {
	s.rows++
	return faults.At(ctx, "teststore/afterRow", func() error { s.plans++; return nil })
}

func TestStoreWindowWithoutRuntimeJustRunsTheStep(t *testing.T) {
	s := &twoStepStore{}
	if err := s.Create(context.Background()); err != nil || s.rows != 1 || s.plans != 1 {
		t.Fatalf("Create without crashmatrix: err %v rows %d plans %d, want nil 1 1", err, s.rows, s.plans)
	}
}

func TestStoreWindowIsReachedFromItsMethodAndInjects(t *testing.T) {
	sched := faults.NewSchedule()
	var reached []faults.Reach
	var crashed []faults.Hit
	rt := &faults.Runtime{Injector: sched, OnReach: func(r faults.Reach) { reached = append(reached, r) },
		Crash: func(h faults.Hit) { crashed = append(crashed, h); panic(h) }}
	ctx := faults.WithRuntime(context.Background(), rt)
	s := &twoStepStore{}
	if err := s.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reached) != 1 || reached[0].Point != "teststore/afterRow" || reached[0].Method != "faults_test.(*twoStepStore).Create" {
		t.Fatalf("reached %+v, want one reach of teststore/afterRow from faults_test.(*twoStepStore).Create", reached)
	}
	// error: the second step does not run, the method fails with an injected error.
	sched.Arm("teststore/afterRow", faults.Action{Kind: faults.Transient})
	err := s.Create(ctx)
	var ie *faults.InjectedError
	if !errors.As(err, &ie) || !ie.Retryable || s.rows != 2 || s.plans != 1 {
		t.Fatalf("error at the window: err %v rows %d plans %d, want an injected retryable error, 2 rows, 1 plan", err, s.rows, s.plans)
	}
	// unknown: the step runs, then the process dies.
	sched.Disarm()
	sched.Arm("teststore/afterRow", faults.Action{Kind: faults.Unknown})
	func() {
		defer func() { _ = recover() }()
		_ = s.Create(ctx)
	}()
	if len(crashed) != 1 || s.rows != 3 || s.plans != 2 {
		t.Fatalf("unknown at the window: crashes %d rows %d plans %d, want 1 3 2", len(crashed), s.rows, s.plans)
	}
}

func TestStoreWindowArmedThroughFailpoints(t *testing.T) {
	p := faults.Point("teststore/afterRow")
	if err := faults.EnableFailpoint(faults.Path(p), `return("error@1")`); err != nil {
		t.Fatal(err)
	}
	defer faults.DisableFailpoint(faults.Path(p))
	ctx := faults.WithRuntime(context.Background(), &faults.Runtime{Injector: &faults.Failpoints{}})
	s := &twoStepStore{}
	if err := s.Create(ctx); !faults.IsInjected(err) || s.plans != 0 {
		t.Fatalf("GO_FAILPOINTS-style arming: err %v plans %d, want an injected error before the plan", err, s.plans)
	}
	if err := s.Create(ctx); err != nil || s.plans != 1 {
		t.Fatalf("second hit: err %v plans %d, want the step to run", err, s.plans)
	}
}

func TestStoreWindowNames(t *testing.T) {
	for _, ok := range []faults.Point{"mystore/afterOperationRow", "pg.v2/before-plan_1"} {
		if err := faults.ValidateStorePoint(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []faults.Point{"afterOperationRow", "/x", "x/", "a/b/c", "my store/x", "beforeGraphWrite"} {
		if err := faults.ValidateStorePoint(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	ctx := faults.WithRuntime(context.Background(), &faults.Runtime{})
	ran := false
	err := faults.At(ctx, "noslash", func() error { ran = true; return nil })
	if err == nil || ran || !strings.Contains(err.Error(), `"noslash"`) {
		t.Fatalf("malformed name: err %v ran %v, want an error naming it and no step", err, ran)
	}
}
