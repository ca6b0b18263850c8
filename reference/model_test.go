package reference_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

func TestNormalize(t *testing.T) {
	cases := map[string]string{
		"  ALICE  smith ":   "alice smith",
		"Alice\tSmith\n":    "alice smith",
		"ＡＬＩＣＥ":             "alice", // fullwidth, NFKC
		"ﬁle":               "file",  // ligature, NFKC
		"Ⅻ":                 "xii",
		"":                  "",
		"   ":               "",
		"林默":                "林默",
		"Caf\u0065\u0301":   "caf\u00e9", // NFKC composes
		"a\u00a0\u3000b  c": "a b c",     // no-break and ideographic spaces
	}
	for in, want := range cases {
		if got := reference.Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNodeID(t *testing.T) {
	id := reference.NodeID("Person", "  ALICE  smith  ")
	if id != reference.NodeID("person", "alice smith") {
		t.Fatalf("NodeID not normalised: %s vs %s", id, reference.NodeID("person", "alice smith"))
	}
	if !regexp.MustCompile(`^person:[0-9a-f]{24}$`).MatchString(id) {
		t.Fatalf("NodeID %q is not lower(type):24 hex", id)
	}
	if reference.NodeID("Person", "ＡＬＩＣＥ smith") != id {
		t.Error("NodeID ignores NFKC")
	}
	for _, other := range []string{
		reference.NodeID("Person", "alice smyth"),
		reference.NodeID("Company", "alice smith"),
		reference.NodeID("Person", "alicesmith"),
	} {
		if other == id {
			t.Errorf("distinct entity got the same id %s", id)
		}
	}
	// type "\n" name framing: the boundary between type and name matters.
	if reference.NodeID("a", "b c") == reference.NodeID("a b", "c") {
		t.Error("NodeID does not separate type from name")
	}
}

func TestEdgeKeyAndIDs(t *testing.T) {
	k := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b", Rank: 7}
	if got := k.PortableID(); got != "a\x1fKNOWS\x1fb\x1f7" {
		t.Fatalf("PortableID = %q", got)
	}
	if k.String() != "(a)-[KNOWS#7]->(b)" {
		t.Errorf("String = %q", k.String())
	}
	k2 := k
	k2.Rank = 8
	if k.PortableID() == k2.PortableID() || !k.Less(k2) || k2.Less(k) || k.Less(k) {
		t.Error("rank not part of the identity / order")
	}
	hx1, hx2 := reference.ContentHash("x"), reference.ContentHash("x")
	if hx1 != hx2 || hx1 == reference.ContentHash("y") || len(reference.ContentHash("")) != 64 {
		t.Error("ContentHash")
	}
	i1 := reference.IngestOperationID("s", "d", "h", 0)
	if !strings.HasPrefix(i1, "ingest-") || len(i1) != len("ingest-")+32 || i1 != reference.IngestOperationID("s", "d", "h", 0) {
		t.Errorf("IngestOperationID = %q", i1)
	}
	for _, o := range []string{reference.IngestOperationID("s2", "d", "h", 0), reference.IngestOperationID("s", "d2", "h", 0), reference.IngestOperationID("s", "d", "h2", 0), reference.IngestOperationID("sd", "", "h", 0)} {
		if o == i1 {
			t.Errorf("IngestOperationID collision %s", o)
		}
	}
	r1 := reference.RetractOperationID("s", "d", 1)
	if !strings.HasPrefix(r1, "retract-") || r1 == reference.RetractOperationID("s", "d", 2) || r1 != reference.RetractOperationID("s", "d", 1) {
		t.Errorf("RetractOperationID = %q", r1)
	}
}

func TestCheckKey(t *testing.T) {
	must(t, reference.CheckKey("s", "d"))
	for _, c := range [][2]string{{"", "d"}, {" ", "d"}, {"s", ""}, {"s", "\t"}} {
		if err := reference.CheckKey(c[0], c[1]); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("CheckKey(%q,%q) = %v", c[0], c[1], err)
		}
	}
}

// bigMutation touches every phase; applied on top of seedGraph it is valid.
func bigMutation() reference.Mutation {
	m := reference.Mutation{OperationID: "op"}
	m.DeleteNodes = []string{"old-1", "old-2", "absent"}
	m.DeleteEdges = []reference.EdgeKey{{Source: "n0", Type: "R", Target: "n1"}, {Source: "x", Type: "GONE", Target: "y"}}
	for i := 0; i < 5; i++ {
		m.UpsertNodes = append(m.UpsertNodes, reference.NodeUpsert{ID: fmt.Sprintf("n%d", i), Label: "L", Properties: map[string]string{"i": fmt.Sprint(i)}})
	}
	for i := 0; i < 4; i++ {
		m.UpsertEdges = append(m.UpsertEdges, reference.EdgeUpsert{Key: reference.EdgeKey{Source: fmt.Sprintf("n%d", i), Type: "NEXT", Target: fmt.Sprintf("n%d", i+1)}, Properties: map[string]string{"w": fmt.Sprint(i)}})
	}
	return m
}

func seedGraph(t *testing.T) reference.Graph {
	g := reference.NewGraph()
	must(t, g.Apply(reference.Mutation{UpsertNodes: []reference.NodeUpsert{
		{ID: "old-1", Label: "L"}, {ID: "old-2", Label: "L"}, {ID: "n0", Label: "L", Properties: map[string]string{"keep": "yes"}}, {ID: "n1", Label: "L"}, {ID: "x", Label: "L"}, {ID: "y", Label: "L"},
	}, UpsertEdges: []reference.EdgeUpsert{
		{Key: reference.EdgeKey{Source: "old-1", Type: "R", Target: "n0"}},
		{Key: reference.EdgeKey{Source: "n0", Type: "R", Target: "n1"}},
		{Key: reference.EdgeKey{Source: "x", Type: "GONE", Target: "y"}},
		{Key: reference.EdgeKey{Source: "x", Type: "STAYS", Target: "y"}},
	}}))
	return g
}

func TestMutationBatches(t *testing.T) {
	m := bigMutation()
	if m.Size() != 14 || m.Empty() || !(reference.Mutation{OperationID: "x"}).Empty() {
		t.Fatalf("Size/Empty wrong: %d", m.Size())
	}
	whole := seedGraph(t)
	must(t, whole.Apply(m))
	for n := -1; n <= 15; n++ {
		bs := m.Batches(n)
		if n <= 0 || n >= m.Size() {
			if len(bs) != 1 || !reflect.DeepEqual(bs[0], m) {
				t.Errorf("Batches(%d) should be the whole mutation, got %d batches", n, len(bs))
			}
			continue
		}
		if want := (m.Size() + n - 1) / n; len(bs) != want {
			t.Errorf("Batches(%d): %d batches, want %d", n, len(bs), want)
		}
		var concat reference.Mutation
		concat.OperationID = "op"
		g := seedGraph(t)
		for i, b := range bs {
			if b.Size() == 0 || b.Size() > n {
				t.Errorf("Batches(%d)[%d] has size %d", n, i, b.Size())
			}
			if b.OperationID != m.OperationID {
				t.Errorf("Batches(%d)[%d] lost the operationId", n, i)
			}
			concat.DeleteNodes = append(concat.DeleteNodes, b.DeleteNodes...)
			concat.DeleteEdges = append(concat.DeleteEdges, b.DeleteEdges...)
			concat.UpsertNodes = append(concat.UpsertNodes, b.UpsertNodes...)
			concat.UpsertEdges = append(concat.UpsertEdges, b.UpsertEdges...)
			if err := g.Apply(b); err != nil {
				t.Fatalf("Batches(%d)[%d]: %v", n, i, err)
			}
		}
		// Phase order kept: every element in its original order.
		if !reflect.DeepEqual(concat, m) {
			t.Errorf("Batches(%d) concatenated differs from the mutation", n)
		}
		// Phases never go backwards across batches.
		phase := 0
		for _, b := range bs {
			first, last := phases(b)
			if first < phase {
				t.Errorf("Batches(%d): phase %d after phase %d", n, first, phase)
			}
			phase = last
		}
		if !reflect.DeepEqual(g, whole) {
			t.Errorf("Batches(%d) applied in order differ from the whole mutation", n)
		}
	}
	if bs := (reference.Mutation{}).Batches(3); len(bs) != 1 {
		t.Errorf("empty mutation: %d batches", len(bs))
	}
}

func phases(m reference.Mutation) (first, last int) {
	first = -1
	for i, n := range []int{len(m.DeleteNodes), len(m.DeleteEdges), len(m.UpsertNodes), len(m.UpsertEdges)} {
		if n > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return
}

func TestGraphApply(t *testing.T) {
	g := seedGraph(t)
	m := bigMutation()
	must(t, g.Apply(m))
	if _, ok := g.Nodes["old-1"]; ok {
		t.Error("deleted node still present")
	}
	if _, ok := g.Edges[reference.EdgeKey{Source: "old-1", Type: "R", Target: "n0"}]; ok {
		t.Error("deleting a node did not detach its edge")
	}
	if _, ok := g.Edges[reference.EdgeKey{Source: "x", Type: "GONE", Target: "y"}]; ok {
		t.Error("deleted edge still present")
	}
	if _, ok := g.Edges[reference.EdgeKey{Source: "x", Type: "STAYS", Target: "y"}]; !ok {
		t.Error("unrelated edge removed")
	}
	if got := g.Nodes["n0"].Properties; got["keep"] != "yes" || got["i"] != "0" {
		t.Errorf("upsert is not a patch: %v", got)
	}
	// Idempotent: applying again changes nothing.
	snap := clone(g)
	must(t, g.Apply(m))
	if !reflect.DeepEqual(g, snap) {
		t.Error("re-applying a mutation changed the graph")
	}
	// Patch: an upsert with fewer properties keeps the others.
	must(t, g.Apply(reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "n1", Label: "L", Properties: map[string]string{"new": "v"}}},
		UpsertEdges: []reference.EdgeUpsert{{Key: m.UpsertEdges[0].Key, Properties: map[string]string{"z": "1"}}}}))
	if p := g.Nodes["n1"].Properties; p["i"] != "1" || p["new"] != "v" {
		t.Errorf("node patch lost properties: %v", p)
	}
	if p := g.Edges[m.UpsertEdges[0].Key].Properties; p["w"] != "0" || p["z"] != "1" {
		t.Errorf("edge patch lost properties: %v", p)
	}
	// A missing endpoint fails the whole mutation, nothing applied.
	snap = clone(g)
	bad := reference.Mutation{
		DeleteNodes: []string{"n4"},
		DeleteEdges: []reference.EdgeKey{{Source: "x", Type: "STAYS", Target: "y"}},
		UpsertNodes: []reference.NodeUpsert{{ID: "fresh", Label: "L"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "fresh", Type: "R", Target: "nowhere"}}},
	}
	if err := g.Apply(bad); !errors.Is(err, reference.ErrMissingEndpoint) {
		t.Fatalf("missing endpoint: %v", err)
	}
	// An endpoint deleted by the same mutation is missing too.
	bad2 := reference.Mutation{DeleteNodes: []string{"n2"}, UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "n1", Type: "R", Target: "n2"}}}}
	if err := g.Apply(bad2); !errors.Is(err, reference.ErrMissingEndpoint) {
		t.Fatalf("endpoint deleted in the same mutation: %v", err)
	}
	if !reflect.DeepEqual(g, snap) {
		t.Fatal("a refused mutation changed the graph")
	}
	// An endpoint created by the same mutation is fine.
	must(t, g.Apply(reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "p", Label: "L"}}, UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "p", Type: "R", Target: "p"}}}}))
	if got, want := g.SortedNodes(), sortedKeys(g.Nodes); !reflect.DeepEqual(got, want) {
		t.Errorf("SortedNodes = %v", got)
	}
	es := g.SortedEdges()
	for i := 1; i < len(es); i++ {
		if !es[i-1].Less(es[i]) {
			t.Errorf("SortedEdges not sorted at %d", i)
		}
	}
}

