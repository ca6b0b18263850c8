package check

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func TestI9NamesTheLostWriteAndTheRestart(t *testing.T) {
	k := reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}
	events := []reference.Event{
		{Kind: reference.EvPrepared, OperationID: "op1", DocumentID: "d1"},
		{Kind: reference.EvGraphBatch, OperationID: "op1", DocumentID: "d1", Detail: "1",
			Batch: &reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "a"}, {ID: "b"}}, UpsertEdges: []reference.EdgeUpsert{{Key: k}}}},
		{Kind: reference.EvStage, OperationID: "op1", DocumentID: "d1", From: reference.Prepared, To: reference.GraphApplied},
		{Kind: reference.EvStateCommit, OperationID: "op1", DocumentID: "d1", Revision: 1},
		{Kind: reference.EvVersion, OperationID: "op1", DocumentID: "d1", Revision: 1},
	}
	full := Snapshot{
		Ops:      []reference.Operation{{OperationID: "op1", DocumentID: "d1", Stage: reference.Completed}},
		States:   []reference.DocumentState{{DocumentID: "d1", Revision: 1, OperationID: "op1"}},
		Versions: map[string][]reference.DocumentState{"d1": {{DocumentID: "d1", Revision: 1, OperationID: "op1"}}},
		Graph:    reference.Graph{Nodes: map[string]reference.Node{"a": {ID: "a"}, "b": {ID: "b"}}, Edges: map[reference.EdgeKey]reference.Edge{k: {Key: k}}},
	}
	if v := CheckI9(full, Observed{Events: events, Restarts: []Restart{{Server: "postgres", Point: "beforeCompleted", Worker: "fault", Events: len(events), Snapshot: full}}}); len(v) != 0 {
		t.Fatalf("every write is there, yet I9 says %v", v)
	}
	// The server lost the stage advance and the edge; the final state
	// (recovery re-did them) has everything again.
	lost := full
	lost.Ops = []reference.Operation{{OperationID: "op1", DocumentID: "d1", Stage: reference.Prepared}}
	lost.Graph = reference.Graph{Nodes: full.Graph.Nodes, Edges: map[reference.EdgeKey]reference.Edge{}}
	v := CheckI9(full, Observed{Events: events, Restarts: []Restart{{Server: "postgres", Point: "beforeCompleted", Worker: "fault", Events: len(events), Snapshot: lost}}})
	if len(v) != 2 {
		t.Fatalf("want the stage and the edge reported, got %v", v)
	}
	for _, x := range v {
		if x.Invariant != I9 || !strings.Contains(x.Message, "postgres restart #1 (SIGKILL at beforeCompleted") {
			t.Errorf("violation does not name the restart: %v", x)
		}
	}
	if !strings.Contains(v[0].Message+v[1].Message, "PREPARED -> GRAPH_APPLIED") || !strings.Contains(v[0].Message+v[1].Message, "edge a-[KNOWS]->b") && !strings.Contains(v[0].Message+v[1].Message, "upserted edge") {
		t.Errorf("violations do not name the writes: %v", v)
	}
	// A write acknowledged after the kill is not the restart's business.
	if v := CheckI9(full, Observed{Events: events, Restarts: []Restart{{Server: "postgres", Events: 1, Snapshot: lost}}}); len(v) != 0 {
		t.Fatalf("writes acknowledged after the kill were held against the restart: %v", v)
	}
	// The final state must hold committed revisions too.
	final := full
	final.States = nil
	if v := CheckI9(final, Observed{Events: events}); len(v) != 1 || !strings.Contains(v[0].Message, "committed at revision 1") {
		t.Fatalf("a lost state commit in the final state: got %v", v)
	}
}
