package properties

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// runOperationStore runs the OperationStore suite on a suiteT (a *testing.T or a recorder).
func runOperationStore(t suiteT, newStore func(t suiteT) reference.OperationStore) {
	t.Helper()
	confRun(t, newStore, opStoreCases)
}

// The subtest names of the OperationStore suite, for tests that assert where
// a broken store fails.
const (
	subOpCreateFirstWriteWins        = "CreateIfAbsentFirstWriteWins"           // a second create with a used id changes nothing
	subOpCreateConcurrent            = "CreateIfAbsentConcurrentSingleWinner"   // racing creates of one id: one winner, op and plan together
	subOpCreateRejectsInvalid        = "CreateIfAbsentRejectsInvalidPair"       // invalid op/plan pairs are refused and nothing is stored
	subOpGetUnknown                  = "GetUnknownIsNotFound"                   // Get and GetPlan of an unknown id wrap ErrNotFound
	subOpPlanRoundTrip               = "PlanRoundTrip"                          // every plan field survives storage; the fingerprint still matches
	subOpCASProtectsStageAndIdentity = "CompareAndSetProtectsStageAndIdentity"  // a stale stage or another identity in expected gives false
	subOpCASIllegalTransitions       = "CompareAndSetRejectsIllegalTransitions" // illegal successors are errors and change nothing
	subOpCASTimeBackwards            = "CompareAndSetRejectsTimeBackwards"      // an update dated before the stored one is ErrTimeBackwards
	subOpStageWalk                   = "StageWalkKeepsFailureRecord"            // failure reason, attempts and updatedAt are kept along the full walk
	subOpCASConcurrent               = "CompareAndSetConcurrentSingleWinner"    // racing compare-and-sets on one record: exactly one wins
	subOpCASKeepsClaim               = "CompareAndSetKeepsClaim"                // a stage change does not drop the recovery claim
	subOpListRecoverable             = "ListRecoverableStableBoundedDetached"   // recoverable scan: filtered, ordered, bounded, detached
	subOpList                        = "ListReturnsEveryOperation"              // List returns every operation ordered by id
	subOpClaimConcurrent             = "ClaimConcurrentSingleWinner"            // racing claims of a free operation: exactly one wins
	subOpClaimLifecycle              = "ClaimExclusiveRenewExpireRelease"       // claims: exclusive while live, renewable, expire, holder-only release
	subOpModel                       = "ModelBasedCommands"                     // gopter commands against a model of the store
)

var opStoreCases = []confCase[reference.OperationStore]{
	{subOpCreateFirstWriteWins, opCreateFirstWriteWins},
	{subOpCreateConcurrent, opCreateConcurrent},
	{subOpCreateRejectsInvalid, opCreateRejectsInvalid},
	{subOpGetUnknown, opGetUnknown},
	{subOpPlanRoundTrip, opPlanRoundTrip},
	{subOpCASProtectsStageAndIdentity, opCASProtects},
	{subOpCASIllegalTransitions, opCASIllegal},
	{subOpCASTimeBackwards, opCASTimeBackwards},
	{subOpStageWalk, opStageWalk},
	{subOpCASConcurrent, opCASConcurrent},
	{subOpCASKeepsClaim, opCASKeepsClaim},
	{subOpListRecoverable, opListRecoverable},
	{subOpList, opList},
	{subOpClaimConcurrent, opClaimConcurrent},
	{subOpClaimLifecycle, opClaimLifecycle},
	{subOpModel, opModel},
}

// opCreate creates the PREPARED operation of p at time at and fails t unless
// it is new.
func opCreate(t suiteT, s reference.OperationStore, p reference.Plan, at int64) reference.Operation {
	t.Helper()
	op := confOp(p, at)
	ok, err := s.CreateIfAbsent(confCtx, op, p)
	if err != nil || !ok {
		t.Fatalf("CreateIfAbsent(%s, new valid plan for %s/%s) = %v, %v; want true, nil", op.OperationID, p.Space, p.DocumentID, ok, err)
	}
	return op
}

