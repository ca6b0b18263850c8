package properties

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

func opCASProtects(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-1", "space_a", "doc-1", 0), confNow)
	other := opCreate(t, s, confPlan("op-2", "space_a", "doc-1", 0), confNow)
	wrong := map[string]func(reference.Operation) reference.Operation{
		"WrongStage":            func(o reference.Operation) reference.Operation { o.Stage = reference.Failed; return o },
		"WrongStageAhead":       func(o reference.Operation) reference.Operation { o.Stage = reference.GraphApplied; return o },
		"OtherFingerprint":      func(o reference.Operation) reference.Operation { o.PlanFingerprint = other.PlanFingerprint; return o },
		"OtherDocument":         func(o reference.Operation) reference.Operation { o.DocumentID = "doc-2"; return o },
		"OtherSpace":            func(o reference.Operation) reference.Operation { o.Space = "space_b"; return o },
		"OtherExpectedRevision": func(o reference.Operation) reference.Operation { o.ExpectedRevision = 1; return o },
		"OtherAttempts":         func(o reference.Operation) reference.Operation { o.Attempts = 3; return o },
		"OtherDisposition":      func(o reference.Operation) reference.Operation { o.Disposition = reference.DeadLetter; return o },
		"UnknownOperation":      func(o reference.Operation) reference.Operation { o.OperationID = "op-unknown"; return o },
	}
	for _, name := range []string{"WrongStage", "WrongStageAhead", "OtherFingerprint", "OtherDocument", "OtherSpace",
		"OtherExpectedRevision", "OtherAttempts", "OtherDisposition", "UnknownOperation"} {
		exp := wrong[name](op)
		next := opAdvance(exp, reference.GraphApplied, confNow+10, "", exp.Attempts)
		if exp.Stage == reference.Failed {
			next = opAdvance(exp, reference.Prepared, confNow+10, "", exp.Attempts)
		} else if exp.Stage == reference.GraphApplied {
			next = opAdvance(exp, reference.StateCommitted, confNow+10, "", exp.Attempts)
		}
		ok, err := s.CompareAndSet(confCtx, exp, next)
		if ok {
			t.Errorf("CompareAndSet with expected %s (%s) = true; want false: the stored record differs", name, confDiff(op, exp))
		}
		// A stale expectation is not an error, unless expected -> next is
		// itself illegal (an expected terminal disposition).
		if err != nil && name != "UnknownOperation" && reference.ValidateUpdate(exp, next) == nil {
			t.Errorf("CompareAndSet with expected %s = false, %v; want false, nil (a stale expectation is not an error)", name, err)
		}
		opExpectStored(t, s, op, "after CompareAndSet with expected "+name)
	}
	next := opAdvance(op, reference.GraphApplied, confNow+10, "", 0)
	opCAS(t, s, op, next, true, "correct expectation")
	opExpectStored(t, s, next, "after a successful CompareAndSet")
	if got := opMustGet(t, s, "op-1"); got.Stage != reference.GraphApplied {
		t.Errorf("stage after CompareAndSet PREPARED->GRAPH_APPLIED is %s; want GRAPH_APPLIED", got.Stage)
	}
	// The old expectation is now stale.
	ok, err := s.CompareAndSet(confCtx, op, opAdvance(op, reference.Failed, confNow+20, "late", 1))
	if ok || err != nil {
		t.Errorf("CompareAndSet with the pre-update record as expected = %v, %v; want false, nil", ok, err)
	}
	opExpectStored(t, s, next, "after a stale CompareAndSet")
	opExpectStored(t, s, other, "the other operation")
}

