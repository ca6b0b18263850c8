package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/rogpeppe/go-internal/testscript"
)

// localpg starts a PostgreSQL server of this machine on 127.0.0.1 (a
// server the user runs, as far as crashmatrix knows: no container) and
// sets, for the script, PGDSN (its DSN), PGKILL (a shell command that
// SIGKILLs every process of the server) and PGSTART (a shell command that
// starts it again on its data, in the background, on the same port). The
// server is killed when the script ends. The cluster is made by
// pgtest.NewCluster (as root, the server runs as the postgres user).
func cmdLocalPG(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: localpg")
	}
	c, err := pgtest.NewCluster("crashmatrix")
	if err != nil {
		ts.Fatalf("localpg: %v (make test installs postgresql-15)", err)
	}
	ts.Defer(c.Remove)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// A shell stays the server's parent and reaps it when it dies (runuser
	// as the parent would stop itself when its child is stopped, and this
	// machine's init does not reap orphans).
	start := fmt.Sprintf("%ssh -c 'exec setsid %s/postgres -D %s -p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c max_connections=200 & wait' >>%s 2>&1 </dev/null &",
		c.As(), c.Bin, c.Data, port, c.Sock, c.Log)
	// The kill SIGKILLs the postmaster and every process it started (each
	// child of PostgreSQL leads a session of its own, so no group kill
	// reaches them): stopped first, it cannot start new ones or notice its
	// children die, as a machine losing the server at once would. It
	// returns once the postmaster is gone: a new one refuses to start while
	// the PID in postmaster.pid still exists.
	kill := fmt.Sprintf("P=$(head -1 %s/postmaster.pid) && kill -STOP $P && pkill -KILL -P $P; kill -KILL $P; while kill -0 $P 2>/dev/null; do sleep 0.02; done", c.Data)
	ts.Defer(func() { _ = exec.Command("timeout", "20", "sh", "-c", kill).Run() })
	if out, err := exec.Command("sh", "-c", start).CombinedOutput(); err != nil {
		ts.Fatalf("localpg: %s: %v\n%s", start, err, out)
	}
	dsn := fmt.Sprintf("postgres://crashmatrix@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE DATABASE crashmatrix_test")
			conn.Close(ctx)
			cancel()
			ts.Check(err)
			break
		}
		cancel()
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(c.Log)
			ts.Fatalf("localpg: the server does not answer after a minute: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Setenv("PGDSN", strings.Replace(dsn, "/postgres?", "/crashmatrix_test?", 1))
	ts.Setenv("PGKILL", kill)
	ts.Setenv("PGSTART", start)
	ts.Setenv("PGLOG", c.Log)
}
