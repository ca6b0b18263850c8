package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serverFlags are the flags that point crashmatrix at servers.
type serverFlags struct {
	postgresDSN, neo4jURI, neo4jUser, neo4jPassword string
	postgresImage, neo4jImage                       string
	allowNondisposable                              bool
	// serverFaults lets --backend containers kill and restart its servers
	// and cut their connections (on unless --server-faults=false: they are
	// crashmatrix's own disposable servers); postgresConfig are the PostgreSQL settings the
	// container starts with.
	serverFaults   bool
	postgresConfig []string
	// The commands that kill and start servers the user runs (given by
	// DSN/URI), for server-crash with --server-faults.
	postgresKill, postgresStart, neo4jKill, neo4jStart string
	// faults carries out server faults once prepare started containers.
	faults          *serverfaults.Supervisor
	serverFaultsSet bool
	// noPowerLoss keeps the containers' data off lazy mounts: the
	// command runs no power loss (bench, or certify --kind without
	// power-loss). Otherwise, with server faults and FUSE, their data
	// directories live on lazy mounts and the servers' power can be cut.
	noPowerLoss bool
	// clockJump makes the containers' PostgreSQL clock movable (--kind
	// clock-jump asks for it).
	clockJump bool
}

func (s *serverFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.postgresDSN, "postgres-dsn", "", "PostgreSQL server to use (env "+servers.EnvPostgresDSN+"); implies --backend postgres")
	fl.StringVar(&s.neo4jURI, "neo4j-uri", "", "Neo4j server for the graph (env "+servers.EnvNeo4jURI+", with "+servers.EnvNeo4jUser+" and "+servers.EnvNeo4jPassword+")")
	fl.StringVar(&s.neo4jUser, "neo4j-user", "neo4j", "Neo4j user")
	fl.StringVar(&s.neo4jPassword, "neo4j-password", "", "Neo4j password (prefer the environment variable)")
	// No flag default: provision picks the image the engine has (see
	// provision.ImageChoice.Choose), which the help spells out.
	fl.StringVar(&s.postgresImage, "postgres-image", "", "image for --backend containers (default: $"+provision.EnvPostgresImage+", else "+provision.OfficialPostgresImage+", or the locally built "+provision.LocalPostgresImage+" (make containers) when the engine has only that one)")
	fl.StringVar(&s.neo4jImage, "neo4j-image", "", "image for --backend containers (default: $"+provision.EnvNeo4jImage+", else "+provision.OfficialNeo4jImage+", or the locally built "+provision.LocalNeo4jImage+" (make containers) when the engine has only that one)")
	fl.BoolVar(&s.allowNondisposable, "allow-nondisposable", false, "use a server that does not look disposable (crashmatrix writes to it and kills clients mid-transaction)")
	// The default depends on the backend, so the flag's own default is
	// false and prepare turns it on for containers unless it was given.
	fl.BoolVar(&s.serverFaults, "server-faults", false, "also kill and restart the database servers (server-crash) and lose replies or cut connections through a fault proxy (ack-lost, conn-reset) at every window. Default: on with --backend containers (--server-faults=false runs the client-side matrix only); off with --postgres-dsn/--neo4j-uri (your servers are faulted only when you give it, and server-crash only with the --*-kill and --*-start commands)")
	fl.StringVar(&s.postgresKill, "postgres-kill", "", "with --postgres-dsn --server-faults: shell command that kills your whole PostgreSQL server, every process, and returns once it is gone. A process-group kill does not reach the backends (each leads a session of its own): stop the postmaster, kill its children, then it, e.g. P=$(head -1 $PGDATA/postmaster.pid) && kill -STOP $P && pkill -KILL -P $P; kill -KILL $P, then wait until it is gone (docs/certify-server.md has the whole command). Run with CRASHMATRIX_SERVER and CRASHMATRIX_SERVER_ADDR set")
	fl.StringVar(&s.postgresStart, "postgres-start", "", "with --postgres-kill: shell command that starts the killed server again on its data, on the same address")
	fl.StringVar(&s.neo4jKill, "neo4j-kill", "", "with --neo4j-uri --server-faults: shell command that kills your Neo4j server")
	fl.StringVar(&s.neo4jStart, "neo4j-start", "", "with --neo4j-kill: shell command that starts the killed Neo4j server again on its data, on the same address")
	fl.StringArrayVar(&s.postgresConfig, "postgres-config", nil, "with --backend containers: a PostgreSQL setting key=value the server starts with (repeatable), e.g. synchronous_commit=off")
}