func opCASIllegal(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-1", "space_a", "doc-1", 0), confNow)
	reject := func(cur, next reference.Operation, want error, what string) {
		t.Helper()
		ok, err := s.CompareAndSet(confCtx, cur, next)
		if ok || !errors.Is(err, want) {
			t.Errorf("CompareAndSet %s = %v, %v; want false and an error wrapping %q", what, ok, err, want)
		}
		opExpectStored(t, s, cur, "after the rejected "+what)
	}
	reject(op, opAdvance(op, reference.Completed, confNow+1, "", 0), reference.ErrIllegalTransition, "PREPARED->COMPLETED")
	reject(op, opAdvance(op, reference.StateCommitted, confNow+1, "", 0), reference.ErrIllegalTransition, "PREPARED->STATE_COMMITTED")
	reject(op, opAdvance(op, "BOGUS", confNow+1, "", 0), reference.ErrUnknownStage, "PREPARED->BOGUS")
	changed := opAdvance(op, reference.GraphApplied, confNow+1, "", 0)
	changed.DocumentID = "doc-2"
	reject(op, changed, reference.ErrIdentityMismatch, "PREPARED->GRAPH_APPLIED changing the documentId")
	changed = opAdvance(op, reference.GraphApplied, confNow+1, "", 0)
	changed.PlanFingerprint = strings.Repeat("0", 64)
	reject(op, changed, reference.ErrIdentityMismatch, "PREPARED->GRAPH_APPLIED changing the fingerprint")

	failed := opAdvance(op, reference.Failed, confNow+2, "boom", 2)
	opCAS(t, s, op, failed, true, "PREPARED->FAILED")
	reject(failed, opAdvance(failed, reference.GraphApplied, confNow+3, "", 2), reference.ErrIllegalTransition, "FAILED->GRAPH_APPLIED")
	lower := opAdvance(failed, reference.Prepared, confNow+3, "", 1)
	ok, err := s.CompareAndSet(confCtx, failed, lower)
	if ok || err == nil {
		t.Errorf("CompareAndSet FAILED->PREPARED lowering attempts 2->1 = %v, %v; want false and an error", ok, err)
	}
	opExpectStored(t, s, failed, "after lowering attempts")

	cur := failed
	for _, st := range []reference.Stage{reference.Prepared, reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		n := opAdvance(cur, st, cur.UpdatedAt+1, "", cur.Attempts)
		opCAS(t, s, cur, n, true, "walk to "+string(st))
		cur = n
	}
	for _, st := range reference.Stages {
		reject(cur, opAdvance(cur, st, cur.UpdatedAt+1, "", cur.Attempts), reference.ErrIllegalTransition, "COMPLETED->"+string(st))
	}
	dl := cur
	dl.Disposition, dl.UpdatedAt = reference.DeadLetter, cur.UpdatedAt+1
	reject(cur, dl, reference.ErrIllegalTransition, "COMPLETED->COMPLETED with a DEAD_LETTER disposition")

	// A dispositioned operation is terminal too.
	op2 := opCreate(t, s, confPlan("op-2", "space_a", "doc-2", 0), confNow)
	dead := op2
	dead.Disposition, dead.FailureReason, dead.UpdatedAt = reference.DeadLetter, "permission denied", confNow+5
	opCAS(t, s, op2, dead, true, "PREPARED -> PREPARED+DEAD_LETTER")
	opExpectStored(t, s, dead, "after dead-lettering")
	reject(dead, opAdvance(dead, reference.GraphApplied, confNow+6, "", 0), reference.ErrIllegalTransition, "DEAD_LETTER PREPARED->GRAPH_APPLIED")
	revived := dead
	revived.Disposition, revived.UpdatedAt = reference.Active, confNow+6
	reject(dead, revived, reference.ErrIllegalTransition, "clearing a DEAD_LETTER disposition")
}

func opCASTimeBackwards(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-1", "space_a", "doc-1", 0), confNow)
	ok, err := s.CompareAndSet(confCtx, op, opAdvance(op, reference.GraphApplied, confNow-1, "", 0))
	if ok || !errors.Is(err, reference.ErrTimeBackwards) {
		t.Errorf("CompareAndSet PREPARED->GRAPH_APPLIED dated %d before the stored %d = %v, %v; want false and ErrTimeBackwards", confNow-1, confNow, ok, err)
	}
	opExpectStored(t, s, op, "after the backwards update")
	next := opAdvance(op, reference.GraphApplied, confNow+100, "", 0)
	opCAS(t, s, op, next, true, "PREPARED->GRAPH_APPLIED forward")
	ok, err = s.CompareAndSet(confCtx, next, opAdvance(next, reference.StateCommitted, confNow+99, "", 0))
	if ok || !errors.Is(err, reference.ErrTimeBackwards) {
		t.Errorf("CompareAndSet GRAPH_APPLIED->STATE_COMMITTED dated %d, before the stored %d = %v, %v; want false and ErrTimeBackwards (is UpdatedAt kept?)", confNow+99, confNow+100, ok, err)
	}
	opExpectStored(t, s, next, "after the second backwards update")
	// Equal time is allowed.
	opCAS(t, s, next, opAdvance(next, reference.StateCommitted, confNow+100, "", 0), true, "same timestamp")
}

