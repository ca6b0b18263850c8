package sqlcore

// What the SQL graph writers share: the property encoding of their node and
// edge rows, and building a graph or a duplicate report from a scan of
// those rows. Rows carry no unique constraint on identity (so the
// CREATE-instead-of-MERGE mutant can store duplicates); a scan reports them
// in insertion order.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/reference"
)

// EncodeProps renders properties as a JSON object ("{}" for none).
func EncodeProps(m map[string]string) (string, error) {
	if m == nil {
		return "{}", nil
	}
	return string(strictjson.AppendStringMap(nil, m)), nil
}

// DecodeProps reads properties written by EncodeProps; never nil.
func DecodeProps(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	// EncodeProps's form read without reflection; anything else (white
	// space, a repeated key) is encoding/json's.
	if d := (strictjson.Decoder{B: []byte(s)}); d.StringMap(&m) && d.I == len(d.B) {
		return m, nil
	}
	m = map[string]string{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("properties %q: %w", s, err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

// readRecords lists every row of a scan, in the order stored.
func readRecords(scan func(reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error) (reference.GraphRecords, error) {
	var r reference.GraphRecords
	err := scan(func() {
		r = reference.GraphRecords{}
	}, func(id, label, props string) error {
		p, err := DecodeProps(props)
		r.Nodes = append(r.Nodes, reference.Node{ID: id, Label: label, Properties: p})
		return err
	}, func(k reference.EdgeKey, props string) error {
		p, err := DecodeProps(props)
		r.Edges = append(r.Edges, reference.Edge{Key: k, Properties: p})
		return err
	})
	if err != nil {
		return reference.GraphRecords{}, err
	}
	return r, nil
}

// Querier runs one statement of a transaction and calls row for each
// result row.
type Querier func(query string, args []any, row func(Row) error) error

// Snapshot runs f on one consistent read-only snapshot of the adapter's
// database, retried as the adapter needs (f starts over), its errors
// wrapped with op and ids.
type Snapshot func(ctx context.Context, op, ids string, f func(q Querier) error) error

// Apply applies a checked mutation to a space in one transaction of the
// adapter: an edge with a missing endpoint (reference.MissingEndpoint)
// rolls all of it back.
type Apply func(ctx context.Context, space string, m reference.Mutation) error

// Writer is a reference.GraphWriter on the {graph_nodes} and
// {graph_edges} tables: Apply checks the mutation and hands it to the
// adapter's transaction; the read-back (every record) is one snapshot
// read of both tables in insertion order.
type Writer struct {
	apply        Apply
	snapshot     Snapshot
	nodes, edges string
}

// NewWriter returns the writer of an adapter's apply and snapshot.
func NewWriter(apply Apply, snapshot Snapshot, d Dialect) *Writer {
	return &Writer{apply: apply, snapshot: snapshot,
		nodes: d.SQL(`SELECT node_id, label, properties_json FROM {graph_nodes} WHERE space = ? ORDER BY seq`),
		edges: d.SQL(`SELECT source, type, target, rank, properties_json FROM {graph_edges} WHERE space = ? ORDER BY seq`),
	}
}

var (
	_ reference.GraphWriter = (*Writer)(nil)
)

// Apply implements reference.GraphWriter.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := reference.CheckMutation(space, m); err != nil {
		return err
	}
	return w.apply(ctx, space, m)
}

// scan reads every node row, then every edge row, of a space in one
// snapshot; reset is called before each attempt.
func (w *Writer) scan(ctx context.Context, space string) func(reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error {
	return func(reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error {
		return w.snapshot(ctx, "graph.read", "space "+space, func(q Querier) error {
			reset()
			if err := q(w.nodes, []any{space}, func(r Row) error {
				var id, label, props string
				if err := r.Scan(&id, &label, &props); err != nil {
					return err
				}
				return node(id, label, props)
			}); err != nil {
				return err
			}
			return q(w.edges, []any{space}, func(r Row) error {
				var k reference.EdgeKey
				var props string
				if err := r.Scan(&k.Source, &k.Type, &k.Target, &k.Rank, &props); err != nil {
					return err
				}
				return edge(k, props)
			})
		})
	}
}

// ReadGraph implements reference.GraphWriter: the fold of ReadRecords
// (a duplicated row folds into one, the last stored winning).
func (w *Writer) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	r, err := w.ReadRecords(ctx, space)
	if err != nil {
		return reference.Graph{}, err
	}
	return r.Graph(), nil
}

// ReadRecords implements reference.GraphWriter: one snapshot read of every
// node row, then every edge row, of a space.
func (w *Writer) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	return readRecords(w.scan(ctx, space))
}

// GraphDeletes are the deletions of a mutation, written for one dialect.
type GraphDeletes struct{ edgesOf, node, edge string }

// NewGraphDeletes writes the deletion statements for d.
func NewGraphDeletes(d Dialect) GraphDeletes {
	return GraphDeletes{
		edgesOf: d.SQL(`DELETE FROM {graph_edges} WHERE space = ? AND (source = ? OR target = ?)`),
		node:    d.SQL(`DELETE FROM {graph_nodes} WHERE space = ? AND node_id = ?`),
		edge:    d.SQL(`DELETE FROM {graph_edges} WHERE space = ? AND source = ? AND type = ? AND target = ? AND rank = ?`),
	}
}

// Apply runs m's deletions with exec (one statement of the adapter's
// transaction): each deleted node with every edge touching it, then each
// deleted edge. Deleting what is absent changes nothing.
func (g GraphDeletes) Apply(space string, m reference.Mutation, exec func(query string, args ...any) error) error {
	for _, id := range m.DeleteNodes {
		if err := exec(g.edgesOf, space, id, id); err != nil {
			return err
		}
		if err := exec(g.node, space, id); err != nil {
			return err
		}
	}
	for _, k := range m.DeleteEdges {
		if err := exec(g.edge, space, k.Source, k.Type, k.Target, k.Rank); err != nil {
			return err
		}
	}
	return nil
}
