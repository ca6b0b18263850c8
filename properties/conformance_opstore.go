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
			// Nothing stored: ErrNotFound, or for a blank id the
			// convention's ErrInvalidArgument (reference/stores.go).
			nothing := func(err error) bool {
				return errors.Is(err, reference.ErrNotFound) || (strings.TrimSpace(op.OperationID) == "" && errors.Is(err, reference.ErrInvalidArgument))
			}
			if got, err := s.Get(confCtx, op.OperationID); !nothing(err) {
				t.Errorf("after a rejected create, Get(%q) = %s, %v; want ErrNotFound (nothing stored)", op.OperationID, confShow(got), err)
			}
			if _, err := s.GetPlan(confCtx, op.OperationID); !nothing(err) {
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
			t.Errorf("Get(%q) = %s, %v; want an error wrapping ErrNotFound", id, confShow(got), err)
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
