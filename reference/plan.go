package reference

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Plan builds the plan of an ingestion request against the current state of
// the document. It returns a NO_OP plan without calling the model when the
// current state already holds this content from this model.
func (s *Service) Plan(ctx context.Context, req IngestRequest) (Plan, error) {
	if err := CheckKey(req.Space, req.DocumentID); err != nil {
		return Plan{}, err
	}
	cur, ok, err := s.States.FindCurrent(ctx, req.Space, req.DocumentID)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s/%s: %w", req.Space, req.DocumentID, err)
	}
	return s.planOn(ctx, req, cur, ok)
}

// planOn is Plan against a current state already read (ok: the document
// exists), so that an operationId derived from that read and the plan
// agree on the revision (derive.go).
func (s *Service) planOn(ctx context.Context, req IngestRequest, cur DocumentState, ok bool) (Plan, error) {
	hash := ContentHash(req.Content)
	var prev *DocumentState
	if ok {
		prev = &cur
	}
	if ok && (cur.Status == DocActive || s.has(BugNoOpIgnoresRetraction)) && cur.ContentHash == hash && cur.ExtractionFingerprint == s.model() {
		return Plan{Kind: NoOp, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID,
			Options: GraphOptions{Space: req.Space}, Mutation: Mutation{OperationID: req.OperationID}, PreviousState: prev, Content: req.Content}, nil
	}
	var ex Extraction
	err := s.at(ctx, faults.BeforeExtract, func() error {
		var e error
		ex, e = s.Extractor.Extract(ctx, ExtractRequest(req))
		return e
	})
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: model: %w", req.OperationID, err)
	}
	s.emit(Event{Kind: EvModelCall, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID, Detail: fmt.Sprint(ex.Call)})
	return s.buildPlan(ctx, req, prev, hash, ex)
}

func (s *Service) buildPlan(ctx context.Context, req IngestRequest, prev *DocumentState, hash string, ex Extraction) (Plan, error) {
	ids := map[string]string{} // normalised type+name -> node id
	key := func(t, n string) string { return Normalize(t) + "\n" + Normalize(n) }
	m := Mutation{OperationID: req.OperationID}
	var regs []EntityRegistration
	nodeIDs := map[string]bool{}
	queries := make([]EntityQuery, len(ex.Entities))
	for i, e := range ex.Entities {
		queries[i] = EntityQuery{Type: e.Type, Names: append([]string{e.Name}, e.Aliases...)}
	}
	matches, err := MatchNodeIDs(ctx, s.Registry, req.Space, queries)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %s: registry: %w", req.OperationID, err)
	}
	for i, e := range ex.Entities {
		id := NodeID(e.Type, e.Name)
		if s.has(BugNodeIDIgnoresCase) {
			id = nodeIDOf(e.Type, strings.TrimSpace(e.Name))
		}
		if len(matches[i]) > 1 {
			return Plan{}, fmt.Errorf("plan %s: %w: %s:%s matches %d registered entities", req.OperationID, ErrRegistryConflict, e.Type, e.Name, len(matches[i]))
		}
		if len(matches[i]) == 1 {
			id = matches[i][0]
		}
		ids[key(e.Type, e.Name)] = id
		for _, a := range e.Aliases {
			ids[key(e.Type, a)] = id
		}
		props := map[string]string{"name": e.Name}
		for k, v := range e.Properties {
			props[k] = v
		}
		if !nodeIDs[id] {
			m.UpsertNodes = append(m.UpsertNodes, NodeUpsert{ID: id, Label: e.Type, Properties: props})
			regs = append(regs, EntityRegistration{NodeID: id, Type: e.Type, CanonicalName: e.Name, Aliases: e.Aliases})
		}
		nodeIDs[id] = true
	}
	seen := map[EdgeKey]bool{}
	var facts []EdgeKey
	for _, r := range ex.Relations {
		k := EdgeKey{Source: ids[key(r.SourceType, r.SourceName)], Type: r.Type, Target: ids[key(r.TargetType, r.TargetName)]}
		if k.Source == "" || k.Target == "" || seen[k] {
			continue
		}
		seen[k] = true
		facts = append(facts, k)
		m.UpsertEdges = append(m.UpsertEdges, EdgeUpsert{Key: k, Properties: r.Properties})
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].Less(facts[j]) })
	var stale []EdgeKey
	if prev != nil {
		for _, k := range prev.FactSources {
			if !seen[k] {
				stale = append(stale, k)
			}
		}
	}
	m.DeleteEdges = append(m.DeleteEdges, stale...)
	rev := int64(1)
	if prev != nil {
		rev = prev.Revision + 1
	}
	sortedIDs := make([]string, 0, len(nodeIDs))
	for id := range nodeIDs {
		sortedIDs = append(sortedIDs, id)
	}
	sort.Strings(sortedIDs)
	next := &DocumentState{Space: req.Space, DocumentID: req.DocumentID, Revision: rev, OperationID: req.OperationID,
		ContentHash: hash, ExtractionFingerprint: firstNonEmpty(ex.Model, s.model()), Status: DocActive,
		FactSources: facts, NodeIDs: sortedIDs}
	p := Plan{Kind: Ingestion, OperationID: req.OperationID, Space: req.Space, DocumentID: req.DocumentID,
		Options: GraphOptions{Space: req.Space}, Mutation: m, PreviousState: prev, NextState: next,
		StaleEdges: stale, Registrations: regs, Content: req.Content, ExtractionCall: ex.Call}
	return p, p.Validate()
}
