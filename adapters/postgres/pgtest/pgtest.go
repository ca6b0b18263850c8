// Package pgtest starts a throw-away PostgreSQL 15 server for tests, from
// the binaries installed under /usr/lib/postgresql/15/bin, listening on
// 127.0.0.1 only. If the environment variable CRASHMATRIX_POSTGRES_DSN is
// set, that server is used instead and nothing is started.
//
// Typical use, once per test binary:
//
//	func TestMain(m *testing.M) {
//		dsn, stop, err := pgtest.StartServer()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, "FAIL:", err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
//
// and then pgtest.Schema(t, dsn) per test for an isolated schema.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable that points the tests at an
// existing server instead of starting one.
const EnvDSN = "CRASHMATRIX_POSTGRES_DSN"

// EnvBinDir names the environment variable that overrides BinDir.
const EnvBinDir = "CRASHMATRIX_POSTGRES_BIN"

// BinDir is where the PostgreSQL 15 server binaries are expected.
const BinDir = "/usr/lib/postgresql/15/bin"

// AuthUser is a role name that a server started by StartServer
// authenticates with a password (scram-sha-256) over TCP, while every
// other role is trusted; tests create the role to check authentication
// failures.
const AuthUser = "crashmatrix_auth"

// Start returns the DSN of a running server (EnvDSN, or one started for
// tb and stopped by tb.Cleanup). It fails tb, naming what is missing, if
// neither is possible; it never skips.
func Start(tb testing.TB) string {
	tb.Helper()
	dsn, stop, err := StartServer()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(stop)
	return dsn
}

// Cluster is a fresh PostgreSQL data directory made by initdb in a
// temporary directory, not yet running: the part of starting a throw-away
// server that does not depend on how it is then run (StartServer runs it
// with pg_ctl; a test that kills and restarts the server with shell
// commands runs postgres itself).
type Cluster struct {
	// Bin is the directory of the server binaries used.
	Bin string
	// Dir is the temporary directory that holds everything below; Remove
	// deletes it.
	Dir string
	// Data is the data directory, Sock the Unix socket directory and Log
	// a file for the server's output, all inside Dir.
	Data, Sock, Log string
	// AsPostgres is true when the server must run as the postgres OS user
	// (this process is root; PostgreSQL refuses to run as root).
	AsPostgres bool
	// Superuser is the role initdb created, trusted on 127.0.0.1.
	Superuser string
}

// NewCluster runs initdb (trust authentication, UTF8, no fsync) in a new
// temporary directory for the role superuser. The binaries come from
// EnvBinDir if set, else from BinDir. It fails naming what is missing: a
// binary, the postgres OS user or runuser when run as root.
func NewCluster(superuser string) (*Cluster, error) {
	bin := BinDir
	if b := strings.TrimSpace(os.Getenv(EnvBinDir)); b != "" {
		bin = b
	}
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			return nil, fmt.Errorf("PostgreSQL 15 server binary %s is missing (%v): install postgresql-15, set %s to its bin directory, or set %s to the DSN of a running server",
				filepath.Join(bin, tool), err, EnvBinDir, EnvDSN)
		}
	}
	c := &Cluster{Bin: bin, AsPostgres: os.Geteuid() == 0, Superuser: superuser}
	var uid, gid int
	if c.AsPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, but the postgres OS user that must run the server is missing (%v): install postgresql-15, or set %s", err, EnvDSN)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("running as root, but runuser (util-linux) is missing: %v", err)
		}
	}
	dir, err := os.MkdirTemp("", "crashmatrix-pg-")
	if err != nil {
		return nil, err
	}
	c.Dir = dir
	c.Data, c.Sock, c.Log = filepath.Join(dir, "data"), filepath.Join(dir, "sock"), filepath.Join(dir, "server.log")
	if err := os.Mkdir(c.Sock, 0o700); err != nil {
		c.Remove()
		return nil, err
	}
	if c.AsPostgres {
		for _, p := range []string{dir, c.Sock} {
			if err := os.Chown(p, uid, gid); err != nil {
				c.Remove()
				return nil, err
			}
		}
	}
	if out, err := c.Command("initdb", "-D", c.Data, "-A", "trust", "-U", superuser, "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		c.Remove()
		return nil, fmt.Errorf("initdb failed: %v\n%s", err, out)
	}
	// A server killed by a test (SIGKILL) leaves its dynamic shared memory
	// behind; with mmap it is a file under the data folder, which goes
	// with the cluster, rather than one in /dev/shm that nothing removes.
	if err := appendConf(filepath.Join(c.Data, "postgresql.conf"), "dynamic_shared_memory_type = mmap\n"); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

