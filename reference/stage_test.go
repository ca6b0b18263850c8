package reference_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

var legal = map[[2]reference.Stage]bool{
	{reference.Prepared, reference.GraphApplied}:       true,
	{reference.Prepared, reference.Failed}:             true,
	{reference.Failed, reference.Prepared}:             true,
	{reference.GraphApplied, reference.StateCommitted}: true,
	{reference.StateCommitted, reference.Completed}:    true,
}

func stagedOp(st reference.Stage) reference.Operation {
	return reference.Operation{OperationID: "op-1", Space: "sp", DocumentID: "d", ExpectedRevision: 0,
		PlanFingerprint: "fp", Stage: st, UpdatedAt: 100, Attempts: 1}
}

func TestStagesAndParse(t *testing.T) {
	if len(reference.Stages) != 5 {
		t.Fatalf("Stages = %v, want 5 stages", reference.Stages)
	}
	for _, st := range reference.Stages {
		got, err := reference.ParseStage(string(st))
		if err != nil || got != st {
			t.Errorf("ParseStage(%q) = %q, %v", st, got, err)
		}
		if !st.Valid() {
			t.Errorf("%s not Valid", st)
		}
		if st.Terminal() != (st == reference.Completed) {
			t.Errorf("%s.Terminal() = %v", st, st.Terminal())
		}
	}
	for _, bad := range []string{"", "prepared", "Completed", "DONE", " PREPARED", "GRAPH-APPLIED"} {
		got, err := reference.ParseStage(bad)
		if !errors.Is(err, reference.ErrUnknownStage) || got != "" {
			t.Errorf("ParseStage(%q) = %q, %v; want ErrUnknownStage", bad, got, err)
		}
		if reference.Stage(bad).Valid() {
			t.Errorf("Stage(%q).Valid() = true", bad)
		}
	}
	ranks := map[reference.Stage]int{reference.Prepared: 0, reference.Failed: 0, reference.GraphApplied: 1,
		reference.StateCommitted: 2, reference.Completed: 3, "BOGUS": -1}
	for st, r := range ranks {
		if st.Rank() != r {
			t.Errorf("%s.Rank() = %d, want %d", st, st.Rank(), r)
		}
	}
}

// Every (from, to) pair: CanTransition, Advance and ValidateUpdate agree with
// the documented machine; COMPLETED is terminal.
func TestTransitionMatrix(t *testing.T) {
	for _, from := range reference.Stages {
		for _, to := range reference.Stages {
			name := fmt.Sprintf("%s->%s", from, to)
			want := legal[[2]reference.Stage{from, to}]
			if got := from.CanTransition(to); got != want {
				t.Errorf("%s: CanTransition = %v, want %v", name, got, want)
			}
			cur := stagedOp(from)
			next, err := cur.Advance(to, 200, "why")
			if want {
				if err != nil {
					t.Errorf("%s: Advance: %v", name, err)
					continue
				}
				if next.Stage != to || next.UpdatedAt != 200 || next.FailureReason != "why" || !next.SameIdentity(cur) || next.Attempts != cur.Attempts {
					t.Errorf("%s: Advance gave %+v", name, next)
				}
				if cur.Stage != from {
					t.Errorf("%s: Advance modified its receiver", name)
				}
			} else {
				if !errors.Is(err, reference.ErrIllegalTransition) {
					t.Errorf("%s: Advance error %v, want ErrIllegalTransition", name, err)
				}
				if next != cur {
					t.Errorf("%s: a refused Advance must return the operation unchanged, got %+v", name, next)
				}
			}
			n := cur
			n.Stage, n.UpdatedAt = to, 200
			err = reference.ValidateUpdate(cur, n)
			switch {
			case from == reference.Completed:
				if !errors.Is(err, reference.ErrIllegalTransition) {
					t.Errorf("%s: ValidateUpdate out of COMPLETED: %v", name, err)
				}
			case from == to:
				if err != nil {
					t.Errorf("%s: ValidateUpdate same stage (attempt bookkeeping) refused: %v", name, err)
				}
			case want && err != nil:
				t.Errorf("%s: ValidateUpdate: %v", name, err)
			case !want && !errors.Is(err, reference.ErrIllegalTransition):
				t.Errorf("%s: ValidateUpdate error %v, want ErrIllegalTransition", name, err)
			}
		}
	}
}