func clone(g reference.Graph) reference.Graph {
	c := reference.NewGraph()
	for k, n := range g.Nodes {
		p := map[string]string{}
		for a, b := range n.Properties {
			p[a] = b
		}
		n.Properties = p
		c.Nodes[k] = n
	}
	for k, e := range g.Edges {
		p := map[string]string{}
		for a, b := range e.Properties {
			p[a] = b
		}
		e.Properties = p
		c.Edges[k] = e
	}
	return c
}

func sortedKeys(m map[string]reference.Node) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestDocumentStateSupportsAndNames(t *testing.T) {
	k := reference.EdgeKey{Source: "a", Type: "T", Target: "b"}
	st := reference.DocumentState{FactSources: []reference.EdgeKey{k}}
	k2 := k
	k2.Rank = 1
	if !st.Supports(k) || st.Supports(k2) {
		t.Error("Supports")
	}
	r := reference.EntityRegistration{CanonicalName: "A", Aliases: []string{"B", "C"}}
	if !reflect.DeepEqual(r.Names(), []string{"A", "B", "C"}) {
		t.Errorf("Names = %v", r.Names())
	}
}

type permErr struct{ perm bool }

func (e permErr) Error() string   { return "perm" }
func (e permErr) Permanent() bool { return e.perm }

