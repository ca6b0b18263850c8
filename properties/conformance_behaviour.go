package properties

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The behaviour suite: every detail of the store contracts the project's
// own adapters were tested on (formerly adapters/internal/storetest), now
// run by Stores on every store, in the subtest Behaviour. Each test takes
// a fresh bundle and skips when the bundle lacks the store it needs.

// bhOpener returns a fresh, empty bundle.
type bhOpener func(t suiteT) reference.Stores

// runBehaviour runs every behaviour test against bundles from open.
func runBehaviour(t suiteT, open bhOpener) {
	probe := open(t)
	for _, c := range []struct {
		name  string
		needs []bool
		run   func(suiteT, bhOpener)
	}{
		{"Operations", []bool{probe.Ops != nil}, testOperations},
		{"OperationCAS", []bool{probe.Ops != nil}, testOperationCAS},
		{"Recoverable", []bool{probe.Ops != nil}, testRecoverable},
		{"Claims", []bool{probe.Ops != nil}, testClaims},
		{"States", []bool{probe.States != nil}, testStates},
		{"StateHistory", []bool{probe.States != nil}, testStateHistory},
		{"References", []bool{probe.States != nil}, testReferences},
		{"Registry", []bool{probe.Registry != nil}, testRegistry},
		{"Graph", []bool{probe.Writer != nil}, testGraph},
		{"GraphRandom", []bool{probe.Writer != nil}, testGraphRandom},
		{"Locks", []bool{probe.Locks != nil}, testLocks},
		{"Races", []bool{confComplete(probe)}, testRaces},
	} {
		t.Run(c.name, func(t suiteT) {
			if slices.Contains(c.needs, false) {
				t.Skipf("the bundle lacks a store %s needs", c.name)
			}
			c.run(t, open)
		})
	}
}

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
		t.Fatalf("Get = %+v, want %+v", got, op)
	}
	gp, err := s.Ops.GetPlan(ctx, "op-1")
	storetest.Must(t, err)
	if !reflect.DeepEqual(gp, p) {
		t.Fatalf("plan did not round-trip:\n got %+v\nwant %+v", gp, p)
	}
	// Callers may scribble on what they got without changing the store.
	gp.Mutation.UpsertNodes[0].Properties["name"] = "changed"
	gp.NextState.FactSources[0].Type = "changed"
	p.Registrations[0].Aliases[0] = "changed"
	gp2, err := s.Ops.GetPlan(ctx, "op-1")
	storetest.Must(t, err)
	if gp2.Mutation.UpsertNodes[0].Properties["name"] != "Ada" || gp2.NextState.FactSources[0].Type != "SELF" ||
		gp2.Registrations[0].Aliases[0] != "A. op-1" {
		t.Fatalf("store aliased a caller's plan: %+v", gp2)
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
		t.Fatalf("stored record changed: %+v", got)
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
	if !reflect.DeepEqual(gp3, p3) {
		t.Fatalf("plan op-3 did not round-trip")
	}
	all, err := s.Ops.List(ctx)
	storetest.Must(t, err)
	if len(all) != 2 || all[0].OperationID != "op-1" || all[1].OperationID != "op-3" {
		t.Fatalf("List = %+v", all)
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
		t.Fatalf("after CAS: %+v", got)
	}
	if got.ClaimHolder != "inst-a" || got.ClaimExpiresAt != 1100 {
		t.Fatalf("CAS lost the claim: %+v", got)
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
		t.Fatalf("stale CAS changed the record: %+v", cur)
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
		t.Fatalf("failed CAS changed the record: %+v vs %+v", again, cur)
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
		t.Fatalf("after disposition: %+v", got)
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
		t.Fatalf("ListRecoverable = %v, want %v", ids(got), want)
	}
	if got[0].Stage != reference.Failed || got[4].Stage != reference.GraphApplied {
		t.Fatalf("ListRecoverable records: %+v", got)
	}
	got[0].OperationID = "scribbled"
	got, err = s.Ops.ListRecoverable(ctx, 2)
	storetest.Must(t, err)
	if want := []string{"f", "c"}; !slices.Equal(ids(got), want) {
		t.Fatalf("ListRecoverable(2) = %v, want %v", ids(got), want)
	}
	for _, lim := range []int{0, -1} {
		_, err = s.Ops.ListRecoverable(ctx, lim)
		storetest.WantErr(t, err, reference.ErrInvalidArgument)
	}
	all, err := s.Ops.List(ctx)
	storetest.Must(t, err)
	if want := []string{"a", "b", "c", "d", "e", "f", "g"}; !slices.Equal(ids(all), want) {
		t.Fatalf("List = %v, want %v", ids(all), want)
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
		t.Fatalf("after renewal: %+v", got)
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
		t.Fatalf("claim not released: %+v", got)
	}
	if !claim("c", 1151) {
		t.Fatal("claim after release refused")
	}
	_, err := s.Ops.Claim(ctx, "ghost", "a", 1, 10)
	storetest.WantErr(t, err, reference.ErrNotFound)
	_, err = s.Ops.Claim(ctx, "op", " ", 1, 10)
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
}

