// Package storetest holds the fixtures and helpers the store tests share:
// the exported conformance suite (properties, whose Behaviour subtest uses
// them on every store) and the adapters' own adapter-specific tests
// (durability, migrations, several handles on one database, the
// CREATE-instead-of-MERGE mutant option).
package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

// TB is the part of testing.TB the helpers use, so that they serve a
// *testing.T and the conformance suite's own test type alike.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Opener returns fresh, empty stores; mutant selects the adapter's
// CreateInsteadOfMerge option.
type Opener func(t *testing.T, mutant bool) reference.Stores

// Must fails the test on an error.
func Must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WantErr fails the test unless err wraps target.
func WantErr(t TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want one wrapping %v", err, target)
	}
}

// FixturePlan builds a valid INGESTION plan of opID for (space, doc) against
// revision expected.
func FixturePlan(space, doc, opID string, expected int64) reference.Plan {
	node := reference.NodeID("Person", "Ada "+opID)
	p := reference.Plan{
		Kind:        reference.Ingestion,
		OperationID: opID,
		Space:       space,
		DocumentID:  doc,
		Options:     reference.GraphOptions{Space: space, Attributes: map[string]string{"db": "neo4j"}},
		Mutation: reference.Mutation{
			OperationID: opID,
			DeleteEdges: []reference.EdgeKey{{Source: "x", Type: "OLD", Target: "y"}},
			UpsertNodes: []reference.NodeUpsert{{ID: node, Label: "Person", Properties: map[string]string{"name": "Ada"}}},
			UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: node, Type: "SELF", Target: node, Rank: 1}, Properties: map[string]string{"w": "1"}}},
		},
		NextState: &reference.DocumentState{
			Space: space, DocumentID: doc, Revision: expected + 1, OperationID: opID,
			ContentHash: reference.ContentHash("content " + opID), ExtractionFingerprint: "fake-model-1",
			Status: reference.DocActive, FactSources: []reference.EdgeKey{{Source: node, Type: "SELF", Target: node, Rank: 1}},
			NodeIDs: []string{node},
		},
		StaleEdges:     []reference.EdgeKey{{Source: "x", Type: "OLD", Target: "y"}},
		Registrations:  []reference.EntityRegistration{{NodeID: node, Type: "Person", CanonicalName: "Ada " + opID, Aliases: []string{"A. " + opID}, Properties: map[string]string{"k": "v"}}},
		Content:        "content " + opID,
		ExtractionCall: 1,
	}
	if expected > 0 {
		p.PreviousState = &reference.DocumentState{Space: space, DocumentID: doc, Revision: expected, OperationID: "prev", Status: reference.DocActive}
	}
	return p
}

// FixtureOp builds a PREPARED operation and its plan.
func FixtureOp(space, doc, opID string, expected, now int64) (reference.Operation, reference.Plan) {
	p := FixturePlan(space, doc, opID, expected)
	return reference.NewOperation(p, now), p
}

// CreateOp stores a fixture operation and returns it.
func CreateOp(t TB, s reference.Stores, opID string, now int64) reference.Operation {
	t.Helper()
	op, p := FixtureOp("sp", "doc-"+opID, opID, 0, now)
	ok, err := s.Ops.CreateIfAbsent(context.Background(), op, p)
	Must(t, err)
	if !ok {
		t.Fatalf("create %s: not created", opID)
	}
	return op
}

// Advance moves op to a stage or fails the test.
func Advance(t TB, op reference.Operation, to reference.Stage, at int64) reference.Operation {
	t.Helper()
	n, err := op.Advance(to, at, "")
	Must(t, err)
	return n
}

// State builds an ACTIVE document state supporting edges.
func State(space, doc string, rev int64, opID string, edges ...reference.EdgeKey) reference.DocumentState {
	return reference.DocumentState{
		Space: space, DocumentID: doc, Revision: rev, OperationID: opID,
		ContentHash: "h-" + opID, ExtractionFingerprint: "m1", Status: reference.DocActive,
		FactSources: edges, NodeIDs: []string{"n-" + opID}, CommittedAt: 1000 + rev,
	}
}

// Reg builds an entity registration.
func Reg(node, typ, canonical string, aliases ...string) reference.EntityRegistration {
	return reference.EntityRegistration{NodeID: node, Type: typ, CanonicalName: canonical, Aliases: aliases}
}

// ReadGraph reads a space's graph or fails the test.
func ReadGraph(t TB, s reference.Stores, space string) reference.Graph {
	t.Helper()
	g, err := s.Writer.ReadGraph(context.Background(), space)
	Must(t, err)
	return g
}

// Duplicates lists the writer's duplicates in a space or fails the test.
func Duplicates(t TB, s reference.Stores, space string) []string {
	t.Helper()
	r, err := s.Writer.ReadRecords(context.Background(), space)
	Must(t, err)
	return r.Duplicates()
}

// Mutant checks an adapter's CreateInsteadOfMerge option (open with
// mutant true): the writer stores copies, ReadRecords lists every copy,
// ReadGraph folds them, deleting removes them all.
func Mutant(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t, true)
	ab := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}
	m := reference.Mutation{OperationID: "op1",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "P", Properties: map[string]string{"v": "1"}}, {ID: "b", Label: "P"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: ab, Properties: map[string]string{"v": "1"}}},
	}
	Must(t, s.Writer.Apply(ctx, "sp", m))
	if d := Duplicates(t, s, "sp"); len(d) != 0 {
		t.Fatalf("duplicates after one apply: %v", d)
	}
	Must(t, s.Writer.Apply(ctx, "sp", m))
	m.UpsertNodes = m.UpsertNodes[:1]
	m.UpsertNodes[0].Properties = map[string]string{"v": "2"}
	m.UpsertEdges[0].Properties = map[string]string{"v": "3"}
	Must(t, s.Writer.Apply(ctx, "sp", m))
	want := []string{"node a x3", "node b x2", "edge (a)-[KNOWS#0]->(b) x3"}
	if d := Duplicates(t, s, "sp"); !slices.Equal(d, want) {
		t.Fatalf("Duplicates = %q, want %q", d, want)
	}
	g := ReadGraph(t, s, "sp")
	if len(g.Nodes) != 2 || len(g.Edges) != 1 || g.Nodes["a"].Properties["v"] != "2" || g.Edges[ab].Properties["v"] != "3" {
		t.Fatalf("folded graph = %+v", g)
	}
	if d := Duplicates(t, s, "other"); len(d) != 0 {
		t.Fatalf("duplicates in an empty space: %v", d)
	}
	// Deleting removes every copy.
	Must(t, s.Writer.Apply(ctx, "sp", reference.Mutation{DeleteNodes: []string{"a"}}))
	if d := Duplicates(t, s, "sp"); !slices.Equal(d, []string{"node b x2"}) {
		t.Fatalf("Duplicates after delete = %q", d)
	}
	if g := ReadGraph(t, s, "sp"); len(g.Nodes) != 1 || len(g.Edges) != 0 {
		t.Fatalf("graph after delete = %+v", g)
	}
}
