package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Registry is a reference.EntityRegistry on PostgreSQL: entity_names has a
// primary key (a unique constraint) on (space, normalised type, normalised
// name).
type Registry struct{ d *db }

func (g *Registry) view(ctx context.Context, q querier, space, nodeID string) (reference.RegisteredEntity, error) {
	re := reference.RegisteredEntity{Space: space, NodeID: nodeID}
	var props string
	err := q.QueryRow(ctx, `SELECT entity_type, canonical_name, properties_json FROM crashmatrix_entities WHERE space = $1 AND node_id = $2`,
		space, nodeID).Scan(&re.Type, &re.CanonicalName, &props)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return re, err
	}
	if p, err := sqlcore.DecodeProps(props); err != nil {
		return re, err
	} else if len(p) > 0 {
		re.Properties = p
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT normalized_name FROM crashmatrix_entity_names WHERE space = $1 AND node_id = $2
		ORDER BY 1`, space, nodeID)
	if err != nil {
		return re, err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return re, err
		}
		re.Names = append(re.Names, n)
	}
	return re, rows.Err()
}

// views reads the entities whose ids idsQuery selects, in one REPEATABLE
// READ snapshot.
func (g *Registry) views(ctx context.Context, op, space string, idsQuery string, args ...any) ([]reference.RegisteredEntity, error) {
	var out []reference.RegisteredEntity
	err := pgx.BeginTxFunc(ctx, g.d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = make([]reference.RegisteredEntity, 0)
		rows, err := tx.Query(ctx, idsQuery, args...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			re, err := g.view(ctx, tx, space, id)
			if err != nil {
				return err
			}
			out = append(out, re)
		}
		return nil
	})
	if err != nil {
		return nil, g.d.wrap(op, "space "+space, err)
	}
	return out, nil
}

// MatchNodeIDs implements reference.BatchMatcher: every query in one
// statement.
func (g *Registry) MatchNodeIDs(ctx context.Context, space string, queries []reference.EntityQuery) ([][]string, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	keys, out := sqlcore.MatchKeys(queries)
	idx := make([]int32, len(keys))
	types, names := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		idx[i], types[i], names[i] = int32(k.Query), k.Type, k.Name
	}
	if len(idx) == 0 {
		return out, nil
	}
	rows, err := g.d.pool.Query(ctx, `SELECT DISTINCT q.i, n.node_id
		FROM unnest($2::int[], $3::text[], $4::text[]) AS q(i, entity_type, normalized_name)
		JOIN crashmatrix_entity_names n ON n.space = $1 AND n.entity_type = q.entity_type AND n.normalized_name = q.normalized_name
		ORDER BY 1, 2`, space, idx, types, names)
	if err != nil {
		return nil, g.d.wrap("registry.matchNodeIDs", "space "+space, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int32
		var id string
		if err := rows.Scan(&i, &id); err != nil {
			return nil, g.d.wrap("registry.matchNodeIDs", "space "+space, err)
		}
		out[i] = append(out[i], id)
	}
	if err := rows.Err(); err != nil {
		return nil, g.d.wrap("registry.matchNodeIDs", "space "+space, err)
	}
	return out, nil
}

// FindMatches implements reference.EntityRegistry. The result is ordered by
// NodeID.
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	norm := reference.NormalizeNames(names)
	if len(norm) == 0 {
		return []reference.RegisteredEntity{}, nil
	}
	return g.views(ctx, "registry.findMatches", space, `SELECT DISTINCT node_id FROM crashmatrix_entity_names
		WHERE space = $1 AND entity_type = $2 AND normalized_name = ANY($3) ORDER BY 1`,
		space, reference.Normalize(entityType), norm)
}

// SaveAll implements reference.EntityRegistry in one transaction: every
// name is claimed with INSERT ... ON CONFLICT DO UPDATE ... RETURNING
// node_id, which waits for a concurrent claimant and returns the winner's
// node id; a name bound to another node rolls everything back with
// ErrRegistryConflict. Names are claimed in sorted order to avoid
// deadlocks (which are retried anyway).
func (g *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	keys, batch, err := sqlcore.BindNames(space, regs)
	if err != nil || len(regs) == 0 {
		return err
	}
	// Entities in node-id order, merged per node.
	type ent struct {
		typ, canonical string
		props          map[string]string
	}
	ents := map[string]*ent{}
	var nodeIDs []string
	for _, r := range regs {
		e := ents[r.NodeID]
		if e == nil {
			e = &ent{typ: strings.TrimSpace(r.Type), canonical: strings.TrimSpace(r.CanonicalName), props: map[string]string{}}
			ents[r.NodeID] = e
			nodeIDs = append(nodeIDs, r.NodeID)
		}
		maps.Copy(e.props, r.Properties)
	}
	sort.Strings(nodeIDs)
	err = g.d.tx(ctx, func(tx pgx.Tx) error {
		for _, id := range nodeIDs {
			e := ents[id]
			p, err := sqlcore.EncodeProps(e.props)
			if err != nil {
				return err
			}
			var stored string
			if err := tx.QueryRow(ctx, `INSERT INTO crashmatrix_entities AS t (space, node_id, entity_type, canonical_name, properties_json)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (space, node_id) DO UPDATE SET properties_json = t.properties_json
				RETURNING t.properties_json`, space, id, e.typ, e.canonical, p).Scan(&stored); err != nil {
				return err
			}
			if len(e.props) > 0 && stored != p {
				m, err := sqlcore.DecodeProps(stored)
				if err != nil {
					return err
				}
				maps.Copy(m, e.props)
				merged, err := sqlcore.EncodeProps(m)
				if err != nil {
					return err
				}
				if merged != stored {
					if _, err := tx.Exec(ctx, `UPDATE crashmatrix_entities SET properties_json = $3 WHERE space = $1 AND node_id = $2`,
						space, id, merged); err != nil {
						return err
					}
				}
			}
		}
		for _, k := range keys {
			id := batch[k]
			var cur string
			if err := tx.QueryRow(ctx, `INSERT INTO crashmatrix_entity_names AS t (space, entity_type, normalized_name, node_id)
				VALUES ($1, $2, $3, $4)
				ON CONFLICT (space, entity_type, normalized_name) DO UPDATE SET node_id = t.node_id
				RETURNING t.node_id`, space, k.Type, k.Name, id).Scan(&cur); err != nil {
				return err
			}
			if cur != id {
				return sqlcore.BoundElsewhere(space, k, cur, id)
			}
		}
		return nil
	})
	if SQLState(err) == "23505" {
		return fmt.Errorf("space %s: %w: %w", space, reference.ErrRegistryConflict, g.d.wrap("registry.saveAll", "space "+space, err))
	}
	return g.d.wrap("registry.saveAll", "space "+space, err)
}

// List implements reference.EntityRegistry.
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	return g.views(ctx, "registry.list", space,
		`SELECT node_id FROM crashmatrix_entities WHERE space = $1 ORDER BY 1`, space)
}
