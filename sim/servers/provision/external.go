package provision

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/jackc/pgx/v5/pgconn"
)

// ExternalOptions are servers the user runs and reaches by DSN/URI, and
// says crashmatrix may fault. Every server given gets a fault proxy in
// front of it (ack-lost, conn-reset); a server with both a kill and a
// start command can also be crashed (server-crash).
type ExternalOptions struct {
	PostgresDSN                        string
	Neo4jURI, Neo4jUser, Neo4jPassword string
	PostgresKill, PostgresStart        string
	Neo4jKill, Neo4jStart              string
}

// killGone bounds how long a server may still answer after its kill
// command returned; killPing bounds one readiness query while waiting.
var killGone, killPing = 30 * time.Second, 2 * time.Second

// External puts the fault supervisor's proxies in front of servers given
// by DSN/URI. Started.Env points the workers at the proxies; Stop closes
// them (the servers are the user's: they are left running).
func External(ctx context.Context, log io.Writer, o ExternalOptions) (*Started, error) {
	if o.PostgresDSN == "" {
		return nil, fmt.Errorf("server faults on your own servers need --postgres-dsn")
	}
	if err := pairedCommands("postgres", o.PostgresKill, o.PostgresStart); err != nil {
		return nil, err
	}
	if err := pairedCommands("neo4j", o.Neo4jKill, o.Neo4jStart); err != nil {
		return nil, err
	}
	if o.Neo4jURI == "" && (o.Neo4jKill != "" || o.Neo4jStart != "") {
		return nil, fmt.Errorf("--neo4j-kill/--neo4j-start need --neo4j-uri")
	}
	pgAddr, pgDSN, err := plainPostgres(o.PostgresDSN)
	if err != nil {
		return nil, err
	}
	env := map[string]string{servers.EnvPostgresDSN: pgDSN}
	pg := &serverfaults.Server{Name: "postgres", Protocol: "postgres", Addr: pgAddr}
	commandServer(pg, o.PostgresKill, o.PostgresStart, func(ctx context.Context, _ string) error { return pgPing(ctx, pgDSN) }, log)
	srvs := []*serverfaults.Server{pg}
	if o.Neo4jURI != "" {
		if servers.Neo4jPing == nil {
			return nil, fmt.Errorf("--neo4j-uri: this build has no Neo4j driver")
		}
		n4Addr, n4URI, err := plainBolt(o.Neo4jURI)
		if err != nil {
			return nil, err
		}
		env[servers.EnvNeo4jURI], env[servers.EnvNeo4jUser], env[servers.EnvNeo4jPassword] = n4URI, o.Neo4jUser, o.Neo4jPassword
		n4 := &serverfaults.Server{Name: "neo4j", Protocol: "bolt", Addr: n4Addr}
		commandServer(n4, o.Neo4jKill, o.Neo4jStart, func(ctx context.Context, _ string) error {
			return servers.Neo4jPing(ctx, n4URI, o.Neo4jUser, o.Neo4jPassword)
		}, log)
		srvs = append(srvs, n4)
	}
	for _, s := range srvs {
		if err := firstQuery(ctx, func(ctx context.Context) error { return s.Ping(ctx) }); err != nil {
			return nil, fmt.Errorf("%s at %s does not answer: %w", s.Name, s.Addr, err)
		}
	}
	sup, err := serverfaults.NewSupervisor(srvs, log)
	if err != nil {
		return nil, err
	}
	st := &Started{Env: env, Direct: maps.Clone(env), Faults: sup}
	var once sync.Once
	st.Stop = func() { once.Do(sup.Close) }
	env[servers.EnvPostgresDSN] = servers.ViaEndpoint(pgDSN, sup.Stable("postgres"))
	if n4 := env[servers.EnvNeo4jURI]; n4 != "" {
		env[servers.EnvNeo4jURI] = servers.ViaEndpoint(n4, sup.Stable("neo4j"))
	}
	for _, s := range srvs {
		if s.Kill == nil {
			fmt.Fprintf(log, "%s: lost replies and cut connections only (give --%s-kill and --%s-start to crash it too)\n", s.Name, s.Name, s.Name)
		}
	}
	return st, nil
}

func pairedCommands(server, kill, start string) error {
	if (kill == "") != (start == "") {
		return fmt.Errorf("--%s-kill and --%s-start go together: crashmatrix kills the server with one and starts it again on its data with the other", server, server)
	}
	return nil
}

