package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
)

// The worker's start bench reports must be that of the binary the workers
// run from: the backend's slim worker binary (crashmatrix-worker for the
// embedded ones) when it lies next to crashmatrix and is no older,
// crashmatrix worker otherwise.
func TestBinaryLauncherFloorStartsTheWorkersBinary(t *testing.T) {
	dir := t.TempDir()
	self, worker := filepath.Join(dir, "crashmatrix"), filepath.Join(dir, "crashmatrix-worker")
	for _, f := range []string{self, worker} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l := sim.BinaryLauncher{Path: self, Backend: "sqlite"}
	old := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name        string
		workerMTime time.Time
		spec, floor []string
	}{
		{"fresh worker binary", time.Now().Add(time.Minute), []string{worker, "--spec", "s.json"}, []string{worker, "--floor"}},
		{"stale worker binary", old, []string{self, "worker", "--spec", "s.json"}, []string{self, "worker", "--floor"}},
	} {
		if err := os.Chtimes(worker, tc.workerMTime, tc.workerMTime); err != nil {
			t.Fatal(err)
		}
		if got := l.Command(context.Background(), "s.json").Args; !slices.Equal(got, tc.spec) {
			t.Errorf("%s: Command runs %q, want %q", tc.name, got, tc.spec)
		}
		if got := l.FloorCommand().Args; !slices.Equal(got, tc.floor) {
			t.Errorf("%s: FloorCommand runs %q, want %q", tc.name, got, tc.floor)
		}
	}
}

// Each backend's workers run from its own slim binary, never from another
// backend's (which would not know it) nor from a missing one.
func TestBinaryLauncherPicksTheBackendsWorkerBinary(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "crashmatrix")
	for _, f := range []string{self, filepath.Join(dir, "crashmatrix-worker"), filepath.Join(dir, "crashmatrix-worker-storecmd")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for backend, want := range map[string][]string{
		"sqlite":    {filepath.Join(dir, "crashmatrix-worker"), "--spec", "s.json"},
		"memory":    {filepath.Join(dir, "crashmatrix-worker"), "--spec", "s.json"},
		"store-cmd": {filepath.Join(dir, "crashmatrix-worker-storecmd"), "--spec", "s.json"},
		// crashmatrix-worker-servers was not built: the CLI runs them.
		"postgres": {self, "worker", "--spec", "s.json"},
		// A backend without a slim binary (a user's own, registered in the CLI).
		"custom": {self, "worker", "--spec", "s.json"},
	} {
		if got := (sim.BinaryLauncher{Path: self, Backend: backend}).Command(context.Background(), "s.json").Args; !slices.Equal(got, want) {
			t.Errorf("backend %s: Command runs %q, want %q", backend, got, want)
		}
	}
}

// An embedded backend's worker processes, and the bare start bench
// measures next to them, run with GOMAXPROCS=1 (worker.WorkerRuntimeEnv);
// the others keep the runtime's default, and a GOMAXPROCS the user set
// wins everywhere.
func TestBinaryLauncherRuntimeEnv(t *testing.T) {
	self := filepath.Join(t.TempDir(), "crashmatrix")
	gomaxprocs := func(env []string) string {
		if env == nil {
			env = os.Environ() // the supervisor's environment, as it is
		}
		v := ""
		for _, e := range env {
			if strings.HasPrefix(e, "GOMAXPROCS=") {
				v = e // the last one wins, as in os/exec
			}
		}
		return v
	}
	check := func(setting string, want map[string]string) {
		t.Helper()
		for backend, w := range want {
			l := sim.BinaryLauncher{Path: self, Backend: backend}
			if got := gomaxprocs(l.Command(context.Background(), "s.json").Env); got != w {
				t.Errorf("%s, backend %s: Command's GOMAXPROCS %q, want %q", setting, backend, got, w)
			}
			if got := gomaxprocs(l.FloorCommand().Env); got != w {
				t.Errorf("%s, backend %s: FloorCommand's GOMAXPROCS %q, want %q", setting, backend, got, w)
			}
		}
	}
	t.Setenv("GOMAXPROCS", "") // restored when the test ends
	os.Unsetenv("GOMAXPROCS")
	check("GOMAXPROCS unset", map[string]string{"sqlite": "GOMAXPROCS=1", "memory": "GOMAXPROCS=1", "store-cmd": "", "postgres": ""})
	t.Setenv("GOMAXPROCS", "3")
	check("GOMAXPROCS=3", map[string]string{"sqlite": "GOMAXPROCS=3", "memory": "GOMAXPROCS=3", "store-cmd": "GOMAXPROCS=3", "postgres": "GOMAXPROCS=3"})
}
