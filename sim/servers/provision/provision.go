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
	"maps"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcneo4j "github.com/testcontainers/testcontainers-go/modules/neo4j"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// The images, chosen in this order when ContainerOptions names none: the
// environment variable (EnvPostgresImage, EnvNeo4jImage); the official
// image when the engine has it or can pull it (users with Docker); the
// image ci/images builds (make containers) when the engine has that one
// and not the official one, as on machines without a registry.
const (
	EnvPostgresImage      = "CRASHMATRIX_POSTGRES_IMAGE"
	EnvNeo4jImage         = "CRASHMATRIX_NEO4J_IMAGE"
	OfficialPostgresImage = "postgres:16"
	OfficialNeo4jImage    = "neo4j:5.26"
	LocalPostgresImage    = "localhost/crashmatrix/postgres:15"
	LocalNeo4jImage       = "localhost/crashmatrix/neo4j:5.26"
)

// Default images as the environment names them now (the official ones
// when it names none); startContainers may still pick the local build.
var (
	DefaultPostgresImage = envOr(EnvPostgresImage, OfficialPostgresImage)
	DefaultNeo4jImage    = envOr(EnvNeo4jImage, OfficialNeo4jImage)
)

// ImageChoice describes how to pick one server's image.
type ImageChoice struct {
	Server, Env, Flag, Official, Local string
}

var (
	postgresChoice = ImageChoice{Server: "postgres", Env: EnvPostgresImage, Flag: "--postgres-image", Official: OfficialPostgresImage, Local: LocalPostgresImage}
	neo4jChoice    = ImageChoice{Server: "neo4j", Env: EnvNeo4jImage, Flag: "--neo4j-image", Official: OfficialNeo4jImage, Local: LocalNeo4jImage}
)

// Choose picks the image when none was given: the environment variable,
// else the official image unless only the local build is present. note
// says why when the local build was picked.
func (c ImageChoice) Choose(present func(image string) bool) (image, note string) {
	if v := os.Getenv(c.Env); v != "" {
		return v, ""
	}
	if !present(c.Official) && present(c.Local) {
		return c.Local, fmt.Sprintf("%s: using the locally built image %s (%s is not here; %s or %s chooses another)", c.Server, c.Local, c.Official, c.Env, c.Flag)
	}
	return c.Official, ""
}

// hint is what to do when image cannot be started: build the local image,
// or name one through the variable or the flag.
func (c ImageChoice) hint(image string) string {
	if strings.HasPrefix(image, "localhost/") {
		return "; a local image: build it with ci/images/" + c.Server + "/build.sh (make containers)"
	}
	return fmt.Sprintf("; without a registry, build %s with make containers (it is then used when %s is absent), or set %s or %s to an image the engine has", c.Local, image, c.Env, c.Flag)
}

// imagePresent asks the engine whether it holds image (no pull).
func imagePresent(ctx context.Context) func(string) bool {
	return func(image string) bool {
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			return false
		}
		defer cli.Close()
		_, err = cli.ImageInspect(ctx, image)
		return err == nil
	}
}

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
	// ServerFaults lets the run kill and restart the servers and put a
	// fault proxy between the workers and them (Started.Faults): the
	// endpoints handed out are then the proxy's stable ones.
	ServerFaults bool
	// PostgresConfig are PostgreSQL settings (key=value) the server is
	// started with, e.g. synchronous_commit=off.
	PostgresConfig []string
	// PowerLoss (with ServerFaults) keeps each server's data directory on
	// a lazy mount (faults/lazyfs) bind-mounted into its container, so
	// that Started.Faults can cut the servers' power (sim.ServerPower).
	// Where FUSE is missing the servers start as without it and
	// Started.Faults.PowerUntested says why.
	PowerLoss bool
	// ClockJump (with ServerFaults) makes PostgreSQL's clock movable
	// (clock.go: libfaketime preloaded into the server), for the
	// clock-jump fault; without it the server runs as the image has it.
	ClockJump bool
}

// Started are the running containers.
type Started struct {
	// Env points the postgres backend (and its workers) at the servers:
	// with server faults, through the fault proxy's stable endpoints.
	Env map[string]string
	// Direct points at the containers themselves, bypassing the fault
	// proxy (the same as Env without server faults). A server restart
	// may move them.
	Direct map[string]string
	// Faults carries out server faults (nil unless asked for).
	Faults *serverfaults.Supervisor
	// Stop terminates the containers (and the fault proxy); safe to call
	// more than once.
	Stop func()
	// CPUGroup is the cgroup the containers run under with a raised CPU
	// weight (cpu.go), or "" where they stay under the engine's own
	// parent; CPUGroupWhy then says why.
	CPUGroup, CPUGroupWhy string
	lazy                  *lazyData
}

