package properties

import (
	"context"
	"slices"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

func testOperations(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	op, p := storetest.FixtureOp("sp", "d1", "op-1", 0, 100)
	ok, err := s.Ops.CreateIfAbsent(ctx, op, p)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("first create returned false")
	}
	got, err := s.Ops.Get(ctx, "op-1")
	storetest.Must(t, err)
	if got != op {
		t.Fatalf("Get(op-1) differs from the operation created:%s", confDiff(op, got))
	}
	gp, err := s.Ops.GetPlan(ctx, "op-1")
	storetest.Must(t, err)
	if !confEqual(gp, p) {
		t.Fatalf("GetPlan(op-1) does not round-trip the plan:%s", confDiff(p, gp))
	}
	// Callers may scribble on what they got without changing the store.
	gp.Mutation.UpsertNodes[0].Properties["name"] = "changed"
	gp.NextState.FactSources[0].Type = "changed"
	p.Registrations[0].Aliases[0] = "changed"
	gp2, err := s.Ops.GetPlan(ctx, "op-1")
	storetest.Must(t, err)
	if gp2.Mutation.UpsertNodes[0].Properties["name"] != "Ada" || gp2.NextState.FactSources[0].Type != "SELF" ||
		gp2.Registrations[0].Aliases[0] != "A. op-1" {
		t.Fatalf("the store's plan changed with the caller's copies: GetPlan(op-1) = %s", confShow(gp2))
	}

	// Same id again, same or another plan: false, nothing changes.
	op0, p0 := storetest.FixtureOp("sp", "d1", "op-1", 0, 100)
	ok, err = s.Ops.CreateIfAbsent(ctx, op0, p0)
	storetest.Must(t, err)
	if ok {
		t.Fatal("second create returned true")
	}
	other := storetest.FixturePlan("sp", "d1", "op-1", 0)
	other.Content = "a different model answer"
	otherOp := reference.NewOperation(other, 200)
	ok, err = s.Ops.CreateIfAbsent(ctx, otherOp, other)
	storetest.Must(t, err)
	if ok {
		t.Fatal("create with another plan under a used id returned true")
	}
	if got, _ := s.Ops.Get(ctx, "op-1"); got.PlanFingerprint != op.PlanFingerprint || got.UpdatedAt != 100 {
		t.Fatalf("a refused create changed the stored record: Get(op-1) = %s; want planFingerprint %s, updatedAt 100", confShow(got), op.PlanFingerprint)
	}

	// Invalid pairs are rejected and store nothing.
	bad, bp := storetest.FixtureOp("sp", "d1", "op-bad", 0, 100)
	bad.PlanFingerprint = "0000"
	_, err = s.Ops.CreateIfAbsent(ctx, bad, bp)
	storetest.WantErr(t, err, reference.ErrFingerprint)
	bad, bp = storetest.FixtureOp("sp", "d1", "op-bad", 0, 100)
	bad.Stage = reference.GraphApplied
	_, err = s.Ops.CreateIfAbsent(ctx, bad, bp)
	storetest.WantErr(t, err, reference.ErrIllegalTransition)
	bad, bp = storetest.FixtureOp("sp", "d1", "op-bad", 0, 100)
	bad.DocumentID = "d2"
	_, err = s.Ops.CreateIfAbsent(ctx, bad, bp)
	storetest.WantErr(t, err, reference.ErrIdentityMismatch)
	bad, bp = storetest.FixtureOp("sp", "d1", "op-bad", 0, 100)
	bp.Mutation.OperationID = "someone-else"
	bad.PlanFingerprint = reference.Fingerprint(bp)
	_, err = s.Ops.CreateIfAbsent(ctx, bad, bp)
	storetest.WantErr(t, err, reference.ErrInvalidPlan)
	_, err = s.Ops.Get(ctx, "op-bad")
	storetest.WantErr(t, err, reference.ErrNotFound)

	blankOp, blankPlan := storetest.FixtureOp("sp", "d1", " ", 0, 100)
	_, err = s.Ops.CreateIfAbsent(ctx, blankOp, blankPlan)
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
	blankOp, blankPlan = storetest.FixtureOp("", "d1", "op-x", 0, 100)
	_, err = s.Ops.CreateIfAbsent(ctx, blankOp, blankPlan)
	storetest.WantErr(t, err, reference.ErrInvalidArgument)

	_, err = s.Ops.Get(ctx, "nope")
	storetest.WantErr(t, err, reference.ErrNotFound)
	_, err = s.Ops.GetPlan(ctx, "nope")
	storetest.WantErr(t, err, reference.ErrNotFound)

	// A plan against revision 3 round-trips its previous state too.
	op3, p3 := storetest.FixtureOp("sp", "d3", "op-3", 3, 100)
	ok, err = s.Ops.CreateIfAbsent(ctx, op3, p3)
	storetest.Must(t, err)
	if !ok || op3.ExpectedRevision != 3 {
		t.Fatalf("create op-3: ok=%v expected=%d", ok, op3.ExpectedRevision)
	}
	gp3, err := s.Ops.GetPlan(ctx, "op-3")
	storetest.Must(t, err)
	if !confEqual(gp3, p3) {
		t.Fatalf("GetPlan(op-3) does not round-trip the plan:%s", confDiff(p3, gp3))
	}
	all, err := s.Ops.List(ctx)
	storetest.Must(t, err)
	if len(all) != 2 || all[0].OperationID != "op-1" || all[1].OperationID != "op-3" {
		t.Fatalf("List() = %s; want op-1, op-3 in that order", confShow(all))
	}
}

