package postgres

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/crashmatrix/crashmatrix/adapters/postgres/pgtest"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// serverDSN is the server every test uses: started by TestMain, or
// pgtest.EnvDSN.
var serverDSN string

// ownServer is true when TestMain started the server (so pgtest.AuthUser
// needs a password).
var ownServer bool

func TestMain(m *testing.M) {
	flag.Parse()
	start := time.Now()
	dsn, stop, err := pgtest.StartServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: adapters/postgres needs a PostgreSQL server: %v\n", err)
		os.Exit(1)
	}
	serverDSN, ownServer = dsn, os.Getenv(pgtest.EnvDSN) == ""
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "postgres server %s ready in %v\n", RedactDSN(dsn), time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// schemaDSN returns a DSN on a fresh schema of the test server, dropped
// when t ends.
func schemaDSN(t testing.TB) string {
	t.Helper()
	return pgtest.Schema(t, serverDSN)
}

func openDSN(t testing.TB, dsn string, mutant bool) reference.Stores {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{CreateInsteadOfMerge: mutant})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openFresh(t *testing.T, mutant bool) reference.Stores {
	t.Helper()
	return openDSN(t, schemaDSN(t), mutant)
}

// rawConn connects to dsn directly, for inspection and tampering.
func rawConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestConformance runs the exported conformance suites of the properties
// package, one fresh schema per subtest.
func TestConformance(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		s, err := Open(context.Background(), schemaDSN(t), Options{})
		if err != nil {
			t.Fatalf("postgres.Open: %v", err)
		}
		return s
	})
}

// The CreateInsteadOfMerge option stores copies that ReadRecords lists
// (the conformance suite itself runs in TestConformance).
func TestCreateInsteadOfMerge(t *testing.T) { storetest.Mutant(t, openFresh) }

func migrationRows(t *testing.T, dsn string) []int {
	t.Helper()
	rows, err := rawConn(t, dsn).Query(context.Background(), `SELECT version FROM `+MigrationsTable+` ORDER BY version`)
	storetest.Must(t, err)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	storetest.Must(t, err)
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = int(v)
	}
	return out
}