func TestIsRetryable(t *testing.T) {
	permanent := []error{reference.ErrMissingEndpoint, reference.ErrRegistryConflict, reference.ErrInvalidPlan, reference.ErrCorruptPlan,
		reference.ErrFingerprint, reference.ErrPlanConflict, reference.ErrInvalidArgument, reference.ErrIdentityMismatch,
		reference.ErrNoPersistedPlan, reference.ErrIllegalTransition, reference.ErrUnknownStage}
	retryable := []error{reference.ErrNotFound, reference.ErrLeaseHeld, reference.ErrLeaseLost, reference.ErrLockTimeout,
		reference.ErrRevisionConflict, reference.ErrTimeBackwards, context.DeadlineExceeded, errors.New("connection reset")}
	for _, e := range permanent {
		for _, w := range []error{e, fmt.Errorf("op x: %w", e), fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", e)), errors.Join(errors.New("a"), e)} {
			if reference.IsRetryable(w) {
				t.Errorf("IsRetryable(%v) = true, want false (permanent)", w)
			}
		}
	}
	for _, e := range retryable {
		for _, w := range []error{e, fmt.Errorf("op x: %w", e)} {
			if !reference.IsRetryable(w) {
				t.Errorf("IsRetryable(%v) = false, want true", w)
			}
		}
	}
	if reference.IsRetryable(nil) {
		t.Error("IsRetryable(nil) = true")
	}
	tr := &faults.InjectedError{Point: faults.BeforeGraphWrite, Retryable: true}
	pe := &faults.InjectedError{Point: faults.BeforeGraphWrite, Retryable: false}
	if !reference.IsRetryable(tr) || !reference.IsRetryable(fmt.Errorf("write: %w", tr)) {
		t.Error("transient injected fault not retryable")
	}
	if reference.IsRetryable(pe) || reference.IsRetryable(fmt.Errorf("write: %w", pe)) {
		t.Error("permanent injected fault retryable")
	}
	if reference.IsRetryable(permErr{true}) || reference.IsRetryable(fmt.Errorf("x: %w", permErr{true})) {
		t.Error("Permanent() true is retryable")
	}
	if !reference.IsRetryable(permErr{false}) {
		t.Error("Permanent() false is not retryable")
	}
}