// Command returns the command that runs the server tool name (initdb,
// pg_ctl, postgres) with args, as the postgres OS user when AsPostgres, in
// Dir, in the C locale.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.Bin, name)
	var cmd *exec.Cmd
	if c.AsPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	return cmd
}

// As is the shell prefix that runs a command as the server's OS user:
// "runuser -u postgres -- " when AsPostgres, else "".
func (c *Cluster) As() string {
	if c.AsPostgres {
		return "runuser -u postgres -- "
	}
	return ""
}

// Remove deletes Dir (stop the server first).
func (c *Cluster) Remove() { os.RemoveAll(c.Dir) }

// StartServer returns the DSN of a running server and a function that stops
// it: EnvDSN if set (stop does nothing), otherwise a fresh cluster created
// with initdb in a temporary directory (NewCluster) and started with pg_ctl
// on a free port of 127.0.0.1 (fsync off). As root the server runs as the
// postgres OS user. stop shuts the server down and removes the directory.
func StartServer() (dsn string, stop func(), err error) {
	if env := strings.TrimSpace(os.Getenv(EnvDSN)); env != "" {
		return env, func() {}, nil
	}
	c, err := NewCluster("postgres")
	if err != nil {
		return "", nil, err
	}
	// Password authentication for AuthUser only, before the trust lines.
	hba := filepath.Join(c.Data, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		c.Remove()
		return "", nil, err
	}
	line := "host all " + AuthUser + " 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, append([]byte(line), old...), 0o600); err != nil {
		c.Remove()
		return "", nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			c.Remove()
			return "", nil, err
		}
		opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", port, c.Sock)
		out, err := c.Command("pg_ctl", "-D", c.Data, "-l", c.Log, "-o", opts, "-w", "-t", "60", "start").CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(c.Log)
			lastErr = fmt.Errorf("pg_ctl start on 127.0.0.1:%d failed: %v\n%s\n%s", port, err, out, tail(string(log), 2000))
			continue
		}
		stopWatchdog := watchdog(c)
		stop := func() {
			_ = c.Command("pg_ctl", "-D", c.Data, "-m", "immediate", "-w", "stop").Run()
			c.Remove()
			stopWatchdog()
		}
		dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		return dsn, stop, nil
	}
	c.Remove()
	return "", nil, lastErr
}

// watchdog starts a detached shell that stops the server and removes dir
// once this process is gone, so a test binary that panics or is killed
// does not leave a server behind. The returned function ends the watchdog.
func watchdog(c *Cluster) func() {
	pgctl := c.As() + shellQuote(filepath.Join(c.Bin, "pg_ctl"))
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done; %s -D %s -m immediate -w stop >/dev/null 2>&1; rm -rf %s`,
		os.Getpid(), pgctl, shellQuote(c.Data), shellQuote(c.Dir))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return func() {}
	}
	go cmd.Wait() //nolint:errcheck // reaps the watchdog
	return func() { _ = cmd.Process.Kill() }
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// NewSchema creates a uniquely named schema (prefix + random suffix) on
// the server of dsn and returns a DSN whose connections use it as their
// search_path, so stores opened on it are isolated from every other test.
// The schema is not dropped; drop it with DropSchema if needed.
func NewSchema(ctx context.Context, dsn, prefix string) (schemaDSN, schema string, err error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	schema = sanitize(prefix) + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create schema %s: %w", schema, err)
	}
	out, err := WithParam(dsn, "search_path", schema)
	return out, schema, err
}

// DropSchema drops a schema made by NewSchema, with everything in it.
func DropSchema(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

// Schema is NewSchema for a test: it fails tb on error and drops the
// schema when tb ends.
func Schema(tb testing.TB, dsn string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, schema, err := NewSchema(ctx, dsn, "t")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DropSchema(ctx, dsn, schema); err != nil {
			tb.Logf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return out
}

// WithParam returns dsn (URL or key=value form) with a run-time parameter
// (or connection setting such as "password" or "user") set to value.
func WithParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("pgtest: cannot parse the DSN URL")
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'", nil
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 || b.String()[0] >= '0' && b.String()[0] <= '9' {
		return "s" + b.String()
	}
	return b.String()
}

func appendConf(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("configure the test cluster: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("configure the test cluster: %s: %w", path, err)
	}
	return f.Close()
}
