// Package provision starts the server backends' databases in containers
// with testcontainers-go. It is kept apart from the backends themselves so
// that worker processes, started thousands of times a run, do not pay for
// the container libraries' initialisation.
package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcneo4j "github.com/testcontainers/testcontainers-go/modules/neo4j"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Default images: the official ones, for users with Docker. Machines
// without a registry build local ones (ci/images) and name them through
// these environment variables or the --postgres-image / --neo4j-image flags.
var (
	DefaultPostgresImage = envOr("CRASHMATRIX_POSTGRES_IMAGE", "postgres:16")
	DefaultNeo4jImage    = envOr("CRASHMATRIX_NEO4J_IMAGE", "neo4j:5.26")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// ContainerOptions choose the images.
type ContainerOptions struct {
	PostgresImage, Neo4jImage string
	// NoNeo4j starts PostgreSQL only (the graph then lives in PostgreSQL).
	NoNeo4j bool
}

// Timings says how long each container took from Run to its first
// answered query.
type Timings struct {
	Postgres, Neo4j time.Duration
}

// LastTimings holds the timings of the most recent StartContainers.
var LastTimings Timings

// ErrNoEngine is returned when no container engine answers.
var ErrNoEngine = errors.New("no container engine")

// CheckEngine fails fast, with what is missing, when testcontainers-go
// cannot reach an engine.
func CheckEngine(ctx context.Context) error {
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return fmt.Errorf("%w: %v (DOCKER_HOST=%q; on a machine without Docker run ci/containers/setup-podman.sh and source ci/containers/env.sh)", ErrNoEngine, err, os.Getenv("DOCKER_HOST"))
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Health(hctx); err != nil {
		return fmt.Errorf("%w: engine at DOCKER_HOST=%q does not answer: %v (run ci/containers/setup-podman.sh)", ErrNoEngine, os.Getenv("DOCKER_HOST"), err)
	}
	return nil
}

// neo4jStartup bounds Neo4j's start-up (JVM, store creation).
const neo4jStartup = 5 * time.Minute

// StartContainers starts PostgreSQL and Neo4j with testcontainers-go and
// returns the environment that points the postgres backend (and its
// workers) at them, and a stop function that terminates both; it is safe to
// call stop more than once, and every path out of a run should.
func StartContainers(ctx context.Context, log io.Writer, o ContainerOptions) (map[string]string, func(), error) {
	if o.PostgresImage == "" {
		o.PostgresImage = DefaultPostgresImage
	}
	if o.Neo4jImage == "" {
		o.Neo4jImage = DefaultNeo4jImage
	}
	if err := CheckEngine(ctx); err != nil {
		return nil, func() {}, err
	}
	var (
		mu   sync.Mutex
		ctrs []testcontainers.Container
	)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range ctrs {
				_ = testcontainers.TerminateContainer(c)
			}
		})
	}
	env := map[string]string{}
	t0 := time.Now()
	pg, err := tcpostgres.Run(ctx, o.PostgresImage,
		tcpostgres.WithDatabase("crashmatrix"), tcpostgres.WithUsername("crashmatrix"), tcpostgres.WithPassword(randomSecret()),
		testcontainers.WithWaitStrategy(wait.ForLog("database system is ready to accept connections").WithOccurrence(2).WithStartupTimeout(120*time.Second)),
	)
	if pg != nil {
		mu.Lock()
		ctrs = append(ctrs, pg)
		mu.Unlock()
	}
	if err != nil {
		stop()
		return nil, stop, fmt.Errorf("start PostgreSQL (image %s%s): %w", o.PostgresImage, buildHint(o.PostgresImage, "postgres"), err)
	}
	dsn, err := pg.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		stop()
		return nil, stop, err
	}
	if err := loopback(dsn); err != nil {
		stop()
		return nil, stop, err
	}
	if err := firstQuery(ctx, func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		var one int
		return c.QueryRow(ctx, "SELECT 1").Scan(&one)
	}); err != nil {
		stop()
		return nil, stop, fmt.Errorf("PostgreSQL container does not answer: %w", err)
	}
	LastTimings.Postgres = time.Since(t0)
	env[servers.EnvPostgresDSN] = dsn
	fmt.Fprintf(log, "PostgreSQL %s up: first query %s after Run\n", o.PostgresImage, LastTimings.Postgres.Round(time.Millisecond))
	if o.NoNeo4j {
		return env, stop, nil
	}
	t1 := time.Now()
	pw := randomSecret()
	n4, err := tcneo4j.Run(ctx, o.Neo4jImage, tcneo4j.WithAdminPassword(pw),
		testcontainers.WithEnv(map[string]string{"NEO4J_server_memory_pagecache_size": "64m", "NEO4J_server_memory_heap_max__size": "768m"}),
		// The module's own wait (same checks) gives up after 60s; on a
		// busy 2-core machine Neo4j took 38-58s to start, and sometimes more.
		testcontainers.WithWaitStrategyAndDeadline(neo4jStartup,
			wait.ForLog("Bolt enabled on").WithStartupTimeout(neo4jStartup),
			wait.ForHTTP("/").WithPort("7474/tcp").WithStartupTimeout(neo4jStartup)))
	if n4 != nil {
		mu.Lock()
		ctrs = append(ctrs, n4)
		mu.Unlock()
	}
	if err != nil {
		stop()
		return nil, stop, fmt.Errorf("start Neo4j (image %s%s): %w", o.Neo4jImage, buildHint(o.Neo4jImage, "neo4j"), err)
	}
	uri, err := n4.BoltUrl(ctx)
	if err != nil {
		stop()
		return nil, stop, err
	}
	uri = strings.Replace(uri, "neo4j://", "bolt://", 1)
	if err := loopback(uri); err != nil {
		stop()
		return nil, stop, err
	}
	env[servers.EnvNeo4jURI], env[servers.EnvNeo4jUser], env[servers.EnvNeo4jPassword] = uri, "neo4j", pw
	if servers.Neo4jPing != nil {
		if err := firstQuery(ctx, func(ctx context.Context) error { return servers.Neo4jPing(ctx, uri, "neo4j", pw) }); err != nil {
			stop()
			return nil, stop, fmt.Errorf("Neo4j container does not answer: %w", err)
		}
	}
	LastTimings.Neo4j = time.Since(t1)
	fmt.Fprintf(log, "Neo4j %s up: first query %s after Run\n", o.Neo4jImage, LastTimings.Neo4j.Round(time.Millisecond))
	return env, stop, nil
}

func firstQuery(ctx context.Context, q func(context.Context) error) error {
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = q(qctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// loopback refuses, when CRASHMATRIX_LOOPBACK_ONLY is set (ci/containers/
// env.sh sets it), an endpoint that is not on this machine's loopback:
// tests here send traffic to 127.0.0.1 only (with podman,
// TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1).
func loopback(endpoint string) error {
	if os.Getenv("CRASHMATRIX_LOOPBACK_ONLY") == "" {
		return nil // e.g. docker:dind in GitLab CI hands out the service host
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	switch h := u.Hostname(); h {
	case "127.0.0.1", "localhost", "::1":
		return nil
	default:
		return fmt.Errorf("container endpoint host %q is not loopback: set TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1", h)
	}
}

func randomSecret() string {
	b := make([]byte, 12)
	f, err := os.Open("/dev/urandom")
	if err == nil {
		_, _ = io.ReadFull(f, b)
		f.Close()
	}
	return fmt.Sprintf("cm%x", b)
}

func buildHint(image, name string) string {
	if strings.HasPrefix(image, "localhost/") {
		return "; a local image: build it with ci/images/" + name + "/build.sh"
	}
	return ""
}
