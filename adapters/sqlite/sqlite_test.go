package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/properties"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
)

func openTemp(t *testing.T, mutant bool) reference.Stores {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "crash.db"), mutant)
}

func openAt(t *testing.T, path string, mutant bool) reference.Stores {
	t.Helper()
	s, err := Open(path, Options{CreateInsteadOfMerge: mutant})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawDB opens the file without the stores, for tampering.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", DSN(path))
	storetest.Must(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// The exported conformance suite, as every store runs it.
func TestStores(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores { return openTemp(t, false) })
}

// The CreateInsteadOfMerge option stores copies that ReadRecords lists.
func TestCreateInsteadOfMerge(t *testing.T) { storetest.Mutant(t, openTemp) }

func TestPragmas(t *testing.T) {
	s := openTemp(t, false)
	db := s.Closer.(*closer).d.sql
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	storetest.Must(t, err)
	defer conn.Close()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": strconv.Itoa(BusyTimeoutMillis)} {
		var got string
		storetest.Must(t, conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got))
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	for i := 0; i < 3; i++ {
		s, err := Open(path, Options{})
		storetest.Must(t, err)
		storetest.Must(t, s.Close())
	}
	db := rawDB(t, path)
	var n, v int
	storetest.Must(t, db.QueryRow(`SELECT count(*), max(version) FROM schema_version`).Scan(&n, &v))
	if n != 1 || v != SchemaVersion {
		t.Fatalf("schema_version rows %d, version %d", n, v)
	}
	_, err := db.Exec(`INSERT INTO schema_version (version) VALUES (?)`, SchemaVersion+1)
	storetest.Must(t, err)
	if s, err := Open(path, Options{}); err == nil {
		s.Close()
		t.Fatal("opened a database with a newer schema")
	}
	if _, err := Open("", Options{}); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Fatalf("blank path: %v", err)
	}
}

// Open skips the migration's write transaction only for a database that
// has every table and index of the schema: one that lost an index gets it
// back.
func TestOpenRecreatesWhatTheSchemaLacks(t *testing.T) {
	if len(schemaNames) != len(schema) {
		t.Fatalf("the schema has %d statements but %d names the fast path checks: %q", len(schema), len(schemaNames), schemaNames)
	}
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(path, Options{})
	storetest.Must(t, err)
	storetest.Must(t, s.Close())
	for _, name := range []string{"graph_edges_target_idx", "leases"} {
		raw := rawDB(t, path)
		kind := "INDEX"
		if name == "leases" {
			kind = "TABLE"
		}
		_, err := raw.Exec("DROP " + kind + " " + name)
		storetest.Must(t, err)
		raw.Close()
		s, err := Open(path, Options{})
		storetest.Must(t, err)
		storetest.Must(t, s.Close())
		var n int
		raw = rawDB(t, path)
		storetest.Must(t, raw.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = ?`, name).Scan(&n))
		raw.Close()
		if n != 1 {
			t.Errorf("after dropping %s and opening again: %d of it in the schema, want 1", name, n)
		}
	}
}

// A version 1 database (tokens in lease_tokens, lease rows deleted on
// release) is migrated: fencing tokens keep growing from where they were.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	s, err := Open(path, Options{})
	storetest.Must(t, err)
	storetest.Must(t, s.Close())
	db := rawDB(t, path)
	for _, q := range []string{
		`CREATE TABLE lease_tokens (space TEXT NOT NULL, document_id TEXT NOT NULL, last_token INTEGER NOT NULL, PRIMARY KEY (space, document_id))`,
		`INSERT INTO lease_tokens VALUES ('sp', 'released', 7), ('sp', 'held', 9), ('sp', 'stale', 3)`,
		`INSERT INTO leases VALUES ('sp', 'held', 'h1', 9, 4000000000000), ('sp', 'stale', 'h2', 5, 0)`,
		`DELETE FROM schema_version`,
		`INSERT INTO schema_version (version) VALUES (1)`,
	} {
		_, err := db.Exec(q)
		storetest.Must(t, err)
	}
	db.Close()
	s = openAt(t, path, false)
	for _, c := range []struct {
		doc       string
		ok        bool
		wantToken int64
	}{
		{"released", true, 8}, // only lease_tokens knew it
		{"held", false, 9},    // still h1's, live
		{"stale", true, 6},    // the larger of the two tokens, plus one
		{"new", true, 1},
	} {
		l, ok, err := s.Locks.TryAcquire(ctx, "sp", c.doc, "h3", 1000, 100)
		storetest.Must(t, err)
		if ok != c.ok || l.Token != c.wantToken {
			t.Errorf("%s after the migration: granted %v token %d, want %v token %d", c.doc, ok, l.Token, c.ok, c.wantToken)
		}
	}
	raw := rawDB(t, path)
	var v int
	storetest.Must(t, raw.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&v))
	var tables int
	storetest.Must(t, raw.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'lease_tokens'`).Scan(&tables))
	if v != SchemaVersion || tables != 0 {
		t.Fatalf("after the migration: schema version %d, lease_tokens tables %d", v, tables)
	}
}

