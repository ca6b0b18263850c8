package memory

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/crashmatrix/crashmatrix/reference"
)

type nodeRow struct {
	id, label string
	props     map[string]string
}

type edgeRow struct {
	key   reference.EdgeKey
	props map[string]string
}

type graphSpace struct {
	nodes []nodeRow
	edges []edgeRow
}

func (g *graphSpace) clone() *graphSpace {
	c := &graphSpace{nodes: make([]nodeRow, len(g.nodes)), edges: make([]edgeRow, len(g.edges))}
	for i, n := range g.nodes {
		c.nodes[i] = nodeRow{n.id, n.label, maps.Clone(n.props)}
	}
	for i, e := range g.edges {
		c.edges[i] = edgeRow{e.key, maps.Clone(e.props)}
	}
	return c
}

// Writer is an in-memory reference.GraphWriter. Nodes and edges are kept as
// lists (not maps keyed by identity) so the CreateInsteadOfMerge mutant can
// store duplicates, which Duplicates reports.
type Writer struct {
	mu     sync.Mutex
	opts   Options
	spaces map[string]*graphSpace
}

// NewWriter returns an empty graph writer.
func NewWriter(opts Options) *Writer {
	return &Writer{opts: opts, spaces: map[string]*graphSpace{}}
}

// Apply implements reference.GraphWriter.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := reference.CheckMutation(space, m); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.spaces[space]
	if cur == nil {
		cur = &graphSpace{}
	}
	g := cur.clone() // work on a copy: all or nothing
	for _, id := range m.DeleteNodes {
		g.nodes = slices.DeleteFunc(g.nodes, func(n nodeRow) bool { return n.id == id })
		g.edges = slices.DeleteFunc(g.edges, func(e edgeRow) bool { return e.key.Source == id || e.key.Target == id })
	}
	for _, k := range m.DeleteEdges {
		g.edges = slices.DeleteFunc(g.edges, func(e edgeRow) bool { return e.key == k })
	}
	create := w.opts.CreateInsteadOfMerge
	for _, n := range m.UpsertNodes {
		g.nodes = upsert(g.nodes, create, n.Properties, func(r nodeRow) bool { return r.id == n.ID },
			func(r *nodeRow) map[string]string { return r.props },
			func(p map[string]string) nodeRow { return nodeRow{n.ID, n.Label, p} })
	}
	exists := map[string]bool{}
	for _, n := range g.nodes {
		exists[n.id] = true
	}
	for _, e := range m.UpsertEdges {
		if !exists[e.Key.Source] || !exists[e.Key.Target] {
			return reference.MissingEndpoint(space, e.Key)
		}
	}
	for _, e := range m.UpsertEdges {
		g.edges = upsert(g.edges, create, e.Properties, func(r edgeRow) bool { return r.key == e.Key },
			func(r *edgeRow) map[string]string { return r.props },
			func(p map[string]string) edgeRow { return edgeRow{e.Key, p} })
	}
	w.spaces[space] = g
	return nil
}

// upsert merges props into every row that match selects (MERGE), or
// appends the row newRow makes with a copy of props when none matched or
// create is set (the CREATE-instead-of-MERGE mutant).
func upsert[R any](rows []R, create bool, props map[string]string, match func(R) bool, propsOf func(*R) map[string]string, newRow func(map[string]string) R) []R {
	merged := false
	if !create {
		for i := range rows {
			if match(rows[i]) {
				maps.Copy(propsOf(&rows[i]), props)
				merged = true
			}
		}
	}
	if merged {
		return rows
	}
	p := maps.Clone(props)
	if p == nil {
		p = map[string]string{}
	}
	return append(rows, newRow(p))
}

// ReadGraph implements reference.GraphWriter: the fold of ReadRecords.
func (w *Writer) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	r, err := w.ReadRecords(ctx, space)
	if err != nil {
		return reference.Graph{}, err
	}
	return r.Graph(), nil
}

// ReadRecords implements reference.GraphWriter: every stored row (the
// CreateInsteadOfMerge mutant stores copies), detached from the store.
func (w *Writer) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.GraphRecords{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out reference.GraphRecords
	g := w.spaces[space]
	if g == nil {
		return out, nil
	}
	for _, n := range g.nodes {
		out.Nodes = append(out.Nodes, reference.Node{ID: n.id, Label: n.label, Properties: maps.Clone(n.props)})
	}
	for _, e := range g.edges {
		out.Edges = append(out.Edges, reference.Edge{Key: e.key, Properties: maps.Clone(e.props)})
	}
	return out, nil
}
