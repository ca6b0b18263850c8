package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// graphDeletes are the SQLite statements of a mutation's deletions.
var graphDeletes = sqlcore.NewGraphDeletes(dialect)

// applyMutation is the Apply of the SQLite sqlcore.Writer, in one
// IMMEDIATE transaction. MERGE is an UPDATE of every row with the identity
// (patching the JSON properties) followed by an INSERT if none was
// updated; with Options.CreateInsteadOfMerge it always INSERTs.
func (d *db) applyMutation(ctx context.Context, space string, m reference.Mutation) error {
	create := d.opts.CreateInsteadOfMerge
	return d.tx(ctx, func(tx *sql.Tx) error {
		err := graphDeletes.Apply(space, m, func(query string, args ...any) error {
			_, err := tx.ExecContext(ctx, query, args...)
			return err
		})
		if err != nil {
			return err
		}
		if create {
			return createAll(ctx, tx, space, m)
		}
		return upsertAll(ctx, tx, space, m)
	})
}

// upsertAll merges the node and edge upserts of m in a few statements
// whatever its size: which nodes and edges exist is read at once, the
// existing ones are patched together (a JSON merge of string values: keys
// added or overwritten, none removed), the new ones inserted together.
// Upserts of one id within m apply in order (the first label stays).
func upsertAll(ctx context.Context, tx *sql.Tx, space string, m reference.Mutation) error {
	nodes := mergeUpserts(m.UpsertNodes, func(n reference.NodeUpsert) string { return n.ID },
		func(into *reference.NodeUpsert, n reference.NodeUpsert) {
			into.Properties = mergeProps(into.Properties, n.Properties)
		})
	ids := make([]string, 0, len(nodes)+2*len(m.UpsertEdges))
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	for _, e := range m.UpsertEdges {
		ids = append(ids, e.Key.Source, e.Key.Target)
	}
	present, err := existingNodes(ctx, tx, space, ids)
	if err != nil {
		return err
	}
	var patchRows, insertRows [][]any
	for _, n := range nodes {
		p, err := sqlcore.EncodeProps(n.Properties)
		if err != nil {
			return err
		}
		switch {
		case !present[n.ID]:
			insertRows = append(insertRows, []any{space, n.ID, n.Label, p})
			present[n.ID] = true
		case len(n.Properties) > 0:
			patchRows = append(patchRows, []any{n.ID, p})
		}
	}
	if err := execRows(ctx, tx, patchRows, `WITH v(id, p) AS (VALUES %s)
		UPDATE graph_nodes SET properties_json = json_patch(graph_nodes.properties_json, v.p) FROM v
		WHERE graph_nodes.space = ? AND graph_nodes.node_id = v.id`, space); err != nil {
		return err
	}
	if err := execRows(ctx, tx, insertRows, `INSERT INTO graph_nodes (space, node_id, label, properties_json) VALUES %s`); err != nil {
		return err
	}
	for _, e := range m.UpsertEdges {
		if !present[e.Key.Source] || !present[e.Key.Target] {
			return reference.MissingEndpoint(space, e.Key)
		}
	}
	edges := mergeUpserts(m.UpsertEdges, func(e reference.EdgeUpsert) reference.EdgeKey { return e.Key },
		func(into *reference.EdgeUpsert, e reference.EdgeUpsert) {
			into.Properties = mergeProps(into.Properties, e.Properties)
		})
	have, err := existingEdges(ctx, tx, space, edges)
	if err != nil {
		return err
	}
	patchRows, insertRows = nil, nil
	for _, e := range edges {
		k := e.Key
		p, err := sqlcore.EncodeProps(e.Properties)
		if err != nil {
			return err
		}
		switch {
		case !have[k]:
			insertRows = append(insertRows, []any{space, k.Source, k.Type, k.Target, k.Rank, p})
		case len(e.Properties) > 0:
			patchRows = append(patchRows, []any{k.Source, k.Type, k.Target, k.Rank, p})
		}
	}
	if err := execRows(ctx, tx, patchRows, `WITH v(source, type, target, rank, p) AS (VALUES %s)
		UPDATE graph_edges SET properties_json = json_patch(graph_edges.properties_json, v.p) FROM v
		WHERE graph_edges.space = ? AND graph_edges.source = v.source AND graph_edges.type = v.type
		AND graph_edges.target = v.target AND graph_edges.rank = v.rank`, space); err != nil {
		return err
	}
	return execRows(ctx, tx, insertRows, `INSERT INTO graph_edges (space, source, type, target, rank, properties_json) VALUES %s`)
}

