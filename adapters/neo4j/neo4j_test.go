package neo4j

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/crashmatrix/crashmatrix/reference"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// query runs cypher on the writer's driver and returns its records.
func query(t *testing.T, w *Writer, cypher string, params map[string]any) []*driver.Record {
	t.Helper()
	res, err := driver.ExecuteQuery(ctxT(t), w.drv, cypher, params, driver.EagerResultTransformer)
	if err != nil {
		t.Fatalf("%s: %v", cypher, err)
	}
	return res.Records
}

func countIn(t *testing.T, w *Writer, space string) (nodes, edges int64) {
	t.Helper()
	r := query(t, w, "MATCH (n:"+w.label+" {space: $space}) RETURN count(n)", map[string]any{"space": space})
	nodes = r[0].Values[0].(int64)
	r = query(t, w, "MATCH ()-[r:"+EdgeType+" {space: $space}]->() RETURN count(r)", map[string]any{"space": space})
	edges = r[0].Values[0].(int64)
	return nodes, edges
}

func mustApply(t *testing.T, w reference.GraphWriter, space string, m reference.Mutation) {
	t.Helper()
	if err := w.Apply(ctxT(t), space, m); err != nil {
		t.Fatalf("Apply(%s, %s): %v", space, m.OperationID, err)
	}
}

func mustRead(t *testing.T, w reference.GraphWriter, space string) reference.Graph {
	t.Helper()
	g, err := w.ReadGraph(ctxT(t), space)
	if err != nil {
		t.Fatalf("ReadGraph(%s): %v", space, err)
	}
	return g
}

func fold(t *testing.T, ms ...reference.Mutation) reference.Graph {
	t.Helper()
	g := reference.NewGraph()
	for _, m := range ms {
		if err := g.Apply(m); err != nil {
			t.Fatalf("reference fold of %s: %v", m.OperationID, err)
		}
	}
	return g
}