func TestCorruptPlan(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s := openAt(t, path, false)
	storetest.CreateOp(t, s, "op", 1)
	db := rawDB(t, path)
	set := func(col string, v any) {
		t.Helper()
		_, err := db.Exec(`UPDATE operations SET `+col+` = ? WHERE operation_id = 'op'`, v)
		storetest.Must(t, err)
	}
	good, err := s.Ops.GetPlan(ctx, "op")
	storetest.Must(t, err)
	payload, err := reference.EncodePlan(good)
	storetest.Must(t, err)

	set("plan", []byte("\x00\xffgarbage"))
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrCorruptPlan)
	set("plan", payload[:len(payload)/2]) // torn write
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrCorruptPlan)
	set("plan", append(slices.Clone(payload), []byte(`{}`)...))
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrCorruptPlan)
	set("plan", []byte{})
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrNoPersistedPlan)

	tampered := good
	tampered.Content = "tampered"
	tp, err := reference.EncodePlan(tampered)
	storetest.Must(t, err)
	set("plan", tp)
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrFingerprint)

	set("plan", payload)
	if p, err := s.Ops.GetPlan(ctx, "op"); err != nil || !reflect.DeepEqual(p, good) {
		t.Fatalf("restored plan: %v", err)
	}
	set("plan_fingerprint", strings.Repeat("0", 64))
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrFingerprint)
}

// TestDurability writes through every store, closes, reopens and reads it
// all back.
func TestDurability(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.db")
	s, err := Open(path, Options{})
	storetest.Must(t, err)
	op := storetest.CreateOp(t, s, "op", 10)
	next := storetest.Advance(t, op, reference.GraphApplied, 20)
	next.Attempts, next.FailureReason = 2, "flaky"
	if ok, err := s.Ops.CompareAndSet(ctx, op, next); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := s.Ops.Claim(ctx, "op", "inst", 20, 1000); err != nil || !ok {
		t.Fatal(ok, err)
	}
	plan, err := s.Ops.GetPlan(ctx, "op")
	storetest.Must(t, err)
	st := storetest.State("sp", "d", 1, "op", reference.EdgeKey{Source: "a", Type: "T", Target: "b", Rank: 3})
	if ok, err := s.States.CompareAndSet(ctx, 0, st); err != nil || !ok {
		t.Fatal(ok, err)
	}
	storetest.Must(t, s.States.RecordVersion(ctx, st))
	storetest.Must(t, s.Registry.SaveAll(ctx, "sp", plan.Registrations))
	storetest.Must(t, s.Writer.Apply(ctx, "sp", plan.Mutation))
	lease, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", "inst", 0, 100)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	storetest.Must(t, s.Locks.Release(ctx, lease))
	regs, err := s.Registry.List(ctx, "sp")
	storetest.Must(t, err)
	graph := storetest.ReadGraph(t, s, "sp")
	storetest.Must(t, s.Close())

	r := openAt(t, path, false)
	gotOp, err := r.Ops.Get(ctx, "op")
	storetest.Must(t, err)
	want := next
	want.ClaimHolder, want.ClaimExpiresAt = "inst", 1020
	if gotOp != want {
		t.Fatalf("operation after reopen = %+v, want %+v", gotOp, want)
	}
	if p, err := r.Ops.GetPlan(ctx, "op"); err != nil || !reflect.DeepEqual(p, plan) {
		t.Fatalf("plan after reopen: %v", err)
	}
	if cur, ok, err := r.States.FindCurrent(ctx, "sp", "d"); err != nil || !ok || !reflect.DeepEqual(cur, st) {
		t.Fatalf("state after reopen = %+v %v %v", cur, ok, err)
	}
	if vs, err := r.States.Versions(ctx, "sp", "d"); err != nil || !reflect.DeepEqual(vs, []reference.DocumentState{st}) {
		t.Fatalf("versions after reopen = %+v %v", vs, err)
	}
	if got, err := r.Registry.List(ctx, "sp"); err != nil || !reflect.DeepEqual(got, regs) || len(got) != 1 {
		t.Fatalf("registry after reopen = %+v %v", got, err)
	}
	if g := storetest.ReadGraph(t, r, "sp"); !reflect.DeepEqual(g, graph) || len(g.Nodes) != 1 {
		t.Fatalf("graph after reopen = %+v", g)
	}
	l2, ok, err := r.Locks.TryAcquire(ctx, "sp", "d", "other", 0, 100)
	if err != nil || !ok || l2.Token <= lease.Token {
		t.Fatalf("token after reopen = %+v %v %v (before %d)", l2, ok, err, lease.Token)
	}
}