func testStates(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	cas := func(expected int64, next reference.DocumentState) bool {
		t.Helper()
		ok, err := s.States.CompareAndSet(ctx, expected, next)
		storetest.Must(t, err)
		return ok
	}
	if _, ok, err := s.States.FindCurrent(ctx, "sp", "d"); err != nil || ok {
		t.Fatalf("FindCurrent on empty: %v %v", ok, err)
	}
	e1 := reference.EdgeKey{Source: "a", Type: "T", Target: "b"}
	s1 := storetest.State("sp", "d", 1, "op1", e1)
	if !cas(0, s1) {
		t.Fatal("insert at 0 failed")
	}
	if cas(0, storetest.State("sp", "d", 1, "op1b")) {
		t.Fatal("second insert at 0 succeeded")
	}
	got, ok, err := s.States.FindCurrent(ctx, "sp", "d")
	storetest.Must(t, err)
	if !ok || !reflect.DeepEqual(got, s1) {
		t.Fatalf("FindCurrent = %+v %v, want %+v", got, ok, s1)
	}
	got.FactSources[0].Type = "scribbled"
	s1.NodeIDs[0] = "scribbled"
	if again, _, _ := s.States.FindCurrent(ctx, "sp", "d"); again.FactSources[0].Type != "T" || again.NodeIDs[0] != "n-op1" {
		t.Fatalf("state aliased: %+v", again)
	}
	if cas(2, storetest.State("sp", "d", 3, "op3")) {
		t.Fatal("CAS at wrong expected revision succeeded")
	}
	if !cas(1, storetest.State("sp", "d", 2, "op2")) {
		t.Fatal("CAS 1 -> 2 failed")
	}
	if cas(1, storetest.State("sp", "d", 2, "op2x")) {
		t.Fatal("stale CAS 1 -> 2 succeeded")
	}
	for _, c := range []struct {
		exp  int64
		next int64
	}{{2, 2}, {2, 4}, {-1, 0}, {0, 0}, {2, 0}} {
		_, err := s.States.CompareAndSet(ctx, c.exp, storetest.State("sp", "d", c.next, "bad"))
		storetest.WantErr(t, err, reference.ErrInvalidRevision)
	}
	_, err = s.States.CompareAndSet(ctx, 0, storetest.State("", "d", 1, "x"))
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
	_, err = s.States.CompareAndSet(ctx, 0, storetest.State("sp", " ", 1, "x"))
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
	_, _, err = s.States.FindCurrent(ctx, "sp", "")
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
	if cur, _, _ := s.States.FindCurrent(ctx, "sp", "d"); cur.Revision != 2 || cur.OperationID != "op2" {
		t.Fatalf("current = %+v", cur)
	}

	// Remove only at the given revision; then 0 inserts again.
	if ok, err := s.States.Remove(ctx, "sp", "d", 1); err != nil || ok {
		t.Fatalf("remove at wrong revision: %v %v", ok, err)
	}
	if ok, err := s.States.Remove(ctx, "sp", "d", 2); err != nil || !ok {
		t.Fatalf("remove: %v %v", ok, err)
	}
	if ok, err := s.States.Remove(ctx, "sp", "d", 2); err != nil || ok {
		t.Fatalf("second remove: %v %v", ok, err)
	}
	if _, ok, _ := s.States.FindCurrent(ctx, "sp", "d"); ok {
		t.Fatal("state still present after remove")
	}
	if !cas(0, storetest.State("sp", "d", 1, "op-again")) {
		t.Fatal("insert after remove failed")
	}

	// List by documentId, spaces isolated.
	for _, d := range []string{"z", "b", "m"} {
		if !cas(0, storetest.State("sp", d, 1, "op-"+d)) {
			t.Fatal("insert", d)
		}
	}
	if !cas(0, storetest.State("other", "a", 1, "op-other")) {
		t.Fatal("insert other space")
	}
	list, err := s.States.List(ctx, "sp")
	storetest.Must(t, err)
	var docs []string
	for _, st := range list {
		docs = append(docs, st.DocumentID)
	}
	if want := []string{"b", "d", "m", "z"}; !slices.Equal(docs, want) {
		t.Fatalf("List = %v, want %v", docs, want)
	}
	if _, ok, _ := s.States.FindCurrent(ctx, "other", "d"); ok {
		t.Fatal("spaces not isolated")
	}
}

