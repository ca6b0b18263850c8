package check

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func digestPlan() reference.Plan {
	k1 := reference.EdgeKey{Source: "person:a", Type: "KNOWS", Target: "person:b"}
	k2 := reference.EdgeKey{Source: "person:b", Type: "WORKS_AT", Target: "org:c"}
	return reference.Plan{Kind: reference.Ingestion, OperationID: "op-1", Space: "s", DocumentID: "d1", Content: "x",
		Mutation: reference.Mutation{OperationID: "op-1",
			UpsertNodes: []reference.NodeUpsert{{ID: "person:a", Label: "Person", Properties: map[string]string{"name": "A", "role": "author"}}, {ID: "person:b", Label: "Person"}},
			UpsertEdges: []reference.EdgeUpsert{{Key: k1}, {Key: k2, Properties: map[string]string{"since": "2020"}}}},
		NextState:     &reference.DocumentState{Space: "s", DocumentID: "d1", Revision: 1, OperationID: "op-1", Status: reference.DocActive, FactSources: []reference.EdgeKey{k1, k2}, NodeIDs: []string{"person:a", "person:b"}},
		Registrations: []reference.EntityRegistration{{NodeID: "person:a", Type: "Person", CanonicalName: "A", Aliases: []string{"Al", "Ally"}}},
	}
}

// The checker's digest ignores order and the plan's name, and sees every
// part of the business content, properties included (the part a weak
// fingerprint might leave out).
func TestPlanDigest(t *testing.T) {
	base := PlanDigest(digestPlan())
	reordered := digestPlan()
	m := &reordered.Mutation
	m.UpsertNodes[0], m.UpsertNodes[1] = m.UpsertNodes[1], m.UpsertNodes[0]
	m.UpsertEdges[0], m.UpsertEdges[1] = m.UpsertEdges[1], m.UpsertEdges[0]
	reordered.Registrations[0].Aliases = []string{"Ally", "Al"}
	reordered.OperationID, reordered.ExtractionCall = "op-2", 2
	if got := PlanDigest(reordered); got != base {
		t.Errorf("reordering or renaming the plan changed its digest: %s, want %s", got, base)
	}
	for name, change := range map[string]func(*reference.Plan){
		"node property": func(p *reference.Plan) { p.Mutation.UpsertNodes[0].Properties["role"] = "editor" },
		"edge property": func(p *reference.Plan) { p.Mutation.UpsertEdges[1].Properties["since"] = "2021" },
		"content":       func(p *reference.Plan) { p.Content = "y" },
		"base revision": func(p *reference.Plan) { p.PreviousState = &reference.DocumentState{Revision: 3} },
		"fact source":   func(p *reference.Plan) { p.NextState.FactSources = p.NextState.FactSources[:1] },
		"registration":  func(p *reference.Plan) { p.Registrations[0].CanonicalName = "B" },
		"a stale edge":  func(p *reference.Plan) { p.StaleEdges = []reference.EdgeKey{{Source: "x", Type: "T", Target: "y"}} },
		"a deleted edge": func(p *reference.Plan) {
			p.Mutation.DeleteEdges = []reference.EdgeKey{{Source: "x", Type: "T", Target: "y"}}
		},
	} {
		p := digestPlan()
		change(&p)
		if PlanDigest(p) == base {
			t.Errorf("changing the %s left the digest unchanged", name)
		}
	}
	items := MutationItems(digestPlan().Mutation)
	if len(items) != 4 || items[0] > items[1] {
		t.Errorf("MutationItems = %q, want 4 sorted items", items)
	}
}