func TestHappyPathAndRetryWalk(t *testing.T) {
	// PREPARED -> FAILED("timeout") -> PREPARED -> GRAPH_APPLIED ->
	// STATE_COMMITTED -> COMPLETED, as the Java state-machine test walks.
	op := stagedOp(reference.Prepared)
	var err error
	at := int64(100)
	for _, step := range []reference.Stage{reference.Failed, reference.Prepared, reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		at += 10
		reason := ""
		if step == reference.Failed {
			reason = "timeout"
		}
		op, err = op.Advance(step, at, reason)
		must(t, err)
	}
	if op.Stage != reference.Completed || !op.Finished() {
		t.Fatalf("walk ended at %+v", op)
	}
	for _, to := range reference.Stages {
		if _, err := op.Advance(to, at+1, ""); !errors.Is(err, reference.ErrIllegalTransition) || !containsAll(err.Error(), "COMPLETED") {
			t.Errorf("move out of COMPLETED to %s: %v, want ErrIllegalTransition mentioning COMPLETED", to, err)
		}
	}
}

func TestValidateUpdateRules(t *testing.T) {
	cur := stagedOp(reference.Prepared)
	cases := []struct {
		name   string
		mutate func(*reference.Operation)
		target error // nil: any error
	}{
		{"time backwards", func(o *reference.Operation) { o.Stage = reference.GraphApplied; o.UpdatedAt = 99 }, reference.ErrTimeBackwards},
		{"time backwards same stage", func(o *reference.Operation) { o.UpdatedAt = 50 }, reference.ErrTimeBackwards},
		{"attempts decrease", func(o *reference.Operation) { o.Attempts = 0 }, nil},
		{"operationId changed", func(o *reference.Operation) { o.OperationID = "op-2" }, reference.ErrIdentityMismatch},
		{"space changed", func(o *reference.Operation) { o.Space = "other" }, reference.ErrIdentityMismatch},
		{"document changed", func(o *reference.Operation) { o.DocumentID = "d2" }, reference.ErrIdentityMismatch},
		{"expected revision changed", func(o *reference.Operation) { o.ExpectedRevision = 3 }, reference.ErrIdentityMismatch},
		{"fingerprint changed", func(o *reference.Operation) { o.PlanFingerprint = "other" }, reference.ErrIdentityMismatch},
		{"unknown stage", func(o *reference.Operation) { o.Stage = "DONE" }, reference.ErrUnknownStage},
		{"unknown disposition", func(o *reference.Operation) { o.Disposition = "LOST" }, nil},
	}
	for _, c := range cases {
		next := cur
		c.mutate(&next)
		err := reference.ValidateUpdate(cur, next)
		if err == nil || (c.target != nil && !errors.Is(err, c.target)) {
			t.Errorf("%s: ValidateUpdate = %v, want %v", c.name, err, c.target)
		}
	}
	// Advance checks time too.
	if _, err := cur.Advance(reference.GraphApplied, 99, ""); !errors.Is(err, reference.ErrTimeBackwards) {
		t.Errorf("Advance with time backwards: %v", err)
	}
	// Legal bookkeeping: same stage, later time, more attempts, a
	// disposition.
	next := cur
	next.UpdatedAt, next.Attempts, next.FailureReason = 100, 2, "x"
	must(t, reference.ValidateUpdate(cur, next))
	for _, d := range []reference.Disposition{reference.DeadLetter, reference.Abandoned} {
		n := cur
		n.Disposition = d
		must(t, reference.ValidateUpdate(cur, n))
		// Nothing changes after a disposition.
		n2 := n
		n2.UpdatedAt++
		if err := reference.ValidateUpdate(n, n2); !errors.Is(err, reference.ErrIllegalTransition) {
			t.Errorf("update after disposition %s: %v", d, err)
		}
		if !n.Finished() {
			t.Errorf("operation with disposition %s not Finished", d)
		}
	}
	if cur.Finished() {
		t.Error("PREPARED active operation reported Finished")
	}
}
