package initial

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
)

// LeaseLister is an optional LockProvider method: every lease row of a
// space (held, expired or released with its last token), ordered by
// document. Read uses it to put leases into a state.
type LeaseLister interface {
	ListLeases(ctx context.Context, space string) ([]reference.Lease, error)
}

// Filter narrows what Read takes from a space. Both empty: the whole
// space.
type Filter struct {
	// Operation takes one operation, its document and whatever that
	// document's recovery can touch.
	Operation string
	// Document takes one document, its operations and whatever its
	// recovery can touch.
	Document string
}

// Read takes the state of space (or the part Filter names) from a
// backend's stores at time at. It only reads: every read is one of the
// stores' read methods (check.Take's snapshot reads, and LeaseLister when
// the lock provider offers it). Notes say what the state could not carry
// (no lease reader, stored duplicates folded into one node or edge).
//
// A document or operation filter keeps the documents whose current ACTIVE
// state shares a node or an edge with the kept ones, until nothing more
// joins (a retraction checks whether another ACTIVE document still
// supports an edge: that document must come along), with their version
// histories, and the nodes, edges, registry entries and leases they
// mention. An operation filter keeps that one operation only.
//
// operationIds that carry the harness's scoping prefix ("space/") lose it.
func Read(ctx context.Context, st reference.Stores, space string, f Filter, at int64) (*State, []string, error) {
	snap, err := check.Take(ctx, st, space, nil, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	var notes []string
	s := &State{Space: space, At: at}
	unscope := func(id string) string { return strings.TrimPrefix(id, space+"/") }

	var leases []reference.Lease
	if ll, ok := st.Locks.(LeaseLister); ok {
		if leases, err = ll.ListLeases(ctx, space); err != nil {
			return nil, nil, fmt.Errorf("leases: %w", err)
		}
	} else {
		notes = append(notes, fmt.Sprintf("the lock provider (%T) cannot list its leases: the state holds none", st.Locks))
	}
	for _, d := range snap.Duplicates {
		notes = append(notes, "the graph stores a duplicate, which the state holds once: "+d)
	}

	keep, keepAll := map[string]bool{}, f.Operation == "" && f.Document == ""
	switch {
	case f.Operation != "":
		found := false
		for _, op := range snap.Ops {
			if op.OperationID == f.Operation || unscope(op.OperationID) == f.Operation {
				keep[op.DocumentID], found = true, true
				f.Operation = op.OperationID
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("space %s holds no operation %q", space, f.Operation)
		}
	case f.Document != "":
		keep[f.Document] = true
		found := false
		for _, op := range snap.Ops {
			found = found || op.DocumentID == f.Document
		}
		for _, d := range snap.States {
			found = found || d.DocumentID == f.Document
		}
		if !found {
			return nil, nil, fmt.Errorf("space %s holds no state and no operation of document %q", space, f.Document)
		}
	}
	if !keepAll {
		closeOver(snap, keep)
	}
	kept := func(doc string) bool { return keepAll || keep[doc] }

	nodes, edges := map[string]bool{}, map[reference.EdgeKey]bool{}
	mention := func(ids []string, ks []reference.EdgeKey) {
		for _, id := range ids {
			nodes[id] = true
		}
		for _, k := range ks {
			edges[k] = true
			nodes[k.Source], nodes[k.Target] = true, true
		}
	}
	for _, op := range snap.Ops {
		if !kept(op.DocumentID) || (f.Operation != "" && op.OperationID != f.Operation) {
			continue
		}
		plan, ok := snap.Plans[op.OperationID]
		if !ok {
			return nil, nil, fmt.Errorf("operation %s: its plan does not load (%s): a state holds every operation with its plan", op.OperationID, snap.PlanErrors[op.OperationID])
		}
		o := Operation{ID: unscope(op.OperationID), Document: op.DocumentID, ExpectedRevision: op.ExpectedRevision,
			Stage: op.Stage, UpdatedAt: op.UpdatedAt, Attempts: op.Attempts, FailureReason: op.FailureReason,
			Disposition: op.Disposition, SupersededBy: unscope(op.SupersededBy), Plan: unscopePlan(plan, unscope)}
		if op.ClaimHolder != "" {
			o.Claim = &Claim{Holder: op.ClaimHolder, ExpiresAt: op.ClaimExpiresAt}
		}
		o.Fingerprint = reference.Fingerprint(o.Plan)
		s.Operations = append(s.Operations, o)
		m := plan.Mutation
		mention(m.DeleteNodes, m.DeleteEdges)
		for _, n := range m.UpsertNodes {
			mention([]string{n.ID}, nil)
		}
		for _, e := range m.UpsertEdges {
			mention(nil, []reference.EdgeKey{e.Key})
		}
		mention(nil, plan.StaleEdges)
		for _, r := range plan.Registrations {
			mention([]string{r.NodeID}, nil)
		}
	}
	docs := map[string]*Document{}
	doc := func(id string) *Document {
		if docs[id] == nil {
			docs[id] = &Document{ID: id}
		}
		return docs[id]
	}
	for _, c := range snap.States {
		if kept(c.DocumentID) {
			c := unscopeState(c, unscope)
			doc(c.DocumentID).Current = &c
			mention(c.NodeIDs, c.FactSources)
		}
	}
	for id, vs := range snap.Versions {
		if !kept(id) || len(vs) == 0 {
			continue
		}
		d := doc(id)
		for _, v := range vs {
			d.Versions = append(d.Versions, unscopeState(v, unscope))
			mention(v.NodeIDs, v.FactSources)
		}
	}
	for _, d := range docs {
		s.Documents = append(s.Documents, *d)
	}
	for _, l := range leases {
		if kept(l.DocumentID) {
			s.Leases = append(s.Leases, Lease{Document: l.DocumentID, Holder: l.Holder, Token: l.Token, ExpiresAt: l.ExpiresAt})
		}
	}
	for _, k := range snap.Graph.SortedEdges() {
		if keepAll || edges[k] {
			s.Graph.Edges = append(s.Graph.Edges, snap.Graph.Edges[k])
			nodes[k.Source], nodes[k.Target] = true, true
		}
	}
	for _, id := range snap.Graph.SortedNodes() {
		if keepAll || nodes[id] {
			s.Graph.Nodes = append(s.Graph.Nodes, snap.Graph.Nodes[id])
		}
	}
	for _, e := range snap.Registry {
		if keepAll || nodes[e.NodeID] {
			s.Registry = append(s.Registry, Entity{NodeID: e.NodeID, Type: e.Type, CanonicalName: e.CanonicalName, Names: slices.Clone(e.Names), Properties: e.Properties})
		}
	}
	s.Normalize()
	return s, notes, nil
}

// closeOver adds to keep every document whose current ACTIVE state shares
// a node or an edge with a kept document's current state, until nothing
// more joins.
func closeOver(snap check.Snapshot, keep map[string]bool) {
	for grew := true; grew; {
		grew = false
		nodes, edges := map[string]bool{}, map[reference.EdgeKey]bool{}
		for _, st := range snap.States {
			if keep[st.DocumentID] {
				for _, n := range st.NodeIDs {
					nodes[n] = true
				}
				for _, k := range st.FactSources {
					edges[k] = true
				}
			}
		}
		for _, p := range snap.Plans {
			if keep[p.DocumentID] {
				for _, n := range p.Mutation.UpsertNodes {
					nodes[n.ID] = true
				}
				for _, e := range p.Mutation.UpsertEdges {
					edges[e.Key] = true
				}
				for _, k := range p.StaleEdges {
					edges[k] = true
				}
			}
		}
		for _, st := range snap.States {
			if keep[st.DocumentID] || st.Status != reference.DocActive {
				continue
			}
			shares := slices.ContainsFunc(st.NodeIDs, func(n string) bool { return nodes[n] }) ||
				slices.ContainsFunc(st.FactSources, func(k reference.EdgeKey) bool { return edges[k] })
			if shares {
				keep[st.DocumentID], grew = true, true
			}
		}
	}
}

func unscopeState(s reference.DocumentState, unscope func(string) string) reference.DocumentState {
	s.OperationID = unscope(s.OperationID)
	return s
}

func unscopePlan(p reference.Plan, unscope func(string) string) reference.Plan {
	p.OperationID, p.Mutation.OperationID = unscope(p.OperationID), unscope(p.Mutation.OperationID)
	if p.PreviousState != nil {
		s := unscopeState(*p.PreviousState, unscope)
		p.PreviousState = &s
	}
	if p.NextState != nil {
		s := unscopeState(*p.NextState, unscope)
		p.NextState = &s
	}
	return p
}
