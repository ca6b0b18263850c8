package neo4jtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// envChild makes the test binary run StartServer once and print its error:
// testcontainers-go caches DOCKER_HOST per process, so each engine setting
// gets its own process.
const envChild = "CRASHMATRIX_NEO4JTEST_CHILD"

func TestChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		return // only a helper process of the tests below does something
	}
	srv, err := StartServer(context.Background())
	if err != nil {
		os.Stdout.WriteString("STARTERR: " + err.Error() + "\n")
		return
	}
	os.Stdout.WriteString("STARTED: " + srv.URI + "\n")
	srv.Stop()
}

func runChild(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.v")
	cmd.Env = append(os.Environ(), append([]string{envChild + "=1", EnvURI + "="}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return string(out)
}

func TestEnvURIIsUsedAsIs(t *testing.T) {
	t.Setenv(EnvURI, "bolt://127.0.0.1:1")
	t.Setenv(EnvUser, "")
	t.Setenv(EnvPassword, "pw")
	srv, err := StartServer(context.Background())
	if err != nil || srv.URI != "bolt://127.0.0.1:1" || srv.User != User || srv.Password != "pw" || srv.Container != nil {
		t.Fatalf("StartServer with %s set = %+v, %v", EnvURI, srv, err)
	}
	srv.Stop()
	srv.Stop()
}

func TestMissingEngineIsNamed(t *testing.T) {
	t0 := time.Now()
	out := runChild(t, "DOCKER_HOST=unix:///nonexistent/crashmatrix-podman.sock")
	if !strings.Contains(out, "STARTERR:") || !strings.Contains(out, "container engine") || !strings.Contains(out, EnvURI) ||
		!strings.Contains(out, "setup-podman.sh") {
		t.Errorf("StartServer without an engine:\n%s\nwant an error naming the missing engine and %s", out, EnvURI)
	}
	t.Logf("failed in %s:\n%s", time.Since(t0).Round(time.Millisecond), out)
}

func TestMissingImageIsNamed(t *testing.T) {
	if os.Getenv("DOCKER_HOST") == "" {
		t.Fatalf("DOCKER_HOST is not set: start podman's API with ci/containers/setup-podman.sh and . ci/containers/env.sh")
	}
	out := runChild(t, EnvImage+"=localhost/crashmatrix/neo4j-does-not-exist:0")
	if !strings.Contains(out, "STARTERR:") || !strings.Contains(out, "neo4j-does-not-exist:0") || !strings.Contains(out, "build.sh") {
		t.Errorf("StartServer with a missing image:\n%s\nwant an error naming the image and build.sh", out)
	}
	t.Logf("%s", out)
}
