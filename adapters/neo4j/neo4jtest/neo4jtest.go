// Package neo4jtest provides a Neo4j 5 server for tests: the server named
// by CRASHMATRIX_NEO4J_URI (with _USER and _PASSWORD) if set, otherwise a
// throw-away container of the locally built image
// localhost/crashmatrix/neo4j:5.26 (ci/images/neo4j/build.sh), started with
// testcontainers-go through the Docker-compatible API of DOCKER_HOST
// (podman: ci/containers/setup-podman.sh, then . ci/containers/env.sh).
// Tests only ever connect through 127.0.0.1 and the mapped Bolt port.
//
// Typical use, once per test binary:
//
//	func TestMain(m *testing.M) {
//		srv, err := neo4jtest.StartServer(context.Background())
//		if err != nil {
//			fmt.Fprintln(os.Stderr, "FAIL:", err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		srv.Stop()
//		os.Exit(code)
//	}
//
// If neither a server nor a container engine and the image are available,
// Start and StartServer fail, naming what is missing; they never skip.
package neo4jtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/testcontainers/testcontainers-go"
	tcneo4j "github.com/testcontainers/testcontainers-go/modules/neo4j"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Environment variables that point the tests at a running server instead of
// starting a container.
const (
	EnvURI      = "CRASHMATRIX_NEO4J_URI"
	EnvUser     = "CRASHMATRIX_NEO4J_USER"     // default "neo4j"
	EnvPassword = "CRASHMATRIX_NEO4J_PASSWORD" // default empty
	// EnvImage overrides Image.
	EnvImage = "CRASHMATRIX_NEO4J_IMAGE"
)

// Image is the container image started when EnvURI is not set.
const Image = "localhost/crashmatrix/neo4j:5.26"

// User is the admin user of a started container.
const User = "neo4j"

// StartupTimeout bounds the container start, until Bolt answers a query.
const StartupTimeout = 3 * time.Minute

// Server is a running Neo4j server for tests.
type Server struct {
	// URI is the Bolt URI, always bolt://127.0.0.1:<port> for a started
	// container.
	URI string
	// User and Password authenticate on URI.
	User, Password string
	// Container is the started container, nil for EnvURI.
	Container *tcneo4j.Neo4jContainer
	// Preflight is how long the engine and image checks took; Ready is
	// how long the container took from Run until Bolt answered the first
	// query, RunTook from Run until the wait strategy was satisfied.
	Preflight, Ready, RunTook time.Duration
	stop                      func()
}

// Stop terminates a started container (nothing for EnvURI). It is safe to
// call more than once.
func (s *Server) Stop() {
	if s != nil && s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// Start returns the URI, user and password of a running server (EnvURI, or
// a container started for tb and terminated by tb.Cleanup). It fails tb,
// naming what is missing, if neither is possible; it never skips.
func Start(tb testing.TB) (uri, user, password string) {
	tb.Helper()
	srv, err := StartServer(context.Background())
	if err != nil {
		tb.Fatalf("neo4jtest: %v", err)
	}
	tb.Cleanup(srv.Stop)
	return srv.URI, srv.User, srv.Password
}

// StartServer returns a running server: EnvURI if set, otherwise a fresh
// container of Image (or EnvImage) with a random admin password, Bolt
// published on a loopback port; it returns once a query has been answered.
func StartServer(ctx context.Context) (*Server, error) {
	if uri := strings.TrimSpace(os.Getenv(EnvURI)); uri != "" {
		user := os.Getenv(EnvUser)
		if user == "" {
			user = User
		}
		return &Server{URI: uri, User: user, Password: os.Getenv(EnvPassword), stop: func() {}}, nil
	}
	image := Image
	if v := strings.TrimSpace(os.Getenv(EnvImage)); v != "" {
		image = v
	}
	tp := time.Now()
	if err := checkEngine(ctx, image); err != nil {
		return nil, err
	}
	preflight := time.Since(tp)
	// A container that dies right after start (seen once on a shared,
	// busy engine) gets one more try; both errors are reported.
	srv, err := startContainer(ctx, image)
	if err != nil {
		fmt.Fprintf(os.Stderr, "neo4jtest: first container start failed, trying once more: %v\n", err)
		var err2 error
		if srv, err2 = startContainer(ctx, image); err2 != nil {
			return nil, fmt.Errorf("%w (an earlier attempt failed too: %v)", err2, err)
		}
	}
	srv.Preflight = preflight
	return srv, nil
}

// startContainer starts one container of image and waits for Bolt.
func startContainer(ctx context.Context, image string) (*Server, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	password := "cm-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout)
	defer cancel()
	t0 := time.Now()
	c, err := tcneo4j.Run(ctx, image,
		tcneo4j.WithAdminPassword(password),
		// Tests try wrong passwords: never lock the admin user out.
		tcneo4j.WithNeo4jSetting("dbms.security.auth_max_failed_attempts", "0"),
		testcontainers.WithEnv(map[string]string{
			"NEO4J_server_memory_heap_initial__size": "256m",
			"NEO4J_server_memory_heap_max__size":     "768m",
		}),
		testcontainers.WithLabels(map[string]string{"org.crashmatrix.test": "neo4j"}),
		// The image logs "Bolt enabled on 0.0.0.0:7687." and then
		// "Started." once the databases are up.
		testcontainers.WithWaitStrategyAndDeadline(StartupTimeout,
			wait.ForLog("Bolt enabled on"),
			wait.ForLog("Started."),
		),
	)
	runTook := time.Since(t0)
	terminate := func() {
		if c != nil {
			tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
			defer tcancel()
			_ = testcontainers.TerminateContainer(c, testcontainers.StopContext(tctx), testcontainers.StopTimeout(time.Second))
		}
	}
	if err != nil {
		msg := err.Error()
		terminate()
		return nil, fmt.Errorf("starting a container of %s failed after %s: %s", image, runTook.Round(time.Millisecond), msg)
	}
	stopWatchdog := watchdog(c.GetContainerID())
	port, err := c.MappedPort(ctx, "7687/tcp")
	if err != nil {
		terminate()
		stopWatchdog()
		return nil, fmt.Errorf("container of %s: no mapped Bolt port: %w", image, err)
	}
	srv := &Server{
		URI:  fmt.Sprintf("bolt://127.0.0.1:%d", port.Num()), // loopback only, whatever the provider reports
		User: User, Password: password, Container: c, RunTook: runTook,
	}
	srv.stop = func() { terminate(); stopWatchdog() }
	if err := firstQuery(ctx, srv); err != nil {
		diag := diagnose(c)
		srv.Stop()
		return nil, fmt.Errorf("container of %s started (wait strategy satisfied after %s) but Bolt on %s does not answer: %w; %s",
			image, runTook.Round(time.Millisecond), srv.URI, err, diag)
	}
	srv.Ready = time.Since(t0)
	return srv, nil
}

// diagnose describes the state and the last log lines of a container.
func diagnose(c *tcneo4j.Neo4jContainer) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out := "container " + c.GetContainerID()
	if st, err := c.State(ctx); err != nil {
		out += fmt.Sprintf(": state unknown (%v)", err)
	} else {
		out += fmt.Sprintf(": status %s, running %v, exit code %d, OOM-killed %v, error %q", st.Status, st.Running, st.ExitCode, st.OOMKilled, st.Error)
	}
	if rc, err := c.Logs(ctx); err == nil {
		b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
		rc.Close()
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		out += "; last log lines:\n" + strings.Join(lines, "\n")
	}
	return out
}