func testStateHistory(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	v1, v2, v3 := storetest.State("sp", "d", 1, "op-a"), storetest.State("sp", "d", 2, "op-b"), storetest.State("sp", "d", 3, "op-a")
	for _, v := range []reference.DocumentState{v3, v1, v2} {
		storetest.Must(t, s.States.RecordVersion(ctx, v))
	}
	dup := v2
	dup.OperationID, dup.ContentHash = "op-z", "other"
	storetest.Must(t, s.States.RecordVersion(ctx, dup)) // idempotent: no-op
	storetest.Must(t, s.States.RecordVersion(ctx, storetest.State("sp", "e", 1, "op-e")))
	vs, err := s.States.Versions(ctx, "sp", "d")
	storetest.Must(t, err)
	if !reflect.DeepEqual(vs, []reference.DocumentState{v1, v2, v3}) {
		t.Fatalf("Versions = %+v", vs)
	}
	if err := s.States.RecordVersion(ctx, storetest.State("sp", "", 1, "x")); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Fatalf("blank document accepted: %v", err)
	}

	// Not current: found in the history, highest revision.
	got, ok, err := s.States.FindByOperationID(ctx, "sp", "d", "op-a")
	storetest.Must(t, err)
	if !ok || got.Revision != 3 {
		t.Fatalf("FindByOperationID(op-a) = %+v %v", got, ok)
	}
	got, ok, _ = s.States.FindByOperationID(ctx, "sp", "d", "op-b")
	if !ok || got.Revision != 2 || got.ContentHash != "h-op-b" {
		t.Fatalf("FindByOperationID(op-b) = %+v %v", got, ok)
	}
	if _, ok, _ := s.States.FindByOperationID(ctx, "sp", "d", "op-z"); ok {
		t.Fatal("found an op whose version write was a no-op")
	}
	if _, ok, _ := s.States.FindByOperationID(ctx, "sp", "e", "op-a"); ok {
		t.Fatal("FindByOperationID crossed documents")
	}
	// The current row wins even without a version.
	cur := storetest.State("sp", "d", 1, "op-cur")
	if ok, err := s.States.CompareAndSet(ctx, 0, cur); err != nil || !ok {
		t.Fatal(ok, err)
	}
	got, ok, _ = s.States.FindByOperationID(ctx, "sp", "d", "op-cur")
	if !ok || !reflect.DeepEqual(got, cur) {
		t.Fatalf("FindByOperationID(current) = %+v %v", got, ok)
	}
}