// opMustGet reads an operation and fails t if it cannot.
func opMustGet(t suiteT, s reference.OperationStore, id string) reference.Operation {
	t.Helper()
	got, err := s.Get(confCtx, id)
	if err != nil {
		t.Fatalf("Get(%s) error: %v; want the stored operation", id, err)
	}
	return got
}

// opExpectStored fails t unless the stored mutable record equals want.
func opExpectStored(t suiteT, s reference.OperationStore, want reference.Operation, context string) {
	t.Helper()
	got := opMustGet(t, s, want.OperationID)
	if !confEqual(confMutable(got), confMutable(want)) {
		t.Errorf("%s: Get(%s) differs from the expected record:%s", context, want.OperationID, confDiff(confMutable(want), confMutable(got)))
	}
}

// opAdvance builds next from cur.
func opAdvance(cur reference.Operation, to reference.Stage, at int64, reason string, attempts int) reference.Operation {
	n := cur
	n.Stage, n.UpdatedAt, n.FailureReason, n.Attempts = to, at, reason, attempts
	return n
}

// opCAS runs CompareAndSet and fails t unless it returns want with no error.
func opCAS(t suiteT, s reference.OperationStore, expected, next reference.Operation, want bool, context string) {
	t.Helper()
	ok, err := s.CompareAndSet(confCtx, expected, next)
	if err != nil || ok != want {
		t.Fatalf("%s: CompareAndSet(%s: %s -> %s at %d) = %v, %v; want %v, nil", context, expected.OperationID,
			expected.Stage, next.Stage, next.UpdatedAt, ok, err, want)
	}
}

func opCreateFirstWriteWins(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	p1 := confPlan("op-1", "space_a", "doc-1", 0)
	first := opCreate(t, s, p1, confNow)
	p2 := confPlan("op-1", "space_a", "doc-2", 0)
	p2.Content = "another plan"
	op2 := confOp(p2, confNow+5)
	ok, err := s.CreateIfAbsent(confCtx, op2, p2)
	if err != nil || ok {
		t.Errorf("second CreateIfAbsent(op-1) for doc-2 = %v, %v; want false, nil (first write wins)", ok, err)
	}
	got := opMustGet(t, s, "op-1")
	if !confEqual(confMutable(got), first) {
		t.Errorf("after the losing create, Get(op-1) is not the first record:%s", confDiff(first, confMutable(got)))
	}
	plan, err := s.GetPlan(confCtx, "op-1")
	if err != nil {
		t.Fatalf("GetPlan(op-1) error: %v; want the first plan", err)
	}
	if plan.DocumentID != "doc-1" || !confEqual(plan, p1) {
		t.Errorf("after the losing create, GetPlan(op-1) is not the first plan (doc %q, want doc-1):%s", plan.DocumentID, confDiff(p1, plan))
	}
	// The same pair again is also just false.
	ok, err = s.CreateIfAbsent(confCtx, first, p1)
	if err != nil || ok {
		t.Errorf("repeating the first CreateIfAbsent(op-1) = %v, %v; want false, nil", ok, err)
	}
}

