package neo4j

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/crashmatrix/crashmatrix/reference"
)

func userProps(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[PropertyPrefix+k] = v
	}
	return out
}

// Apply implements reference.GraphWriter in one write transaction: an edge
// with a missing endpoint rolls back all of m and returns an error wrapping
// reference.ErrMissingEndpoint.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := reference.CheckMutation(space, m); err != nil {
		return err
	}
	if m.Empty() {
		return nil
	}
	type stmt struct {
		cypher string
		params map[string]any
	}
	var before, after []stmt
	if len(m.DeleteNodes) > 0 {
		before = append(before, stmt{w.q.deleteNodes, map[string]any{"space": space, "ids": slices.Clone(m.DeleteNodes)}})
	}
	if len(m.DeleteEdges) > 0 {
		edges := make([]any, len(m.DeleteEdges))
		for i, k := range m.DeleteEdges {
			edges[i] = map[string]any{"source": k.Source, "type": k.Type, "target": k.Target, "rank": k.Rank}
		}
		before = append(before, stmt{w.q.deleteEdges, map[string]any{"space": space, "edges": edges}})
	}
	if len(m.UpsertNodes) > 0 {
		nodes := make([]any, len(m.UpsertNodes))
		for i, n := range m.UpsertNodes {
			nodes[i] = map[string]any{"id": n.ID, "label": n.Label, "props": userProps(n.Properties)}
		}
		before = append(before, stmt{w.q.upsertNodes, map[string]any{"space": space, "nodes": nodes}})
	}
	var endpoints []any
	if len(m.UpsertEdges) > 0 {
		seen := map[string]bool{}
		edges := make([]any, len(m.UpsertEdges))
		for i, e := range m.UpsertEdges {
			k := e.Key
			edges[i] = map[string]any{"source": k.Source, "type": k.Type, "target": k.Target, "rank": k.Rank, "props": userProps(e.Properties)}
			for _, id := range []string{k.Source, k.Target} {
				if !seen[id] {
					seen[id] = true
					endpoints = append(endpoints, id)
				}
			}
		}
		after = append(after, stmt{w.q.upsertEdges, map[string]any{"space": space, "edges": edges}})
	}
	s := w.session(ctx, driver.AccessModeWrite)
	defer s.Close(ctx)
	_, err := s.ExecuteWrite(ctx, func(tx driver.ManagedTransaction) (any, error) {
		run := func(st stmt) error {
			res, err := tx.Run(ctx, st.cypher, st.params)
			if err != nil {
				return err
			}
			_, err = res.Consume(ctx)
			return err
		}
		if err := run(stmt{w.q.gate, map[string]any{"space": space}}); err != nil {
			return nil, err
		}
		for _, st := range before {
			if err := run(st); err != nil {
				return nil, err
			}
		}
		if len(endpoints) > 0 {
			res, err := tx.Run(ctx, w.q.missing, map[string]any{"space": space, "ids": endpoints})
			if err != nil {
				return nil, err
			}
			recs, err := res.Collect(ctx)
			if err != nil {
				return nil, err
			}
			if len(recs) > 0 {
				missing := map[string]bool{}
				for _, r := range recs {
					id, _ := r.Values[0].(string)
					missing[id] = true
				}
				for _, e := range m.UpsertEdges {
					if missing[e.Key.Source] || missing[e.Key.Target] {
						// Returning an error rolls the transaction back.
						return nil, reference.MissingEndpoint(space, e.Key)
					}
				}
			}
		}
		for _, st := range after {
			if err := run(st); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		if errors.Is(err, reference.ErrMissingEndpoint) {
			return err
		}
		return w.wrap("apply to space "+space, err)
	}
	return nil
}

// scan reads every node and edge of a space in one transaction holding the
// space's gate; reset is called before each (re)try of the transaction.
func (w *Writer) scan(ctx context.Context, space string, reset func(),
	node func(id, label string, props map[string]string), edge func(k reference.EdgeKey, props map[string]string)) error {
	p := map[string]any{"space": space}
	var err error
	if w.readOnly {
		// A read-only handle writes nothing, so it cannot take the gate:
		// its reads are consistent only on a graph nobody writes.
		s := w.session(ctx, driver.AccessModeRead)
		defer s.Close(ctx)
		_, err = s.ExecuteRead(ctx, func(tx driver.ManagedTransaction) (any, error) {
			return nil, w.scanOnce(ctx, tx, p, reset, node, edge)
		})
		if err != nil {
			return w.wrap("read space "+space, err)
		}
		return nil
	}
	// A write transaction: it takes the space's gate, so no Apply commits
	// between the node scan and the edge scan.
	s := w.session(ctx, driver.AccessModeWrite)
	defer s.Close(ctx)
	_, err = s.ExecuteWrite(ctx, func(tx driver.ManagedTransaction) (any, error) {
		res, err := tx.Run(ctx, w.q.gate, p)
		if err != nil {
			return nil, err
		}
		if _, err := res.Consume(ctx); err != nil {
			return nil, err
		}
		return nil, w.scanOnce(ctx, tx, p, reset, node, edge)
	})
	if err != nil {
		return w.wrap("read space "+space, err)
	}
	return nil
}

// scanOnce reads the nodes, then the edges, of a space.
func (w *Writer) scanOnce(ctx context.Context, tx driver.ManagedTransaction, p map[string]any, reset func(),
	node func(id, label string, props map[string]string), edge func(k reference.EdgeKey, props map[string]string)) error {
	reset()
	res, err := tx.Run(ctx, w.q.readNodes, p)
	if err != nil {
		return err
	}
	for res.Next(ctx) {
		v := res.Record().Values
		id, _ := v[0].(string)
		label, _ := v[1].(string)
		node(id, label, readProps(v[2]))
	}
	if err := res.Err(); err != nil {
		return err
	}
	res, err = tx.Run(ctx, w.q.readEdges, p)
	if err != nil {
		return err
	}
	for res.Next(ctx) {
		v := res.Record().Values
		var k reference.EdgeKey
		k.Source, _ = v[0].(string)
		k.Type, _ = v[1].(string)
		k.Target, _ = v[2].(string)
		k.Rank, _ = v[3].(int64)
		edge(k, readProps(v[4]))
	}
	return res.Err()
}

// readProps extracts the user properties (PropertyPrefix stripped) of a
// stored property map; the result is never nil.
func readProps(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, x := range m {
		if name, ok := strings.CutPrefix(k, PropertyPrefix); ok {
			if s, ok := x.(string); ok {
				out[name] = s
			} else {
				out[name] = fmt.Sprint(x)
			}
		}
	}
	return out
}

// ReadGraph implements reference.GraphWriter. Duplicates (only the
// CreateInsteadOfMerge mutant makes them) are folded, the properties of
// later copies winning; Properties maps are never nil.
func (w *Writer) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	var g reference.Graph
	err := w.scan(ctx, space, func() { g = reference.NewGraph() }, func(id, label string, props map[string]string) {
		if cur, ok := g.Nodes[id]; ok {
			maps.Copy(cur.Properties, props)
			return
		}
		g.Nodes[id] = reference.Node{ID: id, Label: label, Properties: props}
	}, func(k reference.EdgeKey, props map[string]string) {
		if cur, ok := g.Edges[k]; ok {
			maps.Copy(cur.Properties, props)
			return
		}
		g.Edges[k] = reference.Edge{Key: k, Properties: props}
	})
	if err != nil {
		return reference.Graph{}, err
	}
	return g, nil
}

// ReadRecords implements reference.GraphWriter: every node and
// relationship stored for the space, copies included (only the
// CreateInsteadOfMerge mutant makes them).
func (w *Writer) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	var r reference.GraphRecords
	err := w.scan(ctx, space, func() { r = reference.GraphRecords{} }, func(id, label string, props map[string]string) {
		r.Nodes = append(r.Nodes, reference.Node{ID: id, Label: label, Properties: props})
	}, func(k reference.EdgeKey, props map[string]string) {
		r.Edges = append(r.Edges, reference.Edge{Key: k, Properties: props})
	})
	if err != nil {
		return reference.GraphRecords{}, err
	}
	return r, nil
}

// Duplicates lists the node ids and edge keys stored more than once
// (ReadRecords, then GraphRecords.Duplicates): entries like "node
// person:abc x2".
func (w *Writer) Duplicates(ctx context.Context, space string) ([]string, error) {
	r, err := w.ReadRecords(ctx, space)
	if err != nil {
		return nil, err
	}
	return r.Duplicates(), nil
}