// TestTwoHandles races two independent Open handles on one file from many
// goroutines: every contested write has exactly one winner.
func TestTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	testTwoHandles(t, []reference.Stores{openAt(t, path, false), openAt(t, path, false)})
}

func TestMemoryTwoHandles(t *testing.T) {
	name := memName(t)
	testTwoHandles(t, []reference.Stores{openMem(t, name, false), openMem(t, name, false)})
}

var memSeq atomic.Int64

func memName(t *testing.T) string {
	return fmt.Sprintf("test-%d-%d", os.Getpid(), memSeq.Add(1))
}

func openMem(t *testing.T, name string, mutant bool) reference.Stores {
	t.Helper()
	s, err := OpenMemory(name, Options{CreateInsteadOfMerge: mutant})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The memory database passes the same conformance suite as the file.
func TestMemoryStores(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores { return openMem(t, memName(t), false) })
	t.Run("CreateInsteadOfMerge", func(t *testing.T) {
		storetest.Mutant(t, func(t *testing.T, mutant bool) reference.Stores { return openMem(t, memName(t), mutant) })
	})
}

// Handles that name one memory database share it; it ends with the last
// handle; another name is another database.
func TestMemoryLifetime(t *testing.T) {
	ctx := context.Background()
	name := memName(t)
	a, err := OpenMemory(name, Options{})
	storetest.Must(t, err)
	b, err := OpenMemory(name, Options{})
	storetest.Must(t, err)
	storetest.CreateOp(t, a, "op", 1)
	if _, err := b.Ops.Get(ctx, "op"); err != nil {
		t.Fatalf("a second handle on %s does not see the first one's commit: %v", name, err)
	}
	other := openMem(t, memName(t), false)
	if _, err := other.Ops.Get(ctx, "op"); !errors.Is(err, reference.ErrNotFound) {
		t.Fatalf("another memory database sees op: %v", err)
	}
	storetest.Must(t, a.Close())
	if _, err := b.Ops.Get(ctx, "op"); err != nil {
		t.Fatalf("closing one handle lost the data the other still holds: %v", err)
	}
	storetest.Must(t, b.Close())
	c := openMem(t, name, false)
	if _, err := c.Ops.Get(ctx, "op"); !errors.Is(err, reference.ErrNotFound) {
		t.Fatalf("the database outlived its last handle: %v", err)
	}
	for _, bad := range []string{"", " ", "a/b", "a?b", "a#b"} {
		if _, err := OpenMemory(bad, Options{}); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("OpenMemory(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func testTwoHandles(t *testing.T, hs []reference.Stores) {
	ctx := context.Background()
	const n = 24
	run := func(f func(s reference.Stores, i int) bool) int {
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if f(hs[i%2], i) {
					wins.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		return int(wins.Load())
	}
	one := func(name string, got int) {
		t.Helper()
		if got != 1 {
			t.Fatalf("%s: %d winners, want 1", name, got)
		}
	}
	for round := 0; round < 3; round++ {
		id := fmt.Sprint("op-", round)
		one("CreateIfAbsent", run(func(s reference.Stores, i int) bool {
			p := storetest.FixturePlan("sp", "d", id, 0)
			p.Content = fmt.Sprint("answer ", i)
			ok, err := s.Ops.CreateIfAbsent(ctx, reference.NewOperation(p, 5), p)
			if err != nil {
				t.Error(err)
			}
			return ok
		}))
		op, err := hs[1].Ops.Get(ctx, id)
		storetest.Must(t, err)
		p, err := hs[0].Ops.GetPlan(ctx, id)
		storetest.Must(t, err)
		if reference.Fingerprint(p) != op.PlanFingerprint {
			t.Fatal("stored plan and fingerprint disagree")
		}
		one("Operation CAS", run(func(s reference.Stores, i int) bool {
			ok, err := s.Ops.CompareAndSet(ctx, op, storetest.Advance(t, op, reference.GraphApplied, 10+int64(i)))
			if err != nil {
				t.Error(err)
			}
			return ok
		}))
		one("Claim", run(func(s reference.Stores, i int) bool {
			ok, err := s.Ops.Claim(ctx, id, fmt.Sprint("h", i), 0, 1000)
			if err != nil {
				t.Error(err)
			}
			return ok
		}))
		doc := fmt.Sprint("doc-", round)
		one("State CAS 0", run(func(s reference.Stores, i int) bool {
			ok, err := s.States.CompareAndSet(ctx, 0, storetest.State("sp", doc, 1, fmt.Sprint("o", i)))
			if err != nil {
				t.Error(err)
			}
			return ok
		}))
		one("State CAS 1", run(func(s reference.Stores, i int) bool {
			ok, err := s.States.CompareAndSet(ctx, 1, storetest.State("sp", doc, 2, fmt.Sprint("o", i)))
			if err != nil {
				t.Error(err)
			}
			return ok
		}))
		var tokens sync.Map
		one("TryAcquire", run(func(s reference.Stores, i int) bool {
			l, ok, err := s.Locks.TryAcquire(ctx, "sp", doc, fmt.Sprint("h", i), 0, 1000)
			if err != nil {
				t.Error(err)
			}
			if ok {
				tokens.Store(l.Token, true)
			}
			return ok
		}))
		one("SaveAll", run(func(s reference.Stores, i int) bool {
			err := s.Registry.SaveAll(ctx, "sp", []reference.EntityRegistration{storetest.Reg(fmt.Sprint("n", i), "T", fmt.Sprint("Contested ", round))})
			if err != nil && !errors.Is(err, reference.ErrRegistryConflict) {
				t.Error(err)
			}
			return err == nil
		}))
	}
	// Expired leases taken over from both handles: tokens strictly increase.
	var mu sync.Mutex
	var seen []int64
	run(func(s reference.Stores, i int) bool {
		for now := int64(0); now < 40; now += 10 {
			l, ok, err := s.Locks.TryAcquire(ctx, "sp", "tok", fmt.Sprint("h", i), 1000*int64(i)+now, 1)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				seen = append(seen, l.Token)
				mu.Unlock()
			}
		}
		return true
	})
	slices.Sort(seen)
	if len(slices.Compact(slices.Clone(seen))) != len(seen) {
		t.Fatalf("a fencing token was issued twice: %v", seen)
	}
	// Concurrent MERGE of one node from both handles: one row.
	run(func(s reference.Stores, i int) bool {
		err := s.Writer.Apply(ctx, "sp", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "shared", Label: "L", Properties: map[string]string{fmt.Sprint("p", i): "x"}}}})
		if err != nil {
			t.Error(err)
		}
		return true
	})
	if d := storetest.Duplicates(t, hs[0], "sp"); len(d) != 0 {
		t.Fatalf("duplicates: %v", d)
	}
	if g := storetest.ReadGraph(t, hs[1], "sp"); len(g.Nodes["shared"].Properties) != n {
		t.Fatalf("lost patches: %+v", g.Nodes["shared"])
	}
}