func sameGraph(t *testing.T, what string, want, got reference.Graph) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func TestOpenCreatesConstraintAndIsIdempotent(t *testing.T) {
	w1 := openWriter(t, Options{})
	w2 := openWriter(t, Options{}) // Open twice: the schema statements are no-ops
	_ = openWriter(t, Options{})
	// Once the schema is there, an open writes none of it: a schema
	// transaction would take Neo4j's schema lock from every case running.
	if n, err := w2.ensureSchema(ctxT(t)); err != nil || n != 0 {
		t.Fatalf("ensureSchema on a database that has the schema: created %d (%v), want 0", n, err)
	}
	if rules := w2.schemaRules(); len(rules) != 3 {
		t.Fatalf("%d schema rules, want the constraint, the space index and the gate constraint", len(rules))
	}
	have, err := w2.schemaNames(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range w2.schemaRules() {
		if !have[r.name] {
			t.Errorf("schema rule %s not in SHOW CONSTRAINTS/INDEXES after Open (found %v)", r.name, have)
		}
	}
	recs := query(t, w2, "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties WHERE name = $name RETURN type, labelsOrTypes, properties",
		map[string]any{"name": ConstraintName})
	if len(recs) != 1 {
		t.Fatalf("constraint %s: %d found; want 1", ConstraintName, len(recs))
	}
	v := recs[0].Values
	if v[0] != "UNIQUENESS" || !reflect.DeepEqual(v[1], []any{NodeLabel}) || !reflect.DeepEqual(v[2], []any{"space", "id"}) {
		t.Errorf("constraint %s = %v; want UNIQUENESS on %s(space, id)", ConstraintName, v, NodeLabel)
	}
	// The constraint is enforced: a second node with the same identity is refused.
	space := testSpace(t)
	mustApply(t, w1, space, reference.Mutation{OperationID: "op", UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L"}}})
	_, err = driver.ExecuteQuery(ctxT(t), w1.drv, "CREATE (:"+NodeLabel+" {space: $space, id: 'a'})", map[string]any{"space": space}, driver.EagerResultTransformer)
	var ne *driver.Neo4jError
	if !errors.As(err, &ne) || ne.Code != "Neo.ClientError.Schema.ConstraintValidationFailed" {
		t.Errorf("CREATE of a duplicate node = %v; want ConstraintValidationFailed", err)
	}
	if err := w1.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Close twice is harmless (Cleanup closes again).
}

func TestApplyTwiceEqualsOnceWithExactProperties(t *testing.T) {
	w := openWriter(t, Options{})
	space := testSpace(t)
	odd := map[string]string{
		"space": "user space", "id": "user id", "label": "user label", "p_x": "prefixed", "": "empty key",
		"with space": "", "`tick`": "a\nb\tc", "ünï": "日本語 \u001f \"quoted\" 'single'", "rank": "7", "type": "T",
	}
	m := reference.Mutation{OperationID: "op-1",
		UpsertNodes: []reference.NodeUpsert{{ID: "person:1", Label: "Person", Properties: odd}, {ID: "x y/z", Label: "Thing"}},
		UpsertEdges: []reference.EdgeUpsert{
			{Key: reference.EdgeKey{Source: "person:1", Type: "KNOWS", Target: "x y/z", Rank: 0}, Properties: odd},
			{Key: reference.EdgeKey{Source: "person:1", Type: "KNOWS", Target: "x y/z", Rank: -5}},
			{Key: reference.EdgeKey{Source: "x y/z", Type: "with space", Target: "x y/z", Rank: 1 << 40}},
		}}
	want := fold(t, m)
	mustApply(t, w, space, m)
	sameGraph(t, "after one apply", want, mustRead(t, w, space))
	mustApply(t, w, space, m)
	sameGraph(t, "after two applies", want, mustRead(t, w, space))
	if n, e := countIn(t, w, space); n != 2 || e != 3 {
		t.Errorf("stored %d nodes and %d relationships; want 2 and 3", n, e)
	}
	if d, err := w.Duplicates(ctxT(t), space); err != nil || len(d) != 0 {
		t.Errorf("Duplicates = %q, %v; want none", d, err)
	}
	// The label of an existing node is kept (reference fold semantics).
	relabel := reference.Mutation{OperationID: "op-2", UpsertNodes: []reference.NodeUpsert{{ID: "x y/z", Label: "Other", Properties: map[string]string{"k": "v"}}}}
	mustApply(t, w, space, relabel)
	sameGraph(t, "after a relabelling upsert", fold(t, m, relabel), mustRead(t, w, space))
}

func TestMissingEndpointRollsBackEverything(t *testing.T) {
	w := openWriter(t, Options{})
	space := testSpace(t)
	setup := reference.Mutation{OperationID: "op-setup",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{"v": "1"}}, {ID: "b", Label: "L"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "R", Target: "b"}, Properties: map[string]string{"w": "1"}}}}
	mustApply(t, w, space, setup)
	before := mustRead(t, w, space)
	bad := reference.Mutation{OperationID: "op-bad",
		DeleteNodes: []string{"b"},
		DeleteEdges: []reference.EdgeKey{{Source: "a", Type: "R", Target: "b"}},
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{"v": "2"}}, {ID: "c", Label: "L"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "R", Target: "c"}}, {Key: reference.EdgeKey{Source: "c", Type: "R", Target: "ghost"}}}}
	err := w.Apply(ctxT(t), space, bad)
	if !errors.Is(err, reference.ErrMissingEndpoint) {
		t.Fatalf("Apply(edge to a ghost) = %v; want ErrMissingEndpoint", err)
	}
	if reference.IsRetryable(err) {
		t.Errorf("reference.IsRetryable(%v) = true; want false", err)
	}
	if !strings.Contains(err.Error(), "ghost") {
		t.Errorf("error %q does not name the edge", err)
	}
	sameGraph(t, "after the failed apply (node delete, edge delete and node upserts rolled back)", before, mustRead(t, w, space))
	if n, e := countIn(t, w, space); n != 2 || e != 1 {
		t.Errorf("stored %d nodes and %d relationships after the rollback; want 2 and 1", n, e)
	}
}

func TestCreateMutantYieldsDuplicates(t *testing.T) {
	const label = "CMNodeMutant"
	w := openWriter(t, Options{CreateInsteadOfMerge: true, Label: label})
	recs := query(t, w, "SHOW CONSTRAINTS YIELD labelsOrTypes WHERE $label IN labelsOrTypes RETURN count(*)", map[string]any{"label": label})
	if n := recs[0].Values[0].(int64); n != 0 {
		t.Errorf("the mutant created %d constraints on %s; want none", n, label)
	}
	space := testSpace(t)
	m := reference.Mutation{OperationID: "op",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{"k": "1"}}, {ID: "b", Label: "L"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "R", Target: "b"}}}}
	mustApply(t, w, space, m)
	if d, err := w.Duplicates(ctxT(t), space); err != nil || len(d) != 0 {
		t.Fatalf("Duplicates after one apply = %q, %v; want none", d, err)
	}
	mustApply(t, w, space, m)
	d, err := w.Duplicates(ctxT(t), space)
	if err != nil {
		t.Fatal(err)
	}
	// Second apply: a and b again, and a->b between every copy (2x2) of the endpoints.
	want := []string{"node a x2", "node b x2", "edge (a)-[R#0]->(b) x5"}
	if !slices.Equal(d, want) {
		t.Errorf("Duplicates after two applies = %q; want %q", d, want)
	}
	// ReadGraph folds the copies.
	sameGraph(t, "mutant ReadGraph", fold(t, m), mustRead(t, w, space))
	// A merging writer on the same label does not see the default label's graph and vice versa.
	if g := mustRead(t, openWriter(t, Options{}), space); len(g.Nodes) != 0 {
		t.Errorf("the default label sees %d mutant nodes", len(g.Nodes))
	}
}