// DataMount is the lazy mount that holds the named server's data
// directory (nil without power loss): a test arms disk errors on it
// directly.
func (s *Started) DataMount(server string) *lazyfs.FS {
	if s.lazy == nil {
		return nil
	}
	return s.lazy.mounts[server]
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

// neo4jStartup bounds Neo4j's start-up (JVM, store creation), and
// postgresStartup PostgreSQL's (initdb, a first start, the real one).
const (
	neo4jStartup    = 5 * time.Minute
	postgresStartup = 3 * time.Minute
)

// StartContainers starts PostgreSQL and Neo4j with testcontainers-go and
// returns the environment that points the postgres backend (and its
// workers) at them, and a stop function that terminates both; it is safe to
// call stop more than once, and every path out of a run should.
func StartContainers(ctx context.Context, log io.Writer, o ContainerOptions) (map[string]string, func(), error) {
	st, err := Start(ctx, log, o)
	if err != nil {
		return nil, func() {}, err
	}
	return st.Env, st.Stop, nil
}

// Start is StartContainers with the server-fault supervisor: with
// o.ServerFaults the returned endpoints are the fault proxy's stable ones
// and Started.Faults can kill and restart each server.
func Start(ctx context.Context, log io.Writer, o ContainerOptions) (*Started, error) {
	if err := CheckEngine(ctx); err != nil {
		return nil, err
	}
	grp := cpuGroup{why: "the engine did not say how it makes cgroups"}
	if driver, version, err := engineCgroups(ctx); err == nil {
		grp = ownCPUGroup(cgroupRoot, driver, version)
	}
	var lazy *lazyData
	noPower := ""
	if o.PowerLoss && o.ServerFaults {
		if err := lazyfs.Available(); err != nil {
			noPower = err.Error()
		} else if lazy, err = newLazyData(); err != nil {
			return nil, err
		}
	}
	env, stopCtrs, srvs, err := startContainers(ctx, log, o, lazy, grp)
	// The mounts and the cgroup go once the containers that use them are
	// gone.
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			stopCtrs()
			grp.remove()
			if err := lazy.close(); err != nil {
				fmt.Fprintf(log, "crashmatrix: server data on lazy mounts: %v\n", err)
			}
		})
	}
	if err != nil {
		stop()
		return nil, err
	}
	st := &Started{Env: env, Direct: maps.Clone(env), Stop: stop, CPUGroupWhy: grp.why, lazy: lazy}
	if grp.root != "" {
		st.CPUGroup = "/" + CgroupParent
	}
	if !o.ServerFaults {
		return st, nil
	}
	sup, err := serverfaults.NewSupervisor(srvs, log)
	if err != nil {
		stop()
		return nil, err
	}
	if o.PowerLoss && noPower != "" {
		sup.NoPower(noPower)
	}
	st.Faults = sup
	var once sync.Once
	st.Stop = func() { once.Do(func() { sup.Close(); stop() }) }
	env[servers.EnvPostgresDSN] = servers.ViaEndpoint(env[servers.EnvPostgresDSN], sup.Stable("postgres"))
	if uri := env[servers.EnvNeo4jURI]; uri != "" {
		env[servers.EnvNeo4jURI] = servers.ViaEndpoint(uri, sup.Stable("neo4j"))
	}
	return st, nil
}

