package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim"
	// Every backend the CLI offers, so that BackendNames lists them all
	// (test-only imports: they are not the binary's).
	_ "github.com/crashmatrix/crashmatrix/sim/servers"
	_ "github.com/crashmatrix/crashmatrix/sim/storecmd"
)

const module = "github.com/crashmatrix/crashmatrix/"

// registeredBy is the package that registers each backend.
var registeredBy = map[string]string{
	"sqlite":    module + "sim/embedded",
	"memory":    module + "sim/embedded",
	"postgres":  module + "sim/servers",
	"store-cmd": module + "sim/storecmd",
}

// Each slim worker binary, as make build builds it, links its backend and
// none of the others' heavy packages: the embedded worker, started
// hundreds of times by every embedded matrix, carries no PostgreSQL or
// Neo4j driver, no FUSE, no container library and no CLI; the servers'
// worker no SQLite; store-cmd's no store in Go at all. Neither the
// embedded worker nor store-cmd's links net/http or crypto/tls (their
// initialisation is a fifth of a bare start): a worker reads its
// failpoints itself and asks for server faults over plain HTTP/1.1.
func TestEachWorkerBinaryLinksOnlyItsBackend(t *testing.T) {
	for _, tc := range []struct {
		binary  string
		without []string
	}{
		{"crashmatrix-worker", []string{"github.com/jackc/pgx", "github.com/neo4j/neo4j-go-driver", "github.com/hanwen/go-fuse", "github.com/testcontainers",
			"github.com/docker", "github.com/spf13/cobra", module + "sim/servers", module + "sim/storecmd", module + "adapters/postgres", module + "adapters/neo4j", module + "report",
			"net/http", "crypto/tls"}},
		{"crashmatrix-worker-servers", []string{"modernc.org/sqlite", "github.com/hanwen/go-fuse", "github.com/spf13/cobra", module + "sim/embedded", module + "sim/storecmd"}},
		{"crashmatrix-worker-storecmd", []string{"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/hanwen/go-fuse", "github.com/neo4j/neo4j-go-driver", "github.com/spf13/cobra",
			module + "sim/embedded", module + "sim/servers", "net/http", "crypto/tls"}},
	} {
		deps := linked(t, tc.binary)
		for _, d := range deps {
			for _, w := range tc.without {
				if d == w || strings.HasPrefix(d, w+"/") {
					t.Errorf("%s links %s", tc.binary, d)
				}
			}
		}
	}
}

// Every backend has a slim worker binary, and that binary registers it.
func TestEveryBackendHasAWorkerBinaryThatRegistersIt(t *testing.T) {
	names := sim.BackendNames()
	if want := []string{"memory", "postgres", "sqlite", "store-cmd"}; !slices.Equal(names, want) {
		t.Fatalf("registered backends %v, want %v (give a new backend its worker binary in sim.WorkerBinary and here)", names, want)
	}
	for _, name := range names {
		bin := sim.WorkerBinary(name)
		if bin == "" {
			t.Errorf("backend %s has no worker binary", name)
			continue
		}
		if !slices.Contains(linked(t, bin), registeredBy[name]) {
			t.Errorf("backend %s runs in %s, which does not link %s (where it is registered)", name, bin, registeredBy[name])
		}
	}
}

// workerBuild is the Makefile's WORKER_BUILD: the environment and the go
// build flags of the worker binaries.
var workerBuild = regexp.MustCompile(`(?m)^WORKER_BUILD := ((?:[A-Z_]+=\S* )*)\$\(GO\) build(.*)$`)

// linked lists the packages the binary cmd/<binary> links, built as the
// Makefile builds it (its line in the build target, with WORKER_BUILD's
// environment and flags).
func linked(t *testing.T, binary string) []string {
	t.Helper()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := workerBuild.FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no WORKER_BUILD := ... $(GO) build ... line")
	}
	if line := "\t$(WORKER_BUILD) -o bin/" + binary + " ./cmd/" + binary + "\n"; !strings.Contains(string(mk), line) {
		t.Fatalf("make build does not build %s with WORKER_BUILD (no line %q)", binary, line)
	}
	cmd := exec.Command("go", append(append([]string{"list", "-deps"}, strings.Fields(string(m[2]))...), "../"+binary)...)
	cmd.Env = append(os.Environ(), strings.Fields(string(m[1]))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return strings.Fields(string(out))
}
