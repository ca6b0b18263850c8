package storeproc_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// examples is the folder of the Python example stores.
func examples(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "python")
}

// python returns the command line that runs script with python3: the
// interpreter itself (not a version manager's shim, which costs a shell
// per start), without the site module (the examples use the standard
// library only), so that the many short-lived stores of the suites start
// fast.
func python(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3 is needed to run the example stores: %v", err)
	}
	argv := []string{strings.TrimSpace(string(out)), "-S"}
	if script != "" {
		argv = append(argv, filepath.Join(examples(t), script))
	}
	return strings.Join(append(argv, args...), " ")
}

// protocolStores opens the stores of command over the protocol for the
// conformance suites: two processes per bundle in the concurrency checks,
// so that they race real processes on one store.
//
// The bundles share a pool (and so one TMPDIR): a store that declares
// reopen serves bundle after bundle from a few processes, each bundle
// greeting one with its own hello on its own fresh folder, as certify's
// conformance run does.
func protocolStores(suite *testing.T, command string) func(t *testing.T) reference.Stores {
	pool := storeproc.NewPool()
	tmp := suite.TempDir()
	// Registered after TempDir: the idle processes end before their
	// TMPDIR goes.
	suite.Cleanup(func() { _ = pool.Close() })
	return func(t *testing.T) reference.Stores {
		procs := 1
		if strings.Contains(t.Name(), "/Concurrency/") {
			procs = 2
		}
		c, err := storeproc.Start(context.Background(), storeproc.Options{Command: command, Dir: t.TempDir(), TempDir: tmp, Procs: procs, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return c.Stores()
	}
}

// TestPythonSQLiteStoreConformance runs the conformance suites over the
// protocol against the Python System A store, two processes per bundle so
// the concurrency checks race real processes on one SQLite file.
func TestPythonSQLiteStoreConformance(t *testing.T) {
	cmd := python(t, "sqlite_store.py")
	properties.Stores(t, protocolStores(t, cmd))
}