func testReferences(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	e := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}
	e2 := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b", Rank: 2}
	ref := func(space, doc string, k reference.EdgeKey) bool {
		t.Helper()
		ok, err := s.States.IsReferencedByOtherDocument(ctx, space, doc, k)
		storetest.Must(t, err)
		return ok
	}
	mustCAS := func(exp int64, st reference.DocumentState) {
		t.Helper()
		if ok, err := s.States.CompareAndSet(ctx, exp, st); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	mustCAS(0, storetest.State("sp", "d1", 1, "o1", e))
	if ref("sp", "d1", e) {
		t.Fatal("own document counted")
	}
	if !ref("sp", "d2", e) || !ref("sp", "", e) {
		t.Fatal("other document's edge not found")
	}
	if ref("sp", "d2", e2) {
		t.Fatal("rank ignored")
	}
	if ref("other", "d2", e) {
		t.Fatal("spaces not isolated")
	}
	// A history-only reference does not count.
	storetest.Must(t, s.States.RecordVersion(ctx, storetest.State("sp", "d3", 1, "o3", e2)))
	if ref("sp", "d1", e2) {
		t.Fatal("version history counted")
	}
	// A RETRACTED current state does not count.
	r := storetest.State("sp", "d1", 2, "o1r", e)
	r.Status = reference.DocRetracted
	mustCAS(1, r)
	if ref("sp", "d2", e) || ref("sp", "", e) {
		t.Fatal("retracted state counted")
	}
}