// useFaults lets a runner fault the servers when prepare started them so.
func (s *serverFlags) useFaults(cfg *sim.Config) {
	if s.faults == nil {
		return
	}
	cfg.ServerFaults = s.faults
	// A worker waits while its server restarts.
	cfg.ProcessTimeout = max(cfg.ProcessTimeout, serverfaults.RestartBudget+time.Minute)
}

// setUp is prepare for a command: a backend that cannot be set up is
// reported on stderr and ends the command with exit code 2. It also
// returns the path of this executable, which worker processes run.
func (s *serverFlags) setUp(cmd *cobra.Command, backend string) (name, self string, cleanup func(), err error) {
	if self, err = os.Executable(); err != nil {
		return "", "", nil, err
	}
	s.serverFaultsSet = cmd.Flags().Changed("server-faults")
	name, cleanup, err = s.prepare(cmd.Context(), cmd.ErrOrStderr(), backend)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
		return "", "", nil, exitError{2}
	}
	return name, self, cleanup, nil
}

// setUpBackend sets up the backend a command runs on: the spec of the
// stores --store-cmd runs (storeCmdFlags.spec), else the backend --backend
// names, its servers prepared (setUp). It returns the spec, named, the
// backend's name, the path of this executable (the workers') and the
// cleanup that stops what it started.
func setUpBackend(cmd *cobra.Command, server *serverFlags, store *storeCmdFlags, backend string, inProcess bool) (spec sim.BackendSpec, name, self string, cleanup func(), err error) {
	if spec, err = store.spec(inProcess); err != nil {
		return spec, "", "", nil, err
	}
	if name, self, cleanup, err = server.setUp(cmd, backend); err != nil {
		return spec, "", "", nil, err
	}
	if spec.Name == "" {
		spec.Name = name
	}
	return spec, spec.Name, self, cleanup, nil
}

// prepare resolves the backend name, starts containers when asked, and
// exports what worker processes need through the environment (secrets
// never go into spec files or reports). The cleanup stops what it started.
// A flag given for another backend was refused before (checkFlags).
func (s *serverFlags) prepare(ctx context.Context, log io.Writer, backend string) (string, func(), error) {
	nothing := func() {}
	if known := append(sim.BackendNames(), "containers"); !slices.Contains(known, backend) {
		// Refused before anything is started or created, naming every
		// value --backend takes (containers is the CLI's, not sim's).
		slices.Sort(known)
		return "", nothing, fmt.Errorf("--backend %q: unknown backend (known: %s)", backend, strings.Join(known, ", "))
	}
	if s.postgresDSN != "" {
		os.Setenv(servers.EnvPostgresDSN, s.postgresDSN)
		if backend == "sqlite" {
			backend = "postgres"
		}
	}
	if s.neo4jURI != "" {
		os.Setenv(servers.EnvNeo4jURI, s.neo4jURI)
		os.Setenv(servers.EnvNeo4jUser, s.neo4jUser)
		if s.neo4jPassword != "" {
			os.Setenv(servers.EnvNeo4jPassword, s.neo4jPassword)
		}
	}
	commands := s.postgresKill != "" || s.postgresStart != "" || s.neo4jKill != "" || s.neo4jStart != ""
	ownFaults := backend != "containers" && s.serverFaultsSet && s.serverFaults
	if commands && !ownFaults {
		return "", nothing, fmt.Errorf("--postgres-kill/--postgres-start/--neo4j-kill/--neo4j-start need --postgres-dsn and --server-faults (with --backend containers crashmatrix kills its own servers)")
	}
	switch backend {
	case "containers":
		cleanup, err := s.startContainers(ctx, log)
		if err != nil {
			return "", nothing, err
		}
		return "postgres", cleanup, nil
	case "postgres":
		return s.usePostgres(ctx, log, ownFaults)
	}
	return backend, nothing, nil
}