// commandServer lets the supervisor crash s with the user's commands (run
// with sh -c; CRASHMATRIX_SERVER and CRASHMATRIX_SERVER_ADDR name the
// server). The kill must leave the server not answering; the start must
// bring it back on the same address, answering within the restart budget.
func commandServer(s *serverfaults.Server, kill, start string, ping func(ctx context.Context, addr string) error, log io.Writer) {
	s.Ping = func(ctx context.Context) error { return ping(ctx, s.Addr) }
	if kill == "" {
		return
	}
	run := func(ctx context.Context, flag, command string) error {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Env = append(os.Environ(), "CRASHMATRIX_SERVER="+s.Name, "CRASHMATRIX_SERVER_ADDR="+s.Addr)
		// A start command that leaves the server holding its output
		// (not redirected to a file) must not hang the run.
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if len(out) > 0 {
			fmt.Fprintf(log, "%s %s: %s\n", s.Name, flag, strings.TrimSpace(string(out)))
		}
		if err != nil {
			return fmt.Errorf("--%s-%s %q: %w: %s", s.Name, flag, command, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	s.Kill = func(ctx context.Context) error {
		if err := run(ctx, "kill", kill); err != nil {
			return err
		}
		deadline := time.Now().Add(killGone)
		for {
			pctx, cancel := context.WithTimeout(ctx, killPing)
			err := ping(pctx, s.Addr)
			timedOut := pctx.Err() != nil
			cancel()
			// A query that failed is a server gone; one that ran out of
			// time is not: a live server on a loaded machine answers
			// late (a kill command that did nothing passed as a kill).
			if err != nil && !timedOut {
				return nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				if err != nil {
					return fmt.Errorf("--%s-kill %q returned but %s at %s neither answered nor refused within %s (last: %v): the command must kill the server", s.Name, kill, s.Name, s.Addr, killGone, err)
				}
				return fmt.Errorf("--%s-kill %q returned but %s at %s still answers %s later: the command must kill the server", s.Name, kill, s.Name, s.Addr, killGone)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	s.Start = func(ctx context.Context) (string, error) {
		if err := run(ctx, "start", start); err != nil {
			return "", err
		}
		if err := firstQueryWithin(ctx, serverfaults.RestartBudget, func(ctx context.Context) error { return ping(ctx, s.Addr) }); err != nil {
			return "", fmt.Errorf("%s at %s does not answer after --%s-start: %w", s.Name, s.Addr, s.Name, err)
		}
		return s.Addr, nil
	}
}

// plainPostgres returns a DSN's server address and the DSN the fault
// proxy can read: the proxy parses the PostgreSQL protocol (to drop the
// reply to a COMMIT), which TLS would hide, so a DSN that asks for TLS
// only if available gets sslmode=disable and one that demands it is
// refused.
func plainPostgres(dsn string) (addr, plain string, err error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", "", fmt.Errorf("--postgres-dsn: %w", err)
	}
	addr = net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		return "", "", fmt.Errorf("--postgres-dsn: a Unix socket (%s) cannot go through the fault proxy: give host=127.0.0.1 (or the server's address) and its port", cfg.Host)
	}
	mode := sslMode(dsn)
	switch mode {
	case "", "disable", "allow", "prefer":
	default:
		return "", "", fmt.Errorf("--postgres-dsn has sslmode=%s: the fault proxy reads the PostgreSQL protocol to drop a COMMIT's reply and cannot read TLS; use sslmode=disable (or prefer) with --server-faults", mode)
	}
	return addr, setParam(dsn, "sslmode", "disable"), nil
}

// sslMode is the sslmode a DSN (URL or key=value) asks for.
func sslMode(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Query().Get("sslmode")
	}
	mode := ""
	for _, f := range strings.Fields(dsn) {
		if k, v, ok := strings.Cut(f, "="); ok && k == "sslmode" {
			mode = strings.Trim(v, "'")
		}
	}
	return cmp.Or(mode, os.Getenv("PGSSLMODE"))
}

// setParam sets one parameter of a DSN, URL or key=value form.
func setParam(dsn, key, val string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, val)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " " + key + "=" + val // a later key wins
}

// plainBolt returns a Neo4j URI's server address and the bolt:// URI the
// proxy can stand in front of: neo4j:// would route the driver to the
// address the server advertises, around the proxy; TLS would hide the
// protocol from it.
func plainBolt(uri string) (addr, plain string, err error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", "", fmt.Errorf("--neo4j-uri: %w", err)
	}
	switch u.Scheme {
	case "bolt", "neo4j":
	default:
		return "", "", fmt.Errorf("--neo4j-uri %s: scheme %s: the fault proxy reads the Bolt protocol and cannot read TLS; use bolt:// with --server-faults", u.Redacted(), u.Scheme)
	}
	u.Scheme = "bolt"
	port := u.Port()
	if port == "" {
		port = "7687"
	}
	return net.JoinHostPort(u.Hostname(), port), u.String(), nil
}
