package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
)

// schema creates every table Open needs; sqlcore's stores declare theirs.
var schema = slices.Concat([]string{
	`CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER NOT NULL PRIMARY KEY
	)`,
	`CREATE TABLE IF NOT EXISTS operations (
		operation_id      TEXT    NOT NULL PRIMARY KEY,
		space             TEXT    NOT NULL,
		document_id       TEXT    NOT NULL,
		expected_revision INTEGER NOT NULL,
		plan_fingerprint  TEXT    NOT NULL,
		stage             TEXT    NOT NULL,
		updated_at        INTEGER NOT NULL,
		failure_reason    TEXT    NOT NULL DEFAULT '',
		attempts          INTEGER NOT NULL DEFAULT 0,
		disposition       TEXT    NOT NULL DEFAULT '',
		superseded_by     TEXT    NOT NULL DEFAULT '',
		claim_holder      TEXT    NOT NULL DEFAULT '',
		claim_expires_at  INTEGER NOT NULL DEFAULT 0,
		plan              BLOB    NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS operations_recovery_idx
		ON operations (updated_at, operation_id)
		WHERE stage <> 'COMPLETED' AND disposition = ''`,
	`CREATE INDEX IF NOT EXISTS operations_space_idx ON operations (space, operation_id)`,
}, sqlcore.StatesTables(dialect), []string{
	`CREATE INDEX IF NOT EXISTS document_operation_idx
		ON document_versions (space, document_id, operation_id)`,
	`CREATE TABLE IF NOT EXISTS entities (
		space           TEXT NOT NULL,
		node_id         TEXT NOT NULL,
		entity_type     TEXT NOT NULL,
		canonical_name  TEXT NOT NULL,
		properties_json TEXT NOT NULL DEFAULT '{}',
		PRIMARY KEY (space, node_id)
	)`,
	`CREATE TABLE IF NOT EXISTS entity_names (
		space           TEXT NOT NULL,
		entity_type     TEXT NOT NULL,
		normalized_name TEXT NOT NULL,
		node_id         TEXT NOT NULL,
		PRIMARY KEY (space, entity_type, normalized_name),
		FOREIGN KEY (space, node_id) REFERENCES entities (space, node_id)
	)`,
	`CREATE INDEX IF NOT EXISTS entity_names_node_idx ON entity_names (space, node_id)`,
	// No unique constraint on the node and edge identities: the
	// CreateInsteadOfMerge mutant must be able to store duplicates.
	`CREATE TABLE IF NOT EXISTS graph_nodes (
		seq             INTEGER PRIMARY KEY,
		space           TEXT NOT NULL,
		node_id         TEXT NOT NULL,
		label           TEXT NOT NULL,
		properties_json TEXT NOT NULL DEFAULT '{}'
	)`,
	`CREATE INDEX IF NOT EXISTS graph_nodes_id_idx ON graph_nodes (space, node_id)`,
	`CREATE TABLE IF NOT EXISTS graph_edges (
		seq             INTEGER PRIMARY KEY,
		space           TEXT    NOT NULL,
		source          TEXT    NOT NULL,
		type            TEXT    NOT NULL,
		target          TEXT    NOT NULL,
		rank            INTEGER NOT NULL,
		properties_json TEXT    NOT NULL DEFAULT '{}'
	)`,
	`CREATE INDEX IF NOT EXISTS graph_edges_key_idx ON graph_edges (space, source, type, target, rank)`,
	`CREATE INDEX IF NOT EXISTS graph_edges_target_idx ON graph_edges (space, target)`,
	// One row per document ever leased: a release empties holder and
	// expiry but keeps the token, so fencing tokens strictly increase.
	`CREATE TABLE IF NOT EXISTS leases (
		space       TEXT    NOT NULL,
		document_id TEXT    NOT NULL,
		holder      TEXT    NOT NULL,
		token       INTEGER NOT NULL,
		expires_at  INTEGER NOT NULL,
		PRIMARY KEY (space, document_id)
	)`,
})

// migrations[v] takes a database from schema version v to v+1.
var migrations = map[int64][]string{
	// Version 1 kept the last token of each document in lease_tokens and
	// deleted a lease row on release; version 2 keeps the row.
	1: {
		`INSERT INTO leases (space, document_id, holder, token, expires_at)
			SELECT space, document_id, '', last_token, 0 FROM lease_tokens WHERE true
			ON CONFLICT (space, document_id) DO UPDATE SET token = max(leases.token, excluded.token)`,
		`DROP TABLE lease_tokens`,
	},
}

// A database already at SchemaVersion with every table and index of the
// schema is left alone after one read: the write transaction would take
// the database's write lock and prepare every statement of the schema,
// which every worker process of a crash-matrix case paid on its open.
func (d *db) migrate(ctx context.Context) error {
	if d.schemaCurrent(ctx) {
		return nil
	}
	return d.tx(ctx, func(tx *sql.Tx) error {
		var v sql.NullInt64
		// The table may not exist yet; create everything first.
		for _, stmt := range schema {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("schema: %w", err)
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil {
			return err
		}
		switch {
		case !v.Valid:
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, SchemaVersion)
			return err
		case v.Int64 > SchemaVersion:
			return fmt.Errorf("database schema version %d is newer than %d", v.Int64, SchemaVersion)
		}
		for from := v.Int64; from < SchemaVersion; from++ {
			for _, stmt := range migrations[from] {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migrate schema %d -> %d: %w", from, from+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, from+1); err != nil {
				return err
			}
		}
		return nil
	})
}

// schemaNames are the tables and indexes the schema creates, in order
// (read with strings, not a regular expression: every worker process
// computes them as it starts).
var schemaNames = func() []string {
	var out []string
	for _, stmt := range schema {
		rest := strings.TrimSpace(stmt)
		var ok bool
		if rest, ok = strings.CutPrefix(rest, "CREATE TABLE IF NOT EXISTS "); !ok {
			if rest, ok = strings.CutPrefix(rest, "CREATE INDEX IF NOT EXISTS "); !ok {
				continue
			}
		}
		end := strings.IndexFunc(rest, func(r rune) bool {
			return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		})
		if end < 0 {
			end = len(rest)
		}
		if end > 0 {
			out = append(out, rest[:end])
		}
	}
	return out
}()

// schemaCurrentQuery reads the schema version and how many of the
// schema's tables and indexes exist.
var schemaCurrentQuery = `SELECT (SELECT max(version) FROM schema_version), (SELECT count(*) FROM sqlite_master WHERE name IN (?` +
	strings.Repeat(", ?", len(schemaNames)-1) + `))`

// schemaCurrent says whether the database is at SchemaVersion with every
// table and index of the schema (a missing schema_version table, or any
// error, says no: the migration then runs and reports it).
func (d *db) schemaCurrent(ctx context.Context) bool {
	if len(schemaNames) != len(schema) {
		return false // a statement the fast path cannot see: always migrate
	}
	args := make([]any, len(schemaNames))
	for i, n := range schemaNames {
		args[i] = n
	}
	var v sql.NullInt64
	var n int
	if err := d.sql.QueryRowContext(ctx, schemaCurrentQuery, args...).Scan(&v, &n); err != nil {
		return false
	}
	return v.Valid && v.Int64 == SchemaVersion && n == len(schemaNames)
}