// createAll is the CREATE-instead-of-MERGE mutant: every upsert inserts a
// row, duplicates included.
func createAll(ctx context.Context, tx *sql.Tx, space string, m reference.Mutation) error {
	var rows [][]any
	ids := make([]string, 0, len(m.UpsertNodes)+2*len(m.UpsertEdges))
	for _, n := range m.UpsertNodes {
		p, err := sqlcore.EncodeProps(n.Properties)
		if err != nil {
			return err
		}
		rows = append(rows, []any{space, n.ID, n.Label, p})
	}
	if err := execRows(ctx, tx, rows, `INSERT INTO graph_nodes (space, node_id, label, properties_json) VALUES %s`); err != nil {
		return err
	}
	for _, e := range m.UpsertEdges {
		ids = append(ids, e.Key.Source, e.Key.Target)
	}
	present, err := existingNodes(ctx, tx, space, ids)
	if err != nil {
		return err
	}
	rows = nil
	for _, e := range m.UpsertEdges {
		if !present[e.Key.Source] || !present[e.Key.Target] {
			return reference.MissingEndpoint(space, e.Key)
		}
		p, err := sqlcore.EncodeProps(e.Properties)
		if err != nil {
			return err
		}
		rows = append(rows, []any{space, e.Key.Source, e.Key.Type, e.Key.Target, e.Key.Rank, p})
	}
	return execRows(ctx, tx, rows, `INSERT INTO graph_edges (space, source, type, target, rank, properties_json) VALUES %s`)
}

// mergeUpserts folds upserts of one identity into the first, in order.
func mergeUpserts[T any, K comparable](xs []T, key func(T) K, merge func(into *T, x T)) []T {
	out := make([]T, 0, len(xs))
	at := make(map[K]int, len(xs))
	for _, x := range xs {
		if i, ok := at[key(x)]; ok {
			merge(&out[i], x)
			continue
		}
		at[key(x)] = len(out)
		out = append(out, x)
	}
	return out
}

// mergeProps returns a copy of a with b's keys added or overwritten.
func mergeProps(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// execRows runs query (whose %s takes the VALUES groups) over rows, in
// statements of at most maxRowsPerStatement rows; after are the
// parameters that follow the groups.
func execRows(ctx context.Context, tx *sql.Tx, rows [][]any, query string, after ...any) error {
	for part := range slices.Chunk(rows, maxRowsPerStatement) {
		args := make([]any, 0, len(part)*len(part[0])+len(after))
		for _, r := range part {
			args = append(args, r...)
		}
		args = append(args, after...)
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(query, placeholders(len(part), len(part[0]))), args...); err != nil {
			return err
		}
	}
	return nil
}

// existingNodes reports which of ids are nodes of space.
func existingNodes(ctx context.Context, tx *sql.Tx, space string, ids []string) (map[string]bool, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	present := make(map[string]bool, len(ids))
	for part := range slices.Chunk(ids, maxRowsPerStatement) {
		args := []any{space}
		for _, id := range part {
			args = append(args, id)
		}
		err := scanRows(ctx, tx, `SELECT node_id FROM graph_nodes WHERE space = ? AND node_id IN (?`+strings.Repeat(", ?", len(part)-1)+`)`, args,
			func(rows *sql.Rows) error {
				var id string
				err := rows.Scan(&id)
				present[id] = true
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return present, nil
}

// existingEdges reports which of edges' keys are edges of space.
func existingEdges(ctx context.Context, tx *sql.Tx, space string, edges []reference.EdgeUpsert) (map[reference.EdgeKey]bool, error) {
	have := make(map[reference.EdgeKey]bool, len(edges))
	for part := range slices.Chunk(edges, maxRowsPerStatement) {
		args := []any{space}
		for _, e := range part {
			args = append(args, e.Key.Source, e.Key.Type, e.Key.Target, e.Key.Rank)
		}
		err := scanRows(ctx, tx, `SELECT source, type, target, rank FROM graph_edges
			WHERE space = ? AND (source, type, target, rank) IN (VALUES `+placeholders(len(part), 4)+`)`, args,
			func(rows *sql.Rows) error {
				var k reference.EdgeKey
				err := rows.Scan(&k.Source, &k.Type, &k.Target, &k.Rank)
				have[k] = true
				return err
			})
		if err != nil {
			return nil, err
		}
	}
	return have, nil
}

// scanRows runs query and calls row for each result row.
func scanRows(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args []any, row func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqlcore.Each(rows, func(sqlcore.Row) error { return row(rows) })
}

// snapshot is the Snapshot of the SQLite sqlcore.Writer: f runs in one
// read transaction, retried whole on SQLITE_BUSY.
func (d *db) snapshot(ctx context.Context, op, ids string, f func(q sqlcore.Querier) error) error {
	return wrap(op, ids, d.retry(ctx, func() error {
		tx, err := d.sql.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		return f(func(query string, args []any, row func(sqlcore.Row) error) error {
			return scanRows(ctx, tx, query, args, func(r *sql.Rows) error { return row(r) })
		})
	}))
}
