// Package neo4j is a reference.GraphWriter on Neo4j 5 (Community or
// Enterprise), through the official Go driver (v5).
//
// Data model. Every node of every space is one node
//
//	(:CMNode {space, id, label, p_<key>: <value>, ...})
//
// whose user properties are stored as separate properties named with the
// prefix "p_" (PropertyPrefix), so an upsert patches them with a plain
// `SET n += $props` and they read back exactly, even when a user key is
// "space", "id" or "label". Every edge is one relationship
//
//	(a)-[:CM_EDGE {space, type, rank, p_<key>: <value>, ...}]->(b)
//
// with the edge type as a property: plain Cypher cannot parameterise a
// relationship type, and APOC is not assumed. A node uniqueness constraint
// on (space, id) (ConstraintName, created by Open, idempotently) makes the
// node MERGE safe under concurrency; relationship MERGE between two bound
// nodes locks both endpoints.
//
// Apply runs a whole mutation in one managed write transaction
// (ExecuteWrite, which retries transient errors), in the Agents-Flex order:
// detach-delete nodes, delete edges, merge nodes, check that every edge's
// endpoints exist (ErrMissingEndpoint rolls everything back), merge edges.
package neo4j

import (
	"context"
	"regexp"
	"strings"

	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/crashmatrix/crashmatrix/reference"
)

// NodeLabel is the label of every node the writer stores (unless
// Options.Label names another).
const NodeLabel = "CMNode"

// EdgeType is the relationship type of every edge the writer stores; the
// edge's own type is its "type" property.
const EdgeType = "CM_EDGE"

// ConstraintName names the uniqueness constraint on (space, id) of
// NodeLabel nodes that Open creates.
const ConstraintName = "cm_node_key"

// PropertyPrefix prefixes the stored name of every user property of a node
// or an edge.
const PropertyPrefix = "p_"

// Options configures a Writer.
type Options struct {
	// CreateInsteadOfMerge makes the writer CREATE a new node or edge on
	// every upsert instead of merging into the existing one: a mutant that
	// produces duplicates. Open then creates no uniqueness constraint. On a
	// database where the constraint of the label exists already the mutant
	// fails with a constraint violation instead; give it its own Label.
	CreateInsteadOfMerge bool
	// Database is the database to use; empty means the server's default.
	Database string
	// Label is the node label; empty means NodeLabel. It must be a plain
	// identifier (letters, digits, underscore). Writers with different
	// labels see separate graphs.
	Label string
}

var (
	_ reference.GraphWriter = (*Writer)(nil)
)

// Writer is a reference.GraphWriter on Neo4j. It is safe for concurrent use.
type Writer struct {
	drv      driver.DriverWithContext
	opts     Options
	label    string // validated, used verbatim in Cypher
	secret   string // the password, redacted from error messages
	database string
	q        queries
	// readOnly reads in read transactions without taking the space's
	// gate (OpenReadOnly writes nothing, not even the gate).
	readOnly bool
}

