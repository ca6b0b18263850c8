package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Registry is a reference.EntityRegistry on SQLite: entity_names is unique
// on (space, normalised type, normalised name).
type Registry struct{ d *db }

// views returns the registered entities whose ids idsQuery selects, each
// with its names, ordered by node id: one statement, so one snapshot.
func (g *Registry) views(ctx context.Context, space string, idsQuery string, args ...any) ([]reference.RegisteredEntity, error) {
	q := `WITH ids(node_id) AS (` + idsQuery + `)
		SELECT ids.node_id, coalesce(e.entity_type, ''), coalesce(e.canonical_name, ''), coalesce(e.properties_json, ''), n.normalized_name
		FROM ids
		LEFT JOIN entities e ON e.space = ? AND e.node_id = ids.node_id
		LEFT JOIN entity_names n ON n.space = ? AND n.node_id = ids.node_id
		ORDER BY ids.node_id, n.normalized_name`
	args = append(args, space, space)
	var out []reference.RegisteredEntity
	err := g.d.each(ctx, func() { out = make([]reference.RegisteredEntity, 0) }, func(rows *sql.Rows) error {
		var id, typ, canonical, props string
		var name sql.NullString
		if err := rows.Scan(&id, &typ, &canonical, &props, &name); err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].NodeID != id {
			re := reference.RegisteredEntity{Space: space, NodeID: id, Type: typ, CanonicalName: canonical}
			p, err := sqlcore.DecodeProps(props)
			if err != nil {
				return err
			}
			if len(p) > 0 {
				re.Properties = p
			}
			out = append(out, re)
		}
		re := &out[len(out)-1]
		if name.Valid && (len(re.Names) == 0 || re.Names[len(re.Names)-1] != name.String) {
			re.Names = append(re.Names, name.String)
		}
		return nil
	}, q, args...)
	return out, err
}

// MatchNodeIDs implements reference.BatchMatcher: every query in one
// statement.
func (g *Registry) MatchNodeIDs(ctx context.Context, space string, queries []reference.EntityQuery) ([][]string, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	keys, out := sqlcore.MatchKeys(queries)
	for part := range slices.Chunk(keys, maxRowsPerStatement) {
		args := make([]any, 0, 3*len(part)+1)
		for _, k := range part {
			args = append(args, k.Query, k.Type, k.Name)
		}
		args = append(args, space)
		err := g.d.each(ctx, func() {}, func(rows *sql.Rows) error {
			var i int
			var id string
			err := rows.Scan(&i, &id)
			out[i] = append(out[i], id) // a retry may add an id twice: compacted below
			return err
		}, `WITH q(i, entity_type, normalized_name) AS (VALUES `+placeholders(len(part), 3)+`)
			SELECT q.i, n.node_id FROM q
			JOIN entity_names n ON n.space = ? AND n.entity_type = q.entity_type AND n.normalized_name = q.normalized_name`, args...)
		if err != nil {
			return nil, err
		}
	}
	for i := range out {
		slices.Sort(out[i])
		out[i] = slices.Compact(out[i])
	}
	return out, nil
}

// FindMatches implements reference.EntityRegistry. The result is ordered by
// NodeID.
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	var norm []any
	for _, nn := range reference.NormalizeNames(names) {
		norm = append(norm, nn)
	}
	if len(norm) == 0 {
		return []reference.RegisteredEntity{}, nil
	}
	q := `SELECT DISTINCT node_id FROM entity_names WHERE space = ? AND entity_type = ? AND normalized_name IN (?` +
		strings.Repeat(", ?", len(norm)-1) + `) ORDER BY node_id`
	return g.views(ctx, space, q, append([]any{space, reference.Normalize(entityType)}, norm...)...)
}

// SaveAll implements reference.EntityRegistry in one IMMEDIATE transaction.
func (g *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	keys, batch, err := sqlcore.BindNames(space, regs)
	if err != nil || len(regs) == 0 {
		return err
	}
	return g.d.tx(ctx, func(tx *sql.Tx) error {
		// Names already bound elsewhere refuse the whole batch.
		for part := range slices.Chunk(keys, maxRowsPerStatement) {
			args := []any{space}
			for _, k := range part {
				args = append(args, k.Type, k.Name)
			}
			rows, err := tx.QueryContext(ctx, `SELECT entity_type, normalized_name, node_id FROM entity_names
				WHERE space = ? AND (entity_type, normalized_name) IN (VALUES `+placeholders(len(part), 2)+`)`, args...)
			if err != nil {
				return err
			}
			var conflicts []error
			for rows.Next() {
				var k sqlcore.NameKey
				var cur string
				if err := rows.Scan(&k.Type, &k.Name, &cur); err != nil {
					rows.Close()
					return err
				}
				if id := batch[k]; cur != id {
					conflicts = append(conflicts, sqlcore.BoundElsewhere(space, k, cur, id))
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(conflicts) > 0 {
				slices.SortFunc(conflicts, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
				return conflicts[0]
			}
		}
		// Entities: created with their first registration; later ones
		// add properties (a JSON merge of string values).
		for part := range slices.Chunk(regs, maxRowsPerStatement) {
			args := make([]any, 0, 5*len(part))
			for _, r := range part {
				p, err := sqlcore.EncodeProps(r.Properties)
				if err != nil {
					return err
				}
				args = append(args, space, r.NodeID, strings.TrimSpace(r.Type), strings.TrimSpace(r.CanonicalName), p)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO entities (space, node_id, entity_type, canonical_name, properties_json)
				VALUES `+placeholders(len(part), 5)+`
				ON CONFLICT (space, node_id) DO UPDATE SET properties_json = json_patch(entities.properties_json, excluded.properties_json)
				WHERE excluded.properties_json <> '{}'`, args...); err != nil {
				return err
			}
		}
		for part := range slices.Chunk(keys, maxRowsPerStatement) {
			args := make([]any, 0, 4*len(part))
			for _, k := range part {
				args = append(args, space, k.Type, k.Name, batch[k])
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO entity_names (space, entity_type, normalized_name, node_id)
				VALUES `+placeholders(len(part), 4)+` ON CONFLICT (space, entity_type, normalized_name) DO NOTHING`, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// maxRowsPerStatement bounds the rows of one multi-row statement (SQLite
// limits the parameters of a statement).
const maxRowsPerStatement = 200

// placeholders returns n parenthesised groups of k parameters: "(?, ?), (?, ?)".
func placeholders(n, k int) string {
	group := "(?" + strings.Repeat(", ?", k-1) + ")"
	return group + strings.Repeat(", "+group, n-1)
}

// List implements reference.EntityRegistry.
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	return g.views(ctx, space, `SELECT node_id FROM entities WHERE space = ? ORDER BY node_id`, space)
}
