package containertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/neo4j"
	"github.com/crashmatrix/crashmatrix/adapters/postgres"
	"github.com/crashmatrix/crashmatrix/adapters/postgres/pgtest"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
)

// started are the package's containers; their server faults (kill,
// restart, fault proxy) serve the server-fault matrix.
var started *provision.Started

// TestMain starts PostgreSQL and Neo4j once for the package with
// testcontainers-go, with server faults on; the tests that do not fault
// the servers reach them directly, as before (their lease timing is not
// the proxy's business), the server-fault tests through the fault proxy
// (serverfaults_test.go, run last). The re-executed worker processes
// inherit the endpoints through the environment and start nothing.
func TestMain(m *testing.M) {
	if spec := os.Getenv(sim.WorkerSpecEnv); spec != "" {
		os.Exit(runWorker(spec))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	st, err := provision.Start(ctx, os.Stderr, provision.ContainerOptions{ServerFaults: true, ClockJump: true})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the container tests need PostgreSQL and Neo4j containers: %v\n"+
			"On a machine without Docker: ci/containers/setup-podman.sh, then ci/images/postgres/build.sh and ci/images/neo4j/build.sh, "+
			"then source ci/containers/env.sh and set CRASHMATRIX_POSTGRES_IMAGE=localhost/crashmatrix/postgres:15 CRASHMATRIX_NEO4J_IMAGE=localhost/crashmatrix/neo4j:5.26 "+
			"(make test does all of this).\n", err)
		os.Exit(1)
	}
	started = st
	for k, v := range st.Direct {
		os.Setenv(k, v)
	}
	fmt.Fprintf(os.Stderr, "containers up: PostgreSQL first query after %s, Neo4j after %s\n", provision.LastTimings.Postgres.Round(time.Millisecond), provision.LastTimings.Neo4j.Round(time.Millisecond))
	code := m.Run()
	st.Stop()
	os.Exit(code)
}

// runWorker is a re-executed worker process of a case: it runs against the
// servers the parent started (their endpoints are in the environment).
// A case on the embedded default (a replay of a snapshot on SQLite) runs
// on it.
func runWorker(specPath string) int {
	spec, err := sim.ReadWorkerSpec(specPath)
	backend := embedded.SQLite()
	if err == nil && spec.Backend.Name != backend.Name {
		backend, err = servers.PostgresBackend()
	}
	if err == nil {
		err = sim.RunWorker(context.Background(), spec, backend, sim.ProcessWorkerOptions())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	return 0
}

// Every conformance suite against the PostgreSQL stores, each factory call
// on a fresh schema.
func TestConformancePostgres(t *testing.T) {
	dsn := os.Getenv(servers.EnvPostgresDSN)
	properties.Stores(t, func(t *testing.T) reference.Stores {
		st, err := postgres.Open(context.Background(), pgtest.Schema(t, dsn), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

var spaces atomic.Int64

// spaced maps every space the suite names to one of its own, so factory
// calls sharing the one Neo4j database never see each other.
type spaced struct {
	reference.GraphWriter
	prefix string
}

// at maps a space to the wrapper's own; a blank one stays blank, so the
// store's argument check still sees it.
func (s spaced) at(space string) string {
	if strings.TrimSpace(space) == "" {
		return space
	}
	return s.prefix + space
}

func (s spaced) Apply(ctx context.Context, space string, m reference.Mutation) error {
	return s.GraphWriter.Apply(ctx, s.at(space), m)
}

func (s spaced) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	return s.GraphWriter.ReadGraph(ctx, s.at(space))
}

func (s spaced) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	return s.GraphWriter.ReadRecords(ctx, s.at(space))
}

// The GraphWriter conformance suite against the Neo4j writer.
func TestConformanceNeo4jWriter(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		w, err := neo4j.Open(context.Background(), os.Getenv(servers.EnvNeo4jURI), os.Getenv(servers.EnvNeo4jUser), os.Getenv(servers.EnvNeo4jPassword), neo4j.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(context.Background()) })
		return reference.Stores{Writer: spaced{w, fmt.Sprintf("conf%d-", spaces.Add(1))}}
	})
}

func backend(t *testing.T) sim.Backend {
	b, err := servers.PostgresBackend()
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "postgres+neo4j" {
		t.Fatalf("backend is %s, want postgres+neo4j (is %s set?)", b.Name, servers.EnvNeo4jURI)
	}
	return b
}

// The full crash matrix with PostgreSQL + Neo4j as the backend, with real
// process kills.
func TestCertifyPostgresNeo4j(t *testing.T) {
	// A Neo4j write is slower than an embedded one: a longer lease keeps a
	// slow but live worker from losing its document mid-write.
	properties.CertifyCrashSafety(t, backend(t), properties.CrashOptions{LeaseTTL: 600 * time.Millisecond})
}

// The reference mutants are caught on these servers too.
func TestContainersCatchMutants(t *testing.T) {
	crashrun.MutantsCaught(t, backend(t), crashrun.Options{LeaseTTL: 600 * time.Millisecond})
}

// A scenario replays deterministically on the servers too: ten runs, the
// same verdict and the same history (times, pids and spaces aside).
func TestReplayIsDeterministicOnContainers(t *testing.T) {
	lib, err := scenarios.Library()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"class-unknown-window": true, "class-lease-expiry-stale-writer": true}
	for _, s := range lib {
		if !want[s.Name] {
			continue
		}
		b := backend(t)
		cfg := s.Apply(sim.Config{Use: &b, WorkDir: t.TempDir(), Seed: 1, LeaseTTL: 600 * time.Millisecond,
			Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
		r, err := sim.NewRunner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var first []string
		var firstVerdict string
		for i := 0; i < 10; i++ {
			res := r.RunCase(context.Background(), s.Case())
			if err := s.JudgeResult(res); err != nil {
				t.Fatalf("%s run %d: %v", s.Name, i+1, err)
			}
			tr, v := history.Trace(res.Timeline), fmt.Sprintf("%s %v", res.Verdict, res.Broken())
			if i == 0 {
				first, firstVerdict = tr, v
				continue
			}
			if v != firstVerdict || !slices.Equal(tr, first) {
				t.Fatalf("%s: run %d differs from run 1 (%s vs %s, history equal: %v)", s.Name, i+1, v, firstVerdict, slices.Equal(tr, first))
			}
		}
	}
}
