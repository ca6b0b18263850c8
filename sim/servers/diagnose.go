package servers

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/worker"
	"github.com/jackc/pgx/v5"
)

// Neo4jTransactions lists the Neo4j server's running transactions (the
// Neo4j registration sets it): one line each, and how many ran longer
// than 10 s.
var Neo4jTransactions func(ctx context.Context, uri, user, password string) (lines []string, long int, err error)

// diagnose says what the servers of the postgres backend are doing: the
// PostgreSQL sessions not idle (waiting for a lock and on whom, in a
// transaction for how long, their statements) and Neo4j's running
// transactions. It reaches the servers directly, not through a case's
// fault proxy. The first line sums it up.
func diagnose(ctx context.Context, dsn string, useNeo bool) string {
	var sum, body []string
	pg, waiting, long, err := pgSessions(ctx, dsn)
	if err != nil {
		sum = append(sum, "postgres: "+err.Error())
	} else {
		sum = append(sum, fmt.Sprintf("postgres: %d sessions waiting for a lock, %d in a transaction for over 10s", waiting, long))
		body = append(body, "PostgreSQL sessions that are not idle (pid, state, wait, blocked by, seconds in transaction, statement):")
		body = append(body, pg...)
	}
	if useNeo && Neo4jTransactions != nil {
		tx, n, err := Neo4jTransactions(ctx, os.Getenv(EnvNeo4jURI), neo4jUser(), os.Getenv(EnvNeo4jPassword))
		if err != nil {
			sum = append(sum, "neo4j: "+err.Error())
		} else {
			sum = append(sum, fmt.Sprintf("neo4j: %d transactions running, %d for over 10s", len(tx), n))
			body = append(body, "", "Neo4j transactions (id, status, elapsed, wait, client, query):")
			body = append(body, tx...)
		}
	}
	return strings.Join(sum, "; ") + "\n\n" + strings.Join(body, "\n")
}

func pgSessions(ctx context.Context, dsn string) (lines []string, waiting, long int, err error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("cannot ask: %v", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT pid, state, coalesce(wait_event_type || ':' || wait_event, ''), pg_blocking_pids(pid)::text,
		coalesce(extract(epoch FROM now() - xact_start), 0)::float8, left(regexp_replace(query, '\s+', ' ', 'g'), 200)
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'
		ORDER BY xact_start NULLS LAST`)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("cannot ask: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		var state, wait, blockers, query string
		var secs float64
		if err := rows.Scan(&pid, &state, &wait, &blockers, &secs, &query); err != nil {
			return nil, 0, 0, err
		}
		if strings.HasPrefix(wait, "Lock:") {
			waiting++
		}
		if secs > 10 {
			long++
		}
		lines = append(lines, fmt.Sprintf("  %d %s %s blocked-by=%s %.1fs %s", pid, state, wait, blockers, secs, query))
	}
	return lines, waiting, long, rows.Err()
}

// backendDiagnose is the backend's Diagnose (the supervisor bounds it).
func backendDiagnose(dsn string, useNeo bool) func(ctx context.Context, env worker.CaseEnv) string {
	return func(ctx context.Context, _ worker.CaseEnv) string { return diagnose(ctx, dsn, useNeo) }
}