// queries are the Cypher statements of one label and mode.
type queries struct {
	deleteNodes, deleteEdges, upsertNodes, missing, upsertEdges, readNodes, readEdges string
	// gate locks a space's gate node (unique per space) for the rest of
	// the transaction: every Apply and every read takes it first. Neo4j
	// reads at read-committed, and a read of nodes then edges could
	// otherwise see half of a concurrent write (the linearizability check
	// of properties.Stores found it).
	gate string
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// gateLabel labels the per-space gate nodes of label (queries.gate).
func gateLabel(label string) string { return label + "SpaceGate" }

// constraintName is the name of the uniqueness constraint of label.
func constraintName(label string) string {
	if label == NodeLabel {
		return ConstraintName
	}
	return ConstraintName + "_" + strings.ToLower(label)
}

func buildQueries(label string, create bool) queries {
	n := func(v, id string) string { return "(" + v + ":" + label + " {space: $space, id: " + id + "})" }
	q := queries{
		gate:        "MERGE (g:" + gateLabel(label) + " {space: $space}) SET g.uses = coalesce(g.uses, 0) + 1",
		deleteNodes: "UNWIND $ids AS id MATCH " + n("n", "id") + " DETACH DELETE n",
		deleteEdges: "UNWIND $edges AS e MATCH " + n("a", "e.source") +
			"-[r:" + EdgeType + " {space: $space, type: e.type, rank: e.rank}]->" + n("b", "e.target") + " DELETE r",
		missing: "UNWIND $ids AS id OPTIONAL MATCH " + n("n", "id") +
			" WITH id, count(n) AS c WHERE c = 0 RETURN id",
		readNodes: "MATCH (n:" + label + " {space: $space}) RETURN n.id AS id, n.label AS label, properties(n) AS props ORDER BY elementId(n)",
		readEdges: "MATCH (a:" + label + " {space: $space})-[r:" + EdgeType + " {space: $space}]->(b:" + label + ") " +
			"RETURN a.id AS source, r.type AS type, b.id AS target, r.rank AS rank, properties(r) AS props ORDER BY elementId(r)",
	}
	if create {
		q.upsertNodes = "UNWIND $nodes AS x CREATE (n:" + label + " {space: $space, id: x.id, label: x.label}) SET n += x.props"
		q.upsertEdges = "UNWIND $edges AS e MATCH " + n("a", "e.source") + " MATCH " + n("b", "e.target") +
			" CREATE (a)-[r:" + EdgeType + " {space: $space, type: e.type, rank: e.rank}]->(b) SET r += e.props"
	} else {
		q.upsertNodes = "UNWIND $nodes AS x MERGE " + n("n", "x.id") + " ON CREATE SET n.label = x.label SET n += x.props"
		q.upsertEdges = "UNWIND $edges AS e MATCH " + n("a", "e.source") + " MATCH " + n("b", "e.target") +
			" MERGE (a)-[r:" + EdgeType + " {space: $space, type: e.type, rank: e.rank}]->(b) SET r += e.props"
	}
	return q
}

// Open connects to the Neo4j server at uri (bolt://, neo4j://, ...) with
// basic authentication, verifies connectivity and credentials, and creates
// the schema idempotently: the uniqueness constraint on (space, id) of the
// node label (not for the CreateInsteadOfMerge mutant) and an index on
// space. Errors are *Error values that never contain the password. Close
// the writer when done.
func Open(ctx context.Context, uri, user, password string, opts Options) (*Writer, error) {
	w, err := connect(ctx, uri, user, password, opts)
	if err != nil {
		return nil, err
	}
	if _, err := w.ensureSchema(ctx); err != nil {
		_ = w.drv.Close(ctx)
		return nil, err
	}
	return w, nil
}

// schemaRule is one constraint or index the writer needs, by name.
type schemaRule struct{ name, create string }

// schemaRules are the constraint and indexes of the writer's label.
func (w *Writer) schemaRules() []schemaRule {
	name := constraintName(w.label)
	var rules []schemaRule
	if !w.opts.CreateInsteadOfMerge {
		rules = append(rules, schemaRule{name, "CREATE CONSTRAINT " + name + " IF NOT EXISTS FOR (n:" + w.label + ") REQUIRE (n.space, n.id) IS UNIQUE"})
	}
	return append(rules,
		schemaRule{name + "_space", "CREATE INDEX " + name + "_space IF NOT EXISTS FOR (n:" + w.label + ") ON (n.space)"},
		// One gate per space, so that racing first writers lock the same node.
		schemaRule{name + "_gate", "CREATE CONSTRAINT " + name + "_gate IF NOT EXISTS FOR (g:" + gateLabel(w.label) + ") REQUIRE g.space IS UNIQUE"})
}

// ensureSchema creates the constraint and indexes that are missing, each
// in its own schema transaction, and returns how many it created. It
// reads what exists first: a schema transaction takes Neo4j's schema lock
// exclusively, so that it waits for every data transaction in flight and
// holds back every new one, and every worker process of a matrix opens a
// writer (three schema transactions each, before). Two processes racing
// to create the same rule can make one fail; the statement is then
// retried once and is a no-op.
func (w *Writer) ensureSchema(ctx context.Context) (int, error) {
	have, err := w.schemaNames(ctx)
	if err != nil {
		return 0, w.wrap("read schema", err)
	}
	created := 0
	for _, r := range w.schemaRules() {
		if have[r.name] {
			continue
		}
		var err error
		for attempt := 0; attempt < 2; attempt++ {
			if err = w.exec(ctx, r.create, nil); err == nil {
				break
			}
		}
		if err != nil {
			return created, w.wrap("create schema", err)
		}
		created++
	}
	return created, nil
}

// schemaNames reads the names of the database's constraints and indexes
// (in a managed read transaction: the driver retries a transient error).
func (w *Writer) schemaNames(ctx context.Context) (map[string]bool, error) {
	s := w.session(ctx, driver.AccessModeRead)
	defer s.Close(ctx)
	names, err := s.ExecuteRead(ctx, func(tx driver.ManagedTransaction) (any, error) {
		have := map[string]bool{}
		for _, q := range []string{"SHOW CONSTRAINTS YIELD name RETURN name", "SHOW INDEXES YIELD name RETURN name"} {
			res, err := tx.Run(ctx, q, nil)
			if err != nil {
				return nil, err
			}
			recs, err := res.Collect(ctx)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				if n, ok := r.Values[0].(string); ok {
					have[n] = true
				}
			}
		}
		return have, nil
	})
	if err != nil {
		return nil, err
	}
	return names.(map[string]bool), nil
}

// exec runs one statement in a managed write transaction.
func (w *Writer) exec(ctx context.Context, cypher string, params map[string]any) error {
	s := w.session(ctx, driver.AccessModeWrite)
	defer s.Close(ctx)
	_, err := s.ExecuteWrite(ctx, func(tx driver.ManagedTransaction) (any, error) {
		res, err := tx.Run(ctx, cypher, params)
		if err != nil {
			return nil, err
		}
		_, err = res.Consume(ctx)
		return nil, err
	})
	return err
}

func (w *Writer) session(ctx context.Context, mode driver.AccessMode) driver.SessionWithContext {
	return w.drv.NewSession(ctx, driver.SessionConfig{AccessMode: mode, DatabaseName: w.database})
}

// Close closes the driver and its connections.
func (w *Writer) Close(ctx context.Context) error {
	if err := w.drv.Close(ctx); err != nil {
		return w.wrap("close", err)
	}
	return nil
}

// Options returns the options the writer was opened with.
func (w *Writer) Options() Options { return w.opts }
