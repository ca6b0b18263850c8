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

	"github.com/crashmatrix/crashmatrix/reference"
)

// Scan visits every node row, then every edge row, of a space in one
// consistent read; reset is called before each attempt (a retried read
// starts over).
type Scan func(reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error

// EncodeProps renders properties as a JSON object ("{}" for none).
func EncodeProps(m map[string]string) (string, error) {
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// DecodeProps reads properties written by EncodeProps; never nil.
func DecodeProps(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("properties %q: %w", s, err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

// Read builds the graph of a scan; a duplicated row folds into one, the
// last stored winning.
func Read(scan Scan) (reference.Graph, error) {
	g, _, err := ReadWithDuplicates(scan)
	return g, err
}

// ReadWithDuplicates is Read and Duplicates from one scan.
func ReadWithDuplicates(scan Scan) (reference.Graph, []string, error) {
	var g reference.Graph
	var nodes map[string]int
	var edges map[reference.EdgeKey]int
	err := scan(func() {
		g, nodes, edges = reference.NewGraph(), map[string]int{}, map[reference.EdgeKey]int{}
	}, func(id, label, props string) error {
		nodes[id]++
		p, err := DecodeProps(props)
		g.Nodes[id] = reference.Node{ID: id, Label: label, Properties: p}
		return err
	}, func(k reference.EdgeKey, props string) error {
		edges[k]++
		p, err := DecodeProps(props)
		g.Edges[k] = reference.Edge{Key: k, Properties: p}
		return err
	})
	if err != nil {
		return reference.Graph{}, nil, err
	}
	return g, reference.FormatDuplicates(nodes, edges), nil
}

// Duplicates reports the identities a scan saw more than once, formatted
// as every writer reports them (reference.FormatDuplicates).
func Duplicates(scan Scan) ([]string, error) {
	_, d, err := ReadWithDuplicates(scan)
	return d, err
}

// SpaceScan reads every node and edge row of one space, as Scan does.
type SpaceScan func(ctx context.Context, space string, reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error

// Reader gives a SQL graph writer its read-back methods, all from its one
// scan of a space.
type Reader struct{ Scan SpaceScan }

// ReadGraph implements reference.GraphWriter. Duplicates are folded, the
// last stored row winning; Properties maps are never nil.
func (r Reader) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	return Read(r.bind(ctx, space))
}

// ReadGraphAndDuplicates implements check.GraphDuplicateReader: one scan.
func (r Reader) ReadGraphAndDuplicates(ctx context.Context, space string) (reference.Graph, []string, error) {
	return ReadWithDuplicates(r.bind(ctx, space))
}

// Duplicates implements the duplicate report: entries like "node
// person:abc x2" and "edge (a)-[KNOWS#0]->(b) x3", nodes first, each group
// sorted (reference.FormatDuplicates).
func (r Reader) Duplicates(ctx context.Context, space string) ([]string, error) {
	return Duplicates(r.bind(ctx, space))
}

func (r Reader) bind(ctx context.Context, space string) Scan {
	return func(reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error {
		return r.Scan(ctx, space, reset, node, edge)
	}
}
