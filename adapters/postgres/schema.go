package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
)

// MigrationsTable records the applied schema migrations.
const MigrationsTable = "crashmatrix_schema_migrations"

// migration is one schema version: its statements run in one transaction.
type migration struct {
	version int
	stmts   []string
}

// migrations are applied in order; never edit a released one, append a
// new version instead.
//
// Ids that results are ordered by use the "C" collation: byte order, the
// order Go compares strings in, whatever the database's default collation.
var migrations = []migration{
	{1, slices.Concat([]string{
		`CREATE TABLE IF NOT EXISTS crashmatrix_operations (
			operation_id      text    COLLATE "C" NOT NULL PRIMARY KEY,
			space             text    NOT NULL,
			document_id       text    NOT NULL,
			expected_revision bigint  NOT NULL,
			plan_fingerprint  text    NOT NULL,
			stage             text    NOT NULL,
			updated_at        bigint  NOT NULL,
			failure_reason    text    NOT NULL DEFAULT '',
			attempts          integer NOT NULL DEFAULT 0,
			disposition       text    NOT NULL DEFAULT '',
			superseded_by     text    NOT NULL DEFAULT '',
			claim_holder      text    NOT NULL DEFAULT '',
			claim_expires_at  bigint  NOT NULL DEFAULT 0,
			plan              bytea   NOT NULL
		)`,
		// The recovery scan: unfinished rows only, in scan order.
		`CREATE INDEX IF NOT EXISTS crashmatrix_operations_recovery_idx
			ON crashmatrix_operations (updated_at, operation_id)
			WHERE stage <> 'COMPLETED' AND disposition = ''`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_operations_document_idx
			ON crashmatrix_operations (space, document_id)`,
	}, sqlcore.StatesTables(dialect), []string{
		`CREATE INDEX IF NOT EXISTS crashmatrix_document_versions_operation_idx
			ON crashmatrix_document_versions (space, document_id, operation_id)`,
		`CREATE TABLE IF NOT EXISTS crashmatrix_entities (
			space           text NOT NULL,
			node_id         text COLLATE "C" NOT NULL,
			entity_type     text NOT NULL,
			canonical_name  text NOT NULL,
			properties_json text NOT NULL DEFAULT '{}',
			PRIMARY KEY (space, node_id)
		)`,
		// The registry's unique constraint: one node per (space,
		// normalised type, normalised name).
		`CREATE TABLE IF NOT EXISTS crashmatrix_entity_names (
			space           text NOT NULL,
			entity_type     text NOT NULL,
			normalized_name text COLLATE "C" NOT NULL,
			node_id         text COLLATE "C" NOT NULL,
			CONSTRAINT crashmatrix_entity_names_unique PRIMARY KEY (space, entity_type, normalized_name),
			FOREIGN KEY (space, node_id) REFERENCES crashmatrix_entities (space, node_id)
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_entity_names_node_idx
			ON crashmatrix_entity_names (space, node_id)`,
		// No unique constraint on the node and edge identities: the
		// CreateInsteadOfMerge mutant must be able to store duplicates.
		// Merges are serialised per space by an advisory lock instead.
		`CREATE TABLE IF NOT EXISTS crashmatrix_graph_nodes (
			seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			space           text NOT NULL,
			node_id         text NOT NULL,
			label           text NOT NULL,
			properties_json text NOT NULL DEFAULT '{}'
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_graph_nodes_id_idx
			ON crashmatrix_graph_nodes (space, node_id)`,
		`CREATE TABLE IF NOT EXISTS crashmatrix_graph_edges (
			seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			space           text   NOT NULL,
			source          text   NOT NULL,
			type            text   NOT NULL,
			target          text   NOT NULL,
			rank            bigint NOT NULL,
			properties_json text   NOT NULL DEFAULT '{}'
		)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_graph_edges_key_idx
			ON crashmatrix_graph_edges (space, source, type, target, rank)`,
		`CREATE INDEX IF NOT EXISTS crashmatrix_graph_edges_target_idx
			ON crashmatrix_graph_edges (space, target)`,
		// One row per document ever locked: last_token survives release
		// (holder = '') so fencing tokens strictly increase.
		`CREATE TABLE IF NOT EXISTS crashmatrix_leases (
			space       text   NOT NULL,
			document_id text   NOT NULL,
			holder      text   NOT NULL DEFAULT '',
			token       bigint NOT NULL DEFAULT 0,
			expires_at  bigint NOT NULL DEFAULT 0,
			last_token  bigint NOT NULL DEFAULT 0,
			PRIMARY KEY (space, document_id)
		)`,
	})},
}

// SchemaVersion is the latest schema version Open migrates to.
var SchemaVersion = migrations[len(migrations)-1].version

// migrateLockKey names the advisory lock taken around migrations; it is
// combined with the current schema so that databases with several
// crashmatrix schemas migrate independently.
const migrateLockKey = "crashmatrix-schema-migrations"

func (d *db) migrate(ctx context.Context) error {
	lock := `SELECT pg_advisory_xact_lock(hashtext($1 || current_schema()))`
	var latest int
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lock, migrateLockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+MigrationsTable+` (
			version    integer     NOT NULL PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+MigrationsTable).Scan(&latest)
	})
	if err != nil {
		return err
	}
	if latest > SchemaVersion {
		return &Error{Op: "migrate", Err: fmt.Errorf("database schema version %d is newer than this build's %d", latest, SchemaVersion), permanent: true}
	}
	for _, m := range migrations {
		if m.version <= latest {
			continue
		}
		err := d.tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lock, migrateLockKey); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+MigrationsTable+` WHERE version = $1)`, m.version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			for _, stmt := range m.stmts {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration %d: %w", m.version, err)
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+MigrationsTable+` (version, applied_at) VALUES ($1, now())`, m.version)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