func testRegistry(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	r1 := storetest.Reg("person:1", "Person", "Ada  Lovelace", "Countess of Lovelace")
	r1.Properties = map[string]string{"born": "1815"}
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{r1, storetest.Reg("org:1", "Org", "ACME")}))
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{r1})) // no-op

	hits, err := s.Registry.FindMatches(ctx, "sp", " PERSON ", []string{"ada lovelace", "nobody"})
	storetest.Must(t, err)
	want := reference.RegisteredEntity{Space: "sp", NodeID: "person:1", Type: "Person", CanonicalName: "Ada  Lovelace",
		Names: []string{"ada lovelace", "countess of lovelace"}, Properties: map[string]string{"born": "1815"}}
	if len(hits) != 1 || !reflect.DeepEqual(hits[0], want) {
		t.Fatalf("FindMatches = %+v, want %+v", hits, want)
	}
	hits[0].Names[0] = "scribbled"
	hits[0].Properties["born"] = "scribbled"
	// NFKC folding: the full-width letters match.
	hits, err = s.Registry.FindMatches(ctx, "sp", "person", []string{"ＡＤＡ LOVELACE"})
	storetest.Must(t, err)
	if len(hits) != 1 || hits[0].Names[0] != "ada lovelace" || hits[0].Properties["born"] != "1815" {
		t.Fatalf("FindMatches (NFKC) = %+v", hits)
	}
	if hits, _ := s.Registry.FindMatches(ctx, "sp", "org", []string{"Ada Lovelace"}); len(hits) != 0 {
		t.Fatalf("type ignored: %+v", hits)
	}
	if hits, _ := s.Registry.FindMatches(ctx, "other", "person", []string{"Ada Lovelace"}); len(hits) != 0 {
		t.Fatalf("spaces not isolated: %+v", hits)
	}

	// Conflict with the store: nothing of the batch is saved.
	err = s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{
		storetest.Reg("person:9", "Person", "Grace Hopper"),
		storetest.Reg("person:2", "person", "ADA LOVELACE"),
	})
	storetest.WantErr(t, err, reference.ErrRegistryConflict)
	if hits, _ := s.Registry.FindMatches(ctx, "sp", "Person", []string{"Grace Hopper"}); len(hits) != 0 {
		t.Fatalf("partial batch saved: %+v", hits)
	}
	// Conflict within a batch.
	err = s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{
		storetest.Reg("person:3", "Person", "Alan Turing"),
		storetest.Reg("person:4", "Person", "Turing", "alan  turing"),
	})
	storetest.WantErr(t, err, reference.ErrRegistryConflict)
	if hits, _ := s.Registry.FindMatches(ctx, "sp", "Person", []string{"Alan Turing", "Turing"}); len(hits) != 0 {
		t.Fatalf("partial batch saved: %+v", hits)
	}
	// Same name in another type or space is fine.
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg("ship:1", "Ship", "Ada Lovelace")}))
	storetest.Must(t, s.Registry.SaveAll(ctx, "other", []reference.EntityRegistration{storetest.Reg("person:x", "Person", "Ada Lovelace")}))
	// Aliases of the same node merge; one batch may repeat a node.
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{
		storetest.Reg("person:1", "Person", "Ada Lovelace", "A. A. Lovelace"),
		storetest.Reg("person:1", "Person", "Ada Lovelace", "Augusta Ada King"),
	}))
	hits, err = s.Registry.FindMatches(ctx, "sp", "Person", []string{"augusta ada king", "a. a. lovelace", "Ada Lovelace"})
	storetest.Must(t, err)
	if len(hits) != 1 || !slices.Equal(hits[0].Names, []string{"a. a. lovelace", "ada lovelace", "augusta ada king", "countess of lovelace"}) {
		t.Fatalf("merged aliases: %+v", hits)
	}
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg("person:0", "Person", "Babbage")}))
	hits, err = s.Registry.FindMatches(ctx, "sp", "Person", []string{"Babbage", "Ada Lovelace"})
	storetest.Must(t, err)
	if len(hits) != 2 || hits[0].NodeID != "person:0" || hits[1].NodeID != "person:1" {
		t.Fatalf("two matches: %+v", hits)
	}

	list, err := s.Registry.List(ctx, "sp")
	storetest.Must(t, err)
	var ids []string
	for _, e := range list {
		ids = append(ids, e.NodeID)
	}
	if want := []string{"org:1", "person:0", "person:1", "ship:1"}; !slices.Equal(ids, want) {
		t.Fatalf("List = %v, want %v", ids, want)
	}
	err = s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg("", "Person", "X")})
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", nil))
}