func testOperationCAS(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	op := storetest.CreateOp(t, s, "op-1", 100)
	ok, err := s.Ops.Claim(ctx, "op-1", "inst-a", 100, 1000)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("claim failed")
	}

	next := storetest.Advance(t, op, reference.GraphApplied, 150)
	next.FailureReason = "note"
	ok, err = s.Ops.CompareAndSet(ctx, op, next)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("CAS PREPARED -> GRAPH_APPLIED failed")
	}
	got, _ := s.Ops.Get(ctx, "op-1")
	if got.Stage != reference.GraphApplied || got.UpdatedAt != 150 || got.FailureReason != "note" {
		t.Fatalf("after CAS: %s", confShow(got))
	}
	if got.ClaimHolder != "inst-a" || got.ClaimExpiresAt != 1100 {
		t.Fatalf("CAS lost the claim: %s", confShow(got))
	}

	// Stale expected: false, nothing changes.
	ok, err = s.Ops.CompareAndSet(ctx, op, storetest.Advance(t, op, reference.GraphApplied, 160))
	storetest.Must(t, err)
	if ok {
		t.Fatal("CAS with stale expected stage succeeded")
	}
	// A lost race is false even if next would be illegal after the winner.
	ok, err = s.Ops.CompareAndSet(ctx, op, storetest.Advance(t, op, reference.Failed, 160))
	storetest.Must(t, err)
	if ok {
		t.Fatal("CAS with stale expected stage succeeded")
	}
	cur, _ := s.Ops.Get(ctx, "op-1")
	if cur.Stage != reference.GraphApplied || cur.UpdatedAt != 150 {
		t.Fatalf("stale CAS changed the record: %s", confShow(cur))
	}
	// Attempts and disposition are part of the comparison.
	stale := cur
	stale.Attempts = 7
	n := cur
	n.Attempts, n.UpdatedAt = 8, 170
	ok, err = s.Ops.CompareAndSet(ctx, stale, n)
	storetest.Must(t, err)
	if ok {
		t.Fatal("CAS with wrong attempts succeeded")
	}
	stale = cur
	stale.Disposition = reference.DeadLetter
	n = cur
	n.UpdatedAt = 170
	ok, err = s.Ops.CompareAndSet(ctx, stale, n)
	if ok {
		t.Fatalf("CAS with wrong disposition succeeded (err %v)", err)
	}
	// Identity is part of the comparison.
	stale = cur
	stale.PlanFingerprint = "other"
	n = stale
	n.UpdatedAt = 170
	ok, err = s.Ops.CompareAndSet(ctx, stale, n)
	if ok {
		t.Fatalf("CAS with another identity succeeded (err %v)", err)
	}

	// Illegal successors are errors and change nothing.
	ill := cur
	ill.Stage, ill.UpdatedAt = reference.Prepared, 170
	_, err = s.Ops.CompareAndSet(ctx, cur, ill)
	storetest.WantErr(t, err, reference.ErrIllegalTransition)
	ill = cur
	ill.UpdatedAt = 10
	_, err = s.Ops.CompareAndSet(ctx, cur, ill)
	storetest.WantErr(t, err, reference.ErrTimeBackwards)
	ill = cur
	ill.PlanFingerprint, ill.UpdatedAt = "forged", 170
	_, err = s.Ops.CompareAndSet(ctx, cur, ill)
	storetest.WantErr(t, err, reference.ErrIdentityMismatch)
	ill = cur
	ill.Stage, ill.UpdatedAt = "BOGUS", 170
	_, err = s.Ops.CompareAndSet(ctx, cur, ill)
	storetest.WantErr(t, err, reference.ErrUnknownStage)
	ill = cur
	ill.Attempts, ill.UpdatedAt = -1, 170
	if _, err = s.Ops.CompareAndSet(ctx, cur, ill); err == nil {
		t.Fatal("attempts going down accepted")
	}
	// Time backwards relative to the stored record (expected carries an
	// older UpdatedAt): an error.
	old := cur
	old.UpdatedAt = 120
	ill = old
	ill.Stage, ill.UpdatedAt = reference.StateCommitted, 130
	_, err = s.Ops.CompareAndSet(ctx, old, ill)
	storetest.WantErr(t, err, reference.ErrTimeBackwards)
	if again, _ := s.Ops.Get(ctx, "op-1"); again != cur {
		t.Fatalf("a CAS refused for time going backwards changed the record:%s", confDiff(cur, again))
	}

	// Same-stage update (attempt count) and then a terminal disposition.
	n = cur
	n.Attempts, n.UpdatedAt, n.FailureReason = 1, 200, "boom"
	ok, err = s.Ops.CompareAndSet(ctx, cur, n)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("same-stage CAS failed")
	}
	d := n
	d.Disposition, d.SupersededBy, d.UpdatedAt = reference.Abandoned, "op-2", 210
	ok, err = s.Ops.CompareAndSet(ctx, n, d)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("disposition CAS failed")
	}
	got, _ = s.Ops.Get(ctx, "op-1")
	if got.Disposition != reference.Abandoned || got.SupersededBy != "op-2" || got.Attempts != 1 || got.FailureReason != "boom" {
		t.Fatalf("after disposition: %s", confShow(got))
	}
	after := d
	after.UpdatedAt = 220
	_, err = s.Ops.CompareAndSet(ctx, d, after)
	storetest.WantErr(t, err, reference.ErrIllegalTransition)

	// Full happy path on another op, with FAILED -> PREPARED.
	o := storetest.CreateOp(t, s, "op-2", 100)
	for _, st := range []reference.Stage{reference.Failed, reference.Prepared, reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		nx := storetest.Advance(t, o, st, o.UpdatedAt+1)
		ok, err := s.Ops.CompareAndSet(ctx, o, nx)
		storetest.Must(t, err)
		if !ok {
			t.Fatalf("CAS to %s failed", st)
		}
		o = nx
	}
	nx := o
	nx.UpdatedAt++
	_, err = s.Ops.CompareAndSet(ctx, o, nx)
	storetest.WantErr(t, err, reference.ErrIllegalTransition)

	missing, _ := storetest.FixtureOp("sp", "d", "ghost", 0, 1)
	_, err = s.Ops.CompareAndSet(ctx, missing, storetest.Advance(t, missing, reference.GraphApplied, 2))
	storetest.WantErr(t, err, reference.ErrNotFound)
}

