package postgres

import (
	"context"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Writer is a reference.GraphWriter on PostgreSQL tables. There is no
// unique constraint on node and edge identities; instead every Apply runs
// in one transaction holding a per-space advisory lock, and MERGE is an
// UPDATE of every row with the identity (patching the JSON properties)
// followed by an INSERT if none was updated. With
// Options.CreateInsteadOfMerge it always INSERTs (a mutant).
type Writer struct {
	d              *db
	sqlcore.Reader // ReadGraph, ReadGraphAndDuplicates, Duplicates
}

func newWriter(d *db) *Writer {
	w := &Writer{d: d}
	w.Reader = sqlcore.Reader{Scan: w.scan}
	return w
}

func (w *Writer) patch(ctx context.Context, tx pgx.Tx, sel, upd string, props map[string]string, selArgs ...any) (int, error) {
	rows, err := tx.Query(ctx, sel, selArgs...)
	if err != nil {
		return 0, err
	}
	type row struct {
		seq   int64
		props string
	}
	var found []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.props); err != nil {
			rows.Close()
			return 0, err
		}
		found = append(found, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(props) == 0 {
		return len(found), nil
	}
	for _, r := range found {
		m, err := sqlcore.DecodeProps(r.props)
		if err != nil {
			return 0, err
		}
		maps.Copy(m, props)
		p, err := sqlcore.EncodeProps(m)
		if err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, upd, p, r.seq); err != nil {
			return 0, err
		}
	}
	return len(found), nil
}

const graphLockKey = "crashmatrix-graph:"

// Apply implements reference.GraphWriter in one transaction serialised per
// space by pg_advisory_xact_lock: an edge with a missing endpoint rolls back
// all of m.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := reference.CheckMutation(space, m); err != nil {
		return err
	}
	create := w.d.opts.CreateInsteadOfMerge
	err := w.d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1 || current_schema() || $2))`, graphLockKey, space); err != nil {
			return err
		}
		for _, id := range m.DeleteNodes {
			if _, err := tx.Exec(ctx, `DELETE FROM crashmatrix_graph_edges WHERE space = $1 AND (source = $2 OR target = $2)`, space, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2`, space, id); err != nil {
				return err
			}
		}
		for _, k := range m.DeleteEdges {
			if _, err := tx.Exec(ctx, `DELETE FROM crashmatrix_graph_edges WHERE space = $1 AND source = $2 AND type = $3 AND target = $4 AND rank = $5`,
				space, k.Source, k.Type, k.Target, k.Rank); err != nil {
				return err
			}
		}
		for _, n := range m.UpsertNodes {
			found := 0
			if !create {
				var err error
				found, err = w.patch(ctx, tx, `SELECT seq, properties_json FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2 ORDER BY seq`,
					`UPDATE crashmatrix_graph_nodes SET properties_json = $1 WHERE seq = $2`, n.Properties, space, n.ID)
				if err != nil {
					return err
				}
			}
			if found == 0 {
				p, err := sqlcore.EncodeProps(n.Properties)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO crashmatrix_graph_nodes (space, node_id, label, properties_json) VALUES ($1, $2, $3, $4)`,
					space, n.ID, n.Label, p); err != nil {
					return err
				}
			}
		}
		for _, e := range m.UpsertEdges {
			for _, id := range []string{e.Key.Source, e.Key.Target} {
				var ok bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2)`,
					space, id).Scan(&ok); err != nil {
					return err
				}
				if !ok {
					return reference.MissingEndpoint(space, e.Key)
				}
			}
		}
		for _, e := range m.UpsertEdges {
			k := e.Key
			found := 0
			if !create {
				var err error
				found, err = w.patch(ctx, tx, `SELECT seq, properties_json FROM crashmatrix_graph_edges
					WHERE space = $1 AND source = $2 AND type = $3 AND target = $4 AND rank = $5 ORDER BY seq`,
					`UPDATE crashmatrix_graph_edges SET properties_json = $1 WHERE seq = $2`, e.Properties, space, k.Source, k.Type, k.Target, k.Rank)
				if err != nil {
					return err
				}
			}
			if found == 0 {
				p, err := sqlcore.EncodeProps(e.Properties)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO crashmatrix_graph_edges (space, source, type, target, rank, properties_json)
					VALUES ($1, $2, $3, $4, $5, $6)`, space, k.Source, k.Type, k.Target, k.Rank, p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return w.d.wrap("graph.apply", fmt.Sprintf("space %s operation %s", space, m.OperationID), err)
}

// scan reads every node and edge row of a space, in insertion order, in one
// REPEATABLE READ snapshot.
func (w *Writer) scan(ctx context.Context, space string, reset func(), node func(id, label, props string) error, edge func(k reference.EdgeKey, props string) error) error {
	err := pgx.BeginTxFunc(ctx, w.d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		reset()
		rows, err := tx.Query(ctx, `SELECT node_id, label, properties_json FROM crashmatrix_graph_nodes WHERE space = $1 ORDER BY seq`, space)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, label, props string
			if err := rows.Scan(&id, &label, &props); err != nil {
				rows.Close()
				return err
			}
			if err := node(id, label, props); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT source, type, target, rank, properties_json FROM crashmatrix_graph_edges WHERE space = $1 ORDER BY seq`, space)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k reference.EdgeKey
			var props string
			if err := rows.Scan(&k.Source, &k.Type, &k.Target, &k.Rank, &props); err != nil {
				return err
			}
			if err := edge(k, props); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return w.d.wrap("graph.read", "space "+space, err)
}