func testGraph(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	ab := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}
	ab1 := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b", Rank: 1}
	bc := reference.EdgeKey{Source: "b", Type: "KNOWS", Target: "c"}
	m1 := reference.Mutation{
		OperationID: "op1",
		DeleteNodes: []string{"ghost"},
		DeleteEdges: []reference.EdgeKey{{Source: "x", Type: "Y", Target: "z"}},
		UpsertNodes: []reference.NodeUpsert{
			{ID: "a", Label: "Person", Properties: map[string]string{"name": "A", "age": "1"}},
			{ID: "b", Label: "Person", Properties: map[string]string{"name": "B"}},
			{ID: "c", Label: "Person"},
		},
		UpsertEdges: []reference.EdgeUpsert{
			{Key: ab, Properties: map[string]string{"since": "2020"}},
			{Key: ab1},
			{Key: bc},
		},
	}
	want := reference.NewGraph()
	storetest.Must(t, want.Apply(m1))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m1))
	if g := storetest.ReadGraph(t, s, "sp"); !reflect.DeepEqual(g, want) {
		t.Fatalf("graph = %+v\nwant %+v", g, want)
	}
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m1)) // idempotent
	if g := storetest.ReadGraph(t, s, "sp"); !reflect.DeepEqual(g, want) {
		t.Fatalf("graph after re-apply = %+v\nwant %+v", g, want)
	}
	if d := storetest.Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates after MERGE: %v", d)
	}
	// Patch: given properties set, the others kept; label kept.
	m2 := reference.Mutation{OperationID: "op2",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "Other", Properties: map[string]string{"age": "2", "x": "y"}}},
		UpsertEdges: []reference.EdgeUpsert{{Key: ab, Properties: map[string]string{"w": "3"}}},
	}
	storetest.Must(t, want.Apply(m2))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m2))
	g := storetest.ReadGraph(t, s, "sp")
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("graph after patch = %+v\nwant %+v", g, want)
	}
	if n := g.Nodes["a"]; n.Label != "Person" || !reflect.DeepEqual(n.Properties, map[string]string{"name": "A", "age": "2", "x": "y"}) {
		t.Fatalf("patched node = %+v", n)
	}
	if e := g.Edges[ab]; !reflect.DeepEqual(e.Properties, map[string]string{"since": "2020", "w": "3"}) {
		t.Fatalf("patched edge = %+v", e)
	}
	g.Nodes["a"].Properties["name"] = "scribbled"
	if again := storetest.ReadGraph(t, s, "sp"); again.Nodes["a"].Properties["name"] != "A" {
		t.Fatal("ReadGraph aliased the store")
	}

	// Missing endpoint: nothing of m applied, not even its node phases.
	m3 := reference.Mutation{OperationID: "op3",
		DeleteNodes: []string{"c"},
		DeleteEdges: []reference.EdgeKey{ab1},
		UpsertNodes: []reference.NodeUpsert{{ID: "d", Label: "Person"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "d"}}, {Key: reference.EdgeKey{Source: "d", Type: "KNOWS", Target: "nobody"}}},
	}
	storetest.WantErr(t, s.Writer.Apply(ctx, "sp", m3), reference.ErrMissingEndpoint)
	if g := storetest.ReadGraph(t, s, "sp"); !reflect.DeepEqual(g, want) {
		t.Fatalf("failed Apply changed the graph: %+v", g)
	}
	// An edge to a node deleted in the same mutation is missing too.
	m4 := reference.Mutation{OperationID: "op4", DeleteNodes: []string{"c"}, UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "T", Target: "c"}}}}
	storetest.WantErr(t, s.Writer.Apply(ctx, "sp", m4), reference.ErrMissingEndpoint)
	if g := storetest.ReadGraph(t, s, "sp"); !reflect.DeepEqual(g, want) {
		t.Fatalf("failed Apply changed the graph: %+v", g)
	}
	// Delete a node: its incident edges go too; delete an edge.
	m5 := reference.Mutation{OperationID: "op5", DeleteNodes: []string{"b"}, DeleteEdges: []reference.EdgeKey{ab1}}
	storetest.Must(t, want.Apply(m5))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", m5))
	g = storetest.ReadGraph(t, s, "sp")
	if !reflect.DeepEqual(g, want) || len(g.Edges) != 0 || len(g.Nodes) != 2 {
		t.Fatalf("graph after deletes = %+v\nwant %+v", g, want)
	}
	// Spaces are isolated.
	if g := storetest.ReadGraph(t, s, "other"); len(g.Nodes) != 0 || len(g.Edges) != 0 || g.Nodes == nil || g.Edges == nil {
		t.Fatalf("other space = %+v", g)
	}
	storetest.Must(t, s.Writer.Apply(ctx, "other", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{"q": "1"}}}}))
	if g := storetest.ReadGraph(t, s, "sp"); !reflect.DeepEqual(g, want) {
		t.Fatal("write to another space leaked")
	}
	if err := s.Writer.Apply(ctx, "", m1); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Fatalf("blank space: %v", err)
	}
}

