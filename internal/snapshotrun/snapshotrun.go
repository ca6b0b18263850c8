// Package snapshotrun is crashmatrix snapshot below its flags: it reads
// one space of a real backend's stores (a SQLite file, or PostgreSQL with
// the graph in Neo4j), read-only, keeps one operation, one document or
// all of it (sim/initial), redacts it when asked, and writes it as a
// scenario that starts from that state. The CLI parses the flags into
// Options and calls Run.
package snapshotrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/servers"
)

// Options are one snapshot.
type Options struct {
	// SQLite names the SQLite file to read; else DSN the PostgreSQL
	// database, with the graph in Neo4j when Neo4jURI is set.
	SQLite, DSN                        string
	Neo4jURI, Neo4jUser, Neo4jPassword string
	// Space is read whole, or only Operation's or Document's part of it.
	Space, Operation, Document string
	// Redact replaces business text with stand-ins salted by Salt.
	Redact bool
	Salt   string
	// Name is the scenario's name ("": incident-<space>); Out its file
	// ("" or "-": stdout).
	Name, Out string
}

// Run reads the snapshot and writes the scenario to o.Out or stdout;
// notes and what was written go to stderr.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	st, source, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer st.Close()
	at := time.Now()
	s, notes, err := initial.Read(ctx, st, o.Space, initial.Filter{Operation: o.Operation, Document: o.Document}, at.UnixMilli())
	if err != nil {
		return err
	}
	if s.Empty() {
		return fmt.Errorf("space %q holds nothing in this %s", o.Space, source)
	}
	what := "space " + o.Space
	switch {
	case o.Operation != "":
		what = "operation " + o.Operation + " of space " + o.Space
	case o.Document != "":
		what = "document " + o.Document + " of space " + o.Space
	}
	if o.Redact {
		s = initial.Redact(s, o.Salt)
		what += ", redacted"
	}
	name := o.Name
	if name == "" {
		name = "incident-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(o.Space), "-"), "-")
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
		fmt.Fprintln(stderr, "note:", n)
	}
	if o.Out == "" || o.Out == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(o.Out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s: %d operations (%d unfinished), %d documents, %d leases, %d nodes, %d edges\nreplay: crashmatrix run %s\n",
		o.Out, len(s.Operations), len(s.Unfinished()), len(s.Documents), len(s.Leases), len(s.Graph.Nodes), len(s.Graph.Edges), o.Out)
	return nil
}

// nonName is what a scenario's name cannot hold.
var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// open opens the stores read-only and names where they are.
func open(ctx context.Context, o Options) (reference.Stores, string, error) {
	switch {
	case o.SQLite != "" && o.DSN != "":
		return reference.Stores{}, "", fmt.Errorf("--sqlite and --postgres-dsn exclude each other")
	case o.SQLite != "":
		st, err := sqlite.OpenReadOnly(o.SQLite)
		return st, "SQLite file " + o.SQLite, err
	case o.DSN != "":
		st, err := servers.OpenReadOnly(ctx, o.DSN, o.Neo4jURI, o.Neo4jUser, o.Neo4jPassword)
		source := "PostgreSQL"
		if o.Neo4jURI != "" {
			source += " + Neo4j"
		}
		return st, source, err
	}
	return reference.Stores{}, "", fmt.Errorf("name a backend: --sqlite FILE or --postgres-dsn DSN (env %s)", servers.EnvPostgresDSN)
}