// TestWaitsForWriter holds the write lock on a raw connection: a store write
// waits (busy_timeout) and succeeds once it is released.
func TestWaitsForWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	s := openAt(t, path, false)
	db := rawDB(t, path)
	conn, err := db.Conn(ctx)
	storetest.Must(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	storetest.Must(t, err)
	const hold = 300 * time.Millisecond
	go func() {
		time.Sleep(hold)
		conn.ExecContext(ctx, "COMMIT")
	}()
	start := time.Now()
	storetest.CreateOp(t, s, "op", 1)
	if el := time.Since(start); el < hold-50*time.Millisecond {
		t.Fatalf("write did not wait for the lock holder (%v)", el)
	}
}

// TestMutantSharedFile: a mutant handle writes duplicates that a correct
// handle on the same file reports and folds.
func TestMutantSharedFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	bad, good := openAt(t, path, true), openAt(t, path, false)
	m := reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L"}, {ID: "b", Label: "L"}},
		UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "R", Target: "b"}}}}
	storetest.Must(t, good.Writer.Apply(ctx, "sp", m))
	storetest.Must(t, good.Writer.Apply(ctx, "sp", m))
	if d := storetest.Duplicates(t, good, "sp"); len(d) != 0 {
		t.Fatalf("duplicates from MERGE: %v", d)
	}
	storetest.Must(t, bad.Writer.Apply(ctx, "sp", m))
	want := []string{"node a x2", "node b x2", "edge (a)-[R#0]->(b) x2"}
	if d := storetest.Duplicates(t, good, "sp"); !slices.Equal(d, want) {
		t.Fatalf("Duplicates = %q, want %q", d, want)
	}
	// MERGE over duplicates patches every copy.
	storetest.Must(t, good.Writer.Apply(ctx, "sp", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "a", Properties: map[string]string{"k": "v"}}}}))
	db := rawDB(t, path)
	var n int
	storetest.Must(t, db.QueryRow(`SELECT count(*) FROM graph_nodes WHERE node_id = 'a' AND properties_json = '{"k":"v"}'`).Scan(&n))
	if n != 2 {
		t.Fatalf("%d patched copies of a, want 2", n)
	}
}