func opStageWalk(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-walk", "space_a", "doc-1", 0), confNow)
	steps := []struct {
		stage    reference.Stage
		at       int64
		reason   string
		attempts int
	}{
		{reference.Failed, confNow + 10, "timeout: writer did not answer", 1},
		{reference.Prepared, confNow + 20, "timeout: writer did not answer", 1},
		{reference.Failed, confNow + 30, "connection reset", 2},
		{reference.Prepared, confNow + 40, "", 2},
		{reference.GraphApplied, confNow + 50, "", 2},
		{reference.StateCommitted, confNow + 60, "", 2},
		{reference.Completed, confNow + 70, "", 2},
	}
	cur := op
	for _, st := range steps {
		next := opAdvance(cur, st.stage, st.at, st.reason, st.attempts)
		opCAS(t, s, cur, next, true, fmt.Sprintf("%s->%s", cur.Stage, st.stage))
		opExpectStored(t, s, next, fmt.Sprintf("after %s->%s (reason %q, attempts %d, updatedAt %d)", cur.Stage, st.stage, st.reason, st.attempts, st.at))
		cur = next
	}
	plan, err := s.GetPlan(confCtx, "op-walk")
	if err != nil || reference.Fingerprint(plan) != op.PlanFingerprint {
		t.Errorf("GetPlan after the walk: %v; want the original plan with fingerprint %s", err, op.PlanFingerprint)
	}
}

func opCASConcurrent(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	for round := 0; round < 10; round++ {
		op := opCreate(t, s, confPlan(fmt.Sprintf("op-race-%d", round), "space_a", "doc-1", 0), confNow)
		nexts := make([]reference.Operation, confWorkers)
		for i := range nexts {
			if i%2 == 0 {
				nexts[i] = opAdvance(op, reference.GraphApplied, confNow+int64(i), "", 0)
			} else {
				nexts[i] = opAdvance(op, reference.Failed, confNow+int64(i), fmt.Sprintf("worker %d failed", i), 1)
			}
		}
		type res struct {
			ok  bool
			err error
		}
		results := confRace(confWorkers, func(i int) res {
			ok, err := s.CompareAndSet(confCtx, op, nexts[i])
			return res{ok, err}
		})
		winners := []int{}
		for i, r := range results {
			if r.err != nil {
				t.Errorf("round %d: concurrent CompareAndSet #%d error: %v; want true or false", round, i, r.err)
			}
			if r.ok {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d goroutines CompareAndSet from the same PREPARED record: winners %s; want exactly one", round, confWorkers, confShow(winners))
		}
		opExpectStored(t, s, nexts[winners[0]], fmt.Sprintf("round %d: after the race won by #%d", round, winners[0]))
	}
}

func opCASKeepsClaim(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-claimed", "space_a", "doc-1", 0), confNow)
	if ok, err := s.Claim(confCtx, op.OperationID, "recoverer-1", confNow, 10_000); err != nil || !ok {
		t.Fatalf("Claim(op-claimed, recoverer-1) = %v, %v; want true, nil", ok, err)
	}
	next := opAdvance(op, reference.GraphApplied, confNow+1, "", 0)
	opCAS(t, s, op, next, true, "PREPARED->GRAPH_APPLIED under a claim")
	if ok, err := s.Claim(confCtx, op.OperationID, "recoverer-2", confNow+2, 10_000); err != nil || ok {
		t.Errorf("after a CompareAndSet, Claim by recoverer-2 while recoverer-1's claim is live = %v, %v; want false, nil (CompareAndSet must not drop the claim)", ok, err)
	}
	if got := opMustGet(t, s, op.OperationID); got.ClaimHolder != "recoverer-1" {
		t.Errorf("after a CompareAndSet, Get shows ClaimHolder %q; want recoverer-1", got.ClaimHolder)
	}
}
