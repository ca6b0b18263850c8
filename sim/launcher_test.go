package sim_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
)

// The spawn floor bench compares the matrix with must start the binary the
// workers run from: crashmatrix-worker when it lies next to crashmatrix and
// is no older, crashmatrix worker otherwise.
func TestBinaryLauncherFloorStartsTheWorkersBinary(t *testing.T) {
	dir := t.TempDir()
	self, worker := filepath.Join(dir, "crashmatrix"), filepath.Join(dir, "crashmatrix-worker")
	for _, f := range []string{self, worker} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l := sim.BinaryLauncher{Path: self}
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
