package properties

import (
	"context"
	"errors"
	"slices"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

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
	if !ok || !confEqual(got, s1) {
		t.Fatalf("FindCurrent(sp, d): found %v; want found, the state written:%s", ok, confDiff(s1, got))
	}
	got.FactSources[0].Type = "scribbled"
	s1.NodeIDs[0] = "scribbled"
	if again, _, _ := s.States.FindCurrent(ctx, "sp", "d"); again.FactSources[0].Type != "T" || again.NodeIDs[0] != "n-op1" {
		t.Fatalf("after the caller changed a returned state, FindCurrent(sp, d) = %s; the store's state changed with it", confShow(again))
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
		t.Fatalf("FindCurrent(sp, d) = %s; want revision 2, operationId op2", confShow(cur))
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
		t.Fatalf("List(sp) gives documents %s, want %s", confShow(docs), confShow(want))
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
	if want := []reference.DocumentState{v1, v2, v3}; !confEqual(vs, want) {
		t.Fatalf("Versions(sp, d) differs from revisions 1, 2, 3 as first recorded:%s", confDiff(want, vs))
	}
	if err := s.States.RecordVersion(ctx, storetest.State("sp", "", 1, "x")); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Fatalf("blank document accepted: %v", err)
	}

	// Not current: found in the history, highest revision.
	got, ok, err := s.States.FindByOperationID(ctx, "sp", "d", "op-a")
	storetest.Must(t, err)
	if !ok || got.Revision != 3 {
		t.Fatalf("FindByOperationID(sp, d, op-a) = %s, found %v; want found, the highest revision op-a wrote (3)", confShow(got), ok)
	}
	got, ok, _ = s.States.FindByOperationID(ctx, "sp", "d", "op-b")
	if !ok || got.Revision != 2 || got.ContentHash != "h-op-b" {
		t.Fatalf("FindByOperationID(sp, d, op-b) = %s, found %v; want found, revision 2, contentHash h-op-b", confShow(got), ok)
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
	if !ok || !confEqual(got, cur) {
		t.Fatalf("FindByOperationID(sp, d, op-cur): found %v; want found, the current state as written, though it has no version row:%s", ok, confDiff(cur, got))
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
	if len(hits) != 1 || !confEqual(hits[0], want) {
		t.Fatalf("FindMatches(sp, PERSON, [ada lovelace, nobody]) differs from the one entity registered:%s", confDiff([]reference.RegisteredEntity{want}, hits))
	}
	hits[0].Names[0] = "scribbled"
	hits[0].Properties["born"] = "scribbled"
	// NFKC folding: the full-width letters match.
	hits, err = s.Registry.FindMatches(ctx, "sp", "person", []string{"ＡＤＡ LOVELACE"})
	storetest.Must(t, err)
	if len(hits) != 1 || hits[0].Names[0] != "ada lovelace" || hits[0].Properties["born"] != "1815" {
		t.Fatalf("FindMatches (NFKC) = %s; want person:1 unchanged by the caller's changes to a returned entity", confShow(hits))
	}
	if hits, _ := s.Registry.FindMatches(ctx, "sp", "org", []string{"Ada Lovelace"}); len(hits) != 0 {
		t.Fatalf("FindMatches(sp, org, [Ada Lovelace]) = %s; want none (the type was ignored)", confShow(hits))
	}
	// The type is normalised as the names are (NFKC, case, inner white
	// space), not only trimmed and lower-cased: an outside mutant that
	// folded the type with strings.ToLower alone certified, and a second
	// document naming "Research  Lab:Ally" then failed on a registry
	// conflict instead of resolving the alias.
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp-lab", []reference.EntityRegistration{storetest.Reg("lab:1", "Research Lab", "Alice Lab", "Ally")}))
	for _, typ := range []string{"research  lab", "ＲＥＳＥＡＲＣＨ LAB", "Research\tLab"} {
		if hits, err := s.Registry.FindMatches(ctx, "sp-lab", typ, []string{"ally"}); err != nil || len(hits) != 1 || hits[0].NodeID != "lab:1" {
			t.Fatalf("FindMatches(sp-lab, %q, [ally]) = %s, %v; want lab:1 (the type normalises to %q as registered)", typ, confShow(hits), err, reference.Normalize("Research Lab"))
		}
	}
	if hits, _ := s.Registry.FindMatches(ctx, "other", "person", []string{"Ada Lovelace"}); len(hits) != 0 {
		t.Fatalf("FindMatches(other, person, [Ada Lovelace]) = %s; want none (spaces not isolated)", confShow(hits))
	}

	// Conflict with the store: nothing of the batch is saved.
	err = s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{
		storetest.Reg("person:9", "Person", "Grace Hopper"),
		storetest.Reg("person:2", "person", "ADA LOVELACE"),
	})
	storetest.WantErr(t, err, reference.ErrRegistryConflict)
	if hits, _ := s.Registry.FindMatches(ctx, "sp", "Person", []string{"Grace Hopper"}); len(hits) != 0 {
		t.Fatalf("after a refused batch, FindMatches(sp, Person, [Grace Hopper]) = %s; want none (part of the batch was saved)", confShow(hits))
	}
	// Conflict within a batch.
	err = s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{
		storetest.Reg("person:3", "Person", "Alan Turing"),
		storetest.Reg("person:4", "Person", "Turing", "alan  turing"),
	})
	storetest.WantErr(t, err, reference.ErrRegistryConflict)
	if hits, _ := s.Registry.FindMatches(ctx, "sp", "Person", []string{"Alan Turing", "Turing"}); len(hits) != 0 {
		t.Fatalf("after a refused batch, FindMatches(sp, Person, [Alan Turing, Turing]) = %s; want none (part of the batch was saved)", confShow(hits))
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
	if want := []string{"a. a. lovelace", "ada lovelace", "augusta ada king", "countess of lovelace"}; len(hits) != 1 || !slices.Equal(hits[0].Names, want) {
		t.Fatalf("merged aliases: %s; want one entity, person:1, whose names are every name bound to it, normalised, sorted and distinct: %s", confShow(hits), confShow(want))
	}
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg("person:0", "Person", "Babbage")}))
	hits, err = s.Registry.FindMatches(ctx, "sp", "Person", []string{"Babbage", "Ada Lovelace"})
	storetest.Must(t, err)
	if len(hits) != 2 || hits[0].NodeID != "person:0" || hits[1].NodeID != "person:1" {
		t.Fatalf("FindMatches(sp, Person, [Babbage, Ada Lovelace]) = %s; want person:0, person:1 in that order", confShow(hits))
	}

	list, err := s.Registry.List(ctx, "sp")
	storetest.Must(t, err)
	var ids []string
	for _, e := range list {
		ids = append(ids, e.NodeID)
	}
	if want := []string{"org:1", "person:0", "person:1", "ship:1"}; !slices.Equal(ids, want) {
		t.Fatalf("Registry.List(sp) gives nodeIds %s, want %s", confShow(ids), confShow(want))
	}
	err = s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg("", "Person", "X")})
	storetest.WantErr(t, err, reference.ErrInvalidArgument)
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", nil))
}
