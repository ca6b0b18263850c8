package properties

import (
	"errors"
	"fmt"
	"math/rand"

	"github.com/crashmatrix/crashmatrix/reference"
)

// runGraphWriter runs the GraphWriter suite on a suiteT (a *testing.T or a recorder).
func runGraphWriter(t suiteT, newStore func(t suiteT) reference.GraphWriter) {
	t.Helper()
	confRun(t, newStore, writerCases)
}

// The subtest names of the GraphWriter suite.
const (
	subWriterApplyTwice        = "ApplyTwiceEqualsOnce"          // replaying a mutation equals applying it once
	subWriterPatch             = "UpsertPatchesProperties"       // upserts patch properties, keeping omitted ones
	subWriterDetach            = "DeleteNodeDetachesEdges"       // deleting a node deletes its edges
	subWriterDeleteAbsent      = "DeleteAbsentIsRepeatableNoOp"  // deleting what is absent is no error, repeatedly
	subWriterMissingEndpoint   = "MissingEndpointAppliesNothing" // an edge to a missing node fails the whole mutation
	subWriterPhaseOrder        = "PhaseOrder"                    // node deletes, edge deletes, node upserts, edge upserts, in that order
	subWriterSpaceIsolation    = "SpaceIsolation"                // spaces are separate graphs
	subWriterNoDuplicates      = "NoDuplicatesAfterReplay"       // replays leave no duplicate nodes or edges
	subWriterBatches           = "BatchesEqualWhole"             // Mutation.Batches applied one by one equal the whole
	subWriterReadGraphDetached = "ReadGraphIsDetached"           // read graphs and applied mutations do not alias the store
	subWriterModel             = "ModelBasedMutations"           // random mutations against the reference fold
)

var writerCases = []confCase[reference.GraphWriter]{
	{subWriterApplyTwice, writerApplyTwice},
	{subWriterPatch, writerPatch},
	{subWriterDetach, writerDetach},
	{subWriterDeleteAbsent, writerDeleteAbsent},
	{subWriterMissingEndpoint, writerMissingEndpoint},
	{subWriterPhaseOrder, writerPhaseOrder},
	{subWriterSpaceIsolation, writerSpaceIsolation},
	{subWriterNoDuplicates, writerNoDuplicates},
	{subWriterBatches, writerBatches},
	{subWriterReadGraphDetached, writerReadGraphDetached},
	{subWriterModel, writerModel},
}

func wNode(id string, props ...string) reference.NodeUpsert {
	return reference.NodeUpsert{ID: id, Label: "L", Properties: wProps(props...)}
}

func wEdge(from, typ, to string, props ...string) reference.EdgeUpsert {
	return reference.EdgeUpsert{Key: reference.EdgeKey{Source: from, Type: typ, Target: to}, Properties: wProps(props...)}
}

func wKey(from, typ, to string) reference.EdgeKey {
	return reference.EdgeKey{Source: from, Type: typ, Target: to}
}

