package postgres

import (
	"context"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// graphDeletes are the PostgreSQL statements of a mutation's deletions.
var graphDeletes = sqlcore.NewGraphDeletes(dialect)

// patch merges props into every row sel finds, with upd; it returns how
// many rows it found.
func patch(ctx context.Context, tx pgx.Tx, sel, upd string, props map[string]string, selArgs ...any) (int, error) {
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

// applyMutation is the Apply of the PostgreSQL sqlcore.Writer. There is
// no unique constraint on node and edge identities; instead every Apply
// runs in one transaction holding a per-space advisory lock, and MERGE is
// an UPDATE of every row with the identity (patching the JSON properties)
// followed by an INSERT if none was updated. With
// Options.CreateInsteadOfMerge it always INSERTs (a mutant).
func (d *db) applyMutation(ctx context.Context, space string, m reference.Mutation) error {
	create := d.opts.CreateInsteadOfMerge
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1 || current_schema() || $2))`, graphLockKey, space); err != nil {
			return err
		}
		err := graphDeletes.Apply(space, m, func(query string, args ...any) error {
			_, err := tx.Exec(ctx, query, args...)
			return err
		})
		if err != nil {
			return err
		}
		for _, n := range m.UpsertNodes {
			found := 0
			if !create {
				var err error
				found, err = patch(ctx, tx, `SELECT seq, properties_json FROM crashmatrix_graph_nodes WHERE space = $1 AND node_id = $2 ORDER BY seq`,
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
				found, err = patch(ctx, tx, `SELECT seq, properties_json FROM crashmatrix_graph_edges
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
	return d.wrap("graph.apply", fmt.Sprintf("space %s operation %s", space, m.OperationID), err)
}

// snapshot is the Snapshot of the PostgreSQL sqlcore.Writer: f runs in
// one REPEATABLE READ read-only transaction.
func (d *db) snapshot(ctx context.Context, op, ids string, f func(q sqlcore.Querier) error) error {
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return f(func(query string, args []any, row func(sqlcore.Row) error) error {
			rows, err := tx.Query(ctx, query, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			return sqlcore.Each(rows, row)
		})
	})
	return d.wrap(op, ids, err)
}