func startContainers(ctx context.Context, log io.Writer, o ContainerOptions, lazy *lazyData, grp cpuGroup) (map[string]string, func(), []*serverfaults.Server, error) {
	var srvs []*serverfaults.Server
	if err := reapDead(ctx, log); err != nil {
		fmt.Fprintf(log, "crashmatrix: %v\n", err)
	}
	for _, im := range []struct {
		image  *string
		choice ImageChoice
		skip   bool
	}{{&o.PostgresImage, postgresChoice, false}, {&o.Neo4jImage, neo4jChoice, o.NoNeo4j}} {
		if *im.image != "" || im.skip {
			continue
		}
		var note string
		if *im.image, note = im.choice.Choose(imagePresent(ctx)); note != "" {
			fmt.Fprintln(log, note)
		}
	}
	var (
		mu   sync.Mutex
		ctrs []testcontainers.Container
	)
	// With server faults, PostgreSQL's clock can be moved (clock-jump).
	clock := &serverClock{why: "the server's clock cannot be moved: it was started without libfaketime (crashmatrix preloads it only when --kind clock-jump asks for it: ContainerOptions.ClockJump)"}
	if o.ServerFaults && o.ClockJump {
		clock = newServerClock()
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range ctrs {
				_ = testcontainers.TerminateContainer(c)
			}
			clock.remove()
		})
	}
	env := map[string]string{}
	t0 := time.Now()
	pgArgs, err := ParseServerConfig(o.PostgresConfig)
	if err != nil {
		return nil, func() {}, nil, err
	}
	pgOpts := []testcontainers.ContainerCustomizer{
		tcpostgres.WithDatabase("crashmatrix"), tcpostgres.WithUsername("crashmatrix"), tcpostgres.WithPassword(randomSecret()),
		// WithWaitStrategy alone bounds the wait by 60s whatever the
		// strategy's own timeout: a loaded machine with the data on a lazy
		// mount took longer (initdb, then the second start).
		testcontainers.WithWaitStrategyAndDeadline(postgresStartup,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2).WithStartupTimeout(postgresStartup)),
		withOwner(), grp.customizer(),
	}
	if !o.ServerFaults {
		// Nothing restarts the server: its data lives in memory. On this
		// kind of machine the guest kernel, starved of CPU, has left block
		// IO unfinished for minutes ("workqueue lockup … stuck for 99s",
		// servers in D state), and every worker waiting on the server hung
		// with it; memory needs no IO completion.
		pgOpts = append(pgOpts, testcontainers.WithTmpfs(map[string]string{"/var/lib/postgresql/data": "rw"}))
	}
	if o.ServerFaults || len(pgArgs) > 0 {
		// The module's default command turns fsync off; a server that is
		// certified against its own crashes runs with its own defaults
		// (fsync on) plus what was asked for.
		pgOpts = append(pgOpts, testcontainers.WithCmd(append([]string{"postgres"}, pgArgs...)...))
	}
	pgOpts = append(pgOpts, clock.customizers()...)
	if lazy != nil {
		dir, err := lazy.mount("postgres", false)
		if err != nil {
			return nil, func() {}, nil, fmt.Errorf("PostgreSQL data on a lazy mount: %w", err)
		}
		pgOpts = append(pgOpts, bind(dir, postgresDataDir))
	}
	pg, err := tcpostgres.Run(ctx, o.PostgresImage, pgOpts...)
	if pg != nil {
		mu.Lock()
		ctrs = append(ctrs, pg)
		mu.Unlock()
	}
	if err != nil {
		stop()
		return nil, stop, nil, fmt.Errorf("start PostgreSQL (image %s%s): %w", o.PostgresImage, postgresChoice.hint(o.PostgresImage), err)
	}
	dsn, err := pg.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		stop()
		return nil, stop, nil, err
	}
	if err := loopback(dsn); err != nil {
		stop()
		return nil, stop, nil, err
	}
	if err := firstQuery(ctx, func(ctx context.Context) error { return pgPing(ctx, dsn) }); err != nil {
		stop()
		return nil, stop, nil, fmt.Errorf("PostgreSQL container does not answer: %w", err)
	}
	LastTimings.Postgres = time.Since(t0)
	lazy.settled("postgres")
	if o.ServerFaults {
		srv, err := containerServer(ctx, "postgres", "postgres", "5432/tcp", pg, func(ctx context.Context, addr string) error {
			return pgPing(ctx, servers.ViaEndpoint(dsn, addr))
		})
		if err != nil {
			stop()
			return nil, stop, nil, err
		}
		if lazy != nil {
			srv.PowerLoss, srv.PowerOff = lazy.powerLoss("postgres"), lazy.mounts["postgres"].PowerOff
			srv.OnDurable = pgClientDurable(lazy.mounts["postgres"])
			srv.Disk = lazy.mounts["postgres"]
		}
		if srv.NoClock = clock.why; clock.why == "" {
			srv.SetClock = clock.setter(func(ctx context.Context) (string, error) {
				addr, err := mappedAddr(ctx, pg, "5432/tcp")
				return servers.ViaEndpoint(dsn, addr), err
			})
		}
		srvs = append(srvs, srv)
	}
	env[servers.EnvPostgresDSN] = dsn
	fmt.Fprintf(log, "PostgreSQL %s up: first query %s after Run\n", o.PostgresImage, LastTimings.Postgres.Round(time.Millisecond))
	if o.NoNeo4j {
		return env, stop, srvs, nil
	}
	t1 := time.Now()
	pw := randomSecret()
	var n4Tmpfs []testcontainers.ContainerCustomizer
	if !o.ServerFaults {
		n4Tmpfs = append(n4Tmpfs, testcontainers.WithTmpfs(neo4jTmpfs(o.Neo4jImage)))
	}
	if lazy != nil {
		dir, err := lazy.mount("neo4j", true)
		if err != nil {
			stop()
			return nil, stop, nil, fmt.Errorf("Neo4j data on a lazy mount: %w", err)
		}
		n4Tmpfs = append(n4Tmpfs, bind(dir, neo4jDataDir(o.Neo4jImage)))
	}
	n4, err := tcneo4j.Run(ctx, o.Neo4jImage, append([]testcontainers.ContainerCustomizer{tcneo4j.WithAdminPassword(pw), withOwner(), grp.customizer(),
		testcontainers.WithEnv(map[string]string{"NEO4J_server_memory_pagecache_size": "64m", "NEO4J_server_memory_heap_max__size": "768m"}),
		// The module's own wait (same checks) gives up after 60s; on a
		// busy 2-core machine Neo4j took 38-58s to start, and sometimes more.
		testcontainers.WithWaitStrategyAndDeadline(neo4jStartup,
			wait.ForLog("Bolt enabled on").WithStartupTimeout(neo4jStartup),
			wait.ForHTTP("/").WithPort("7474/tcp").WithStartupTimeout(neo4jStartup))}, n4Tmpfs...)...)
	if n4 != nil {
		mu.Lock()
		ctrs = append(ctrs, n4)
		mu.Unlock()
	}
	if err != nil {
		stop()
		return nil, stop, nil, fmt.Errorf("start Neo4j (image %s%s): %w", o.Neo4jImage, neo4jChoice.hint(o.Neo4jImage), err)
	}
	uri, err := n4.BoltUrl(ctx)
	if err != nil {
		stop()
		return nil, stop, nil, err
	}
	uri = strings.Replace(uri, "neo4j://", "bolt://", 1)
	if err := loopback(uri); err != nil {
		stop()
		return nil, stop, nil, err
	}
	env[servers.EnvNeo4jURI], env[servers.EnvNeo4jUser], env[servers.EnvNeo4jPassword] = uri, "neo4j", pw
	if servers.Neo4jPing != nil {
		if err := firstQuery(ctx, func(ctx context.Context) error { return servers.Neo4jPing(ctx, uri, "neo4j", pw) }); err != nil {
			stop()
			return nil, stop, nil, fmt.Errorf("Neo4j container does not answer: %w", err)
		}
	}
	LastTimings.Neo4j = time.Since(t1)
	lazy.settled("neo4j")
	if o.ServerFaults && servers.Neo4jPing != nil {
		srv, err := containerServer(ctx, "neo4j", "bolt", "7687/tcp", n4, func(ctx context.Context, addr string) error {
			return servers.Neo4jPing(ctx, servers.ViaEndpoint(uri, addr), "neo4j", pw)
		})
		if err != nil {
			stop()
			return nil, stop, nil, err
		}
		if lazy != nil {
			srv.PowerLoss, srv.PowerOff = lazy.powerLoss("neo4j"), lazy.mounts["neo4j"].PowerOff
			// Every durable operation of the JVM counts (its transaction
			// log's fdatasync in each commit); the probe's two runs leave
			// out what its background threads sync (catalogue.StableCalls).
			srv.OnDurable = lazy.mounts["neo4j"].OnDurable
			// Disk errors are armed on PostgreSQL's data mount only: Neo4j
			// under them is not tested (a Neo4j restart on the lazy mount
			// takes over a minute here, each disk error case ends in one).
		}
		srv.NoClock = "Neo4j holds no lease: clock-jump moves PostgreSQL's clock, where the leases are"
		srvs = append(srvs, srv)
	}
	fmt.Fprintf(log, "Neo4j %s up: first query %s after Run\n", o.Neo4jImage, LastTimings.Neo4j.Round(time.Millisecond))
	return env, stop, srvs, nil
}

// neo4jTmpfs are the directories of a Neo4j image that hold its data and
// logs, mounted in memory when the server is never restarted: the local
// image keeps them under NEO4J_HOME, the official one under /data and /logs.
func neo4jTmpfs(image string) map[string]string {
	if strings.HasPrefix(image, "localhost/crashmatrix/") {
		return map[string]string{"/var/lib/neo4j/data": "rw", "/var/lib/neo4j/logs": "rw"}
	}
	return map[string]string{"/data": "rw", "/logs": "rw"}
}

// pgPing answers once the PostgreSQL server of dsn answers SELECT 1.
func pgPing(ctx context.Context, dsn string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var one int
	return c.QueryRow(ctx, "SELECT 1").Scan(&one)
}

func firstQuery(ctx context.Context, q func(context.Context) error) error {
	return firstQueryWithin(ctx, 60*time.Second, q)
}

// firstQueryWithin retries q until it succeeds or limit has passed.
func firstQueryWithin(ctx context.Context, limit time.Duration, q func(context.Context) error) error {
	deadline := time.Now().Add(limit)
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
