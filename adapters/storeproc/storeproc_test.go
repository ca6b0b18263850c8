package storeproc_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
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

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the example stores: %v", err)
	}
	return p
}

// TestPythonSQLiteStoreConformance runs the conformance suites over the
// protocol against the Python System A store, two processes per bundle so
// the concurrency checks race real processes on one SQLite file.
func TestPythonSQLiteStoreConformance(t *testing.T) {
	cmd := python(t) + " " + filepath.Join(examples(t), "sqlite_store.py")
	properties.Stores(t, func(t *testing.T) reference.Stores {
		c, err := storeproc.Start(context.Background(), storeproc.Options{Command: cmd, Dir: t.TempDir(), Procs: 2})
		if err != nil {
			t.Fatal(err)
		}
		return c.Stores()
	})
}
