package servers_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/postgres/pgtest"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/servers"
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