// The helper process: run by TestProcesses with CRASHMATRIX_SQLITE_CHILD
// set. It races the other processes, prints one line per result and, in
// "hang" mode, waits to be killed.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("CRASHMATRIX_SQLITE_CHILD")
	if mode == "" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	path := os.Getenv("CRASHMATRIX_SQLITE_PATH")
	me := os.Getenv("CRASHMATRIX_SQLITE_ME")
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	switch mode {
	case "race":
		p := storetest.FixturePlan("sp", "d", "proc-op", 0)
		p.Content = "answer of " + me
		ok, err := s.Ops.CreateIfAbsent(ctx, reference.NewOperation(p, 1), p)
		fmt.Println("create", ok, err)
		ok, err = s.States.CompareAndSet(ctx, 0, storetest.State("sp", "d", 1, me))
		fmt.Println("state", ok, err)
		l, ok, err := s.Locks.TryAcquire(ctx, "sp", "d", me, 0, 60000)
		fmt.Println("lease", ok, l.Token, err)
	case "hang":
		op, p := storetest.FixtureOp("sp", "k", "killed-op", 0, 1)
		ok, err := s.Ops.CreateIfAbsent(ctx, op, p)
		ok2, err2 := s.Ops.CompareAndSet(ctx, op, storetest.Advance(t, op, reference.GraphApplied, 2))
		ok3, err3 := s.States.CompareAndSet(ctx, 0, storetest.State("sp", "k", 1, "killed-op"))
		fmt.Println("written", ok, err, ok2, err2, ok3, err3)
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func child(t *testing.T, path, mode, me string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "CRASHMATRIX_SQLITE_CHILD="+mode, "CRASHMATRIX_SQLITE_PATH="+path, "CRASHMATRIX_SQLITE_ME="+me)
	return cmd
}

