// Package servers registers the simulator's server backends (PostgreSQL,
// optionally with Neo4j as the graph) and provisions them. It lives apart
// from sim so that the adapters' own tests can import the conformance
// suites without an import cycle.
package servers

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/postgres"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/worker"
	"github.com/jackc/pgx/v5"
)

// Environment variables through which server backends reach their servers.
// Secrets travel only this way (inherited by worker processes), never in a
// spec file, a report or a log line.
const (
	EnvPostgresDSN   = "CRASHMATRIX_POSTGRES_DSN"
	EnvNeo4jURI      = "CRASHMATRIX_NEO4J_URI"
	EnvNeo4jUser     = "CRASHMATRIX_NEO4J_USER"
	EnvNeo4jPassword = "CRASHMATRIX_NEO4J_PASSWORD"
)

// GraphOpener opens a GraphWriter for a server backend (the Neo4j adapter
// registers one); nil keeps the PostgreSQL graph tables.
type GraphOpener func(ctx context.Context, env worker.CaseEnv) (reference.GraphWriter, func() error, error)

var neo4jOpener GraphOpener

// RegisterNeo4j installs the Neo4j GraphWriter used by the "postgres"
// backend when CRASHMATRIX_NEO4J_URI is set.
func RegisterNeo4j(open GraphOpener) { neo4jOpener = open }

func init() {
	worker.RegisterBackend("postgres", func(worker.BackendSpec) (worker.Backend, error) { return PostgresBackend() })
}

// PostgresBackend stores everything in the PostgreSQL server named by
// CRASHMATRIX_POSTGRES_DSN (keys are space-scoped, so cases share one
// database); with CRASHMATRIX_NEO4J_URI set, the graph lives in Neo4j.
func PostgresBackend() (worker.Backend, error) {
	dsn := os.Getenv(EnvPostgresDSN)
	if dsn == "" {
		return worker.Backend{}, fmt.Errorf("backend postgres: %s is not set (pass --postgres-dsn, or --backend containers to start one)", EnvPostgresDSN)
	}
	name := "postgres"
	useNeo := os.Getenv(EnvNeo4jURI) != "" && neo4jOpener != nil
	if useNeo {
		name = "postgres+neo4j"
	}
	return worker.Backend{
		Name:     name,
		Diagnose: backendDiagnose(dsn, useNeo),
		Open: func(ctx context.Context, env worker.CaseEnv) (reference.Stores, error) {
			st, err := postgres.Open(ctx, ViaEndpoint(dsn, env.Servers["postgres"]), postgres.Options{CreateInsteadOfMerge: env.Mutant == worker.MutantCreateNotMerge,
				LostCommitIsFailure: env.Mutant == worker.MutantLostCommitIsFailure, RenewIgnoresHolder: env.Mutant == worker.MutantRenewIgnoresHolder,
				ServerClockLeases: env.Mutant == worker.MutantServerClockLease, PlanApart: env.Mutant == worker.MutantTwoTransactionCreate})
			if err != nil || !useNeo {
				return st, err
			}
			w, closeW, err := neo4jOpener(ctx, env)
			if err != nil {
				st.Close()
				return reference.Stores{}, err
			}
			st.Writer = w
			st.Closer = closers{st.Closer, closeFunc(closeW)}
			return st, nil
		},
		OpenPlanSave: func(ctx context.Context, env worker.CaseEnv) (worker.PlanSaveStores, error) {
			p, err := postgres.OpenPlanSave(ctx, ViaEndpoint(dsn, env.Servers["postgres"]), env.Mutant != worker.MutantNoUniqueConstraint)
			if err != nil {
				return worker.PlanSaveStores{}, err
			}
			return worker.PlanSaveStores{Checkpoints: p, Plans: p, Closer: p}, nil
		},
	}, nil
}

// ViaEndpoint points a PostgreSQL DSN or a Neo4j URI (URL form) at
// hostPort instead of its own host and port: a case whose servers may be
// faulted reaches them through its own fault proxy. A key=value DSN gets
// host and port appended (the later key wins); an empty hostPort leaves it
// as it is.
func ViaEndpoint(dsnOrURI, hostPort string) string {
	if hostPort == "" {
		return dsnOrURI
	}
	u, err := url.Parse(dsnOrURI)
	if err == nil && u.Host != "" {
		u.Host = hostPort
		return u.String()
	}
	if host, port, err := net.SplitHostPort(hostPort); err == nil && strings.Contains(dsnOrURI, "=") {
		// A key=value DSN: a later key wins.
		return strings.TrimSpace(dsnOrURI) + " host=" + host + " port=" + port
	}
	return dsnOrURI
}

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

type closers []interface{ Close() error }

func (c closers) Close() error {
	var first error
	for _, x := range c {
		if x == nil {
			continue
		}
		if err := x.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

var disposableName = regexp.MustCompile(`(?i)(test|tmp|temp|scratch|crashmatrix|ci|disposable)`)

// CheckDisposable refuses a server that does not look like a throwaway
// one: crashmatrix writes freely and kills clients mid-transaction. A
// loopback host or a database/URI naming itself test, tmp, ci, scratch or
// crashmatrix passes; anything else needs an explicit override.
func CheckDisposable(kind, dsnOrURI string) error {
	host, db := "", ""
	if cfg, err := pgx.ParseConfig(dsnOrURI); kind == "postgres" && err == nil {
		host, db = cfg.Host, cfg.Database
	} else if u, err := url.Parse(dsnOrURI); err == nil {
		host, db = u.Hostname(), strings.Trim(u.Path, "/")
	}
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if disposableName.MatchString(db) || disposableName.MatchString(host) {
		return nil
	}
	return fmt.Errorf("%s server %s (database %q) does not look disposable: crashmatrix writes to it and kills its clients mid-transaction; "+
		"use a loopback or test server, or pass --allow-nondisposable", kind, postgres.RedactDSN(dsnOrURI), db)
}
