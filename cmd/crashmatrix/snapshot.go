package main

import (
	"cmp"
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/internal/snapshotrun"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/spf13/cobra"
)

func snapshotCmd() *cobra.Command {
	var o snapshotrun.Options
	cmd := &cobra.Command{
		Use:   "snapshot --space S (--sqlite FILE | --postgres-dsn DSN [--neo4j-uri URI]) [--operation ID | --document ID] [-o FILE]",
		Short: "Write a scenario that starts from a real backend's state (one operation, one document or a whole space)",
		Long:  snapshotLong,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Space == "" {
				return fmt.Errorf("--space is required")
			}
			if o.Operation != "" && o.Document != "" {
				return fmt.Errorf("--operation and --document exclude each other")
			}
			o.DSN = cmp.Or(o.DSN, os.Getenv(servers.EnvPostgresDSN))
			o.Neo4jURI = cmp.Or(o.Neo4jURI, os.Getenv(servers.EnvNeo4jURI))
			o.Neo4jPassword = cmp.Or(o.Neo4jPassword, os.Getenv(servers.EnvNeo4jPassword))
			return snapshotrun.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.SQLite, "sqlite", "", "SQLite database file to read")
	fl.StringVar(&o.DSN, "postgres-dsn", "", "PostgreSQL database to read (env "+servers.EnvPostgresDSN+")")
	fl.StringVar(&o.Neo4jURI, "neo4j-uri", "", "Neo4j server holding the graph (env "+servers.EnvNeo4jURI+")")
	fl.StringVar(&o.Neo4jUser, "neo4j-user", "neo4j", "Neo4j user")
	fl.StringVar(&o.Neo4jPassword, "neo4j-password", "", "Neo4j password (prefer env "+servers.EnvNeo4jPassword+")")
	fl.StringVar(&o.Space, "space", "", "the space to read")
	fl.StringVar(&o.Operation, "operation", "", "keep one operation (and what its document's recovery can touch)")
	fl.StringVar(&o.Document, "document", "", "keep one document (and what its recovery can touch)")
	fl.BoolVar(&o.Redact, "redact", false, "replace business text deterministically (keys and shapes stay)")
	fl.StringVar(&o.Salt, "redact-salt", "", "salt of --redact's stand-ins")
	fl.StringVar(&o.Name, "name", "", "scenario name (default incident-<space>)")
	fl.StringVarP(&o.Out, "out", "o", "", "write the scenario here (default stdout)")
	return cmd
}

// snapshotLong is snapshot's help.
const snapshotLong = `snapshot reads the stores of a real backend — a SQLite file, or a PostgreSQL
database (with the graph in Neo4j when --neo4j-uri is given) — and writes a
scenario whose initial block holds what they hold for one space: operations
with their stage, plan, attempts, failure reason, disposition and claim;
document states and version histories; registry entries; leases (holder,
token, expiry); graph nodes and edges. Its steps let recovery run (a recover
worker, then quiesce) and it expects every invariant to hold: run it with
'crashmatrix run FILE', add faults to its steps, or explore from it with
'crashmatrix explore --from FILE'.

--operation keeps one operation, --document one document and its operations;
either also keeps the ACTIVE documents sharing a node or an edge with them
(a retraction asks whether another document still supports an edge), with
the nodes, edges, registry entries and leases they mention.

--redact replaces business text (property values, entity names, document
contents) with deterministic stand-ins (the same text, the same stand-in;
--redact-salt changes them) and keeps ids, keys and shapes; each plan's
fingerprint is recomputed over the redacted plan.

snapshot only reads. SQLite is opened read-only (mode=ro, query_only); a
PostgreSQL session runs with default_transaction_read_only=on, so the server
refuses any write and each read runs in a read-only transaction; Neo4j is read
in read sessions and no schema is created. Because reading is safe, the
disposable-server check of certify/run/explore does not apply. The reads are
not one transaction: take the snapshot while nothing writes to the space (a
stuck operation is not moving).

Exit code: 0 written, 2 error.`