// testGraphRandom compares the writer with the reference fold over random
// mutations, including failing ones, batches and re-applications.
func testGraphRandom(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	rng := rand.New(rand.NewSource(7))
	ids := []string{"n1", "n2", "n3", "n4", "n5"}
	key := func() reference.EdgeKey {
		return reference.EdgeKey{Source: ids[rng.Intn(len(ids))], Type: []string{"A", "B"}[rng.Intn(2)], Target: ids[rng.Intn(len(ids))], Rank: int64(rng.Intn(2))}
	}
	props := func() map[string]string {
		if rng.Intn(3) == 0 {
			return nil
		}
		return map[string]string{[]string{"p", "q", "r"}[rng.Intn(3)]: fmt.Sprint(rng.Intn(5))}
	}
	want := reference.NewGraph()
	for i := 0; i < 60; i++ {
		m := reference.Mutation{OperationID: fmt.Sprint("op", i)}
		for j := rng.Intn(2); j > 0; j-- {
			m.DeleteNodes = append(m.DeleteNodes, ids[rng.Intn(len(ids))])
		}
		for j := rng.Intn(2); j > 0; j-- {
			m.DeleteEdges = append(m.DeleteEdges, key())
		}
		for j := rng.Intn(3); j > 0; j-- {
			m.UpsertNodes = append(m.UpsertNodes, reference.NodeUpsert{ID: ids[rng.Intn(len(ids))], Label: "L", Properties: props()})
		}
		for j := rng.Intn(3); j > 0; j-- {
			m.UpsertEdges = append(m.UpsertEdges, reference.EdgeUpsert{Key: key(), Properties: props()})
		}
		wantErrBool := want.Apply(m) != nil
		err := s.Writer.Apply(ctx, "sp", m)
		if (err != nil) != wantErrBool || (err != nil && !errors.Is(err, reference.ErrMissingEndpoint)) {
			t.Fatalf("step %d: Apply error %v, reference error %v", i, err, wantErrBool)
		}
		if err == nil && rng.Intn(3) == 0 {
			storetest.Must(t, s.Writer.Apply(ctx, "sp", m))
		}
		if g := storetest.ReadGraph(t, s, "sp"); !reflect.DeepEqual(g, want) {
			t.Fatalf("step %d: graph = %+v\nwant %+v", i, g, want)
		}
	}
	if d := storetest.Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates: %v", d)
	}
}

func testLocks(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	l1, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "a", 1000, 100)
	storetest.Must(t, err)
	if !ok || l1.Holder != "a" || l1.Token < 1 || l1.ExpiresAt != 1100 || l1.Space != "sp" || l1.DocumentID != "d" {
		t.Fatalf("first acquire = %+v %v", l1, ok)
	}
	cur, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "b", 1099, 100)
	storetest.Must(t, err)
	if ok || cur != l1 {
		t.Fatalf("live lease taken: %+v %v", cur, ok)
	}
	re, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "a", 1050, 100)
	storetest.Must(t, err)
	if !ok || re.Token != l1.Token || re.ExpiresAt != 1150 {
		t.Fatalf("re-acquire by holder = %+v %v", re, ok)
	}
	// Another document has its own lease.
	if o, ok, err := s.Locks.TryAcquire(ctx, "sp", "d2", "b", 1050, 100); err != nil || !ok {
		t.Fatalf("other document: %+v %v %v", o, ok, err)
	}
	rn, err := s.Locks.Renew(ctx, re, 1100, 100)
	storetest.Must(t, err)
	if rn.ExpiresAt != 1200 || rn.Token != l1.Token {
		t.Fatalf("renew = %+v", rn)
	}
	stale := rn
	stale.Token++
	_, err = s.Locks.Renew(ctx, stale, 1100, 100)
	storetest.WantErr(t, err, reference.ErrLeaseLost)
	storetest.WantErr(t, s.Locks.Release(ctx, stale), reference.ErrLeaseLost)
	other := rn
	other.Holder = "b"
	storetest.WantErr(t, s.Locks.Release(ctx, other), reference.ErrLeaseLost)
	_, err = s.Locks.Renew(ctx, rn, 1200, 100) // expired exactly now
	storetest.WantErr(t, err, reference.ErrLeaseLost)

	// Expired: another holder takes it with a greater token; the old
	// holder can neither renew nor release.
	l2, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "b", 1200, 100)
	storetest.Must(t, err)
	if !ok || l2.Holder != "b" || l2.Token <= l1.Token {
		t.Fatalf("takeover = %+v %v", l2, ok)
	}
	storetest.WantErr(t, s.Locks.Release(ctx, rn), reference.ErrLeaseLost)
	_, err = s.Locks.Renew(ctx, rn, 1201, 100)
	storetest.WantErr(t, err, reference.ErrLeaseLost)
	storetest.Must(t, s.Locks.Release(ctx, l2))
	storetest.WantErr(t, s.Locks.Release(ctx, l2), reference.ErrLeaseLost)
	_, err = s.Locks.Renew(ctx, l2, 1201, 100)
	storetest.WantErr(t, err, reference.ErrLeaseLost)
	// Tokens keep increasing across releases, also for the same holder.
	l3, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "b", 1201, 100)
	storetest.Must(t, err)
	if !ok || l3.Token <= l2.Token {
		t.Fatalf("after release = %+v %v", l3, ok)
	}
	for _, c := range [][3]string{{"", "d", "a"}, {"sp", " ", "a"}, {"sp", "d", ""}} {
		_, _, err := s.Locks.TryAcquire(ctx, c[0], c[1], c[2], 1, 10)
		storetest.WantErr(t, err, reference.ErrInvalidArgument)
	}
}

