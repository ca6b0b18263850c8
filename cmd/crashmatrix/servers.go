package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serverFlags are the flags that point crashmatrix at servers.
type serverFlags struct {
	postgresDSN, neo4jURI, neo4jUser, neo4jPassword string
	postgresImage, neo4jImage                       string
	allowNondisposable                              bool
}

func (s *serverFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.postgresDSN, "postgres-dsn", "", "PostgreSQL server to use (env "+servers.EnvPostgresDSN+"); implies --backend postgres")
	fl.StringVar(&s.neo4jURI, "neo4j-uri", "", "Neo4j server for the graph (env "+servers.EnvNeo4jURI+", with "+servers.EnvNeo4jUser+" and "+servers.EnvNeo4jPassword+")")
	fl.StringVar(&s.neo4jUser, "neo4j-user", "neo4j", "Neo4j user")
	fl.StringVar(&s.neo4jPassword, "neo4j-password", "", "Neo4j password (prefer the environment variable)")
	fl.StringVar(&s.postgresImage, "postgres-image", provision.DefaultPostgresImage, "image for --backend containers")
	fl.StringVar(&s.neo4jImage, "neo4j-image", provision.DefaultNeo4jImage, "image for --backend containers")
	fl.BoolVar(&s.allowNondisposable, "allow-nondisposable", false, "use a server that does not look disposable (crashmatrix writes to it and kills clients mid-transaction)")
}

// setUp is prepare for a command: a backend that cannot be set up is
// reported on stderr and ends the command with exit code 2. It also
// returns the path of this executable, which worker processes run.
func (s *serverFlags) setUp(cmd *cobra.Command, backend string) (name, self string, cleanup func(), err error) {
	if self, err = os.Executable(); err != nil {
		return "", "", nil, err
	}
	name, cleanup, err = s.prepare(cmd.Context(), cmd.ErrOrStderr(), backend)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
		return "", "", nil, exitError{2}
	}
	return name, self, cleanup, nil
}

// prepare resolves the backend name, starts containers when asked, and
// exports what worker processes need through the environment (secrets
// never go into spec files or reports). The cleanup stops what it started.
func (s *serverFlags) prepare(ctx context.Context, log io.Writer, backend string) (string, func(), error) {
	nothing := func() {}
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
	switch backend {
	case "containers":
		env, stop, err := provision.StartContainers(ctx, log, provision.ContainerOptions{PostgresImage: s.postgresImage, Neo4jImage: s.neo4jImage})
		if err != nil {
			return "", nothing, err
		}
		for k, v := range env {
			os.Setenv(k, v)
		}
		return "postgres", stop, nil
	case "postgres":
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
	}
	return backend, nothing, nil
}
