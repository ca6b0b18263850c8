package properties

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Two spaces whose names share a prefix, with documents whose ids make
// space+"-"+document the same key in both ("acme" "eu-d" and "acme-eu"
// "d"): a store that scans a space by a key prefix without its separator,
// or joins space and document with a character a space may hold, mixes
// tenants. The other behaviour tests use spaces no prefix of another, so
// they never see it (an outside mutant hunt found a bbolt store whose
// state scan of "acme" also read "acme-eu").
const (
	prefixSpace   = "acme"
	prefixedSpace = "acme-eu"
	prefixDoc     = "eu-d" // in prefixSpace
	prefixedDoc   = "d"    // in prefixedSpace
)

// testPrefixSpaces writes the same facts under both spaces and checks that
// every read of each space sees its own only, and that a write to one
// (a retraction, a lease) leaves the other alone.
func testPrefixSpaces(t suiteT, open bhOpener) {
	ctx := context.Background()
	s := open(t)
	edge := reference.EdgeKey{Source: "n-shared", Type: "KNOWS", Target: "n-other"}
	type tenant struct{ space, doc, op string }
	a := tenant{prefixSpace, prefixDoc, "op-acme"}
	b := tenant{prefixedSpace, prefixedDoc, "op-acme-eu"}
	for _, x := range []tenant{a, b} {
		if ok, err := s.States.CompareAndSet(ctx, 0, storetest.State(x.space, x.doc, 1, x.op, edge)); err != nil || !ok {
			t.Fatalf("States.CompareAndSet(0, %s/%s r1) = %v, %v; want true, nil", x.space, x.doc, ok, err)
		}
		storetest.Must(t, s.States.RecordVersion(ctx, storetest.State(x.space, x.doc, 1, x.op, edge)))
	}
	// Each space's current states, one document each.
	for _, x := range []tenant{a, b} {
		l, err := s.States.List(ctx, x.space)
		storetest.Must(t, err)
		if len(l) != 1 || l[0].Space != x.space || l[0].DocumentID != x.doc {
			t.Errorf("States.List(%q) = %s; want only %s/%s (spaces %q and %q share a prefix)", x.space, describeStates(l), x.space, x.doc, prefixSpace, prefixedSpace)
		}
	}
	for _, miss := range []tenant{{prefixSpace, prefixedDoc, ""}, {prefixedSpace, prefixDoc, ""}} {
		if st, ok, err := s.States.FindCurrent(ctx, miss.space, miss.doc); err != nil || ok {
			t.Errorf("States.FindCurrent(%q, %q) = %s, %v, %v; want absent (the state is %s's)", miss.space, miss.doc, describeStates([]reference.DocumentState{st}), ok, err, map[string]string{prefixSpace: prefixedSpace, prefixedSpace: prefixSpace}[miss.space])
		}
		if v, err := s.States.Versions(ctx, miss.space, miss.doc); err != nil || len(v) != 0 {
			t.Errorf("States.Versions(%q, %q) = %s, %v; want none", miss.space, miss.doc, describeStates(v), err)
		}
	}
	// Retract acme's document: only acme-eu's state supports the edge now,
	// which does not count for acme (the edge must go from acme's graph).
	r := storetest.State(a.space, a.doc, 2, "op-acme-retract", edge)
	r.Status = reference.DocRetracted
	if ok, err := s.States.CompareAndSet(ctx, 1, r); err != nil || !ok {
		t.Fatalf("States.CompareAndSet(1, %s/%s r2 RETRACTED) = %v, %v; want true, nil", a.space, a.doc, ok, err)
	}
	if ok, err := s.States.IsReferencedByOtherDocument(ctx, prefixSpace, prefixDoc, edge); err != nil || ok {
		t.Errorf("States.IsReferencedByOtherDocument(%q, %q, %v) = %v, %v; want false: only %q's document supports it", prefixSpace, prefixDoc, edge, ok, err, prefixedSpace)
	}
	if ok, err := s.States.IsReferencedByOtherDocument(ctx, prefixedSpace, "other", edge); err != nil || !ok {
		t.Errorf("States.IsReferencedByOtherDocument(%q, other, %v) = %v, %v; want true", prefixedSpace, edge, ok, err)
	}

	// The registry: one name in each space, bound to different nodes.
	storetest.Must(t, s.Registry.SaveAll(ctx, prefixedSpace, []reference.EntityRegistration{storetest.Reg("n-eu", "Person", "Ally")}))
	if m, err := s.Registry.FindMatches(ctx, prefixSpace, "Person", []string{"Ally"}); err != nil || len(m) != 0 {
		t.Errorf("Registry.FindMatches(%q, Person, Ally) = %s, %v; want none (Ally is registered in %q)", prefixSpace, confShow(m), err, prefixedSpace)
	}
	if l, err := s.Registry.List(ctx, prefixSpace); err != nil || len(l) != 0 {
		t.Errorf("Registry.List(%q) = %s, %v; want none", prefixSpace, confShow(l), err)
	}
	if err := s.Registry.SaveAll(ctx, prefixSpace, []reference.EntityRegistration{storetest.Reg("n-acme", "Person", "Ally")}); err != nil {
		t.Errorf("Registry.SaveAll(%q, Ally -> n-acme) = %v; want nil (Ally is bound in %q, not here)", prefixSpace, err, prefixedSpace)
	}

	// The graph: a node in acme-eu is not in acme.
	storetest.Must(t, s.Writer.Apply(ctx, prefixedSpace, reference.Mutation{OperationID: "op-g",
		UpsertNodes: []reference.NodeUpsert{{ID: "n-shared", Label: "Person"}, {ID: "n-other", Label: "Person"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: edge}}}))
	if rec, err := s.Writer.ReadRecords(ctx, prefixSpace); err != nil || len(rec.Nodes)+len(rec.Edges) != 0 {
		t.Errorf("Writer.ReadRecords(%q) = %d nodes, %d edges, %v; want none (they are %q's)", prefixSpace, len(rec.Nodes), len(rec.Edges), err, prefixedSpace)
	}

	// Leases: each space's document has its own.
	for _, x := range []tenant{{prefixedSpace, prefixedDoc, "h-eu"}, {prefixSpace, "eu-" + prefixedDoc, "h-acme"}} {
		if l, ok, err := s.Locks.TryAcquire(ctx, x.space, x.doc, x.op, 1000, 100); err != nil || !ok {
			t.Errorf("Locks.TryAcquire(%q, %q, %s) = %s, %v, %v; want granted (the live lease is another space's)", x.space, x.doc, x.op, confShow(l), ok, err)
		}
	}
	if l, ok, err := s.Locks.TryAcquire(ctx, prefixSpace, prefixedDoc, "h-3", 1000, 100); err != nil || !ok {
		t.Errorf("Locks.TryAcquire(%q, %q) = %s, %v, %v; want granted (the live lease on %q is %q's)", prefixSpace, prefixedDoc, confShow(l), ok, err, prefixedDoc, prefixedSpace)
	}

	// Operations: a space lister sees its own space only.
	for _, x := range []tenant{a, b} {
		op, p := storetest.FixtureOp(x.space, x.doc, x.op+"-ingest", 0, 1000)
		if ok, err := s.Ops.CreateIfAbsent(ctx, op, p); err != nil || !ok {
			t.Fatalf("Ops.CreateIfAbsent(%s) = %v, %v; want true, nil", op.OperationID, ok, err)
		}
	}
	if sl, ok := s.Ops.(reference.SpaceLister); ok {
		for _, x := range []tenant{a, b} {
			ops, err := sl.ListSpace(ctx, x.space)
			storetest.Must(t, err)
			if len(ops) != 1 || ops[0].Space != x.space {
				t.Errorf("ListSpace(%q) = %d operations; want only %s's own (%s)", x.space, len(ops), x.space, x.op+"-ingest")
			}
		}
	}
}

// describeStates lists states as space/document rN for a failure message.
func describeStates(sts []reference.DocumentState) string {
	out := "["
	for i, st := range sts {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s/%s r%d", st.Space, st.DocumentID, st.Revision)
	}
	return out + "]"
}