// startContainers starts crashmatrix's own database containers and
// points this process at them; cleanup stops them.
func (s *serverFlags) startContainers(ctx context.Context, log io.Writer) (cleanup func(), err error) {
	st, err := provision.Start(ctx, log, provision.ContainerOptions{PostgresImage: s.postgresImage, Neo4jImage: s.neo4jImage,
		ServerFaults: s.serverFaults || !s.serverFaultsSet, PostgresConfig: s.postgresConfig, PowerLoss: !s.noPowerLoss, ClockJump: s.clockJump})
	if err != nil {
		return func() {}, err
	}
	if st.CPUGroup != "" {
		fmt.Fprintf(log, "crashmatrix: the database containers run under the cgroup %s with cpu.shares %d (cgroup v1 weighs a group of containers as one task; docs/ci.md)\n", st.CPUGroup, provision.CPUShares)
	} else if note := containersWeightNote(cgroupRoot); note != "" {
		fmt.Fprintln(log, "crashmatrix: note:", note+" (crashmatrix could not give them a group of their own: "+st.CPUGroupWhy+")")
	}
	return s.use(st), nil
}

// usePostgres checks that the user's servers (--postgres-dsn, and
// --neo4j-uri) look disposable, unless allowed, and with ownFaults puts a
// fault proxy in front of each.
func (s *serverFlags) usePostgres(ctx context.Context, log io.Writer, ownFaults bool) (string, func(), error) {
	nothing := func() {}
	dsn := os.Getenv(servers.EnvPostgresDSN)
	if dsn == "" {
		return "", nothing, fmt.Errorf("--backend postgres needs --postgres-dsn or %s", servers.EnvPostgresDSN)
	}
	if !s.allowNondisposable {
		if err := servers.CheckDisposable("postgres", dsn); err != nil {
			return "", nothing, err
		}
		if uri := os.Getenv(servers.EnvNeo4jURI); uri != "" {
			if err := servers.CheckDisposable("neo4j", uri); err != nil {
				return "", nothing, err
			}
		}
	}
	if !ownFaults {
		return "postgres", nothing, nil
	}
	// The user said their servers may be faulted: a fault proxy goes in
	// front of each, and the commands crash them.
	st, err := provision.External(ctx, log, provision.ExternalOptions{PostgresDSN: dsn,
		Neo4jURI: os.Getenv(servers.EnvNeo4jURI), Neo4jUser: cmp.Or(os.Getenv(servers.EnvNeo4jUser), s.neo4jUser), Neo4jPassword: os.Getenv(servers.EnvNeo4jPassword),
		PostgresKill: s.postgresKill, PostgresStart: s.postgresStart, Neo4jKill: s.neo4jKill, Neo4jStart: s.neo4jStart})
	if err != nil {
		return "", nothing, err
	}
	return "postgres", s.use(st), nil
}

// use points this process, and the workers it starts, at the servers st
// started or put fault proxies in front of; it returns st's Stop.
func (s *serverFlags) use(st *provision.Started) func() {
	for k, v := range st.Env {
		os.Setenv(k, v)
	}
	s.faults = st.Faults
	return st.Stop
}

// cgroupRoot is where the host's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// containersWeightNote warns, on a host with cgroup v1 where podman puts
// containers under /libpod_parent (its cgroupfs manager), that the group
// still has the default CPU weight: the kernel weighs both database
// servers together as one task against every other process, and beside
// CPU-bound jobs Neo4j was seen at 4% of a core, its graph writes waiting
// for minutes (docs/ci.md). "" when the group is absent or was raised.
func containersWeightNote(root string) string {
	path := filepath.Join(root, "cpu", "libpod_parent", "cpu.shares")
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != "1024" {
		return ""
	}
	return fmt.Sprintf("the database containers share one default CPU weight (%s is 1024, cgroup v1): beside other CPU-bound jobs they get one task's share and cases may end UNDECIDED; on a shared runner raise it, e.g. echo 8192 > %s (docs/ci.md)", path, path)
}
