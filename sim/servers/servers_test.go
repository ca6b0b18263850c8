package servers_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/postgres/pgtest"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestMain starts one PostgreSQL for the package (the preinstalled server
// binaries on 127.0.0.1, or the server in CRASHMATRIX_POSTGRES_DSN). The
// re-executed worker processes inherit its DSN and start nothing.
func TestMain(m *testing.M) {
	if os.Getenv(sim.WorkerSpecEnv) != "" {
		os.Exit(m.Run())
	}
	dsn, stop, err := pgtest.StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim/servers tests need PostgreSQL:", err)
		os.Exit(1)
	}
	os.Setenv(servers.EnvPostgresDSN, dsn)
	code := m.Run()
	stop()
	os.Exit(code)
}

func backend(t *testing.T) sim.Backend {
	b, err := servers.PostgresBackend()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The whole crash matrix, with real process kills, on PostgreSQL: many
// cases share one database, isolated by space.
func TestCertifyPostgres(t *testing.T) {
	properties.CertifyCrashSafety(t, backend(t))
}

// The reference mutants are caught on PostgreSQL too.
func TestPostgresCatchesMutants(t *testing.T) {
	crashrun.MutantsCaught(t, backend(t), crashrun.Options{})
}

func TestCheckDisposable(t *testing.T) {
	for dsn, ok := range map[string]bool{
		"postgres://u:pw@127.0.0.1:5432/app":           true,
		"postgres://u:pw@localhost/app":                true,
		"host=/tmp/sock dbname=app":                    true,
		"postgres://u:pw@db.prod.example.com/app":      false,
		"postgres://u:pw@db.example.com/crashmatrix_1": true,
		"postgres://u:pw@10.1.2.3/ledger":              false,
	} {
		err := servers.CheckDisposable("postgres", dsn)
		if (err == nil) != ok {
			t.Errorf("CheckDisposable(%q) = %v, want ok=%v", dsn, err, ok)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("password leaked: %v", err)
		}
	}
}

// A case reaches its server through its own proxy whatever form the DSN
// has: a URL gets its host:port replaced, a key=value DSN gets host and
// port keys that override its own.
func TestViaEndpointBothDSNForms(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:p@db.example:5432/x?sslmode=disable", "postgres://u:p@127.0.0.1:4000/x?sslmode=disable"},
		{"bolt://neo4j.example:7687", "bolt://127.0.0.1:4000"},
		{"host=db.example port=5432 user=u dbname=x sslmode=disable", "host=db.example port=5432 user=u dbname=x sslmode=disable host=127.0.0.1 port=4000"},
	} {
		if got := servers.ViaEndpoint(c.in, "127.0.0.1:4000"); got != c.want {
			t.Errorf("ViaEndpoint(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := servers.ViaEndpoint(c.in, ""); got != c.in {
			t.Errorf("ViaEndpoint(%q, \"\") = %q, want it unchanged", c.in, got)
		}
	}
	cfg, err := pgconn.ParseConfig(servers.ViaEndpoint("host=db.example port=5432 user=u dbname=x", "127.0.0.1:4000"))
	if err != nil || cfg.Host != "127.0.0.1" || cfg.Port != 4000 {
		t.Fatalf("pgx reads the rewritten key=value DSN as %v:%v (%v), want 127.0.0.1:4000", cfg.Host, cfg.Port, err)
	}
}

// A worker that hangs past its deadline leaves what the servers were doing
// then: here a session waiting for a row lock another transaction holds,
// named with the pid that blocks it and its statement.
func TestDiagnoseNamesLockWaits(t *testing.T) {
	ctx := context.Background()
	dsn := os.Getenv(servers.EnvPostgresDSN)
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "CREATE TABLE IF NOT EXISTS diagnose_probe (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	_, _ = holder.Exec(ctx, "INSERT INTO diagnose_probe VALUES (1) ON CONFLICT DO NOTHING")
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "UPDATE diagnose_probe SET id = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	var holderPID int32
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	waiter, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close(ctx)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = waiter.Exec(wctx, "UPDATE diagnose_probe SET id = 1 WHERE id = 1 /* the waiter */") }()
	b := backend(t)
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = b.Diagnose(ctx, sim.CaseEnv{}); strings.HasPrefix(got, "postgres: 1 sessions waiting for a lock") {
			break
		}
	}
	if !strings.HasPrefix(got, "postgres: 1 sessions waiting for a lock") || !strings.Contains(got, fmt.Sprintf("blocked-by={%d}", holderPID)) || !strings.Contains(got, "the waiter") {
		t.Fatalf("diagnosis does not name the waiting session, who blocks it and its statement:\n%s", got)
	}
}