func testRecoverable(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	// Same update time for b and a: ordered by id.
	b := storetest.CreateOp(t, s, "b", 300)
	storetest.CreateOp(t, s, "a", 300)
	storetest.CreateOp(t, s, "c", 100)
	d := storetest.CreateOp(t, s, "d", 50)
	e := storetest.CreateOp(t, s, "e", 60)
	f := storetest.CreateOp(t, s, "f", 70)
	g := storetest.CreateOp(t, s, "g", 400)
	// d completes; e is dead-lettered; f fails (still recoverable); b moves
	// to GRAPH_APPLIED at 500 (moves to the end).
	for _, st := range []reference.Stage{reference.GraphApplied, reference.StateCommitted, reference.Completed} {
		nx := storetest.Advance(t, d, st, d.UpdatedAt+1)
		if ok, err := s.Ops.CompareAndSet(ctx, d, nx); err != nil || !ok {
			t.Fatal(ok, err)
		}
		d = nx
	}
	ne := e
	ne.Disposition, ne.UpdatedAt = reference.DeadLetter, 61
	if ok, err := s.Ops.CompareAndSet(ctx, e, ne); err != nil || !ok {
		t.Fatal(ok, err)
	}
	nf := storetest.Advance(t, f, reference.Failed, 80)
	if ok, err := s.Ops.CompareAndSet(ctx, f, nf); err != nil || !ok {
		t.Fatal(ok, err)
	}
	nb := storetest.Advance(t, b, reference.GraphApplied, 500)
	if ok, err := s.Ops.CompareAndSet(ctx, b, nb); err != nil || !ok {
		t.Fatal(ok, err)
	}
	_ = g
	ids := func(ops []reference.Operation) []string {
		var out []string
		for _, o := range ops {
			out = append(out, o.OperationID)
		}
		return out
	}
	got, err := s.Ops.ListRecoverable(ctx, 100)
	storetest.Must(t, err)
	if want := []string{"f", "c", "a", "g", "b"}; !slices.Equal(ids(got), want) {
		t.Fatalf("ListRecoverable gives operationIds %s, want %s", confShow(ids(got)), confShow(want))
	}
	if got[0].Stage != reference.Failed || got[4].Stage != reference.GraphApplied {
		t.Fatalf("ListRecoverable records: %s", confShow(got))
	}
	got[0].OperationID = "scribbled"
	got, err = s.Ops.ListRecoverable(ctx, 2)
	storetest.Must(t, err)
	if want := []string{"f", "c"}; !slices.Equal(ids(got), want) {
		t.Fatalf("ListRecoverable(2) gives operationIds %s, want %s", confShow(ids(got)), confShow(want))
	}
	for _, lim := range []int{0, -1} {
		_, err = s.Ops.ListRecoverable(ctx, lim)
		storetest.WantErr(t, err, reference.ErrInvalidArgument)
	}
	all, err := s.Ops.List(ctx)
	storetest.Must(t, err)
	if want := []string{"a", "b", "c", "d", "e", "f", "g"}; !slices.Equal(ids(all), want) {
		t.Fatalf("List() gives operationIds %s, want %s", confShow(ids(all)), confShow(want))
	}
}