func TestMutantOnConstrainedLabelFailsPermanently(t *testing.T) {
	_ = openWriter(t, Options{}) // the constraint on CMNode exists
	w := openWriter(t, Options{CreateInsteadOfMerge: true})
	space := testSpace(t)
	m := reference.Mutation{OperationID: "op", UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L"}}}
	mustApply(t, w, space, m)
	err := w.Apply(ctxT(t), space, m)
	var e *Error
	if !errors.As(err, &e) || e.Code != "Neo.ClientError.Schema.ConstraintValidationFailed" || !e.Permanent() {
		t.Fatalf("second CREATE of node a = %#v; want a permanent *Error with ConstraintValidationFailed", err)
	}
	if reference.IsRetryable(err) {
		t.Errorf("reference.IsRetryable(constraint violation) = true")
	}
}

func TestErrorsAreClassified(t *testing.T) {
	cases := []struct {
		err       error
		retryable bool
	}{
		{&driver.Neo4jError{Code: "Neo.TransientError.Transaction.DeadlockDetected"}, true},
		{&driver.Neo4jError{Code: "Neo.TransientError.General.DatabaseUnavailable"}, true},
		{&driver.Neo4jError{Code: "Neo.ClientError.Schema.ConstraintValidationFailed"}, false},
		{&driver.Neo4jError{Code: "Neo.ClientError.Statement.SyntaxError"}, false},
		{&driver.Neo4jError{Code: "Neo.ClientError.Security.Unauthorized"}, false},
		{&driver.Neo4jError{Code: "Neo.ClientError.Security.Forbidden"}, false},
		{&driver.Neo4jError{Code: "Neo.ClientError.Security.AuthorizationExpired"}, true},
		{&driver.Neo4jError{Code: "Neo.ClientError.Cluster.NotALeader"}, true},
		{&driver.Neo4jError{Code: "Neo.ClientError.Database.DatabaseNotFound"}, false},
		{&driver.ConnectivityError{Inner: errors.New("connection reset")}, true},
		{&driver.TransactionExecutionLimit{Cause: "timeout"}, true},
		{&driver.UsageError{Message: "closed driver"}, false},
		{context.DeadlineExceeded, true},
	}
	w := &Writer{secret: "s3cr3t-pw"}
	for _, c := range cases {
		err := w.wrap("test", fmt.Errorf("wrapped: %w", c.err))
		var e *Error
		if !errors.As(err, &e) || e.Retryable != c.retryable || e.Permanent() == c.retryable {
			t.Errorf("wrap(%v) = %#v; want retryable=%v", c.err, err, c.retryable)
		}
		if got := reference.IsRetryable(err); got != c.retryable {
			t.Errorf("reference.IsRetryable(%v) = %v; want %v", err, got, c.retryable)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("wrap(%v) does not unwrap to its cause", c.err)
		}
	}
	if msg := w.wrap("op", errors.New("user neo4j password s3cr3t-pw rejected")).Error(); strings.Contains(msg, "s3cr3t-pw") {
		t.Errorf("message %q contains the password", msg)
	}

	// Live: a syntax error and a schema error from the server are permanent.
	lw := openWriter(t, Options{})
	for _, c := range []struct{ cypher, code string }{
		{"THIS IS NOT CYPHER", "Neo.ClientError.Statement.SyntaxError"},
		{"CREATE CONSTRAINT " + ConstraintName + " FOR (n:OtherLabel) REQUIRE n.x IS UNIQUE", "Neo.ClientError.Schema."},
	} {
		err := lw.wrap("test", lw.exec(ctxT(t), c.cypher, nil))
		var e *Error
		if !errors.As(err, &e) || !strings.HasPrefix(e.Code, c.code) || !e.Permanent() || reference.IsRetryable(err) {
			t.Errorf("%q: %#v; want a permanent *Error with code %s*", c.cypher, err, c.code)
		}
	}
}

func TestWrongPasswordNeverInErrors(t *testing.T) {
	wrong := "wrong-" + server.Password[len(server.Password)/2:] + "-pw"
	_, err := Open(ctxT(t), server.URI, server.User, wrong, Options{})
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	var e *Error
	if !errors.As(err, &e) || !e.Permanent() || reference.IsRetryable(err) || !strings.HasPrefix(e.Code, "Neo.ClientError.Security.") {
		t.Errorf("Open with a wrong password = %#v; want a permanent *Error with a Neo.ClientError.Security code", err)
	}
	for _, secret := range []string{wrong, server.Password} {
		if secret != "" && (strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret)) {
			t.Errorf("error %q contains a password", err)
		}
	}
	t.Logf("wrong password: %v", err)
	// The right password still works (no lockout).
	_ = openWriter(t, Options{})
}

func TestUnreachableServerIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = Open(ctx, "bolt://"+addr, "neo4j", "some-password", Options{})
	var e *Error
	if !errors.As(err, &e) || e.Permanent() || !reference.IsRetryable(err) {
		t.Errorf("Open(%s) = %#v; want a retryable *Error", addr, err)
	}
	if strings.Contains(err.Error(), "some-password") {
		t.Errorf("error %q contains the password", err)
	}
}

func TestOpenRejectsBadLabel(t *testing.T) {
	_, err := Open(ctxT(t), server.URI, server.User, server.Password, Options{Label: "x) DETACH DELETE n //"})
	if !errors.Is(err, reference.ErrInvalidArgument) || reference.IsRetryable(err) {
		t.Errorf("Open with an injected label = %v; want a permanent ErrInvalidArgument", err)
	}
}

func TestConcurrentAppliesLeaveNoDuplicates(t *testing.T) {
	space := testSpace(t)
	m := reference.Mutation{OperationID: "op",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L"}, {ID: "b", Label: "L"}, {ID: "c", Label: "L"}},
		UpsertEdges: []reference.EdgeUpsert{
			{Key: reference.EdgeKey{Source: "a", Type: "R", Target: "b"}},
			{Key: reference.EdgeKey{Source: "b", Type: "R", Target: "c"}},
			{Key: reference.EdgeKey{Source: "c", Type: "R", Target: "a", Rank: 2}},
		}}
	const n = 8
	writers := make([]*Writer, n)
	for i := range writers {
		writers[i] = openWriter(t, Options{})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				mm := m
				mm.UpsertNodes = []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{fmt.Sprintf("w%d", i): fmt.Sprint(j)}}, m.UpsertNodes[1], m.UpsertNodes[2]}
				if err := writers[i].Apply(context.Background(), space, mm); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if d, err := writers[0].Duplicates(ctxT(t), space); err != nil || len(d) != 0 {
		t.Errorf("Duplicates after concurrent applies = %q, %v; want none", d, err)
	}
	g := mustRead(t, writers[0], space)
	if len(g.Nodes) != 3 || len(g.Edges) != 3 || len(g.Nodes["a"].Properties) != n {
		t.Errorf("graph after concurrent applies: %+v", g)
	}
}

func TestEmptyAndInvalidMutations(t *testing.T) {
	w := openWriter(t, Options{})
	if err := w.Apply(ctxT(t), testSpace(t), reference.Mutation{OperationID: "empty"}); err != nil {
		t.Errorf("Apply(empty) = %v", err)
	}
	if err := w.Apply(ctxT(t), " ", reference.Mutation{OperationID: "x", UpsertNodes: []reference.NodeUpsert{{ID: "a"}}}); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Errorf("Apply(blank space) = %v; want ErrInvalidArgument", err)
	}
	if g := mustRead(t, w, testSpace(t)); g.Nodes == nil || g.Edges == nil || len(g.Nodes)+len(g.Edges) != 0 {
		t.Errorf("ReadGraph(unused space) = %+v; want an empty, non-nil graph", g)
	}
}

func TestDatabaseOption(t *testing.T) {
	w := openWriter(t, Options{Database: "neo4j"})
	space := testSpace(t)
	mustApply(t, w, space, reference.Mutation{OperationID: "op", UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L"}}})
	if g := mustRead(t, openWriter(t, Options{}), space); len(g.Nodes) != 1 {
		t.Errorf("the default database does not see the node written to database neo4j: %+v", g)
	}
	_, err := Open(ctxT(t), server.URI, server.User, server.Password, Options{Database: "nosuchdb"})
	var e *Error
	if !errors.As(err, &e) || !e.Permanent() || reference.IsRetryable(err) {
		t.Errorf("Open(database nosuchdb) = %#v; want a permanent *Error", err)
	}
	t.Logf("missing database: %v", err)
}