func wantMigrations(t *testing.T, dsn string) {
	t.Helper()
	got := migrationRows(t, dsn)
	if len(got) != len(migrations) {
		t.Fatalf("migration rows %v, want one per migration (%d)", got, len(migrations))
	}
	for i, m := range migrations {
		if got[i] != m.version {
			t.Fatalf("migration rows %v, want versions of %v", got, migrations)
		}
	}
	if got[len(got)-1] != SchemaVersion {
		t.Fatalf("latest version %d, want %d", got[len(got)-1], SchemaVersion)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	dsn := schemaDSN(t)
	a := openDSN(t, dsn, false)
	storetest.Must(t, a.Close())
	b := openDSN(t, dsn, false)
	wantMigrations(t, dsn)
	// The second Open works on the tables the first one created.
	op, plan := storetest.FixtureOp("sp", "d", "op-mig", 0, 1)
	ok, err := b.Ops.CreateIfAbsent(context.Background(), op, plan)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("CreateIfAbsent on a fresh schema = false")
	}
	c := openDSN(t, dsn, false)
	if _, err := c.Ops.Get(context.Background(), "op-mig"); err != nil {
		t.Fatal(err)
	}
	wantMigrations(t, dsn)
	// The partial recovery index exists.
	var n int
	storetest.Must(t, rawConn(t, dsn).QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes
		WHERE schemaname = current_schema() AND indexname = 'crashmatrix_operations_recovery_idx'
		AND indexdef LIKE '%WHERE%'`).Scan(&n))
	if n != 1 {
		t.Fatalf("partial recovery index missing (%d)", n)
	}
}

// TestRecoveryScanUsesIndex checks that the ListRecoverable query is
// served by the partial index on unfinished rows, in index order.
func TestRecoveryScanUsesIndex(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	s := openDSN(t, dsn, false)
	for i := range 50 {
		storetest.CreateOp(t, s, fmt.Sprintf("op-idx-%02d", i), int64(100-i))
	}
	raw := rawConn(t, dsn)
	_, err := raw.Exec(ctx, `ANALYZE crashmatrix_operations`)
	storetest.Must(t, err)
	_, err = raw.Exec(ctx, `SET enable_seqscan = off`)
	storetest.Must(t, err)
	rows, err := raw.Query(ctx, `EXPLAIN SELECT `+sqlcore.OpColumns+` FROM crashmatrix_operations
		WHERE stage <> 'COMPLETED' AND disposition = ''
		ORDER BY updated_at, operation_id LIMIT 10`)
	storetest.Must(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	storetest.Must(t, err)
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Index Scan using crashmatrix_operations_recovery_idx") || strings.Contains(plan, "Sort") {
		t.Fatalf("recovery scan is not an ordered scan of the partial index:\n%s", plan)
	}
	ops, err := s.Ops.ListRecoverable(ctx, 3)
	storetest.Must(t, err)
	if len(ops) != 3 || ops[0].OperationID != "op-idx-49" || ops[2].OperationID != "op-idx-47" {
		t.Fatalf("ListRecoverable = %v", ops)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dsn := schemaDSN(t)
	openDSN(t, dsn, false)
	_, err := rawConn(t, dsn).Exec(context.Background(), `INSERT INTO `+MigrationsTable+` (version, applied_at) VALUES ($1, now())`, SchemaVersion+1)
	storetest.Must(t, err)
	_, err = Open(context.Background(), dsn, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open on a newer schema: %v", err)
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() {
		t.Fatalf("newer schema error is not permanent: %v", err)
	}
}

func TestConcurrentOpen(t *testing.T) {
	dsn := schemaDSN(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]reference.Stores, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), dsn, Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	wantMigrations(t, dsn)
	// Every handle works on the same tables.
	op, plan := storetest.FixtureOp("sp", "d", "op-conc", 0, 1)
	ok, err := stores[0].Ops.CreateIfAbsent(context.Background(), op, plan)
	storetest.Must(t, err)
	if !ok {
		t.Fatal("create = false")
	}
	for i, s := range stores {
		if _, err := s.Ops.Get(context.Background(), "op-conc"); err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
	}
}

// race runs f(0) and f(1) at the same moment and returns how many won.
func race(t *testing.T, f func(i int) (bool, error)) int {
	t.Helper()
	var wg sync.WaitGroup
	var wins atomic.Int32
	start := make(chan struct{})
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := f(i)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(wins.Load())
}

// TestTwoPoolsRace races two independent pools (as two processes would)
// on the same rows: exactly one wins every round.
func TestTwoPoolsRace(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	pools := []reference.Stores{openDSN(t, dsn, false), openDSN(t, dsn, false)}
	const rounds = 40
	for r := range rounds {
		id := fmt.Sprintf("op-race-%d", r)
		doc := fmt.Sprintf("doc-%d", r)
		if w := race(t, func(i int) (bool, error) {
			op, plan := storetest.FixtureOp("sp", doc, id, 0, 10)
			return pools[i].Ops.CreateIfAbsent(ctx, op, plan)
		}); w != 1 {
			t.Fatalf("round %d: %d CreateIfAbsent winners", r, w)
		}
		cur, err := pools[0].Ops.Get(ctx, id)
		storetest.Must(t, err)
		if w := race(t, func(i int) (bool, error) {
			next := cur
			next.Stage, next.UpdatedAt, next.FailureReason = reference.GraphApplied, 20+int64(i), fmt.Sprintf("pool %d", i)
			if i == 1 {
				next.Stage = reference.Failed
			}
			return pools[i].Ops.CompareAndSet(ctx, cur, next)
		}); w != 1 {
			t.Fatalf("round %d: %d stage CAS winners", r, w)
		}
		if w := race(t, func(i int) (bool, error) {
			return pools[i].Ops.Claim(ctx, id, fmt.Sprintf("holder-%d", i), 100, 1000)
		}); w != 1 {
			t.Fatalf("round %d: %d Claim winners", r, w)
		}
		var leases [2]reference.Lease
		if w := race(t, func(i int) (bool, error) {
			l, ok, err := pools[i].Locks.TryAcquire(ctx, "sp", doc, fmt.Sprintf("holder-%d", i), 100, 1000)
			leases[i] = l
			return ok, err
		}); w != 1 {
			t.Fatalf("round %d: %d TryAcquire winners", r, w)
		}
		if leases[0].Token != 1 || leases[1].Token != 1 || leases[0].Holder != leases[1].Holder {
			t.Fatalf("round %d: leases %+v", r, leases)
		}
		next := reference.DocumentState{Space: "sp", DocumentID: doc, Revision: 1, OperationID: id, Status: reference.DocActive}
		if w := race(t, func(i int) (bool, error) {
			return pools[i].States.CompareAndSet(ctx, 0, next)
		}); w != 1 {
			t.Fatalf("round %d: %d state CAS winners", r, w)
		}
		regs := func(i int) []reference.EntityRegistration {
			return []reference.EntityRegistration{{NodeID: fmt.Sprintf("n-%d-%d", r, i), Type: "Person", CanonicalName: fmt.Sprintf("Name %d", r)}}
		}
		if w := race(t, func(i int) (bool, error) {
			err := pools[i].Registry.SaveAll(ctx, "sp", regs(i))
			if errors.Is(err, reference.ErrRegistryConflict) {
				return false, nil
			}
			return err == nil, err
		}); w != 1 {
			t.Fatalf("round %d: %d registry winners", r, w)
		}
	}
}

func TestCorruptPlan(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	s := openDSN(t, dsn, false)
	raw := rawConn(t, dsn)
	for i, payload := range [][]byte{[]byte("{not json"), []byte(`{"kind":"INGESTION"`), []byte(`{"kind":"INGESTION","bogus":1}`), {0xff, 0x00}} {
		id := fmt.Sprintf("op-corrupt-%d", i)
		storetest.CreateOp(t, s, id, 1)
		if _, err := s.Ops.GetPlan(ctx, id); err != nil {
			t.Fatal(err)
		}
		_, err := raw.Exec(ctx, `UPDATE crashmatrix_operations SET plan = $1 WHERE operation_id = $2`, payload, id)
		storetest.Must(t, err)
		_, err = s.Ops.GetPlan(ctx, id)
		storetest.WantErr(t, err, reference.ErrCorruptPlan)
		if reference.IsRetryable(err) {
			t.Fatalf("a corrupt plan is retryable: %v", err)
		}
	}
	// A well-formed plan that does not hash to the stored fingerprint.
	storetest.CreateOp(t, s, "op-fp", 1)
	_, other := storetest.FixtureOp("sp", "doc-op-fp", "op-fp", 0, 1)
	other.Content = "changed"
	payload, err := reference.EncodePlan(other)
	storetest.Must(t, err)
	_, err = raw.Exec(ctx, `UPDATE crashmatrix_operations SET plan = $1 WHERE operation_id = 'op-fp'`, payload)
	storetest.Must(t, err)
	_, err = s.Ops.GetPlan(ctx, "op-fp")
	storetest.WantErr(t, err, reference.ErrFingerprint)
}

func TestCreateInsteadOfMergeDuplicates(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	m := reference.Mutation{OperationID: "op1",
		UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "P"}, {ID: "b", Label: "P"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "KNOWS", Target: "b"}}},
	}
	good := openDSN(t, dsn, false)
	for range 3 {
		storetest.Must(t, good.Writer.Apply(ctx, "merge", m))
	}
	if d := storetest.Duplicates(t, good, "merge"); len(d) != 0 {
		t.Fatalf("MERGE writer stored duplicates: %v", d)
	}
	mutant := openDSN(t, dsn, true)
	storetest.Must(t, mutant.Writer.Apply(ctx, "create", m))
	storetest.Must(t, mutant.Writer.Apply(ctx, "create", m))
	d := storetest.Duplicates(t, mutant, "create")
	want := []string{"node a x2", "node b x2", "edge (a)-[KNOWS#0]->(b) x2"}
	if strings.Join(d, "|") != strings.Join(want, "|") {
		t.Fatalf("mutant Duplicates = %q, want %q", d, want)
	}
}

// TestLeaseSurvivesPoolClose: a lease is a row with an expiry, not a
// session lock; closing the holder's pool does not free it.
func TestLeaseSurvivesPoolClose(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	a, err := Open(ctx, dsn, Options{})
	storetest.Must(t, err)
	l, ok, err := a.Locks.TryAcquire(ctx, "sp", "doc", "proc-a", 1000, 500)
	storetest.Must(t, err)
	if !ok || l.Token != 1 {
		t.Fatalf("acquire = %+v %v", l, ok)
	}
	claimed, err := func() (bool, error) {
		storetest.CreateOp(t, a, "op-lease", 1)
		return a.Ops.Claim(ctx, "op-lease", "proc-a", 1000, 500)
	}()
	storetest.Must(t, err)
	if !claimed {
		t.Fatal("claim = false")
	}
	storetest.Must(t, a.Close())

	b := openDSN(t, dsn, false)
	cur, ok, err := b.Locks.TryAcquire(ctx, "sp", "doc", "proc-b", 1200, 500)
	storetest.Must(t, err)
	if ok || cur.Holder != "proc-a" || cur.Token != 1 {
		t.Fatalf("lease freed by closing the pool: %+v %v", cur, ok)
	}
	if ok, err := b.Ops.Claim(ctx, "op-lease", "proc-b", 1200, 500); err != nil || ok {
		t.Fatalf("claim freed by closing the pool: %v %v", ok, err)
	}
	// Expiry ends it; the token increases.
	l2, ok, err := b.Locks.TryAcquire(ctx, "sp", "doc", "proc-b", 1500, 500)
	storetest.Must(t, err)
	if !ok || l2.Token != 2 || l2.Holder != "proc-b" {
		t.Fatalf("after expiry: %+v %v", l2, ok)
	}
	if _, err := b.Locks.Renew(ctx, l, 1500, 500); !errors.Is(err, reference.ErrLeaseLost) {
		t.Fatalf("stale holder renewed: %v", err)
	}
	if err := b.Locks.Release(ctx, l); !errors.Is(err, reference.ErrLeaseLost) {
		t.Fatalf("stale holder released: %v", err)
	}
	if ok, err := b.Ops.Claim(ctx, "op-lease", "proc-b", 1500, 500); err != nil || !ok {
		t.Fatalf("claim after expiry: %v %v", ok, err)
	}
	// The token counter survives release.
	storetest.Must(t, b.Locks.Release(ctx, l2))
	l3, ok, err := b.Locks.TryAcquire(ctx, "sp", "doc", "proc-a", 1600, 500)
	storetest.Must(t, err)
	if !ok || l3.Token != 3 {
		t.Fatalf("after release: %+v %v", l3, ok)
	}
}

// TestPermanentErrors: schema and unknown-database errors are permanent
// (the service dead-letters), a cancelled context is not.
func TestPermanentErrors(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	s := openDSN(t, dsn, false)
	storetest.CreateOp(t, s, "op-perm", 1)
	_, err := rawConn(t, dsn).Exec(ctx, `ALTER TABLE crashmatrix_operations RENAME COLUMN attempts TO attempts_gone`)
	storetest.Must(t, err)
	_, err = s.Ops.Get(ctx, "op-perm")
	var pe *Error
	if !errors.As(err, &pe) || !pe.Permanent() || pe.Code != "42703" {
		t.Fatalf("undefined column: %v (%#v)", err, pe)
	}
	if !strings.Contains(err.Error(), "op-perm") || !strings.Contains(err.Error(), "operations.get") {
		t.Fatalf("error does not name the operation and id: %v", err)
	}
	if reference.IsRetryable(err) {
		t.Fatalf("schema error is retryable: %v", err)
	}

	bad, err := pgtest.WithParam(serverDSN, "database", "crashmatrix_no_such_db")
	storetest.Must(t, err)
	if strings.HasPrefix(bad, "postgres") {
		bad = strings.Replace(bad, "/postgres?", "/crashmatrix_no_such_db?", 1)
	}
	_, err = Open(ctx, bad, Options{})
	if !errors.As(err, &pe) || !pe.Permanent() || pe.Code != "3D000" {
		t.Fatalf("unknown database: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Ops.ListRecoverable(cctx, 10)
	if err == nil || !reference.IsRetryable(err) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestPasswordRedaction(t *testing.T) {
	const secret = "S3cret-wr0ng-pa55"
	for _, c := range []struct{ in, want string }{
		{"postgres://u:" + secret + "@127.0.0.1:5432/db?sslmode=disable", "postgres://u:xxxxx@127.0.0.1:5432/db?sslmode=disable"},
		{"postgres://u@127.0.0.1/db?password=" + secret, "postgres://u@127.0.0.1/db?password=xxxxx"},
		{"host=127.0.0.1 password=" + secret + " user=u", "host=127.0.0.1 password=xxxxx user=u"},
		{"host=127.0.0.1 password='" + secret + " x' user=u", "host=127.0.0.1 password=xxxxx user=u"},
		{"host=127.0.0.1 user=u", "host=127.0.0.1 user=u"},
	} {
		if got := RedactDSN(c.in); got != c.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	ctx := context.Background()
	check := func(name string, err error, permanent bool) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: Open succeeded", name)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v %#v", err, err.Error()), secret) {
			t.Fatalf("%s: the password leaks: %v", name, err)
		}
		var p interface{ Permanent() bool }
		if got := errors.As(err, &p) && p.Permanent(); got != permanent {
			t.Fatalf("%s: permanent = %v, want %v: %v", name, got, permanent, err)
		}
		t.Logf("%s: %v", name, err)
	}
	// Nobody listens on this port.
	_, err := Open(ctx, "postgres://u:"+secret+"@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", Options{})
	check("refused", err, false)
	_, err = Open(ctx, "host=127.0.0.1 port=1 user=u dbname=db sslmode=disable connect_timeout=2 password="+secret, Options{})
	check("refused kv", err, false)
	_, err = Open(ctx, "postgres://u:"+secret+"@127.0.0.1:notaport/db", Options{})
	check("unparsable", err, true)
	if !ownServer {
		t.Log("wrong-password check needs the server started by pgtest")
		return
	}
	raw := rawConn(t, serverDSN)
	_, err = raw.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '`+pgtest.AuthUser+`') THEN
			CREATE ROLE `+pgtest.AuthUser+` LOGIN PASSWORD 'the-right-one';
		END IF; END $$`)
	storetest.Must(t, err)
	u, err := pgtest.WithParam(serverDSN, "user", pgtest.AuthUser)
	storetest.Must(t, err)
	wrong, err := pgtest.WithParam(u, "password", secret)
	storetest.Must(t, err)
	_, err = Open(ctx, wrong, Options{})
	check("wrong password", err, true)
	if SQLState(err) != "28P01" {
		t.Fatalf("wrong password SQLSTATE %q: %v", SQLState(err), err)
	}
	right, err := pgtest.WithParam(u, "password", "the-right-one")
	storetest.Must(t, err)
	s, err := Open(ctx, right, Options{})
	if err == nil {
		s.Close()
	} else if !strings.Contains(err.Error(), "permission denied") {
		// The role may lack CREATE on the public schema: that is fine,
		// authentication is what this checks.
		t.Fatalf("right password: %v", err)
	}
}

// The optional batch reads (all plans, all versions, graph with duplicates)
// give the snapshot the one-by-one reads give, unreadable plan included.
func TestBatchedReadsAgree(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	st := openDSN(t, dsn, false)
	svc := &reference.Service{Stores: st, Extractor: &reference.FakeExtractor{Log: &reference.MemoryCallLog{}}}
	for _, r := range []reference.IngestRequest{
		{Space: "sp", DocumentID: "d1", Content: "Person:Alice {role=author}\nPerson:Alice -KNOWS-> Person:Bob\n"},
		{Space: "sp", DocumentID: "d2", Content: "Person:Bob -WORKS_AT-> Org:Acme\n"},
		{Space: "sp", DocumentID: "d1", Content: "Person:Alice -KNOWS-> Person:Carol\n"},
	} {
		_, err := svc.Ingest(ctx, r)
		storetest.Must(t, err)
	}
	_, err := svc.Retract(ctx, "sp", "d2")
	storetest.Must(t, err)
	_, err = rawConn(t, dsn).Exec(ctx, `UPDATE crashmatrix_operations SET plan = '\x00ff'::bytea
		WHERE operation_id = (SELECT min(operation_id) FROM crashmatrix_operations WHERE space = 'sp')`)
	storetest.Must(t, err)
	snap, err := check.Take(ctx, st, "sp", nil, nil, nil)
	storetest.Must(t, err)
	if len(snap.Ops) != 4 || len(snap.PlanErrors) != 1 || len(snap.Versions["d1"]) != 2 {
		t.Fatalf("snapshot: %d ops, %d unreadable plans, %d versions of d1; want 4, 1, 2", len(snap.Ops), len(snap.PlanErrors), len(snap.Versions["d1"]))
	}
	diff, err := check.CompareBatchedReads(ctx, st, "sp")
	storetest.Must(t, err)
	if diff != "" {
		t.Fatal(diff)
	}
}