func testClaims(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	storetest.CreateOp(t, s, "op", 0)
	claim := func(holder string, now int64) bool {
		t.Helper()
		ok, err := s.Ops.Claim(ctx, "op", holder, now, 100)
		storetest.Must(t, err)
		return ok
	}
	if !claim("a", 1000) {
		t.Fatal("first claim refused")
	}
	if claim("b", 1050) {
		t.Fatal("live claim taken by another holder")
	}
	if !claim("a", 1050) {
		t.Fatal("renewal by the holder refused")
	}
	if got, _ := s.Ops.Get(ctx, "op"); got.ClaimHolder != "a" || got.ClaimExpiresAt != 1150 {
		t.Fatalf("after renewal: %s", confShow(got))
	}
	if claim("b", 1149) {
		t.Fatal("claim taken before expiry")
	}
	if !claim("b", 1150) {
		t.Fatal("expired claim not taken over")
	}
	if ok, err := s.Ops.ReleaseClaim(ctx, "op", "a"); err != nil || ok {
		t.Fatalf("release by non-holder: %v %v", ok, err)
	}
	if ok, err := s.Ops.ReleaseClaim(ctx, "op", "b"); err != nil || !ok {
		t.Fatalf("release by holder: %v %v", ok, err)
	}
	if ok, err := s.Ops.ReleaseClaim(ctx, "op", "b"); err != nil || ok {
		t.Fatalf("second release: %v %v", ok, err)
	}
	if got, _ := s.Ops.Get(ctx, "op"); got.ClaimHolder != "" {
		t.Fatalf("claim not released: %s", confShow(got))
	}
	if !claim("c", 1151) {
		t.Fatal("claim after release refused")
	}
	_, err := s.Ops.Claim(ctx, "ghost", "a", 1, 10)
	storetest.WantErr(t, err, reference.ErrNotFound)
	_, err = s.Ops.Claim(ctx, "op", " ", 1, 10)
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
}