func wProps(kv ...string) map[string]string {
	if len(kv) == 0 {
		return nil
	}
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// wCanonGraph makes graphs comparable: nil and empty property maps are the
// same, and a node or edge map entry is keyed consistently.
func wCanonGraph(g reference.Graph) reference.Graph {
	out := reference.NewGraph()
	for id, n := range g.Nodes {
		n.Properties = confCanon(n.Properties)
		out.Nodes[id] = n
	}
	for k, e := range g.Edges {
		e.Properties = confCanon(e.Properties)
		out.Edges[k] = e
	}
	return out
}

func wCopy(g reference.Graph) reference.Graph {
	out := reference.NewGraph()
	for id, n := range g.Nodes {
		n.Properties = confCloneProps(n.Properties)
		out.Nodes[id] = n
	}
	for k, e := range g.Edges {
		e.Properties = confCloneProps(e.Properties)
		out.Edges[k] = e
	}
	return out
}

func confCloneProps(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// wGraphDiff lists the differences between two graphs, or "".
func wGraphDiff(want, got reference.Graph) string {
	w, g := wCanonGraph(want), wCanonGraph(got)
	var out string
	for _, id := range w.SortedNodes() {
		gn, ok := g.Nodes[id]
		switch {
		case !ok:
			out += fmt.Sprintf("\n  missing node %s %s", id, confShow(w.Nodes[id]))
		case !confEqual(gn, w.Nodes[id]):
			out += fmt.Sprintf("\n  node %s:%s", id, confDiff(w.Nodes[id], gn))
		}
	}
	for _, id := range g.SortedNodes() {
		if _, ok := w.Nodes[id]; !ok {
			out += fmt.Sprintf("\n  unexpected node %s %s", id, confShow(g.Nodes[id]))
		}
	}
	for _, k := range w.SortedEdges() {
		ge, ok := g.Edges[k]
		switch {
		case !ok:
			out += fmt.Sprintf("\n  missing edge %s %s", confShow(k), confShow(w.Edges[k]))
		case !confEqual(ge, w.Edges[k]):
			out += fmt.Sprintf("\n  edge %s:%s", confShow(k), confDiff(w.Edges[k], ge))
		}
	}
	for _, k := range g.SortedEdges() {
		if _, ok := w.Edges[k]; !ok {
			out += fmt.Sprintf("\n  unexpected edge %s %s", confShow(k), confShow(g.Edges[k]))
		}
	}
	return out
}

// wApply applies m and fails t on an error.
func wApply(t suiteT, w reference.GraphWriter, space string, m reference.Mutation, what string) {
	t.Helper()
	if err := w.Apply(confCtx, space, m); err != nil {
		t.Fatalf("Apply(%s, %s) = %v; want nil", space, what, err)
	}
}

// wExpect fails t unless space's graph equals want.
func wExpect(t suiteT, w reference.GraphWriter, space string, want reference.Graph, context string) {
	t.Helper()
	got, err := w.ReadGraph(confCtx, space)
	if err != nil {
		t.Fatalf("%s: ReadGraph(%s) error: %v", context, space, err)
	}
	if d := wGraphDiff(want, got); d != "" {
		t.Errorf("%s: ReadGraph(%s) differs from the expected graph:%s", context, space, d)
	}
	if msg := wRecords(w, space, got); msg != "" {
		t.Errorf("%s: %s", context, msg)
	}
}

// wRecords checks the required record read against ReadGraph's answer g:
// no node id or edge key stored twice, and the records fold to g.
func wRecords(w reference.GraphWriter, space string, g reference.Graph) string {
	recs, err := w.ReadRecords(confCtx, space)
	if err != nil {
		return fmt.Sprintf("ReadRecords(%s) error: %v", space, err)
	}
	if dups := recs.Duplicates(); len(dups) > 0 {
		return fmt.Sprintf("ReadRecords(%s): stored more than once: %q (an upsert must MERGE, not CREATE)", space, dups)
	}
	if d := wGraphDiff(g, recs.Graph()); d != "" {
		return fmt.Sprintf("ReadRecords(%s) disagrees with ReadGraph:%s", space, d)
	}
	return ""
}

// wFold returns the reference fold of ms over an empty graph.
func wFold(t suiteT, ms ...reference.Mutation) reference.Graph {
	t.Helper()
	g := reference.NewGraph()
	for i, m := range ms {
		if err := g.Apply(m); err != nil {
			t.Fatalf("fixture mutation %d does not apply to the reference graph: %v", i, err)
		}
	}
	return g
}

func writerRich() reference.Mutation {
	return reference.Mutation{
		OperationID: "op-rich",
		UpsertNodes: []reference.NodeUpsert{wNode("a", "name", "A", "n", "1"), wNode("b", "name", "B"), wNode("c")},
		UpsertEdges: []reference.EdgeUpsert{
			wEdge("a", "KNOWS", "b", "since", "2020"),
			wEdge("b", "KNOWS", "a"),
			{Key: reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b", Rank: 1}, Properties: wProps("since", "2021")},
			wEdge("c", "SELF", "c"),
		},
	}
}

func writerApplyTwice(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	m := writerRich()
	want := wFold(t, m)
	wApply(t, w, "space_a", m, "rich mutation")
	wExpect(t, w, "space_a", want, "after one apply")
	wApply(t, w, "space_a", m, "rich mutation again")
	wExpect(t, w, "space_a", want, "after applying the same mutation twice")
	del := reference.Mutation{OperationID: "op-del", DeleteNodes: []string{"c"}, DeleteEdges: []reference.EdgeKey{wKey("b", "KNOWS", "a")},
		UpsertNodes: []reference.NodeUpsert{wNode("d", "k", "v")}, UpsertEdges: []reference.EdgeUpsert{wEdge("d", "R", "a")}}
	want = wFold(t, m, del)
	for i := 0; i < 3; i++ {
		wApply(t, w, "space_a", del, "mixed delete/upsert mutation")
		wExpect(t, w, "space_a", want, fmt.Sprintf("after applying a mixed mutation %d times", i+1))
	}
}

func writerPatch(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	m1 := reference.Mutation{OperationID: "op-1",
		UpsertNodes: []reference.NodeUpsert{wNode("a", "x", "1", "y", "2"), wNode("b")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("a", "R", "b", "p", "1", "q", "2")}}
	m2 := reference.Mutation{OperationID: "op-2",
		UpsertNodes: []reference.NodeUpsert{wNode("a", "y", "3", "z", "4")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("a", "R", "b", "q", "9")}}
	m3 := reference.Mutation{OperationID: "op-3", UpsertNodes: []reference.NodeUpsert{wNode("a")}, UpsertEdges: []reference.EdgeUpsert{wEdge("a", "R", "b")}}
	wApply(t, w, "space_a", m1, "nodes and edge with properties")
	wApply(t, w, "space_a", m2, "patch y, add z, patch q")
	want := wFold(t, m1, m2)
	if want.Nodes["a"].Properties["x"] != "1" {
		t.Fatalf("the reference fold does not patch; fixture broken")
	}
	wExpect(t, w, "space_a", want, "after a patch: omitted properties x and p are kept, y and q updated, z added")
	wApply(t, w, "space_a", m3, "upserts without properties")
	wExpect(t, w, "space_a", want, "after upserts without properties: nothing is cleared")
}

func writerDetach(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	setup := reference.Mutation{OperationID: "op-1",
		UpsertNodes: []reference.NodeUpsert{wNode("a"), wNode("b", "k", "v"), wNode("c")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("a", "R", "b"), wEdge("b", "R", "c"), wEdge("c", "R", "a"), wEdge("b", "SELF", "b"),
			{Key: reference.EdgeKey{Source: "c", Type: "R", Target: "b", Rank: 3}}}}
	del := reference.Mutation{OperationID: "op-2", DeleteNodes: []string{"b"}}
	wApply(t, w, "space_a", setup, "setup")
	wApply(t, w, "space_a", del, "delete node b")
	want := wFold(t, setup, del)
	if len(want.Edges) != 1 {
		t.Fatalf("fixture: the fold keeps %d edges; want 1", len(want.Edges))
	}
	wExpect(t, w, "space_a", want, "after deleting b: every edge into or out of b is gone, c->a stays")
	// Re-creating b does not bring its old edges back.
	re := reference.Mutation{OperationID: "op-3", UpsertNodes: []reference.NodeUpsert{wNode("b")}}
	wApply(t, w, "space_a", re, "re-create b")
	wExpect(t, w, "space_a", wFold(t, setup, del, re), "after re-creating b: no old edges, no old properties")
}

func writerDeleteAbsent(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	ghost := reference.Mutation{OperationID: "op-ghost", DeleteNodes: []string{"ghost", "x"}, DeleteEdges: []reference.EdgeKey{wKey("ghost", "R", "x"), wKey("a", "R", "b")}}
	for i := 0; i < 2; i++ {
		if err := w.Apply(confCtx, "space_a", ghost); err != nil {
			t.Errorf("Apply(deletes of absent nodes and edges on an empty space) #%d = %v; want nil", i+1, err)
		}
	}
	wExpect(t, w, "space_a", reference.NewGraph(), "after deleting absent things from an empty space")
	setup := reference.Mutation{OperationID: "op-1", UpsertNodes: []reference.NodeUpsert{wNode("a"), wNode("b")}, UpsertEdges: []reference.EdgeUpsert{wEdge("a", "R", "b")}}
	wApply(t, w, "space_a", setup, "setup")
	del := reference.Mutation{OperationID: "op-2", DeleteNodes: []string{"a"}, DeleteEdges: []reference.EdgeKey{wKey("a", "R", "b")}}
	for i := 0; i < 3; i++ {
		if err := w.Apply(confCtx, "space_a", del); err != nil {
			t.Errorf("Apply(delete a and a->b) #%d = %v; want nil (repeatable)", i+1, err)
		}
	}
	wExpect(t, w, "space_a", wFold(t, setup, del), "after repeating a delete")
	if err := w.Apply(confCtx, "space_a", reference.Mutation{OperationID: "op-empty"}); err != nil {
		t.Errorf("Apply(empty mutation) = %v; want nil", err)
	}
}

func writerMissingEndpoint(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	setup := reference.Mutation{OperationID: "op-1", UpsertNodes: []reference.NodeUpsert{wNode("x", "k", "v")}}
	wApply(t, w, "space_a", setup, "setup")
	before := wFold(t, setup)
	bad := []struct {
		name string
		m    reference.Mutation
	}{
		{"TargetMissing", reference.Mutation{OperationID: "op-bad",
			UpsertNodes: []reference.NodeUpsert{wNode("a"), wNode("b"), wNode("x", "k", "changed")},
			UpsertEdges: []reference.EdgeUpsert{wEdge("a", "R", "b"), wEdge("a", "R", "ghost")}}},
		{"SourceMissing", reference.Mutation{OperationID: "op-bad2",
			DeleteEdges: []reference.EdgeKey{wKey("x", "R", "x")},
			UpsertNodes: []reference.NodeUpsert{wNode("a")},
			UpsertEdges: []reference.EdgeUpsert{wEdge("ghost", "R", "x")}}},
		{"BothMissingOnEmptySpace", reference.Mutation{OperationID: "op-bad3",
			UpsertEdges: []reference.EdgeUpsert{wEdge("p", "R", "q")}}},
	}
	for _, b := range bad {
		err := w.Apply(confCtx, "space_a", b.m)
		if !errors.Is(err, reference.ErrMissingEndpoint) {
			t.Errorf("Apply(%s: an edge to a node that does not exist) = %v; want an error wrapping ErrMissingEndpoint", b.name, err)
		}
		wExpect(t, w, "space_a", before, "after the failed "+b.name+" (nothing of the mutation may be applied, not even its node upserts)")
	}
	err := w.Apply(confCtx, "space_empty", bad[2].m)
	if !errors.Is(err, reference.ErrMissingEndpoint) {
		t.Errorf("Apply(edge between missing nodes in a fresh space) = %v; want ErrMissingEndpoint", err)
	}
	wExpect(t, w, "space_empty", reference.NewGraph(), "a failed apply must not create endpoints")
}

func writerPhaseOrder(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	setup := reference.Mutation{OperationID: "op-1",
		UpsertNodes: []reference.NodeUpsert{wNode("x", "old", "1"), wNode("y")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("y", "R", "x", "old", "1"), wEdge("x", "R", "y")}}
	wApply(t, w, "space_a", setup, "setup")
	before := wFold(t, setup)
	deleteThenLink := reference.Mutation{OperationID: "op-2", DeleteNodes: []string{"x"}, UpsertEdges: []reference.EdgeUpsert{wEdge("y", "R", "x", "new", "1")}}
	if err := w.Apply(confCtx, "space_a", deleteThenLink); !errors.Is(err, reference.ErrMissingEndpoint) {
		t.Errorf("Apply(delete x, upsert edge y->x) = %v; want ErrMissingEndpoint: node deletes run before edge upserts", err)
	}
	wExpect(t, w, "space_a", before, "after the failed delete-then-link (x must still exist)")
	recreate := reference.Mutation{OperationID: "op-3", DeleteNodes: []string{"x"},
		UpsertNodes: []reference.NodeUpsert{wNode("x", "fresh", "1")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("y", "R", "x", "new", "1")}}
	wApply(t, w, "space_a", recreate, "delete x, upsert x, upsert y->x")
	want := wFold(t, setup, recreate)
	wExpect(t, w, "space_a", want, "after delete+re-create in one mutation (x has only the new properties, x->y is detached, y->x only new properties)")
	relink := reference.Mutation{OperationID: "op-4", DeleteEdges: []reference.EdgeKey{wKey("y", "R", "x")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("y", "R", "x", "again", "1")}}
	wApply(t, w, "space_a", relink, "delete edge y->x and upsert it")
	wExpect(t, w, "space_a", wFold(t, setup, recreate, relink), "after delete+upsert of one edge (edge deletes run before edge upserts)")
}

func writerSpaceIsolation(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	ma := reference.Mutation{OperationID: "op-a", UpsertNodes: []reference.NodeUpsert{wNode("n", "space", "a"), wNode("m")}, UpsertEdges: []reference.EdgeUpsert{wEdge("n", "R", "m")}}
	mb := reference.Mutation{OperationID: "op-b", UpsertNodes: []reference.NodeUpsert{wNode("n", "space", "b")}}
	wApply(t, w, "space_a", ma, "space_a graph")
	wApply(t, w, "space_b", mb, "space_b graph")
	wExpect(t, w, "space_a", wFold(t, ma), "space_a")
	wExpect(t, w, "space_b", wFold(t, mb), "space_b")
	wExpect(t, w, "space_c", reference.NewGraph(), "space_c")
	if err := w.Apply(confCtx, "space_b", reference.Mutation{OperationID: "op-link", UpsertEdges: []reference.EdgeUpsert{wEdge("n", "R", "m")}}); !errors.Is(err, reference.ErrMissingEndpoint) {
		t.Errorf("Apply(space_b edge n->m where m exists only in space_a) = %v; want ErrMissingEndpoint", err)
	}
	del := reference.Mutation{OperationID: "op-del", DeleteNodes: []string{"n"}}
	wApply(t, w, "space_b", del, "delete n in space_b")
	wExpect(t, w, "space_a", wFold(t, ma), "space_a after deleting n in space_b")
	wExpect(t, w, "space_b", reference.NewGraph(), "space_b after deleting n")
}

func writerNoDuplicates(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	m := writerRich()
	for i := 0; i < 3; i++ {
		wApply(t, w, "space_a", m, "rich mutation")
		for _, b := range m.Batches(2) {
			wApply(t, w, "space_a", b, "a batch of the rich mutation")
		}
	}
	wExpect(t, w, "space_a", wFold(t, m), "after repeated applies") // ReadRecords included
}

func writerBatches(t suiteT, fresh func() reference.GraphWriter) {
	setup := reference.Mutation{OperationID: "op-setup",
		UpsertNodes: []reference.NodeUpsert{wNode("old1", "k", "v"), wNode("old2"), wNode("keep", "k", "1")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("old1", "R", "old2"), wEdge("keep", "R", "old2"), wEdge("keep", "R", "old1")}}
	m := reference.Mutation{OperationID: "op-big",
		DeleteNodes: []string{"old1"},
		DeleteEdges: []reference.EdgeKey{wKey("keep", "R", "old2"), wKey("nope", "R", "nope")},
		UpsertNodes: []reference.NodeUpsert{wNode("n1", "a", "1"), wNode("n2"), wNode("keep", "k", "2", "j", "3"), wNode("n3"), wNode("old1", "re", "1")},
		UpsertEdges: []reference.EdgeUpsert{wEdge("n1", "R", "n2"), wEdge("n2", "R", "n3", "w", "1"), wEdge("keep", "R", "old1"), wEdge("n3", "R", "keep"), wEdge("old1", "R", "old2")},
	}
	want := wFold(t, setup, m)
	for _, size := range []int{1, 2, 3, 5, 100} {
		w := fresh()
		space := fmt.Sprintf("batch_%d", size)
		wApply(t, w, space, setup, "setup")
		batches := m.Batches(size)
		for i, b := range batches {
			wApply(t, w, space, b, fmt.Sprintf("batch %d/%d of size %d", i+1, len(batches), size))
		}
		wExpect(t, w, space, want, fmt.Sprintf("after applying Batches(%d) one by one", size))
		// A crash in the middle and a full replay also converge.
		w2 := fresh()
		wApply(t, w2, space, setup, "setup")
		for _, b := range batches[:len(batches)/2] {
			wApply(t, w2, space, b, "first half of the batches")
		}
		wApply(t, w2, space, m, "the whole mutation after a partial batch write")
		wExpect(t, w2, space, want, fmt.Sprintf("after half of Batches(%d) and then the whole", size))
	}
}

func writerReadGraphDetached(t suiteT, fresh func() reference.GraphWriter) {
	w := fresh()
	m := writerRich()
	wApply(t, w, "space_a", m, "rich mutation")
	g, err := w.ReadGraph(confCtx, "space_a")
	if err != nil {
		t.Fatalf("ReadGraph: %v", err)
	}
	for id, n := range g.Nodes {
		if n.Properties != nil {
			n.Properties["mutated"] = "yes"
		}
		delete(g.Nodes, id)
		break
	}
	for k, e := range g.Edges {
		if e.Properties != nil {
			e.Properties["mutated"] = "yes"
		}
		delete(g.Edges, k)
	}
	in := m
	in.UpsertNodes[0].Properties["name"] = "mutated input"
	wExpect(t, w, "space_a", wFold(t, writerRich()), "after mutating a read graph and the applied mutation")
}

// writerModelState is the model of a GraphWriter: the reference fold per
// space.
type writerModelState struct {
	w      reference.GraphWriter
	graphs map[string]reference.Graph
	last   map[string]reference.Mutation
}

func writerModel(t suiteT, fresh func() reference.GraphWriter) {
	prop := confModelProp(t, func() *writerModelState {
		return &writerModelState{w: fresh(), graphs: map[string]reference.Graph{}, last: map[string]reference.Mutation{}}
	}, writerModelPick)
	confCheckProp(t, "GraphWriter mutations", prop, 40, 25)
}

func writerModelPick(r *rand.Rand) *confStep[*writerModelState] {
	space := confOneOf(r, "space_a", "space_b")
	ids := []string{"a", "b", "c", "d"}
	if r.Intn(5) == 0 {
		return &confStep[*writerModelState]{fmt.Sprintf("ReplayLast(%s)", space), func(s *writerModelState) string {
			return s.apply(space, s.last[space])
		}}
	}
	m := reference.Mutation{OperationID: fmt.Sprintf("op-%d", r.Intn(1000))}
	for i := r.Intn(2); i > 0; i-- {
		m.DeleteNodes = append(m.DeleteNodes, confOneOf(r, ids...))
	}
	for i := r.Intn(2); i > 0; i-- {
		m.DeleteEdges = append(m.DeleteEdges, reference.EdgeKey{Source: confOneOf(r, ids...), Type: "R", Target: confOneOf(r, ids...), Rank: int64(r.Intn(2))})
	}
	for i := r.Intn(4); i > 0; i-- {
		props := map[string]string{}
		for j := r.Intn(3); j > 0; j-- {
			props[confOneOf(r, "p", "q", "s")] = fmt.Sprint(r.Intn(9))
		}
		m.UpsertNodes = append(m.UpsertNodes, reference.NodeUpsert{ID: confOneOf(r, ids...), Label: "L", Properties: props})
	}
	for i := r.Intn(4); i > 0; i-- {
		props := map[string]string{}
		for j := r.Intn(2); j > 0; j-- {
			props[confOneOf(r, "p", "q")] = fmt.Sprint(r.Intn(9))
		}
		m.UpsertEdges = append(m.UpsertEdges, reference.EdgeUpsert{Key: reference.EdgeKey{Source: confOneOf(r, ids...), Type: "R", Target: confOneOf(r, ids...), Rank: int64(r.Intn(2))}, Properties: props})
	}
	return &confStep[*writerModelState]{fmt.Sprintf("Apply(%s, %s)", space, confShow(m)), func(s *writerModelState) string { return s.apply(space, m) }}
}

func (s *writerModelState) apply(space string, m reference.Mutation) string {
	g, ok := s.graphs[space]
	if !ok {
		g = reference.NewGraph()
	}
	next := wCopy(g)
	merr := next.Apply(m)
	err := s.w.Apply(confCtx, space, m)
	switch {
	case merr != nil && !errors.Is(err, reference.ErrMissingEndpoint):
		return confMismatch("Apply of a mutation with a missing endpoint", "ErrMissingEndpoint", err)
	case merr == nil && err != nil:
		return confMismatch("Apply", "nil", err)
	case merr == nil:
		s.graphs[space] = next
		s.last[space] = m
	}
	got, rerr := s.w.ReadGraph(confCtx, space)
	if rerr != nil {
		return confMismatch("ReadGraph", "a graph", rerr)
	}
	if d := wGraphDiff(s.graphs[space], got); d != "" {
		return "ReadGraph differs from the reference fold:" + d
	}
	return wRecords(s.w, space, got)
}