func testRaces(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	const n = 16
	run := func(f func(i int) bool) int {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if f(i) {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		return int(wins.Load())
	}
	check := func(name string, got int) {
		t.Helper()
		if got != 1 {
			t.Fatalf("%s: %d winners, want 1", name, got)
		}
	}
	check("CreateIfAbsent", run(func(i int) bool {
		p := storetest.FixturePlan("sp", "d", "race", 0)
		p.Content = fmt.Sprint("answer ", i)
		ok, err := s.Ops.CreateIfAbsent(ctx, reference.NewOperation(p, int64(i)), p)
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	op, _ := s.Ops.Get(ctx, "race")
	check("Operation CAS", run(func(i int) bool {
		ok, err := s.Ops.CompareAndSet(ctx, op, storetest.Advance(t, op, reference.GraphApplied, op.UpdatedAt+int64(i)))
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	check("Claim", run(func(i int) bool {
		ok, err := s.Ops.Claim(ctx, "race", fmt.Sprint("h", i), 0, 1000)
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	check("State CAS", run(func(i int) bool {
		ok, err := s.States.CompareAndSet(ctx, 0, storetest.State("sp", "d", 1, fmt.Sprint("op", i)))
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	check("TryAcquire", run(func(i int) bool {
		_, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", fmt.Sprint("h", i), 0, 1000)
		if err != nil {
			t.Error(err)
		}
		return ok
	}))
	var regErrs atomic.Int32
	check("SaveAll", run(func(i int) bool {
		err := s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg(fmt.Sprint("n", i), "T", "Contested")})
		if err != nil && !errors.Is(err, reference.ErrRegistryConflict) {
			t.Error(err)
		}
		if err != nil {
			regErrs.Add(1)
		}
		return err == nil
	}))
	// Concurrent upserts of the same node under MERGE leave one copy.
	run(func(i int) bool {
		err := s.Writer.Apply(ctx, "sp", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "shared", Label: "L", Properties: map[string]string{fmt.Sprint("p", i): "x"}}}})
		if err != nil {
			t.Error(err)
		}
		return true
	})
	if d := storetest.Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates after concurrent MERGE: %v", d)
	}
	if g := storetest.ReadGraph(t, s, "sp"); len(g.Nodes["shared"].Properties) != n {
		t.Fatalf("concurrent patches lost: %+v", g.Nodes["shared"])
	}
}