func opCreateConcurrent(t suiteT, fresh func() reference.OperationStore) {
	for round := 0; round < 5; round++ {
		s := fresh()
		id := fmt.Sprintf("operation-concurrent-%d", round)
		plans := make([]reference.Plan, confWorkers)
		for i := range plans {
			plans[i] = confPlan(id, "space_a", fmt.Sprintf("doc-%d", i), 0)
		}
		type res struct {
			ok  bool
			err error
		}
		results := confRace(confWorkers, func(i int) res {
			ok, err := s.CreateIfAbsent(confCtx, confOp(plans[i], confNow), plans[i])
			return res{ok, err}
		})
		winner := -1
		for i, r := range results {
			if r.err != nil {
				t.Errorf("round %d: concurrent CreateIfAbsent #%d error: %v; want true or false", round, i, r.err)
			}
			if r.ok {
				if winner >= 0 {
					t.Errorf("round %d: concurrent CreateIfAbsent: #%d and #%d both returned true; want exactly one winner", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: %d concurrent CreateIfAbsent calls: none returned true; want exactly one", round, confWorkers)
		}
		got := opMustGet(t, s, id)
		if got.DocumentID != plans[winner].DocumentID || got.PlanFingerprint != reference.Fingerprint(plans[winner]) {
			t.Errorf("round %d: stored op is for %s (fingerprint %s); want the winner's %s", round, got.DocumentID, got.PlanFingerprint, plans[winner].DocumentID)
		}
		plan, err := s.GetPlan(confCtx, id)
		if err != nil {
			t.Fatalf("round %d: GetPlan(%s) after concurrent creation: %v; want the winner's plan", round, id, err)
		}
		if reference.Fingerprint(plan) != got.PlanFingerprint {
			t.Errorf("round %d: stored plan (doc %s) does not hash to the stored operation's fingerprint (doc %s): op and plan not created together",
				round, plan.DocumentID, got.DocumentID)
		}
	}
}

func opCreateRejectsInvalid(t suiteT, fresh func() reference.OperationStore) {
	type bad struct {
		name  string
		op    func() (reference.Operation, reference.Plan)
		wants []error
	}
	good := func(id string) (reference.Operation, reference.Plan) {
		p := confPlan(id, "space_a", "doc-1", 0)
		return confOp(p, confNow), p
	}
	cases := []bad{
		{"ZeroPlan", func() (reference.Operation, reference.Plan) {
			op, _ := good("op-zero")
			return op, reference.Plan{}
		}, []error{reference.ErrInvalidPlan, reference.ErrIdentityMismatch}},
		{"PlanWithoutNextState", func() (reference.Operation, reference.Plan) {
			p := confPlan("op-nonext", "space_a", "doc-1", 0)
			p.NextState = nil
			op := confOp(p, confNow)
			return op, p
		}, []error{reference.ErrInvalidPlan}},
		{"MutationOperationIDDiffers", func() (reference.Operation, reference.Plan) {
			p := confPlan("op-mut", "space_a", "doc-1", 0)
			p.Mutation.OperationID = "op-other"
			return confOp(p, confNow), p
		}, []error{reference.ErrInvalidPlan}},
		{"FingerprintMismatch", func() (reference.Operation, reference.Plan) {
			op, p := good("op-fp")
			op.PlanFingerprint = strings.Repeat("ab", 32) // well-formed, but not this plan's hash
			return op, p
		}, []error{reference.ErrFingerprint}},
		{"FingerprintOfAnotherPlan", func() (reference.Operation, reference.Plan) {
			op, p := good("op-fp2")
			other := p
			other.Content = "edited after fingerprinting"
			return op, other
		}, []error{reference.ErrFingerprint}},
		{"BlankSpace", func() (reference.Operation, reference.Plan) {
			p := confPlan("op-blank", "  ", "doc-1", 0)
			return confOp(p, confNow), p
		}, []error{reference.ErrInvalidPlan, reference.ErrInvalidArgument}},
		{"BlankOperationID", func() (reference.Operation, reference.Plan) {
			p := confPlan("", "space_a", "doc-1", 0)
			return confOp(p, confNow), p
		}, []error{reference.ErrInvalidPlan, reference.ErrInvalidArgument}},
		{"OperationForAnotherDocument", func() (reference.Operation, reference.Plan) {
			op, p := good("op-ident")
			op.DocumentID = "doc-2"
			return op, p
		}, []error{reference.ErrIdentityMismatch}},
		{"NotPrepared", func() (reference.Operation, reference.Plan) {
			op, p := good("op-stage")
			op.Stage = reference.GraphApplied
			return op, p
		}, []error{reference.ErrIllegalTransition}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t suiteT) {
			s := fresh()
			op, p := c.op()
			ok, err := s.CreateIfAbsent(confCtx, op, p)
			matched := false
			for _, w := range c.wants {
				matched = matched || errors.Is(err, w)
			}
			if ok || !matched {
				t.Errorf("CreateIfAbsent(invalid pair: %s) = %v, %v; want false and an error wrapping one of %v", c.name, ok, err, c.wants)
			}
			if got, err := s.Get(confCtx, op.OperationID); !errors.Is(err, reference.ErrNotFound) {
				t.Errorf("after a rejected create, Get(%q) = %+v, %v; want ErrNotFound (nothing stored)", op.OperationID, got, err)
			}
			if _, err := s.GetPlan(confCtx, op.OperationID); !errors.Is(err, reference.ErrNotFound) {
				t.Errorf("after a rejected create, GetPlan(%q) error = %v; want ErrNotFound (nothing stored)", op.OperationID, err)
			}
			if all, err := s.List(confCtx); err != nil || len(all) != 0 {
				t.Errorf("after a rejected create, List() = %d operations, %v; want none", len(all), err)
			}
		})
	}
}

func opGetUnknown(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	opCreate(t, s, confPlan("op-known", "space_a", "doc-1", 0), confNow)
	for _, id := range []string{"op-unknown", "op-know", "OP-KNOWN"} {
		if got, err := s.Get(confCtx, id); !errors.Is(err, reference.ErrNotFound) {
			t.Errorf("Get(%q) = %+v, %v; want an error wrapping ErrNotFound", id, got, err)
		}
		if _, err := s.GetPlan(confCtx, id); !errors.Is(err, reference.ErrNotFound) {
			t.Errorf("GetPlan(%q) error = %v; want an error wrapping ErrNotFound", id, err)
		}
	}
}

func opPlanRoundTrip(t suiteT, fresh func() reference.OperationStore) {
	plans := map[string]reference.Plan{
		"Full":    confFullPlan("op-full", "space_a", "doc-full"),
		"Minimal": confPlan("op-min", "space_a", "doc-min", 0),
		"NoOp": {Kind: reference.NoOp, OperationID: "op-noop", Space: "space_a", DocumentID: "doc-noop",
			Options: reference.GraphOptions{Space: "space_a", ReadOnly: true}, Mutation: reference.Mutation{OperationID: "op-noop"}},
		"Retraction": func() reference.Plan {
			p := confPlan("op-retract", "space_b", "doc-r", 3)
			p.Kind = reference.Retraction
			p.NextState.Status = reference.DocRetracted
			p.Mutation.DeleteEdges = []reference.EdgeKey{{Source: "a", Type: "R", Target: "b"}}
			p.StaleEdges = []reference.EdgeKey{{Source: "a", Type: "R", Target: "b"}}
			return p
		}(),
	}
	for _, name := range []string{"Full", "Minimal", "NoOp", "Retraction"} {
		t.Run(name, func(t suiteT) {
			s := fresh()
			p := plans[name]
			if err := p.Validate(); err != nil {
				t.Fatalf("fixture %s is invalid: %v", name, err)
			}
			op := opCreate(t, s, p, confNow)
			opExpectStored(t, s, op, "round trip")
			got, err := s.GetPlan(confCtx, p.OperationID)
			if err != nil {
				t.Fatalf("GetPlan(%s) error: %v", p.OperationID, err)
			}
			if !confEqual(got, p) {
				t.Errorf("GetPlan(%s) does not round-trip the plan:%s", p.OperationID, confDiff(p, got))
			}
			if fp := reference.Fingerprint(got); fp != op.PlanFingerprint {
				t.Errorf("GetPlan(%s) hashes to %s; the stored fingerprint is %s", p.OperationID, fp, op.PlanFingerprint)
			}
			// Mutating the returned plan must not reach the store.
			if got.NextState != nil {
				got.NextState.Revision = 99
			}
			if len(got.Mutation.UpsertNodes) > 0 {
				got.Mutation.UpsertNodes[0].Properties = map[string]string{"mutated": "yes"}
			}
			again, err := s.GetPlan(confCtx, p.OperationID)
			if err != nil || !confEqual(again, p) {
				t.Errorf("after mutating a returned plan, GetPlan(%s) = %v; want the stored plan unchanged:%s", p.OperationID, err, confDiff(p, again))
			}
		})
	}
}

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
			t.Fatalf("round %d: %d goroutines CompareAndSet from the same PREPARED record: winners %v; want exactly one", round, confWorkers, winners)
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

func opListRecoverable(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	mk := func(id string, at int64) reference.Operation {
		return opCreate(t, s, confPlan(id, "space_a", "doc-"+id, 0), at)
	}
	b := mk("b", confNow+10)
	a := mk("a", confNow+10)
	c := mk("c", confNow+5)
	d := mk("d", confNow+20)
	f := mk("f", confNow+1)
	fFailed := opAdvance(f, reference.Failed, confNow+15, "retry later", 1)
	opCAS(t, s, f, fFailed, true, "f PREPARED->FAILED")
	done := mk("completed", confNow)
	cur := done
	for _, st := range []reference.Stage{reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		n := opAdvance(cur, st, confNow, "", 0)
		opCAS(t, s, cur, n, true, "completed -> "+string(st))
		cur = n
	}
	for _, disp := range []reference.Disposition{reference.DeadLetter, reference.Abandoned} {
		o := mk(strings.ToLower(string(disp)), confNow)
		n := o
		n.Disposition = disp
		if disp == reference.Abandoned {
			n.SupersededBy = "d"
		}
		opCAS(t, s, o, n, true, "disposition "+string(disp))
		opExpectStored(t, s, n, "after setting disposition "+string(disp))
	}
	ids := func(ops []reference.Operation) []string {
		out := make([]string, len(ops))
		for i, o := range ops {
			out[i] = o.OperationID
		}
		return out
	}
	want := []reference.Operation{c, a, b, fFailed, d}
	for _, limit := range []int{1, 2, 5, 100} {
		got, err := s.ListRecoverable(confCtx, limit)
		if err != nil {
			t.Fatalf("ListRecoverable(%d) error: %v", limit, err)
		}
		w := want[:min(limit, len(want))]
		if fmt.Sprint(ids(got)) != fmt.Sprint(ids(w)) {
			t.Errorf("ListRecoverable(%d) = %v; want %v (unfinished, no disposition, by updatedAt then id, at most limit)", limit, ids(got), ids(w))
			continue
		}
		for i := range got {
			if !confEqual(confMutable(got[i]), confMutable(w[i])) {
				t.Errorf("ListRecoverable(%d)[%d] differs from the stored record:%s", limit, i, confDiff(confMutable(w[i]), confMutable(got[i])))
			}
		}
	}
	for _, limit := range []int{0, -1} {
		if got, err := s.ListRecoverable(confCtx, limit); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("ListRecoverable(%d) = %v, %v; want an error wrapping ErrInvalidArgument", limit, ids(got), err)
		}
	}
	got, _ := s.ListRecoverable(confCtx, 100)
	if len(got) > 0 {
		got[0].Stage, got[0].OperationID, got[0].UpdatedAt = reference.Completed, "zzz", 0
		got = append(got[:1], got[2:]...)
		_ = got
	}
	again, err := s.ListRecoverable(confCtx, 100)
	if err != nil || fmt.Sprint(ids(again)) != fmt.Sprint(ids(want)) {
		t.Errorf("after mutating a returned slice, ListRecoverable(100) = %v, %v; want %v", ids(again), err, ids(want))
	}
	if op := opMustGet(t, s, "c"); op.Stage != reference.Prepared || op.UpdatedAt != c.UpdatedAt {
		t.Errorf("after mutating a returned slice, Get(c) = %s at %d; want PREPARED at %d", op.Stage, op.UpdatedAt, c.UpdatedAt)
	}
	// Moving c forward in time moves it to the end of the scan.
	c2 := opAdvance(c, reference.GraphApplied, confNow+30, "", 0)
	opCAS(t, s, c, c2, true, "c PREPARED->GRAPH_APPLIED")
	again, _ = s.ListRecoverable(confCtx, 100)
	want2 := []string{"a", "b", "f", "d", "c"}
	if fmt.Sprint(ids(again)) != fmt.Sprint(want2) {
		t.Errorf("after c moved to updatedAt %d, ListRecoverable(100) = %v; want %v (ordered by the current updatedAt)", confNow+30, ids(again), want2)
	}
}

func opList(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	if all, err := s.List(confCtx); err != nil || len(all) != 0 {
		t.Errorf("List() on an empty store = %d operations, %v; want none", len(all), err)
	}
	z := opCreate(t, s, confPlan("z", "space_a", "doc-z", 0), confNow)
	m := opCreate(t, s, confPlan("m", "space_b", "doc-m", 0), confNow+1)
	cur := m
	for _, st := range []reference.Stage{reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		n := opAdvance(cur, st, cur.UpdatedAt+1, "", 0)
		opCAS(t, s, cur, n, true, "m -> "+string(st))
		cur = n
	}
	all, err := s.List(confCtx)
	if err != nil || len(all) != 2 || all[0].OperationID != "m" || all[1].OperationID != "z" {
		t.Fatalf("List() = %v, %v; want [m z] ordered by operationId, finished ones included", all, err)
	}
	if !confEqual(confMutable(all[0]), cur) || !confEqual(confMutable(all[1]), z) {
		t.Errorf("List() records differ:%s%s", confDiff(cur, confMutable(all[0])), confDiff(z, confMutable(all[1])))
	}
}

func opClaimConcurrent(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	for round := 0; round < 5; round++ {
		op := opCreate(t, s, confPlan(fmt.Sprintf("op-claim-%d", round), "space_a", "doc-1", 0), confNow)
		type res struct {
			ok  bool
			err error
		}
		results := confRace(confWorkers, func(i int) res {
			ok, err := s.Claim(confCtx, op.OperationID, fmt.Sprintf("recoverer-%d", i), confNow, 5_000)
			return res{ok, err}
		})
		winners := []int{}
		for i, r := range results {
			if r.err != nil {
				t.Errorf("round %d: concurrent Claim #%d error: %v", round, i, r.err)
			}
			if r.ok {
				winners = append(winners, i)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d concurrent Claims on a free operation: winners %v; want exactly one", round, confWorkers, winners)
		}
		if got := opMustGet(t, s, op.OperationID); got.ClaimHolder != fmt.Sprintf("recoverer-%d", winners[0]) {
			t.Errorf("round %d: Get shows ClaimHolder %q; want the winner recoverer-%d", round, got.ClaimHolder, winners[0])
		}
	}
}

func opClaimLifecycle(t suiteT, fresh func() reference.OperationStore) {
	s := fresh()
	op := opCreate(t, s, confPlan("op-1", "space_a", "doc-1", 0), confNow)
	claim := func(holder string, at, ttl int64, want bool, why string) {
		t.Helper()
		ok, err := s.Claim(confCtx, op.OperationID, holder, at, ttl)
		if err != nil || ok != want {
			t.Errorf("Claim(%s, %s, now=%d, ttl=%d) = %v, %v; want %v, nil: %s", op.OperationID, holder, at, ttl, ok, err, want, why)
		}
	}
	release := func(holder string, want bool, why string) {
		t.Helper()
		ok, err := s.ReleaseClaim(confCtx, op.OperationID, holder)
		if err != nil || ok != want {
			t.Errorf("ReleaseClaim(%s, %s) = %v, %v; want %v, nil: %s", op.OperationID, holder, ok, err, want, why)
		}
	}
	claim("A", confNow, 1000, true, "the operation is unclaimed")
	if got := opMustGet(t, s, op.OperationID); got.ClaimHolder != "A" || got.ClaimExpiresAt != confNow+1000 {
		t.Errorf("after Claim by A, Get shows claim %q until %d; want A until %d", got.ClaimHolder, got.ClaimExpiresAt, confNow+1000)
	}
	claim("B", confNow+500, 1000, false, "A's claim is live until now+1000")
	release("B", false, "B does not hold the claim")
	claim("B", confNow+600, 1000, false, "B's release must not have dropped A's claim")
	claim("A", confNow+900, 1000, true, "the holder may renew its own claim")
	claim("B", confNow+1500, 1000, false, "A renewed until now+1900")
	claim("B", confNow+1901, 1000, true, "A's claim expired at now+1900")
	claim("A", confNow+1902, 1000, false, "B took over until now+2901")
	release("A", false, "A lost the claim to B")
	release("B", true, "B holds the claim")
	release("B", false, "B released already")
	claim("A", confNow+1903, 1000, true, "B released the claim")
	if got, err := s.Get(confCtx, op.OperationID); err != nil || !confEqual(confMutable(got), op) {
		t.Errorf("claims changed the operation record: %v%s", err, confDiff(op, confMutable(got)))
	}
}
