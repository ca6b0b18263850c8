package faults_test

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/faults"
)

// opStore keeps an operation row and its plan apart, as a store whose
// create takes two durable steps would.
type opStore struct {
	rows  map[string]string
	plans map[string]string
}

// CreateIfAbsent writes the operation row, then in a second step its plan.
// A process can die between the two, and only the store knows it: the
// step that follows the window is wrapped in faults.At, named
// "<store>/<window>". Under crashmatrix the matrix then crashes, fails,
// stalls and re-crashes the worker there, as at the protocol's own
// windows; anywhere else At just runs the step.
func (s *opStore) CreateIfAbsent(ctx context.Context, id, plan string) (bool, error) {
	if _, ok := s.rows[id]; ok {
		return false, nil
	}
	s.rows[id] = "PREPARED"
	err := faults.At(ctx, "mystore/afterOperationRow", func() error {
		s.plans[id] = plan
		return nil
	})
	return err == nil, err
}

func ExampleAt() {
	s := &opStore{rows: map[string]string{}, plans: map[string]string{}}
	// Outside crashmatrix the context carries no fault runtime: the step
	// runs, and the store behaves as it would without the declaration.
	created, err := s.CreateIfAbsent(context.Background(), "op-1", "plan of op-1")
	fmt.Println(created, err, s.plans["op-1"])
	created, err = s.CreateIfAbsent(context.Background(), "op-1", "plan of op-1")
	fmt.Println(created, err)

	// What a crash case of the matrix does there, simulated in-process: a
	// crash armed at the window's first hit. The row is written, the plan
	// never is: the operation cannot be resumed, which the matrix reports
	// as a broken I5.
	sched := faults.NewSchedule()
	sched.Arm("mystore/afterOperationRow", faults.On(faults.Crash, 1))
	ctx := faults.WithRuntime(context.Background(), faults.PanicCrash(sched))
	hit := faults.RunUntilCrash(func() { s.CreateIfAbsent(ctx, "op-2", "plan of op-2") })
	_, hasPlan := s.plans["op-2"]
	fmt.Printf("%s at %s: row %s, plan stored %v\n", hit.Action.Kind, hit.Point, s.rows["op-2"], hasPlan)
	// Output:
	// true <nil> plan of op-1
	// false <nil>
	// crash at mystore/afterOperationRow: row PREPARED, plan stored false
}