// TestProcesses races several OS processes on one file, and checks that
// committed writes survive a SIGKILL.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "p.db")
	// Create the schema first so the children only race on data.
	s0, err := Open(path, Options{})
	storetest.Must(t, err)
	storetest.Must(t, s0.Close())
	const procs = 4
	outs := make([]string, procs)
	var wg sync.WaitGroup
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := child(t, path, "race", fmt.Sprint("proc", i)).CombinedOutput()
			if err != nil {
				t.Errorf("child %d: %v\n%s", i, err, out)
			}
			outs[i] = string(out)
		}()
	}
	wg.Wait()
	all := strings.Join(outs, "\n")
	for _, want := range []string{"create true <nil>", "state true <nil>", "lease true 1 <nil>"} {
		if c := strings.Count(all, want); c != 1 {
			t.Fatalf("%q seen %d times, want once:\n%s", want, c, all)
		}
	}
	if c := strings.Count(all, "<nil>"); c != 3*procs {
		t.Fatalf("errors in children:\n%s", all)
	}

	// SIGKILL after the writes returned: they are durable.
	cmd := child(t, path, "hang", "victim")
	stdout, err := cmd.StdoutPipe()
	storetest.Must(t, err)
	storetest.Must(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	storetest.Must(t, err)
	if line != "written true <nil> true <nil> true <nil>\n" {
		cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	storetest.Must(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	r := openAt(t, path, false)
	ctx := context.Background()
	op, err := r.Ops.Get(ctx, "killed-op")
	storetest.Must(t, err)
	if op.Stage != reference.GraphApplied {
		t.Fatalf("stage after SIGKILL = %s", op.Stage)
	}
	if _, err := r.Ops.GetPlan(ctx, "killed-op"); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := r.States.FindByOperationID(ctx, "sp", "k", "killed-op"); err != nil || !ok || st.Revision != 1 {
		t.Fatalf("state after SIGKILL = %+v %v %v", st, ok, err)
	}
}

// TestTxIsImmediate checks that a store transaction takes the write lock at
// BEGIN (the DSN's _txlock=immediate), not at its first write.
func TestTxIsImmediate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "i.db")
	s := openAt(t, path, false)
	tx, err := s.Closer.(*closer).d.sql.BeginTx(ctx, nil)
	storetest.Must(t, err)
	defer tx.Rollback()
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	storetest.Must(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	if !IsBusy(err) {
		t.Fatalf("BEGIN IMMEDIATE beside a store transaction: %v, want SQLITE_BUSY", err)
	}
	storetest.Must(t, tx.Rollback())
	conn, err := other.Conn(ctx)
	storetest.Must(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	storetest.Must(t, err)
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	storetest.Must(t, err)
}

// The renew-ignores-holder mutant (Options.RenewIgnoresHolder) renews a
// stale holder's lease while another holder, granted the lease after it
// expired, holds it live; the stores as they are refuse it.
func TestRenewIgnoresHolderMutant(t *testing.T) {
	ctx := context.Background()
	for _, mutant := range []bool{false, true} {
		s, err := OpenMemory(memName(t), Options{RenewIgnoresHolder: mutant})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stale, ok, err := s.Locks.TryAcquire(ctx, "sp", "d1", "a", 1000, 100)
		if err != nil || !ok {
			t.Fatalf("first grant: ok %v err %v", ok, err)
		}
		if _, ok, err := s.Locks.TryAcquire(ctx, "sp", "d1", "b", 1150, 100); err != nil || !ok {
			t.Fatalf("grant after expiry: ok %v err %v", ok, err)
		}
		_, err = s.Locks.Renew(ctx, stale, 1160, 100)
		switch {
		case mutant && err != nil:
			t.Errorf("mutant: the stale holder's renewal was refused (%v); the mutant renews it", err)
		case !mutant && !errors.Is(err, reference.ErrLeaseLost):
			t.Errorf("the stale holder renewed the lease b holds: err %v, want ErrLeaseLost", err)
		}
	}
}