// firstQuery retries "RETURN 1" until it is answered.
func firstQuery(ctx context.Context, srv *Server) error {
	drv, err := driver.NewDriverWithContext(srv.URI, driver.BasicAuth(srv.User, srv.Password, ""))
	if err != nil {
		return err
	}
	defer drv.Close(context.Background())
	for {
		_, err := driver.ExecuteQuery(ctx, drv, "RETURN 1 AS one", nil, driver.EagerResultTransformer)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkEngine fails, naming what is missing, when the container engine does
// not answer or the image is not there.
func checkEngine(ctx context.Context, image string) error {
	hint := fmt.Sprintf("set %s (+ %s, %s) to use a running Neo4j 5 server, or start podman's Docker API (ci/containers/setup-podman.sh; . ci/containers/env.sh: DOCKER_HOST=%q)",
		EnvURI, EnvUser, EnvPassword, os.Getenv("DOCKER_HOST"))
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return fmt.Errorf("no container engine for testcontainers-go (%v); %s", err, hint)
	}
	hctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := p.Health(hctx); err != nil {
		return fmt.Errorf("the container engine does not answer (%v); %s", err, hint)
	}
	dp, ok := p.(*testcontainers.DockerProvider)
	if !ok {
		return nil
	}
	if _, err := dp.Client().ImageInspect(hctx, image); err != nil {
		return fmt.Errorf("container image %s is missing from the engine at DOCKER_HOST=%q (%v): build it with ci/images/neo4j/build.sh (no registry can be reached), or set %s",
			image, os.Getenv("DOCKER_HOST"), err, EnvURI)
	}
	return nil
}

// watchdog starts a detached shell that removes the container through the
// engine's API once this process is gone (Ryuk is disabled here), so a test
// binary that panics or is killed leaves no server behind. It needs curl
// and a unix DOCKER_HOST; otherwise it does nothing. The returned function
// ends the watchdog.
func watchdog(id string) func() {
	u, err := url.Parse(os.Getenv("DOCKER_HOST"))
	if err != nil || u.Scheme != "unix" || id == "" {
		return func() {}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		return func() {}
	}
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done; curl -fsS -X DELETE --unix-socket '%s' 'http://d/containers/%s?force=true&v=true' >/dev/null 2>&1`,
		os.Getpid(), strings.ReplaceAll(u.Path, "'", ""), url.PathEscape(id))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return func() {}
	}
	go cmd.Wait() //nolint:errcheck // reaps the watchdog
	return func() { _ = cmd.Process.Kill() }
}
