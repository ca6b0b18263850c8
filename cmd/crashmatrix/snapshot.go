package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/spf13/cobra"
)

func snapshotCmd() *cobra.Command {
	var (
		sqliteFile, dsn, neoURI, neoUser, neoPassword string
		space, operation, document, name, out, salt   string
		redact                                        bool
	)
	cmd := &cobra.Command{
		Use:   "snapshot --space S (--sqlite FILE | --postgres-dsn DSN [--neo4j-uri URI]) [--operation ID | --document ID] [-o FILE]",
		Short: "Write a scenario that starts from a real backend's state (one operation, one document or a whole space)",
		Long: `snapshot reads the stores of a real backend — a SQLite file, or a PostgreSQL
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

Exit code: 0 written, 2 error.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if space == "" {
				return fmt.Errorf("--space is required")
			}
			if operation != "" && document != "" {
				return fmt.Errorf("--operation and --document exclude each other")
			}
			if dsn == "" {
				dsn = os.Getenv(servers.EnvPostgresDSN)
			}
			if neoURI == "" {
				neoURI = os.Getenv(servers.EnvNeo4jURI)
			}
			if neoPassword == "" {
				neoPassword = os.Getenv(servers.EnvNeo4jPassword)
			}
			var st reference.Stores
			var err error
			source := ""
			switch {
			case sqliteFile != "" && dsn != "":
				return fmt.Errorf("--sqlite and --postgres-dsn exclude each other")
			case sqliteFile != "":
				st, err = sqlite.OpenReadOnly(sqliteFile)
				source = "SQLite file " + sqliteFile
			case dsn != "":
				st, err = servers.OpenReadOnly(cmd.Context(), dsn, neoURI, neoUser, neoPassword)
				source = "PostgreSQL"
				if neoURI != "" {
					source += " + Neo4j"
				}
			default:
				return fmt.Errorf("name a backend: --sqlite FILE or --postgres-dsn DSN (env %s)", servers.EnvPostgresDSN)
			}
			if err != nil {
				return err
			}
			defer st.Close()
			at := time.Now()
			s, notes, err := initial.Read(cmd.Context(), st, space, initial.Filter{Operation: operation, Document: document}, at.UnixMilli())
			if err != nil {
				return err
			}
			if s.Empty() {
				return fmt.Errorf("space %q holds nothing in this %s", space, source)
			}
			what := "space " + space
			switch {
			case operation != "":
				what = "operation " + operation + " of space " + space
			case document != "":
				what = "document " + document + " of space " + space
			}
			if redact {
				s = initial.Redact(s, salt)
				what += ", redacted"
			}
			if name == "" {
				name = "incident-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(space), "-"), "-")
			}
			desc := fmt.Sprintf("Snapshot of %s, read from %s at %s by crashmatrix snapshot; recovery then quiesce.", what, source, at.UTC().Format(time.RFC3339))
			if u := s.Unfinished(); len(u) > 0 {
				desc += fmt.Sprintf(" Unfinished: %s.", strings.Join(u, ", "))
			}
			b, err := scenarios.FromState(name, desc, s).Marshal()
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d operations (%d unfinished), %d documents, %d leases, %d nodes, %d edges\nreplay: crashmatrix run %s\n",
				out, len(s.Operations), len(s.Unfinished()), len(s.Documents), len(s.Leases), len(s.Graph.Nodes), len(s.Graph.Edges), out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&sqliteFile, "sqlite", "", "SQLite database file to read")
	fl.StringVar(&dsn, "postgres-dsn", "", "PostgreSQL database to read (env "+servers.EnvPostgresDSN+")")
	fl.StringVar(&neoURI, "neo4j-uri", "", "Neo4j server holding the graph (env "+servers.EnvNeo4jURI+")")
	fl.StringVar(&neoUser, "neo4j-user", "neo4j", "Neo4j user")
	fl.StringVar(&neoPassword, "neo4j-password", "", "Neo4j password (prefer env "+servers.EnvNeo4jPassword+")")
	fl.StringVar(&space, "space", "", "the space to read")
	fl.StringVar(&operation, "operation", "", "keep one operation (and what its document's recovery can touch)")
	fl.StringVar(&document, "document", "", "keep one document (and what its recovery can touch)")
	fl.BoolVar(&redact, "redact", false, "replace business text deterministically (keys and shapes stay)")
	fl.StringVar(&salt, "redact-salt", "", "salt of --redact's stand-ins")
	fl.StringVar(&name, "name", "", "scenario name (default incident-<space>)")
	fl.StringVarP(&out, "out", "o", "", "write the scenario here (default stdout)")
	return cmd
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)
